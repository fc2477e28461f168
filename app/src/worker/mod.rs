//! The planning worker's state and request handling, in plain Rust so it is
//! tested natively; `bin/worker.rs` only wires it to `postMessage`.
//!
//! Invariant: a request that fails leaves the state as it was — a broken
//! file never costs the user the trace they had.

use moeplan::data::Workload;
use moeplan::judge::cost::Pricing;
use moeplan::planners::Settings;
use moeplan::planners::{DEFAULT_DEPTH, PathMemoBuild};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan::{LoadTrace, data::model};
use moeplan_view::{Cluster, View, Workspace, dispatch_rule};

use moeplan_view::page::{Shown, TraceStatsLite, Update};

use crate::protocol::{Request, Response, Source, TOKENS_PER_BATCH};
use crate::reader::ReadAsk;

mod ahead;
mod helper;
mod studies;

use ahead::Ahead;
pub use ahead::{Preparing, Warmed, neighbours};
pub use helper::{HELPER, Helper, HelperAnswer, HelperAsk, Shared};

/// The traces a request's files held, each with the name the page shows
/// ([`crate::reader::read`]).
pub type Read = Vec<(String, LoadTrace)>;

/// What the worker holds between requests.
#[derive(Default)]
pub struct WorkerState {
    workspace: Option<Workspace>,
    source: String,
    /// The figures of the last view answered, for the workspace held: the
    /// next answer sends only what differs from them.
    shown: Option<Shown>,
    /// The per-batch planners' options last asked for ([`Request::per_batch`]).
    per_batch: Vec<(String, String)>,
    /// Why the per-batch planners show their defaults (the options asked
    /// for did not fit the trace), kept in every view's notes.
    per_batch_note: Option<String>,
    /// The traces of the last cross-workload matrix ([`Request::cross`]),
    /// with their names, judged again after a cluster change.
    cross: Option<(Vec<String>, Vec<LoadTrace>)>,
    /// The work still to do ahead of time for the clusters next to the
    /// one shown, one (what, cluster, layer) per step, the next one last;
    /// set anew whenever the workspace changes ([`WorkerState::warm_step`]).
    warm: Vec<(Ahead, Cluster, usize)>,
    /// The clusters of `warm`, and the milliseconds spent on them so far.
    warming: (Vec<Cluster>, f64),
    /// The steps `warm` held when it was set (how far it is, for the page).
    queued: usize,
    /// Libra's path-table predictions for the trace held, made between
    /// requests once GRACE's clusterings are done, and the milliseconds
    /// spent so far. They depend on the routes alone: a cluster change
    /// keeps them, a new trace starts them anew.
    memo: Option<(PathMemoBuild, f64)>,
    /// Where the trace held came from (what a helper loads again), and its
    /// number: one more per trace loaded ([`WorkerState::helper_load`]).
    loaded: Option<Source>,
    trace_number: u64,
    /// Phases of the next answer spent before it was taken (a re-plan
    /// shared with the helper: this worker's half, the wait, the join).
    phases_before: Vec<(String, f64)>,
    /// Workspaces a cluster change or new trace replaced, freed by the
    /// next step ahead of time rather than before the answer (freeing the
    /// route default's was a tenth of a GPU change).
    retired: Vec<Workspace>,
}

/// Each phase's milliseconds: from its mark to the next one, the last to
/// `end` (which includes drawing the view).
///
/// ```
/// use moeplan_app::worker::phase_durations;
/// let marks = vec![("a".to_string(), 10.0), ("b".to_string(), 15.0)];
/// assert_eq!(phase_durations(&marks, 18.0), vec![("a".into(), 5.0), ("b".into(), 3.0)]);
/// ```
pub fn phase_durations(marks: &[(String, f64)], end: f64) -> Vec<(String, f64)> {
    marks
        .iter()
        .enumerate()
        .map(|(i, (phase, t))| {
            let next = marks.get(i + 1).map_or(end, |m| m.1);
            (phase.clone(), next - t)
        })
        .collect()
}

