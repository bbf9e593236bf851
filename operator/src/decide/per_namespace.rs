//! What a namespace needs before a Run pod can start there: the `herd-runner` ServiceAccount,
//! the CA bundle's copy and the default-deny policy, all made once per namespace, and after that
//! only the copy kept current.

use k8s_openapi::api::core::v1::ConfigMap;

use super::run_api_tls::ca_config_map_stale;

/// The writes a namespace needs before the next Pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceWork {
    /// Everything, in order: ServiceAccount, CA copy, default-deny (each created when absent).
    All,
    /// Only the CA copy, whose content differs from the bundle.
    Copy,
    /// Nothing: prepared, and the copy is current.
    Nothing,
}

/// What the namespace needs, given whether this process prepared it and its cached copy of the
/// CA bundle. A namespace prepared before but without a copy was deleted (and maybe created
/// again under the same name): it is prepared again.
pub fn namespace_work(prepared: bool, copy: Option<&ConfigMap>, bundle: &str) -> NamespaceWork {
    match copy {
        Some(copy) if prepared => {
            if ca_config_map_stale(copy, bundle) {
                NamespaceWork::Copy
            } else {
                NamespaceWork::Nothing
            }
        }
        _ => NamespaceWork::All,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::run_api_tls::ca_config_map;

    #[test]
    fn prepared_once_then_only_the_copy() {
        let current = ca_config_map("ns", "bundle");
        let stale = ca_config_map("ns", "old bundle");
        assert_eq!(namespace_work(false, None, "bundle"), NamespaceWork::All);
        assert_eq!(
            namespace_work(false, Some(&current), "bundle"),
            NamespaceWork::All,
            "a new process makes sure of everything once"
        );
        assert_eq!(
            namespace_work(true, Some(&current), "bundle"),
            NamespaceWork::Nothing
        );
        assert_eq!(
            namespace_work(true, Some(&stale), "bundle"),
            NamespaceWork::Copy
        );
        assert_eq!(
            namespace_work(true, None, "bundle"),
            NamespaceWork::All,
            "the copy is gone: the namespace was deleted, or it was"
        );
    }
}
