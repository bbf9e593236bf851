//! Herd's end-to-end test support: a real Kubernetes API server for the suite in
//! `tests/e2e/` (one binary, one server), and helpers to talk to it.
//!
//! - [`harness`]: the suite's `main` ([`run_suite`]), [`E2eTest`] (shared or exclusive),
//!   [`TestEnv`] (admin client, the test's own namespace, logs to print on failure).
//! - [`cluster`], [`control_plane`], [`pki`], [`process`]: where the server comes from: etcd,
//!   kube-apiserver and kube-controller-manager started from `KUBEBUILDER_ASSETS` on free
//!   loopback ports with throwaway certificates, or the cluster `HERD_E2E_KUBECONFIG` names.
//! - [`requests`]: creates and patches as `kubectl` makes them, refusals kept as values;
//!   [`runner`]: a runner's token and the run API's CA it trusts.
//! - [`wait`]: waits with a deadline of at most a minute; [`dump`]: what a failure prints.
//! - [`crds`], [`namespace`], [`fixtures`]: CRD installation, namespaces, repository files.
//! - [`operator_rbac`]: an operator's ServiceAccount under exactly the chart's RBAC;
//!   [`operator_requests`]: what an operator asked of the API server, from its metrics.
//! - [`argo_cd`], [`flux`], [`lua_literal`]: the GitOps health checks the chart ships, run as
//!   Argo CD (Lua) and Flux (CEL) run them; [`external_tools`]: `lua5.1`, `kubectl`, `helm`,
//!   `prometheus`; [`promql`]: the metric names of a query.
//! - [`kubelet`]: `local-kubelet`, which runs Pods' containers for real on this machine;
//!   [`local_kubelet`] starts one for a test; [`node`]: the real node (kubelet, scheduler,
//!   containerd) the Pods of [`Lane::Node`] tests run on, and [`relay`]: a port on the node's
//!   address forwarding to a loopback server (a model server, an MCP server).
//!
//! An operator run in-process by a test binds its HTTP listeners to port 0, so tests running
//! side by side never collide.

pub mod argo_cd;
pub mod cluster;
pub mod control_plane;
pub mod crds;
pub mod dump;
pub mod external_tools;
pub mod fixtures;
pub mod flux;
pub mod harness;
pub mod kubeconfig;
#[cfg(target_os = "linux")]
pub mod kubelet;
#[cfg(target_os = "linux")]
pub mod local_kubelet;
pub mod lua_literal;
pub mod namespace;
pub mod node;
pub mod operator_rbac;
pub mod operator_requests;
pub mod pki;
pub mod process;
pub mod promql;
pub mod relay;
pub mod requests;
pub mod runner;
pub mod wait;

pub use harness::{E2eTest, Lane, Lock, TestEnv, run_suite};
