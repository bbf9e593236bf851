//! Leader election on a Lease, always on. Losing the Lease ends the operator with an error:
//! a replica that might no longer lead must stop acting at once.

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::LeaseConfig;
use crate::error::Error;

/// Competes for the Lease until `shutdown` flips to true (then releases it when held) or the
/// Lease is lost (an error). `leader` carries whether this replica holds it.
pub async fn elect(
    client: Client,
    config: &LeaseConfig,
    leader: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Error> {
    let (duration, renew_before) = config.seconds().map_err(Error::Config)?;
    let identity = config.identity();
    let manager = LeaseManagerBuilder::new(client, &config.name)
        .with_namespace(&config.namespace)
        .with_identity(&identity)
        .with_duration(duration)
        .with_grace(renew_before)
        .build()
        .await
        .map_err(|e| Error::Lease(e.to_string()))?;
    let mut leading = false;
    loop {
        tokio::select! {
            () = stop_requested(&mut shutdown) => {
                if leading {
                    if let Err(error) = manager.release().await {
                        warn!(%error, "could not release the Lease");
                    }
                    info!(lease = %config.name, %identity, "released the Lease");
                }
                return Ok(());
            }
            changed = manager.changed() => match changed {
                Ok(true) => {
                    leading = true;
                    info!(lease = %config.name, %identity, "acquired the Lease: leading");
                    leader.send_replace(true);
                }
                Ok(false) if leading => {
                    leader.send_replace(false);
                    return Err(Error::Lease(format!("lost the Lease {}", config.name)));
                }
                Ok(false) => {}
                Err(error) if leading => {
                    leader.send_replace(false);
                    return Err(Error::Lease(format!(
                        "could not renew the Lease {}: {error}",
                        config.name
                    )));
                }
                Err(error) => {
                    warn!(%error, "leader election failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }
}

async fn stop_requested(shutdown: &mut watch::Receiver<bool>) {
    // A dropped sender also means stop.
    let _ = shutdown.wait_for(|stop| *stop).await;
}
