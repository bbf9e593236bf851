//! The process groups the sandbox started (`bash` commands, stdio programs), so that a
//! stopping sandbox can end them gracefully: SIGTERM first, SIGKILL for whatever is left
//! after a grace. A group stays listed after its leader exits, because what a command put in
//! the background (a server) lives on in it; dead groups are dropped whenever one is added
//! and before they are signalled.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

/// How long stopping tools get between SIGTERM and SIGKILL: a Pod's sandbox when it is
/// stopped, a local run when it is interrupted.
pub const TOOL_GRACE: Duration = Duration::from_secs(2);

/// How often a stopping sandbox looks whether its groups are gone.
const POLL: Duration = Duration::from_millis(50);

/// The live process groups started here. Cheap to clone; clones share the list.
#[derive(Clone, Debug, Default)]
pub struct ProcessGroups {
    groups: Arc<Mutex<BTreeSet<i32>>>,
}

impl ProcessGroups {
    /// Lists the group led by `leader` (a child spawned with `process_group(0)`). Never the
    /// sandbox's own group nor PID 1's: a missing or odd id is ignored.
    pub(crate) fn add(&self, leader: Option<u32>) {
        let Some(pid) = leader.and_then(|id| i32::try_from(id).ok()) else {
            return;
        };
        if pid <= 1 || Some(pid) == i32::try_from(std::process::id()).ok() {
            return;
        }
        let mut groups = self.lock();
        groups.retain(|group| alive(*group));
        groups.insert(pid);
    }

    /// The groups that still have a process.
    pub(crate) fn live(&self) -> Vec<i32> {
        let mut groups = self.lock();
        groups.retain(|group| alive(*group));
        groups.iter().copied().collect()
    }

    /// Sends SIGTERM to every live group, waits up to `grace` for them to end, then sends
    /// SIGKILL to those still there.
    pub async fn terminate(&self, grace: Duration) {
        let groups = self.live();
        if groups.is_empty() {
            return;
        }
        for group in &groups {
            signal(*group, Signal::TERM);
        }
        let deadline = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < deadline && !self.live().is_empty() {
            tokio::time::sleep(POLL).await;
        }
        for group in self.live() {
            signal(group, Signal::KILL);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<i32>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn alive(group: i32) -> bool {
    Pid::from_raw(group).is_some_and(|pid| test_kill_process_group(pid).is_ok())
}

fn signal(group: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(group) {
        // Gone in the meantime: nothing left to stop.
        let _ = kill_process_group(pid, signal);
    }
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;

    fn spawn(script: &str) -> std::io::Result<tokio::process::Child> {
        tokio::process::Command::new("bash")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
    }

    #[tokio::test]
    async fn terminate_sends_sigterm_first_and_sigkill_to_what_stays() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let marker = dir.path().join("terminated");
        let groups = ProcessGroups::default();
        // Ends on SIGTERM, leaving a mark.
        let polite = spawn(&format!(
            "trap 'touch {}; exit 0' TERM; sleep 30 & wait",
            marker.display()
        ))?;
        // Ignores SIGTERM: only SIGKILL ends it.
        let stubborn = spawn("trap '' TERM; sleep 30 & wait")?;
        groups.add(polite.id());
        groups.add(stubborn.id());
        // The traps must be set before the signal comes.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let reaped = tokio::spawn(async move {
            let (mut polite, mut stubborn) = (polite, stubborn);
            let _ = polite.wait().await;
            let _ = stubborn.wait().await;
        });
        let started = std::time::Instant::now();
        groups.terminate(Duration::from_millis(700)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::timeout(Duration::from_secs(5), reaped).await??;
        assert!(marker.exists(), "the polite group never saw SIGTERM");
        // The killed `sleep`s were orphans: whoever adopted them reaps them in its own time.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !groups.live().is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(groups.live().is_empty(), "{:?}", groups.live());
        Ok(())
    }

    #[test]
    fn odd_ids_and_the_sandbox_itself_are_never_listed() {
        let groups = ProcessGroups::default();
        groups.add(None);
        groups.add(Some(0));
        groups.add(Some(1));
        groups.add(Some(std::process::id()));
        groups.add(Some(u32::MAX));
        assert!(groups.lock().is_empty());
    }
}
