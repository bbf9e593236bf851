//! Running the lead agent under the run's deadline: both shells end a run that outlives its
//! time the same way.

use std::time::Duration;

use herd_crds::report::StopReason;

use crate::agent::{Agent, AgentEvent, Observer, RunEnv, RunError, RunOutcome};
use crate::control::deadline::Deadline;
use crate::thread::ThreadState;

/// Runs `lead` on `state` until it ends or `deadline` passes (wherever it has moved); then the
/// run is `TimedOut`, naming `time_left`, the time it had.
pub(crate) async fn run_lead_until(
    deadline: &Deadline,
    time_left: Duration,
    lead: &Agent,
    state: &mut ThreadState,
    env: &RunEnv,
    observer: &dyn Observer,
) -> Result<RunOutcome, RunError> {
    tokio::select! {
        biased;
        ended = lead.run(state, env) => ended,
        () = deadline.passed() => {
            observer.on_event(AgentEvent::Stopped {
                agent: "lead".into(),
                reason: StopReason::TimedOut,
            });
            Ok(RunOutcome {
                stop_reason: StopReason::TimedOut,
                answer: String::new(),
                error: Some(format!("the run took longer than {time_left:?}")),
                question: None,
            })
        }
    }
}
