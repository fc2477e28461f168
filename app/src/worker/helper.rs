//! The planning worker's helper: a second instance of the same wasm,
//! started by the planning worker a second after an answer, holding a copy of
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
//! Messages are `[words, Float64Array, "helper"]` to the helper and
//! `[words, Float64Array]` back (a JSON list of words and the numbers:
//! [`Message`]).

use moeplan::data::Workload;
use moeplan_view::{Cluster, SchedulePart, SplitJob, schedule_part};

use super::{WorkerState, load};
use crate::protocol::{Request, Source};
use crate::reader::{ReadTrace, pack, unpack};

/// The third element of a message to the helper.
pub const HELPER: &str = "helper";

/// A message between the two workers: a JSON list of words and numbers
/// (no serde types of their own: each would add its code to the page's
/// wasm).
pub type Message = (String, Vec<f64>);

/// What the planning worker asks its helper.
#[derive(Debug, Clone, PartialEq)]
pub enum HelperAsk {
    /// Hold this trace, numbered `trace`: generated again from `source`, or
    /// (a file) its counts, `headers` saying their shape ([`pack`]).
    Load {
        /// The planning worker's number for the trace.
        trace: u64,
        /// Where it came from.
        source: Source,
        /// A file's trace, without its counts.
        headers: Vec<ReadTrace>,
        /// A file's counts.
        counts: Vec<f64>,
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
#[derive(Debug, Clone, PartialEq)]
pub enum HelperAnswer {
    /// It holds trace `trace`.
    Loaded {
        /// The trace.
        trace: u64,
    },
    /// Its part of `job`.
    Part {
        /// The job.
        job: SplitJob,
        /// Milliseconds the helper spent on it.
        worker_ms: f64,
        /// The part ([`SchedulePart::to_numbers`]).
        numbers: Vec<f64>,
    },
    /// It cannot: the trace is not the one it holds, the planner cannot
    /// schedule a part alone, or planning failed.
    Refused {
        /// Why, for the console.
        message: String,
    },
}

/// A job's words (planner, model — empty for the trace's —, then its
/// options' names and values) and numbers (the cluster and the split).
fn job_message(job: &SplitJob) -> (Vec<String>, [f64; 5]) {
    let mut words = vec![
        job.planner.to_string(),
        job.model.clone().unwrap_or_default(),
    ];
    for (k, v) in &job.options {
        words.extend([k.clone(), v.clone()]);
    }
    let c = job.cluster;
    let numbers = [c.nodes, c.gpus_per_node, c.groups, job.from, job.batches].map(|x| x as f64);
    (words, numbers)
}

/// The job [`job_message`] wrote.
fn job_of(words: &[String], numbers: &[f64]) -> Result<SplitJob, String> {
    let [nodes, gpus_per_node, groups, from, batches] = counts_of(numbers)?;
    let [planner, model, options @ ..] = words else {
        return Err("a job without its planner and model".into());
    };
    if options.len() % 2 != 0 {
        return Err("a job's options are not name-value pairs".into());
    }
    Ok(SplitJob {
        planner: planner.parse().map_err(|e: moeplan::Error| e.to_string())?,
        cluster: Cluster {
            nodes,
            gpus_per_node,
            groups,
        },
        options: options
            .chunks_exact(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect(),
        from,
        batches,
        model: Some(model.clone()).filter(|m| !m.is_empty()),
    })
}

/// The first `N` numbers as counts (whole, not negative).
fn counts_of<const N: usize>(numbers: &[f64]) -> Result<[usize; N], String> {
    let mut out = [0usize; N];
    for (o, &x) in out
        .iter_mut()
        .zip(numbers.get(..N).ok_or("a message cut short")?)
    {
        if !(x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 9.0e15) {
            return Err(format!("{x} is not a count"));
        }
        *o = x as usize;
    }
    Ok(out)
}

/// The words of a message's text.
fn words_of(text: &str) -> Result<Vec<String>, String> {
    serde_json::from_str(text).map_err(|e| format!("not a helper message: {e}"))
}

fn text_of(words: &[String]) -> String {
    serde_json::to_string(words).unwrap_or_default()
}

impl HelperAsk {
    /// As a message.
    pub fn to_message(&self) -> Message {
        match self {
            HelperAsk::Load {
                trace,
                source,
                headers,
                counts,
            } => {
                let words = [
                    "load".to_string(),
                    serde_json::to_string(source).unwrap_or_default(),
                    serde_json::to_string(headers).unwrap_or_default(),
                ];
                let mut numbers = Vec::with_capacity(counts.len() + 1);
                numbers.push(*trace as f64);
                numbers.extend_from_slice(counts);
                (text_of(&words), numbers)
            }
            HelperAsk::Part { trace, job } => {
                let (mut words, numbers) = job_message(job);
                words.insert(0, "part".into());
                let mut all = vec![*trace as f64];
                all.extend(numbers);
                (text_of(&words), all)
            }
        }
    }

    /// The ask a message holds, checked.
    pub fn from_message(text: &str, numbers: Vec<f64>) -> Result<HelperAsk, String> {
        let words = words_of(text)?;
        let [trace] = counts_of(&numbers)?;
        let trace = trace as u64;
        match words.first().map(String::as_str) {
            Some("load") => {
                let word = |i: usize| words.get(i).map(String::as_str).unwrap_or_default();
                let source = serde_json::from_str(word(1)).map_err(|e| e.to_string())?;
                let headers = serde_json::from_str(word(2)).map_err(|e| e.to_string())?;
                let mut counts = numbers;
                counts.remove(0);
                Ok(HelperAsk::Load {
                    trace,
                    source,
                    headers,
                    counts,
                })
            }
            Some("part") => Ok(HelperAsk::Part {
                trace,
                job: job_of(&words[1..], &numbers[1..])?,
            }),
            _ => Err(format!("an ask the helper does not know: {text}")),
        }
    }
}

impl HelperAnswer {
    /// As a message.
    pub fn to_message(&self) -> Message {
        match self {
            HelperAnswer::Loaded { trace } => (text_of(&["loaded".into()]), vec![*trace as f64]),
            HelperAnswer::Part {
                job,
                worker_ms,
                numbers,
            } => {
                let (mut words, head) = job_message(job);
                words.insert(0, "part".into());
                let mut all = Vec::with_capacity(numbers.len() + 6);
                all.extend(head);
                all.push(*worker_ms);
                all.extend_from_slice(numbers);
                (text_of(&words), all)
            }
            HelperAnswer::Refused { message } => {
                (text_of(&["refused".into(), message.clone()]), Vec::new())
            }
        }
    }

    /// The answer a message holds, checked.
    pub fn from_message(text: &str, numbers: Vec<f64>) -> Result<HelperAnswer, String> {
        let words = words_of(text)?;
        match words.first().map(String::as_str) {
            Some("loaded") => {
                let [trace] = counts_of(&numbers)?;
                Ok(HelperAnswer::Loaded {
                    trace: trace as u64,
                })
            }
            Some("part") => {
                let job = job_of(&words[1..], &numbers)?;
                let worker_ms = numbers.get(5).copied().unwrap_or(0.0);
                Ok(HelperAnswer::Part {
                    job,
                    worker_ms,
                    numbers: numbers.get(6..).unwrap_or(&[]).to_vec(),
                })
            }
            Some("refused") => Ok(HelperAnswer::Refused {
                message: words.get(1).cloned().unwrap_or_default(),
            }),
            _ => Err(format!(
                "an answer the planning worker does not know: {text}"
            )),
        }
    }
}

/// The helper's side: the workload it holds.
#[derive(Default)]
pub struct Helper {
    held: Option<(u64, Workload)>,
}

impl Helper {
    /// Answers one ask.
    pub fn handle(&mut self, ask: HelperAsk) -> HelperAnswer {
        let refused = |message: String| HelperAnswer::Refused { message };
        match ask {
            HelperAsk::Load {
                trace,
                source,
                headers,
                counts,
            } => {
                // The old copy goes first: two at once may not fit.
                self.held = None;
                let read = match source {
                    Source::File { .. } => match unpack(&headers, &counts) {
                        Ok(traces) => Some(traces),
                        Err(e) => return refused(e),
                    },
                    Source::Generate { .. } => None,
                };
                drop(counts);
                match load(&source, read, &mut |_| {}) {
                    Ok((work, _)) => {
                        self.held = Some((trace, work));
                        HelperAnswer::Loaded { trace }
                    }
                    Err(e) => refused(e),
                }
            }
            HelperAsk::Part { trace, job } => {
                let Some((held, work)) = &self.held else {
                    return refused("no trace held".into());
                };
                if *held != trace {
                    return refused(format!("trace {trace} asked, {held} held"));
                }
                match schedule_part(work, &job, job.theirs()) {
                    Ok(Some(part)) => HelperAnswer::Part {
                        job,
                        worker_ms: 0.0,
                        numbers: part.to_numbers(),
                    },
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
    pub fn helper_load(&self) -> Option<HelperAsk> {
        let (source, ws) = (self.loaded.as_ref()?, self.workspace.as_ref()?);
        if !ws.shares_per_batch() {
            return None;
        }
        let (headers, counts) = match source {
            Source::File { .. } => pack(&[(self.source.clone(), ws.workload().trace().clone())]),
            Source::Generate { .. } => (Vec::new(), Vec::new()),
        };
        Some(HelperAsk::Load {
            trace: self.trace_number,
            source: source.clone(),
            headers,
            counts,
        })
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
                .any(|(k, v)| k == "predictor" && v == "path-table");
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
