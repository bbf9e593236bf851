//! Child Runs over the run API: `POST children` (idempotent on the `task` call's id, so a
//! retry never starts a second child), then `GET children/{toolCallId}?wait=` until the child
//! ends, then each presented file from `GET children/{toolCallId}/files/{n}` into the sandbox's
//! `outputs/<child>/`.

use herd_crds::report::Artifact;
use herd_crds::wire::{ChildOutcome, ChildRequest, ChildStatus};
use herd_sandbox::SandboxClient;
use tokio::time::Instant;

use super::RunApiControlPlane;
use super::child_files::{FileBudget, Placed, Planned, child_folder, destination, files_note};
use super::client::{LONGEST_WAIT, route_segment};
use crate::control::{Budget, ControlError};

impl RunApiControlPlane {
    /// Starts the child of `request` with the claims of `parent` and waits for its end; its
    /// files are in the sandbox when this returns, and its result says where.
    pub(super) async fn start_and_await_child(
        &self,
        mut request: ChildRequest,
        parent: Budget,
    ) -> Result<ChildOutcome, ControlError> {
        let until = parent.deadline.map_or(self.deadline.instant(), |deadline| {
            deadline.min(self.deadline.instant())
        });
        claim(&mut request, parent, until);
        let id = route_segment(&request.tool_call_id)?;
        self.client.post("children", &request, until).await?;
        let mut outcome = self.await_child(id, until).await?;
        if !outcome.artifacts.is_empty() {
            self.copy_files(id, &mut outcome, until).await;
        }
        Ok(outcome)
    }

    /// Long-polls the child until it ends or `until` comes (then it counts as timed out).
    async fn await_child(&self, id: &str, until: Instant) -> Result<ChildOutcome, ControlError> {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(ChildOutcome {
                    name: String::new(),
                    status: Some(ChildStatus::TimedOut),
                    stop_reason: None,
                    result: String::new(),
                    error: Some("the parent's time ran out before the child Run ended".into()),
                    usage: Default::default(),
                    artifacts: Vec::new(),
                });
            }
            let started = Instant::now();
            let outcome: ChildOutcome = self
                .client
                .long_poll(&["children", id], left.min(LONGEST_WAIT), until)
                .await?;
            if outcome.status.is_some() {
                return Ok(outcome);
            }
            self.client.pace_polls(started).await;
        }
    }

    /// Fetches the child's presented files into `outputs/<child>/` and adds to its result
    /// where they went (and which were skipped or failed).
    async fn copy_files(&self, id: &str, outcome: &mut ChildOutcome, until: Instant) {
        let placed = match child_folder(&outcome.name) {
            Ok(folder) => {
                self.place_files(id, folder, &outcome.artifacts, until)
                    .await
            }
            Err(why) => outcome
                .artifacts
                .iter()
                .map(|artifact| Placed::Failed {
                    artifact: artifact.clone(),
                    why: why.clone(),
                })
                .collect(),
        };
        let note = files_note(child_folder(&outcome.name).unwrap_or("<child>"), &placed);
        outcome.artifacts = placed
            .iter()
            .filter_map(|place| match place {
                Placed::Copied { path, size } => Some(Artifact {
                    path: path.clone(),
                    size: *size,
                }),
                _ => None,
            })
            .collect();
        if !note.is_empty() {
            if !outcome.result.is_empty() {
                outcome.result.push_str("\n\n");
            }
            outcome.result.push_str(&note);
        }
    }

    async fn place_files(
        &self,
        id: &str,
        folder: &str,
        artifacts: &[Artifact],
        until: Instant,
    ) -> Vec<Placed> {
        let mut budget = FileBudget::default();
        let mut placed = Vec::with_capacity(artifacts.len());
        for (n, artifact) in artifacts.iter().enumerate() {
            let place = match budget.plan(n, artifact.size) {
                Planned::Skip { .. } => Placed::Skipped {
                    artifact: artifact.clone(),
                },
                Planned::Fetch { n, max_bytes } => {
                    match self.place_file(id, folder, n, max_bytes, until).await {
                        Ok((path, size)) => {
                            budget.fetched(size);
                            Placed::Copied { path, size }
                        }
                        Err(why) => {
                            tracing::warn!(child = folder, file = %artifact.path, %why, "a child's file was not copied");
                            Placed::Failed {
                                artifact: artifact.clone(),
                                why,
                            }
                        }
                    }
                }
            };
            placed.push(place);
        }
        placed
    }

    /// Fetches file `n` (at most `max_bytes`) and writes it; its virtual path and size.
    async fn place_file(
        &self,
        id: &str,
        folder: &str,
        n: usize,
        max_bytes: u64,
        until: Instant,
    ) -> Result<(String, u64), String> {
        let Some(sandbox) = self.sandbox.get() else {
            return Err("there is no sandbox to write it into".into());
        };
        let index = n.to_string();
        let limit = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        let file = self
            .client
            .get_file(&["children", id, "files", &index], limit, until)
            .await
            .map_err(|error| error.to_string())?;
        let header = file.path.ok_or_else(|| {
            format!(
                "the run API named no path for it (no {} header)",
                herd_crds::wire::FILE_PATH_HEADER
            )
        })?;
        let target = destination(folder, &header)?;
        let written = sandbox
            .write_output_bytes(&target, &file.bytes)
            .await
            .map_err(|error| error.to_string())?;
        Ok((written, file.bytes.len() as u64))
    }
}

/// Fills in what the parent has left (never more than the request already claims): model
/// calls, tokens, and seconds until `until`.
fn claim(request: &mut ChildRequest, parent: Budget, until: Instant) {
    let lower = |claimed: Option<u64>, left: u64| Some(claimed.map_or(left, |c| c.min(left)));
    request.model_calls_left = Some(
        request
            .model_calls_left
            .map_or(parent.model_calls_left, |c| c.min(parent.model_calls_left)),
    );
    if let Some(tokens) = parent.tokens_left {
        request.tokens_left = lower(request.tokens_left, tokens);
    }
    let seconds = until.saturating_duration_since(Instant::now()).as_secs();
    request.seconds_left = lower(request.seconds_left, seconds);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn request() -> ChildRequest {
        ChildRequest {
            attempt: 1,
            tool_call_id: "call_1".into(),
            description: "d".into(),
            prompt: "p".into(),
            subagent_type: "bash".into(),
            model_calls_left: None,
            tokens_left: None,
            seconds_left: None,
        }
    }

    #[test]
    fn a_child_claims_what_its_parent_has_left_and_never_more() {
        let until = Instant::now() + Duration::from_secs(120);
        let parent = Budget {
            model_calls_left: 7,
            tokens_left: Some(5000),
            deadline: Some(until),
        };
        let mut plain = request();
        claim(&mut plain, parent, until);
        assert_eq!(
            (plain.model_calls_left, plain.tokens_left),
            (Some(7), Some(5000))
        );
        let seconds = plain.seconds_left.unwrap();
        assert!((118..=120).contains(&seconds), "{seconds}");

        let mut modest = ChildRequest {
            model_calls_left: Some(3),
            tokens_left: Some(9000),
            seconds_left: Some(30),
            ..request()
        };
        claim(&mut modest, parent, until);
        assert_eq!(
            (
                modest.model_calls_left,
                modest.tokens_left,
                modest.seconds_left
            ),
            (Some(3), Some(5000), Some(30))
        );

        let mut unbudgeted = request();
        claim(
            &mut unbudgeted,
            Budget {
                tokens_left: None,
                ..parent
            },
            until,
        );
        assert_eq!(unbudgeted.tokens_left, None, "no token budget, no claim");
    }
}
