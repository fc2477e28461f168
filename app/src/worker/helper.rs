//! The planning worker's helper: a second instance of the same wasm,
//! started by the planning worker once the page is quiet, holding a copy of
//! the trace, that schedules and replays the second half of a per-batch
//! re-plan (Libra's N or predictor) while the planning worker does the
//! first ([`moeplan_view::SplitJob`]). On two cores a new Libra option then
//! costs about half its single-thread time (docs/speed.md).
//!
//! The helper is only ever a speed-up: the planning worker answers every
//! request alone when the helper is missing, still loading, refuses a job,
//! or dies (`bin/worker.rs`), and what it shows is the same to the bit
//! either way (`moeplan_view`'s split test).
//!
//! Messages are `[json, Float64Array | null, "helper"]` to the helper and
//! `[json, Float64Array | null]` back, as the page's are.

use moeplan::data::Workload;
use moeplan_view::{SchedulePart, SplitJob, schedule_part};
use serde::{Deserialize, Serialize};

use super::{WorkerState, load, planner_settings};
use crate::protocol::{Request, Source};
use crate::reader::{ReadTrace, pack, unpack};

/// The third element of a message to the helper.
pub const HELPER: &str = "helper";

/// What the planning worker asks its helper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
pub enum HelperAsk {
    /// Hold this trace, numbered `trace`: generated again from `source`, or
    /// (a file) the counts that come as numbers, `headers` saying their
    /// shape ([`pack`]).
    Load {
        /// The planning worker's number for the trace.
        trace: u64,
        /// Where it came from.
        source: Source,
        /// A file's trace, without its counts.
        headers: Vec<ReadTrace>,
    },
    /// The second part of `job` on trace `trace`.
    Part {
        /// The trace it is for.
        trace: u64,
        /// The job.
        job: SplitJob,
    },
}

/// What the helper answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum HelperAnswer {
    /// It holds trace `trace`.
    Loaded {
        /// The trace.
        trace: u64,
    },
    /// Its part of `job`, as numbers ([`SchedulePart::to_numbers`]).
    Part {
        /// The job.
        job: SplitJob,
        /// Milliseconds the helper spent on it.
        #[serde(default)]
        worker_ms: f64,
    },
    /// It cannot: the trace is not the one it holds, the planner cannot
    /// schedule a part alone, or planning failed.
    Refused {
        /// Why, for the console.
        message: String,
    },
}

/// The helper's side: the workload it holds.
#[derive(Default)]
pub struct Helper {
    held: Option<(u64, Workload)>,
}

impl Helper {
    /// Answers one ask (`numbers`: a file's counts for a load) with the
    /// answer and its numbers.
    pub fn handle(&mut self, ask: &HelperAsk, numbers: &[f64]) -> (HelperAnswer, Option<Vec<f64>>) {
        let refused = |message: String| (HelperAnswer::Refused { message }, None);
        match ask {
            HelperAsk::Load {
                trace,
                source,
                headers,
            } => {
                // The old copy goes first: two at once may not fit.
                self.held = None;
                let read = match source {
                    Source::File { .. } => match unpack(headers, numbers) {
                        Ok(traces) => Some(traces),
                        Err(e) => return refused(e),
                    },
                    Source::Generate { .. } => None,
                };
                match load(source, read, &mut |_| {}) {
                    Ok((work, _)) => {
                        self.held = Some((*trace, work));
                        (HelperAnswer::Loaded { trace: *trace }, None)
                    }
                    Err(e) => refused(e),
                }
            }
            HelperAsk::Part { trace, job } => {
                let Some((held, work)) = &self.held else {
                    return refused("no trace held".into());
                };
                if held != trace {
                    return refused(format!("trace {trace} asked, {held} held"));
                }
                match schedule_part(work, job, job.theirs()) {
                    Ok(Some(part)) => (
                        HelperAnswer::Part {
                            job: job.clone(),
                            worker_ms: 0.0,
                        },
                        Some(part.to_numbers()),
                    ),
                    Ok(None) => refused("the planner cannot schedule a part alone".into()),
                    Err(e) => refused(e.to_string()),
                }
            }
        }
    }
}

/// A job the planning worker shares: the helper's ask, and its own part
/// (made while the helper makes the other).
pub struct Shared {
    /// The job.
    pub job: SplitJob,
    /// The planning worker's part.
    pub mine: SchedulePart,
}

impl WorkerState {
    /// The trace held and what to send the helper so it holds it too
    /// (`None` before the first trace, and while no re-plan here can be
    /// shared: the copy would cost memory for nothing).
    pub fn helper_load(&self) -> Option<(HelperAsk, Option<Vec<f64>>)> {
        let (source, ws) = (self.loaded.as_ref()?, self.workspace.as_ref()?);
        if !ws.shares_per_batch() {
            return None;
        }
        let (headers, counts) = match source {
            Source::File { .. } => {
                let (headers, counts) =
                    pack(&[(self.source.clone(), ws.workload().trace().clone())]);
                (headers, Some(counts))
            }
            Source::Generate { .. } => (Vec::new(), None),
        };
        let ask = HelperAsk::Load {
            trace: self.trace_number,
            source: source.clone(),
            headers,
        };
        Some((ask, counts))
    }

    /// Whether a helper would share re-plans of the workspace held.
    pub fn wants_helper(&self) -> bool {
        self.loaded.is_some()
            && self
                .workspace
                .as_ref()
                .is_some_and(|ws| ws.shares_per_batch())
    }

    /// The number of the trace held (a new one per trace loaded).
    pub fn trace_number(&self) -> u64 {
        self.trace_number
    }

    /// The job `req` can share with a helper holding the same trace: a
    /// change of the per-batch planners' options alone, to options whose
    /// schedule is not kept, that the helper can make without seconds of
    /// its own work (not the path table: its predictions are made here).
    pub fn split_job(&self, req: &Request) -> Option<SplitJob> {
        let ws = self.workspace.as_ref()?;
        let asked = req.per_batch.as_ref()?;
        let alone = req.source.is_none()
            && req.export.is_none()
            && req.cross.is_none()
            && req.serving.is_none()
            && req.cluster.is_none_or(|c| c == ws.cluster())
            && !ws.has_pending()
            && *asked != self.per_batch
            && !asked
                .iter()
                .any(|(k, v)| k == "predictor" && v == "path-table")
            && planner_settings(asked).is_ok();
        if !alone {
            return None;
        }
        ws.split_job(asked)
    }

    /// This worker's part of `job`, made now.
    pub fn share(&self, job: SplitJob) -> Option<Shared> {
        let ws = self.workspace.as_ref()?;
        let mine = ws.schedule_part(&job).ok()??;
        Some(Shared { job, mine })
    }

    /// Phases the next answer reports before its own (milliseconds each).
    pub fn phases_before(&mut self, phases: Vec<(String, f64)>) {
        self.phases_before = phases;
    }

    /// The helper's part of `shared` (its numbers) joined with this
    /// worker's and kept, so the request that asked for them finds the
    /// schedule made; an error leaves the state as it was (the request
    /// then makes it alone).
    pub fn keep_shared(&mut self, shared: Shared, numbers: &[f64]) -> Result<(), String> {
        let ws = self.workspace.as_mut().ok_or("no trace yet")?;
        let theirs =
            SchedulePart::from_numbers(numbers, &shared.mine).map_err(|e| e.to_string())?;
        ws.keep_parts(&shared.job, vec![shared.mine, theirs])
            .map_err(|e| e.to_string())
    }
}
