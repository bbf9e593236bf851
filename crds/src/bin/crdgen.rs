//! Writes Herd's CRDs to `charts/herd/crds/` (one file each); with `--check`, writes nothing and
//! fails when the committed files differ from what the types generate.
//!
//! Usage: `crdgen [--check] [DIR]` (DIR defaults to `charts/herd/crds`).

use std::path::PathBuf;
use std::process::ExitCode;

use herd_crds::generate::{CHART_CRDS_DIR, crds, to_yaml};

fn main() -> ExitCode {
    let mut check = false;
    let mut dir = PathBuf::from(CHART_CRDS_DIR);
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!("usage: crdgen [--check] [DIR]   (DIR defaults to {CHART_CRDS_DIR})");
                return ExitCode::SUCCESS;
            }
            other => dir = PathBuf::from(other),
        }
    }
    match run(check, &dir) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("crdgen: {message}");
            ExitCode::from(2)
        }
    }
}

/// Writes or checks every CRD; `Ok(false)` when `--check` found drift.
fn run(check: bool, dir: &std::path::Path) -> Result<bool, String> {
    let mut clean = true;
    for (file, crd) in crds().map_err(|e| e.to_string())? {
        let yaml = to_yaml(&crd).map_err(|e| format!("{file}: {e}"))?;
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
