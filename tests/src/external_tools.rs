//! Programs some tests run that are not part of the build (`lua5.1`, `kubectl`, `helm`,
//! `prometheus`, `chromedriver` and `chromium`): found through an environment variable naming
//! the file, else on `PATH`.
//! Outside CI a missing program skips the test with a message on stderr; under `CI=true` it
//! fails the test, because CI must never pass without having run it.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// `lua5.1`, the Lua Argo CD's health scripts are written for (Debian package `lua5.1`).
pub const LUA: Tool = Tool {
    env: "HERD_LUA",
    program: "lua5.1",
    install: "apt-get install lua5.1",
};

/// `kubectl`, for what users run with it (`kubectl apply -k`, `kubectl patch`).
pub const KUBECTL: Tool = Tool {
    env: "HERD_KUBECTL",
    program: "kubectl",
    install: "scripts/k8s-tools prints a folder holding it",
};

/// `helm` (v4), for installing the chart as users do.
pub const HELM: Tool = Tool {
    env: "HERD_HELM",
    program: "helm",
    install: "scripts/k8s-tools prints a folder holding it",
};

/// `prometheus`, scraping an operator and evaluating the chart's alerts and dashboard queries
/// (Debian package `prometheus`).
pub const PROMETHEUS: Tool = Tool {
    env: "HERD_PROMETHEUS",
    program: "prometheus",
    install: "apt-get install prometheus",
};

/// `chromedriver`, the WebDriver server the dashboard's browser tests drive (Debian package
/// `chromium-driver`).
pub const CHROMEDRIVER: Tool = Tool {
    env: "HERD_CHROMEDRIVER",
    program: "chromedriver",
    install: "apt-get install chromium chromium-driver",
};

/// `chromium`, the headless browser `chromedriver` starts (Debian package `chromium`).
pub const CHROMIUM: Tool = Tool {
    env: "HERD_CHROMIUM",
    program: "chromium",
    install: "apt-get install chromium chromium-driver",
};

/// A program a test needs.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// The environment variable that names the program's file.
    pub env: &'static str,
    /// Its name on `PATH`.
    pub program: &'static str,
    /// How to get it, for the skip message.
    pub install: &'static str,
}

impl Tool {
    /// The program, or `Ok(None)` after saying on stderr that `test` is skipped; an error
    /// under `CI=true`, or when the variable names a file that does not exist.
    pub fn find(&self, test: &str) -> anyhow::Result<Option<PathBuf>> {
        let found = self.locate(
            std::env::var_os(self.env).as_deref(),
            std::env::var_os("PATH").as_deref(),
        )?;
        if found.is_some() {
            return Ok(found);
        }
        let skipped = self.skip_message(std::env::var("CI").is_ok_and(|v| v == "true"), test)?;
        // Written to stderr directly so that the skip is visible whatever captures output.
        let _ = writeln!(std::io::stderr(), "{skipped}");
        Ok(None)
    }

    /// The file the variable names, else the program on `path`.
    fn locate(
        &self,
        named: Option<&OsStr>,
        path: Option<&OsStr>,
    ) -> anyhow::Result<Option<PathBuf>> {
        if let Some(file) = named.filter(|f| !f.is_empty()) {
            let file = PathBuf::from(file);
            if !file.is_file() {
                bail!("{}={} is not a file", self.env, file.display());
            }
            return Ok(Some(file));
        }
        Ok(path.and_then(|path| on_path(path, self.program)))
    }

    /// What a missing program means for `test`: the skip message, or under CI the failure.
    fn skip_message(&self, ci: bool, test: &str) -> anyhow::Result<String> {
        let missing = format!(
            "{} is not on PATH and {} is unset ({})",
            self.program, self.env, self.install
        );
        if ci {
            bail!("{missing}; CI=true, so {test} fails");
        }
        Ok(format!("SKIPPED {test}: {missing}"))
    }
}

fn on_path(path: &OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: Tool = Tool {
        env: "HERD_TEST_TOOL",
        program: "herd-test-tool",
        install: "nowhere",
    };

    fn executable(dir: &Path, name: &str) -> PathBuf {
        let file = dir.join(name);
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        file
    }

    #[test]
    fn the_variable_wins_over_path() {
        let dir = tempfile::tempdir().unwrap();
        let named = executable(dir.path(), "named");
        let on_path_dir = tempfile::tempdir().unwrap();
        executable(on_path_dir.path(), TOOL.program);
        let found = TOOL
            .locate(
                Some(named.as_os_str()),
                Some(on_path_dir.path().as_os_str()),
            )
            .unwrap();
        assert_eq!(found, Some(named));
    }

    #[test]
    fn a_named_file_that_does_not_exist_is_an_error() {
        let error = TOOL
            .locate(Some(OsStr::new("/nonexistent/tool")), None)
            .unwrap_err();
        assert!(error.to_string().contains("HERD_TEST_TOOL"), "{error}");
    }

    #[test]
    fn found_on_path_when_the_variable_is_unset_or_empty() {
        let dir = tempfile::tempdir().unwrap();
        let file = executable(dir.path(), TOOL.program);
        let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        for named in [None, Some(OsStr::new(""))] {
            let found = TOOL.locate(named, Some(&path)).unwrap();
            assert_eq!(found.as_ref(), Some(&file));
        }
    }

    #[test]
    fn missing_skips_outside_ci_and_fails_in_ci() {
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            TOOL.locate(None, Some(empty.path().as_os_str())).unwrap(),
            None
        );
        let skipped = TOOL.skip_message(false, "area::test").unwrap();
        assert!(
            skipped.starts_with("SKIPPED area::test: herd-test-tool"),
            "{skipped}"
        );
        assert!(skipped.contains("HERD_TEST_TOOL"), "{skipped}");
        let error = TOOL.skip_message(true, "area::test").unwrap_err();
        assert!(
            error.to_string().contains("CI=true, so area::test fails"),
            "{error}"
        );
    }
}