impl WorkerState {
    /// Answers one request whose files (`bytes`, when it carries any) are
    /// read here, as the page's reader worker reads them
    /// ([`crate::reader::read`]); the page's worker uses
    /// [`WorkerState::handle_read`] with what its reader read. `progress` is
    /// called with each long phase.
    pub fn handle(
        &mut self,
        req: &Request,
        bytes: Option<&[u8]>,
        now_ms: impl Fn() -> f64,
        mut progress: impl FnMut(&str),
    ) -> Response {
        let read = match (bytes, ReadAsk::of(req, bytes.map_or(0, <[u8]>::len))) {
            (Some(bytes), Some(ask)) => {
                progress(&ask.phase());
                match crate::reader::read(&ask, bytes) {
                    Ok(traces) => Some(traces),
                    Err(message) => {
                        return Response::Error {
                            id: req.id,
                            message,
                        };
                    }
                }
            }
            _ => None,
        };
        self.handle_read(req, read, now_ms, progress)
    }

    /// Answers one request, given the traces its files held (`None` when it
    /// carries no files). `progress` is called with each long phase.
    pub fn handle_read(
        &mut self,
        req: &Request,
        read: Option<Read>,
        now_ms: impl Fn() -> f64,
        mut progress: impl FnMut(&str),
    ) -> Response {
        let start = now_ms();
        if let Some(ask) = &req.cross {
            return match self.cross(req, ask, read, &mut progress) {
                Ok(table) => Response::Cross {
                    id: req.id,
                    table,
                    worker_ms: now_ms() - start,
                },
                Err(message) => Response::Error {
                    id: req.id,
                    message,
                },
            };
        }
        if let Some(ask) = req.serving.clone() {
            return match self.serving(req, ask) {
                Ok(view) => Response::Serving {
                    id: req.id,
                    view: Box::new(view),
                    worker_ms: now_ms() - start,
                },
                Err(message) => Response::Error {
                    id: req.id,
                    message,
                },
            };
        }
        // When each long phase started: what a re-plan spent where.
        let mut marks: Vec<(String, f64)> = Vec::new();
        let mut marked = |phase: &str| {
            marks.push((phase.to_string(), now_ms()));
            progress(phase);
        };
        let answer = self.try_handle(req, read, &mut marked);
        let end = now_ms();
        match answer {
            Ok(Answer::View(update, stats)) => Response::View {
                id: req.id,
                stats,
                update,
                worker_ms: end - start,
                span: (0.0, 0.0),
                phase_ms: std::mem::take(&mut self.phases_before)
                    .into_iter()
                    .chain(phase_durations(&marks, end))
                    .collect(),
            },
            Ok(Answer::Export(file_name, text, note)) => Response::Export {
                id: req.id,
                file_name,
                text,
                note,
            },
            Err(message) => Response::Error {
                id: req.id,
                message,
            },
        }
    }

