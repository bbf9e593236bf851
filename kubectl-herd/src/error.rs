//! A command's failure: a message that names the object and says what to do, and the exit
//! code. API errors become such messages in [`api_error`].

/// Why a command failed, for the person who ran it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CliError {
    /// What went wrong and what to do about it.
    pub message: String,
    /// The process's exit code.
    pub code: u8,
}

impl CliError {
    /// A failure with exit code 1.
    pub fn new(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            code: crate::outcome::EXIT_FAILED,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// What a request was about, for its error message.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// What was being done, e.g. `reading` or `patching`.
    pub doing: &'a str,
    /// The object, e.g. `Run market-map`.
    pub object: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// What to do when it does not exist, e.g. `kubectl herd get lists the Runs`.
    pub not_found: &'a str,
}

/// The message for a failed request to the API server.
pub fn api_error(error: &kube::Error, target: Target<'_>) -> CliError {
    let Target {
        doing,
        object,
        namespace,
        not_found,
    } = target;
    let message = match error {
        kube::Error::Api(status) => {
            let said = herd_crds::terminal_text::one_line(&status.message);
            match status.code {
                404 => format!("{object} not found in namespace {namespace} ({not_found})"),
                401 => format!(
                    "the API server refused your kubeconfig's credentials while {doing} {object}: \
                     {said} (log in again, or choose another --context)"
                ),
                403 => format!(
                    "you may not go on {doing} {object} in namespace {namespace}: {said} (ask \
                     for RBAC rights on runs.herd.dev there, or choose another -n)"
                ),
                409 => format!("{object} changed while {doing} it: {said} (run the command again)"),
                _ => format!("the API server refused {doing} {object}: {said}"),
            }
        }
        other => format!(
            "no answer from the API server while {doing} {object}: {} (is the cluster up? \
             `kubectl cluster-info` checks the kubeconfig's server)",
            herd_crds::terminal_text::one_line(&other.to_string())
        ),
    };
    CliError::new(message)
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn status(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, "Reason").with_code(code).boxed())
    }

    const TARGET: Target<'static> = Target {
        doing: "reading",
        object: "Run market-map",
        namespace: "research",
        not_found: "kubectl herd get lists the Runs",
    };

    #[test]
    fn each_refusal_names_the_object_and_what_to_do() {
        let cases = [
            (
                404,
                "Run market-map not found in namespace research (kubectl herd get lists the Runs)",
            ),
            (
                403,
                "you may not go on reading Run market-map in namespace research: no (ask for RBAC rights on runs.herd.dev there, or choose another -n)",
            ),
            (
                401,
                "the API server refused your kubeconfig's credentials while reading Run market-map: no (log in again, or choose another --context)",
            ),
            (
                409,
                "Run market-map changed while reading it: no (run the command again)",
            ),
            (422, "the API server refused reading Run market-map: no"),
        ];
        for (code, expected) in cases {
            let error = api_error(&status(code, "no"), TARGET);
            assert_eq!(error.message, expected);
            assert_eq!(error.code, 1);
        }
    }

    #[test]
    fn server_text_cannot_drive_the_terminal() {
        let error = api_error(&status(500, "\u{1b}[2J\nx"), TARGET);
        assert!(!error.message.contains('\u{1b}') && !error.message.contains('\n'));
    }
}
