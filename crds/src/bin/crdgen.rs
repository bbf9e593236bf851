//! Writes Herd's CRDs to `charts/herd/crds/` (one file each, which Helm installs on the first
//! install) and to `charts/herd-crds/templates/` (the same CRDs as templates of the `herd-crds`
//! chart, which `helm upgrade` updates); with `--check`, writes nothing and fails when a
//! committed file differs from what the types generate. Paths are relative to the working
//! directory: run it from the repository root.
//!
//! Usage: `crdgen [--check]`.

use std::path::Path;
use std::process::ExitCode;

use herd_crds::generate::{
    CHART_CRDS_DIR, CRDS_CHART_TEMPLATES_DIR, GenerateError, crds, to_helm_template, to_yaml,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// How a CRD is rendered into one of the folders.
type Render = fn(&CustomResourceDefinition) -> Result<String, GenerateError>;

fn main() -> ExitCode {
    let mut check = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "usage: crdgen [--check]   (writes {CHART_CRDS_DIR} and {CRDS_CHART_TEMPLATES_DIR})"
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("crdgen: unknown argument {other:?}; usage: crdgen [--check]");
                return ExitCode::from(2);
            }
        }
    }
    let folders: [(&str, Render); 2] = [
        (CHART_CRDS_DIR, to_yaml),
        (CRDS_CHART_TEMPLATES_DIR, to_helm_template),
    ];
    let mut clean = true;
    for (dir, render) in folders {
        match run(check, Path::new(dir), render) {
            Ok(folder_clean) => clean &= folder_clean,
            Err(message) => {
                eprintln!("crdgen: {message}");
                return ExitCode::from(2);
            }
        }
    }
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Writes or checks every CRD in `dir`; `Ok(false)` when `--check` found drift.
fn run(check: bool, dir: &Path, render: Render) -> Result<bool, String> {
    let mut clean = true;
    for (file, crd) in crds().map_err(|e| e.to_string())? {
        let yaml = render(&crd).map_err(|e| format!("{file}: {e}"))?;
        let path = dir.join(file);
        if check {
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            if committed != yaml {
                eprintln!(
                    "crdgen: {} differs from the generated CRD; run `cargo run -p herd-crds --bin crdgen`",
                    path.display()
                );
                clean = false;
            }
        } else {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            std::fs::write(&path, yaml).map_err(|e| format!("{}: {e}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    Ok(clean)
}