    /// Works out the whole answer first and changes the state last, so a
    /// request that fails at any step (reading, planning, the view for its
    /// budget, the export) leaves the state as it was.
    fn try_handle(
        &mut self,
        req: &Request,
        read: Option<Read>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Answer, String> {
        let new_trace = match &req.source {
            Some(source) => Some(load(source, read, progress)?),
            None => None,
        };
        let cluster = match (req.cluster, &self.workspace) {
            (Some(c), _) => c,
            (None, Some(ws)) => ws.cluster(),
            (None, None) => return Err("no cluster given yet".into()),
        };
        // The model asked for is judged with from the start (bytes, copies
        // and prices alike): another one is a new workspace, as a cluster.
        let model = Some(req.model.as_str()).filter(|m| !m.is_empty());
        let changed_cluster = self
            .workspace
            .as_ref()
            .is_none_or(|ws| ws.cluster() != cluster || ws.asked_model() != model);
        // GRACE's ratio: a new workspace is prepared with it, the current
        // one re-plans GRACE only when it changed (below).
        let statics = match &req.static_options {
            Some(options) => Some(planner_settings(options)?),
            None => None,
        };
        let mut fresh = None;
        if new_trace.is_some() || changed_cluster {
            // A cluster change keeps what does not depend on the cluster
            // (GRACE's affinity analysis); the workspace checks the routes.
            let previous = if new_trace.is_none() {
                self.workspace.as_ref()
            } else {
                None
            };
            let (work, name) = match new_trace {
                Some(t) => t,
                None => match &self.workspace {
                    Some(ws) => (ws.workload().clone(), self.source.clone()),
                    None => return Err("no trace yet".into()),
                },
            };
            let stats = TraceStatsLite::from_stats(name.clone(), &work.trace().stats());
            // A cluster change shows the static plans first: the per-batch
            // planners (Libra), and GRACE on a cluster its analysis has not
            // clustered, are planned by the request after it, the page's
            // follow-up for the timeline (see `plan_pending`).
            let defer = previous.is_some();
            let options = match (&statics, &self.workspace) {
                (Some(s), _) => s.clone(),
                (None, Some(ws)) => ws.options().clone(),
                (None, None) => Settings::new(),
            };
            let ws = Workspace::of_workload_deferring(
                work,
                cluster,
                previous,
                defer,
                &options,
                model,
                &mut *progress,
            )
            .map_err(|e| e.to_string())?;
            fresh = Some((ws, name, stats));
        }
        if let (Some(options), None) = (&statics, &fresh) {
            let ws = self.workspace.as_mut().ok_or("no trace yet")?;
            ws.set_options(options, &mut *progress)
                .map_err(|e| e.to_string())?;
        }
        let asked = req.per_batch.as_ref().unwrap_or(&self.per_batch).clone();
        // The path table asked for before its predictions were made ahead:
        // the steps left now, rather than all of them again (a new trace
        // makes its own).
        let path_table = asked
            .iter()
            .any(|(k, v)| k == "predictor" && v == "path-table");
        if path_table && req.source.is_none() {
            let work = match &fresh {
                Some((ws, ..)) => Some(ws.workload()),
                None => self.workspace.as_ref().map(|ws| ws.workload()),
            };
            if let (Some(work), Some((build, _))) = (work, self.memo.take()) {
                progress("Libra: the path table's predictions");
                // On an error, planning says it again in the row.
                let _ = build.finish(work);
            }
        }
        let mut fallback = self.per_batch_note.clone();
        let pending = fresh.is_none() && self.workspace.as_ref().is_some_and(|ws| ws.has_pending());
        // A schedule planned now is timed on the request's hardware in its
        // own replay: its price costs no second replay of every batch.
        // Only the workspace this request plans on: the new one, else the
        // one held.
        if let Some(ws) = fresh.as_mut().map(|f| &mut f.0).or(self.workspace.as_mut()) {
            let pricing = pricing(ws, req)?;
            ws.price_schedules_on(pricing);
        }
        match &mut fresh {
            // Deferred: planned, with the options asked, by the next request.
            Some((ws, ..)) if ws.has_pending() => fallback = None,
            // A new workspace plans the per-batch planners at their
            // defaults: the options asked for are applied on top; options a
            // new trace cannot feed (a path-table predictor on counts) leave
            // the defaults, said in the notes, rather than refuse the trace.
            Some((ws, ..)) if !asked.is_empty() => {
                fallback = None;
                if let Err(e) = planner_settings(&asked).and_then(|s| replan(ws, &s)) {
                    fallback = Some(format!("{e}: shown with its default options"));
                }
            }
            Some(_) => fallback = None,
            None if pending => {
                let ws = self.workspace.as_mut().ok_or("no trace yet")?;
                // The options kept from before the cluster change fed this
                // trace then; new ones that cannot are refused as ever.
                match planner_settings(&asked).and_then(|s| plan_pending(ws, &s, progress)) {
                    Ok(()) => fallback = None,
                    Err(e) if asked == self.per_batch => {
                        fallback = Some(format!("{e}: shown with its default options"));
                        plan_pending(ws, &Settings::new(), progress)?;
                    }
                    Err(e) => return Err(e),
                }
            }
            None if asked != self.per_batch => {
                // Only the per-batch planners: on an error nothing changed.
                let settings = planner_settings(&asked)?;
                let ws = self.workspace.as_mut().ok_or("no trace yet")?;
                replan(ws, &settings)?;
                fallback = None;
            }
            None => {}
        }
        let ws = match &fresh {
            Some((ws, ..)) => ws,
            None => self.workspace.as_ref().ok_or("no trace yet")?,
        };
        let (answer, shown) = match &req.export {
            Some(format) => {
                let export = ws.export(req.replicas_per_gpu, format).map_err(|e| {
                    let e = e.to_string();
                    // The core's advice names CLI flags; say what works here.
                    if e.contains("layer count is unknown") {
                        format!(
                            "{e}. In the page: this file matches no model preset's shape, so                              export moeplan JSON (it records the layer ids), or run the CLI                              with --model or --model-layers"
                        )
                    } else {
                        e
                    }
                })?;
                // Named after the planner whose plan it is (`moeplan-craft.plan.json`).
                let focus = ws.focus_id().map_or("plan", |id| id.as_str());
                let ext = if format == "sglang" {
                    "sglang.json"
                } else {
                    "plan.json"
                };
                let answer =
                    Answer::Export(format!("moeplan-{focus}.{ext}"), export.text, export.note);
                (answer, None)
            }
            None => {
                let mut shown = Shown::of(&view(ws, req)?)?;
                shown.frame.notes.extend(fallback.clone());
                // A new workspace is drawn afresh: the page gets everything.
                let before = if fresh.is_some() {
                    None
                } else {
                    self.shown.as_ref()
                };
                let update = shown.update_from(before);
                (Answer::View(Box::new(update), None), Some(shown))
            }
        };
        // Nothing fails from here on: the state takes the answer.
        if let Some(shown) = shown {
            self.shown = Some(shown);
        }
        self.per_batch = asked;
        self.per_batch_note = fallback;
        Ok(match fresh {
            Some((ws, name, stats)) => {
                self.warm_around(&ws);
                if req.source.is_some() {
                    self.loaded.clone_from(&req.source);
                    self.trace_number += 1;
                    // A trace too large to keep them, or counts only: none.
                    self.memo = PathMemoBuild::new(ws.workload(), DEFAULT_DEPTH)
                        .ok()
                        .flatten()
                        .map(|b| (b, 0.0));
                }
                self.retired.extend(self.workspace.replace(ws));
                self.source = name;
                match answer {
                    Answer::View(v, _) => Answer::View(v, Some(stats)),
                    export => export,
                }
            }
            None => answer,
        })
    }
}

/// The request's dispatch rule (`even` when it names none).
fn rule_of(req: &Request) -> Result<moeplan::judge::Rule, String> {
    let name = if req.rule.is_empty() {
        "even"
    } else {
        &req.rule
    };
    dispatch_rule(name).map_err(|e| e.to_string())
}

fn view(ws: &Workspace, req: &Request) -> Result<View, String> {
    let layer = req.layer.min(ws.trace().num_layers().saturating_sub(1));
    let rule = rule_of(req)?;
    let pricing = pricing(ws, req)?;
    if req.one_rule {
        ws.view_priced(
            req.replicas_per_gpu,
            layer,
            rule,
            req.batches,
            pricing.as_ref(),
        )
    } else {
        ws.view_own_rules(
            req.replicas_per_gpu,
            layer,
            rule,
            req.batches,
            pricing.as_ref(),
        )
    }
    .map_err(|e| e.to_string())
}

/// The request's hardware with the model whose sizes it prices: the
/// page's memory model, else the trace's, else DeepSeek-V3.
fn pricing(ws: &Workspace, req: &Request) -> Result<Option<Pricing>, String> {
    if req.hardware.is_empty() {
        return Ok(None);
    }
    // A loaded file is checked again here: the worker trusts no message.
    let file;
    let hardware = match &req.hardware_json {
        Some(json) => {
            file = moeplan::formats::read_hardware(json.as_bytes()).map_err(|e| e.to_string())?;
            &file
        }
        None => moeplan::data::hardware::preset(&req.hardware).map_err(|e| e.to_string())?,
    };
    let mut pricing = ws.judge().priced_on(hardware);
    if req.phase == "decode" {
        pricing.assumptions.phase = moeplan::judge::cost::Phase::Decode;
    }
    Ok(Some(pricing))
}

/// The few figures the page draws of a prediction, per MoE layer and per
/// step.
/// The registry's settings for planner options (names and values as the
/// CLI reads them).
fn planner_settings(options: &[(String, String)]) -> Result<Settings, String> {
    let mut s = Settings::new();
    for (name, value) in options {
        s.set_str(name, value).map_err(|e| e.to_string())?;
    }
    Ok(s)
}

/// Plans the per-batch planners a cluster change left for later.
fn plan_pending(
    ws: &mut Workspace,
    settings: &Settings,
    progress: &mut dyn FnMut(&str),
) -> Result<(), String> {
    ws.plan_pending(settings, progress)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn replan(ws: &mut Workspace, settings: &Settings) -> Result<(), String> {
    ws.replan_scheduled(settings).map_err(|e| e.to_string())
}

enum Answer {
    /// What changed in the view, and the new trace's statistics when the
    /// trace changed.
    View(Box<Update>, Option<TraceStatsLite>),
    Export(String, String, Option<String>),
}

fn load(
    source: &Source,
    read: Option<Read>,
    progress: &mut dyn FnMut(&str),
) -> Result<(Workload, String), String> {
    match source {
        Source::Generate {
            preset,
            batches,
            seed,
            routes: true,
        } => {
            progress("generating the token routes");
            let p = model::preset(preset).map_err(|e| e.to_string())?;
            // Each batch's tokens dealt to the ranks in equal shares, as an
            // engine's scheduler gives them (whole sequences would put a
            // 512-token batch on 2 of the 8 ranks).
            let cfg = TokenGenConfig {
                seed: (*seed).into(),
                batch_tokens: TOKENS_PER_BATCH,
                ..TokenGenConfig::new(p, batches.saturating_mul(TOKENS_PER_BATCH))
            };
            let t = generate_tokens(&cfg).map_err(|e| e.to_string())?;
            let work = Workload::from_tokens(t, TOKENS_PER_BATCH).map_err(|e| e.to_string())?;
            Ok((
                work,
                format!(
                    "generated {preset} with token routes, {batches} batches of {TOKENS_PER_BATCH} tokens, seed {seed}"
                ),
            ))
        }
        Source::Generate {
            preset,
            batches,
            seed,
            routes: false,
        } => {
            progress("generating the trace");
            let p = model::preset(preset).map_err(|e| e.to_string())?;
            let cfg = GenConfig {
                seed: (*seed).into(),
                ..GenConfig::new(p, *batches)
            };
            let t = generate(&cfg).map_err(|e| e.to_string())?;
            Ok((
                Workload::new(t),
                format!("generated {preset}, {batches} batches, seed {seed}"),
            ))
        }
        Source::File { name } => {
            let (name, t) = read
                .and_then(|r| r.into_iter().next())
                .ok_or_else(|| format!("{name}: no file content arrived"))?;
            Ok((Workload::new(t), name))
        }
    }
}

#[cfg(test)]
mod tests;
