//! Errors of the operator.

/// Why a reconcile or the operator failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// An object lacks something every stored object has (name, namespace).
    #[error("{0}")]
    MissingField(&'static str),
    /// Leader election failed or the Lease was lost.
    #[error("leader election: {0}")]
    Lease(String),
    /// The settings cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// The HTTP listener failed.
    #[error("HTTP listener: {0}")]
    Http(#[from] std::io::Error),
    /// The API server refused a create because the namespace is being deleted: whatever the
    /// reconcile was doing is moot, and nothing of it is written.
    #[error("namespace {0} is being deleted")]
    NamespaceTerminating(String),
}

impl Error {
    /// A conditional write refused because the object changed since it was read (409): the
    /// decision was made from a cache that had not caught up yet.
    pub fn is_stale_write(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(status)) if status.is_conflict())
    }
}
