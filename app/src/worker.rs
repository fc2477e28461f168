//! The planning worker's state and request handling, in plain Rust so it is
//! tested natively; `bin/worker.rs` only wires it to `postMessage`.
//!
//! Invariant: a request that fails leaves the state as it was — a broken
//! file never costs the user the trace they had.

use moeplan::data::Workload;
use moeplan::judge::cost::{Prediction, Pricing};
use moeplan::planners::Settings;
use moeplan::planners::libra::{DEFAULT_DEPTH, PathMemoBuild};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan::{Budget, LoadTrace, data::model};
use moeplan_view::{Cluster, ServingAsk, ServingView, View, Workspace, dispatch_rule};

use crate::protocol::{
    CrossAsk, CrossLine, CrossTable, CurvePoint, Figures, Frame, Grouping, Heat, Placement,
    Predicted, Request, Response, Slot, Source, TOKENS_PER_BATCH, TraceStatsLite, Update,
};
use crate::reader::ReadAsk;

/// The page's reading limit in MiB: a file larger than this on disk is
/// refused before it is read, and reading may build no more than this
/// (the file itself, what it decompresses to and the parsed values).
pub const MAX_TRACE_MIB: u64 = 512;

/// Largest trace file the page accepts, in bytes.
pub const MAX_FILE_BYTES: u64 = MAX_TRACE_MIB << 20;

/// Tells a page user what the limit is and where to go past it.
pub const BUDGET_HINT: &str = "the page reads files that expand to at most 512 MiB; \
use the moeplan CLI with --max-trace-mib for larger ones";

/// How the phase the worker reports while it reads begins (`reading
/// big.pt`, `reading the files`): the page's read deadline runs until a
/// later phase or an answer arrives.
pub const READING_PHASE: &str = "reading";

/// The budget the worker reads every file with.
///
/// ```
/// let b = moeplan_app::worker::read_budget();
/// assert_eq!(b.max_bytes, moeplan_app::worker::MAX_FILE_BYTES);
/// assert!(b.raise_hint.contains("--max-trace-mib"));
/// ```
pub fn read_budget() -> Budget {
    Budget::mib(MAX_TRACE_MIB).with_hint(BUDGET_HINT)
}

/// The message for a file of `size` bytes on disk when it is over the
/// page's limit, or `None` when the page may read it.
///
/// ```
/// use moeplan_app::worker::{MAX_FILE_BYTES, too_large};
/// assert!(too_large("a.json", MAX_FILE_BYTES as f64).is_none());
/// let m = too_large("a.json", (600u64 << 20) as f64).unwrap();
/// assert!(m.starts_with("a.json: 600 MiB on disk") && m.contains("512 MiB"), "{m}");
/// ```
pub fn too_large(name: &str, size: f64) -> Option<String> {
    (size > MAX_FILE_BYTES as f64).then(|| {
        format!(
            "{name}: {:.0} MiB on disk is more than the {MAX_TRACE_MIB} MiB the page reads \
(use the moeplan CLI with --max-trace-mib for larger files)",
            (size / (1u64 << 20) as f64).ceil()
        )
    })
}

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
    /// Libra's path-table predictions for the trace held, made between
    /// requests once GRACE's clusterings are done, and the milliseconds
    /// spent so far. They depend on the routes alone: a cluster change
    /// keeps them, a new trace starts them anew.
    memo: Option<(PathMemoBuild, f64)>,
    /// Workspaces a cluster change or new trace replaced, freed by the
    /// next step ahead of time rather than before the answer (freeing the
    /// route default's was a tenth of a GPU change).
    retired: Vec<Workspace>,
}

/// What one step ahead of time prepares for a neighbouring cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ahead {
    /// CRAFT's measurements of one layer (the step after the last layer:
    /// its budget bound), kept with the trace.
    Craft,
    /// GRACE's clusterings of one layer (token routes only).
    Grace,
}

/// Work ahead of time that [`WorkerState::warm_step`] finished.
#[derive(Debug, Clone, PartialEq)]
pub enum Warmed {
    /// CRAFT's measurements and (token routes) GRACE's clusterings of these
    /// clusters (`N × G`), in this many ms.
    Clusters(Vec<String>, f64),
    /// Libra's path-table predictions for the trace, in this many ms.
    PathTable(f64),
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

/// The clusters a person is likely to try next from `c`, for GRACE's
/// clusterings ahead of time: half and twice the GPUs per node first — they
/// keep the node groupings as a rule, so they cost little — then half and
/// twice the nodes; at most `experts` GPUs, none twice, not `c` itself.
///
/// ```
/// use moeplan_view::Cluster;
/// use moeplan_app::worker::neighbours;
/// let c = |nodes, gpus_per_node| Cluster { nodes, gpus_per_node, groups: 8 };
/// let n: Vec<_> = neighbours(c(8, 8), 256).iter().map(|c| (c.nodes, c.gpus_per_node)).collect();
/// assert_eq!(n, vec![(8, 4), (8, 16), (4, 8), (16, 8)]);
/// let n: Vec<_> = neighbours(c(1, 8), 8).iter().map(|c| (c.nodes, c.gpus_per_node)).collect();
/// assert_eq!(n, vec![(1, 4)]);
/// ```
pub fn neighbours(c: Cluster, experts: usize) -> Vec<Cluster> {
    let (n, g) = (c.nodes, c.gpus_per_node);
    let mut out: Vec<Cluster> = Vec::new();
    for (nodes, gpus_per_node) in [(n, g / 2), (n, g * 2), (n / 2, g), (n * 2, g)] {
        let next = Cluster {
            nodes,
            gpus_per_node,
            ..c
        };
        let fits =
            nodes >= 1 && gpus_per_node >= 1 && nodes.saturating_mul(gpus_per_node) <= experts;
        if fits && next != c && !out.contains(&next) {
            out.push(next);
        }
    }
    out
}

/// Most traces the page judges plans across: the matrix costs `3 · T + 2`
/// plannings and `(3 · T + 3) · T` evaluations.
pub const MAX_CROSS_TRACES: usize = 8;

/// Every figure of one view, in the page's form ([`Update`] with every part).
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// What only a new trace or cluster changes.
    pub frame: Frame,
    /// Every plan's figures, in the frame's order.
    pub plans: Vec<Figures>,
    /// CRAFT's R.
    pub replicas_per_gpu: usize,
    /// The dispatch rule of the plans' figures.
    pub rule: String,
    /// CRAFT's load map.
    pub heat: Heat,
    /// The chosen layer under CRAFT.
    pub placement: Placement,
    /// The chosen layer as GRACE grouped it (token routes only).
    pub grouping: Option<Grouping>,
}

impl Shown {
    /// The page's form of a core [`View`].
    pub fn of(v: &View) -> Result<Shown, String> {
        Ok(Shown {
            frame: Frame {
                topology: v.topology.to_string(),
                layer_ids: v.layer_ids.clone(),
                batches: v.batches,
                plans: v.plans.iter().map(|p| p.name.clone()).collect(),
                notes: v.notes.clone(),
                planner_notes: v.planner_notes.clone(),
                focus: v.focus.clone(),
                auto_replicas_per_gpu: v.auto_replicas_per_gpu,
                curve: v
                    .curve
                    .iter()
                    .map(|p| CurvePoint {
                        replicas_per_gpu: p.replicas_per_gpu,
                        replicas: p.replicas,
                        predicted_balancedness: p.predicted_balancedness,
                        bound: p.bound,
                    })
                    .collect(),
            },
            plans: v
                .plans
                .iter()
                .map(|p| Figures {
                    name: p.name.clone(),
                    label: p.label.clone(),
                    balancedness: p.balancedness,
                    imbalance_ratio: p.imbalance_ratio,
                    replicas: p.replicas,
                    replica_slots_per_gpu: p.replica_slots_per_gpu,
                    bound: p.bound,
                    rule: p.own_rule.clone().unwrap_or_else(|| v.rule.clone()),
                    traffic: shares(&p.traffic),
                    cross_node_gb: p.traffic.cross_node_bytes / 1e9,
                    per_layer: p.per_layer.clone(),
                    replicas_per_layer: p.replicas_per_layer.clone(),
                    per_batch_imbalance: p.per_batch_imbalance.clone(),
                    per_batch_bytes: p.per_batch_bytes.clone(),
                    schedule: p.schedule.clone(),
                    predicted: p.predicted.as_ref().map(predicted),
                })
                .collect(),
            replicas_per_gpu: v.replicas_per_gpu,
            rule: v.rule.clone(),
            heat: Heat::from_rows(&v.heat).ok_or("the load map's layers differ in GPUs")?,
            placement: Placement {
                layer: v.layer.layer,
                gpus: v
                    .layer
                    .gpus
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|&(expert, copies, share)| Slot {
                                expert,
                                copies,
                                share,
                            })
                            .collect()
                    })
                    .collect(),
            },
            grouping: v.grouping.as_ref().map(|g| Grouping {
                layer: g.layer,
                ratio: g.ratio,
                curve: g
                    .curve
                    .iter()
                    .map(|p| (p.ratio, p.size_deviation, p.utilisation))
                    .collect(),
                order: g.order.clone(),
                sizes: g.sizes.clone(),
                affinity: g.affinity.clone(),
            }),
        })
    }

    /// What the page, showing `before` (or nothing), needs to show `self`.
    ///
    /// ```
    /// use moeplan_app::worker::Shown;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let a = Shown::of(&ws.view(Some(2), 0)?)?;
    /// let b = Shown::of(&ws.view(Some(4), 0)?)?;
    /// let full = a.update_from(None);
    /// assert!(full.frame.is_some() && full.plans.len() == a.plans.len() && full.heat.is_some());
    /// let budget = b.update_from(Some(&a));
    /// assert!(budget.frame.is_none() && budget.heat.is_some());
    /// let names: Vec<_> = budget.plans.iter().map(|p| p.name.as_str()).collect();
    /// assert_eq!(names, ["craft"]); // BASE and EPLB stay as they are
    /// assert_eq!(b.update_from(Some(&b)).plans.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update_from(&self, before: Option<&Shown>) -> Update {
        let before = before.filter(|b| b.frame == self.frame);
        let changed = |old: Option<&Figures>, new: &Figures| old != Some(new);
        Update {
            frame: before.is_none().then(|| self.frame.clone()),
            plans: self
                .plans
                .iter()
                .filter(|p| {
                    changed(
                        before.and_then(|b| b.plans.iter().find(|o| o.name == p.name)),
                        p,
                    )
                })
                .cloned()
                .collect(),
            replicas_per_gpu: self.replicas_per_gpu,
            rule: self.rule.clone(),
            heat: (before.map(|b| &b.heat) != Some(&self.heat)).then(|| self.heat.clone()),
            placement: (before.map(|b| &b.placement) != Some(&self.placement))
                .then(|| self.placement.clone()),
            grouping: match before {
                Some(b) if b.grouping == self.grouping => None,
                _ => self.grouping.clone(),
            },
        }
    }
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
        if let Some(ask) = req.serving {
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
                phase_ms: phase_durations(&marks, end),
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
        let changed_cluster = self
            .workspace
            .as_ref()
            .is_none_or(|ws| ws.cluster() != cluster);
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

impl WorkerState {
    /// Queues the work ahead of time for `ws`'s [`neighbours`], the first
    /// neighbour first: CRAFT's measurements of every layer (most of a
    /// cluster change's work, whatever the trace), then GRACE's
    /// clusterings of every layer when `ws` groups by token routes (a
    /// count-only trace groups by load, which costs nothing to re-plan).
    fn warm_around(&mut self, ws: &Workspace) {
        self.warm.clear();
        self.warming = (Vec::new(), 0.0);
        let clusters = neighbours(ws.cluster(), ws.trace().num_experts());
        let layers = ws.trace().num_layers();
        let grace = if ws.workload().tokens().is_some() {
            layers
        } else {
            0
        };
        // Popped from the end: the first neighbour's first step last.
        for &c in clusters.iter().rev() {
            for layer in (0..grace).rev() {
                self.warm.push((Ahead::Grace, c, layer));
            }
            for layer in (0..layers).rev() {
                self.warm.push((Ahead::Craft, c, layer));
            }
        }
        self.warming.0 = clusters;
    }

    /// One step of the work ahead of time: CRAFT's measurements or GRACE's
    /// clusterings of one layer for one neighbouring cluster, then, once
    /// those are done, one step of Libra's path-table predictions. Returns
    /// what this step finished (with the milliseconds its work took, by
    /// `now_ms`), `None` while that work goes on or when there was none.
    /// The page's worker runs steps only between requests, so they never
    /// delay an answer by more than one step.
    pub fn warm_step(&mut self, now_ms: impl Fn() -> f64) -> Option<Warmed> {
        // What the last answers replaced is freed first, a step of its own.
        if self.retired.pop().is_some() {
            return None;
        }
        let ws = self.workspace.as_ref()?;
        let start = now_ms();
        if let Some((what, cluster, layer)) = self.warm.pop() {
            // A cluster that cannot be prepared (checked again when asked
            // for) is left to be planned from scratch then.
            let failed = match what {
                Ahead::Craft => ws.warm_craft(cluster, layer).is_err(),
                Ahead::Grace => ws.warm_grace(cluster, layer).is_err(),
            };
            if failed {
                self.warm.retain(|(w, c, _)| (*w, *c) != (what, cluster));
            }
            self.warming.1 += now_ms() - start;
            if !self.warm.is_empty() {
                return None;
            }
            let done = self
                .warming
                .0
                .iter()
                .map(|c| format!("{} × {}", c.nodes, c.gpus_per_node))
                .collect();
            return Some(Warmed::Clusters(done, self.warming.1));
        }
        let (build, ms) = self.memo.as_mut()?;
        let done = build.step(ws.workload());
        *ms += now_ms() - start;
        match done {
            Ok(false) => None,
            Ok(true) => {
                let ms = *ms;
                self.memo = None;
                Some(Warmed::PathTable(ms))
            }
            // Asked for, the path table says why in Libra's row.
            Err(_) => {
                self.memo = None;
                None
            }
        }
    }

    /// Whether work ahead of time is queued.
    pub fn warming(&self) -> bool {
        !self.warm.is_empty() || self.memo.is_some() || !self.retired.is_empty()
    }

    /// Plans across the workloads `ask` names (`read` from its files, each
    /// within its share of the page's reading budget) or, when it names
    /// none, the ones held; at the request's cluster (else the workspace's)
    /// and budget. The traces are kept only when the matrix is made.
    fn cross(
        &mut self,
        req: &Request,
        ask: &CrossAsk,
        read: Option<Read>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<CrossTable, String> {
        let cluster = req
            .cluster
            .or_else(|| self.workspace.as_ref().map(Workspace::cluster))
            .ok_or("no cluster given yet")?;
        let fresh = if ask.names.is_empty() {
            None
        } else {
            let read = read.ok_or("the files' bytes did not arrive")?;
            Some(read.into_iter().unzip::<_, _, Vec<_>, Vec<_>>())
        };
        let (names, traces) = match (&fresh, &self.cross) {
            (Some((n, t)), _) | (None, Some((n, t))) => (n, t),
            (None, None) => return Err("no traces loaded to judge plans across".into()),
        };
        progress("planning on every trace and judging on every trace");
        let topology = moeplan::Topology::new(cluster.nodes, cluster.gpus_per_node)
            .map_err(|e| e.to_string())?;
        let settings = cross_settings(cluster.groups, req.replicas_per_gpu)?;
        let rows = moeplan::studies::across::cross_table(traces, topology, &settings)
            .map_err(|e| e.to_string())?;
        let table = CrossTable {
            traces: names.clone(),
            batches: traces.iter().map(LoadTrace::num_batches).collect(),
            cluster: topology.to_string(),
            rows: rows
                .iter()
                .map(|r| CrossLine {
                    name: r.name.clone(),
                    planner: r.planner.to_string(),
                    made_on: r.made_on,
                    replicas: r.plan.summary().replicas,
                    balancedness: r.cells.iter().map(|c| c.balancedness).collect(),
                    in_sample: r
                        .cells
                        .iter()
                        .map(|c| c.scope.kind() == "in-sample")
                        .collect(),
                })
                .collect(),
        };
        if let Some(f) = fresh {
            self.cross = Some(f);
        }
        Ok(table)
    }
}

impl WorkerState {
    /// Serves the workspace's trace with EPLB re-planned as `ask` says,
    /// under the request's rule, priced on its hardware; a move's bytes are
    /// the priced (else the page's memory) model's experts.
    fn serving(&self, req: &Request, ask: ServingAsk) -> Result<ServingView, String> {
        let ws = self.workspace.as_ref().ok_or("no trace planned yet")?;
        let rule = rule_of(req)?;
        let pricing = pricing(ws, req)?;
        let expert_bytes = match &pricing {
            Some(p) => p.assumptions.expert_bytes(&p.model),
            None => memory_model(ws, req)?.expert_bytes() as f64,
        };
        ws.serving(ask, rule, pricing.as_ref(), expert_bytes)
            .map_err(|e| e.to_string())
    }
}

/// EPLB's router groups and CRAFT's budget as the page's other plans get
/// them.
fn cross_settings(groups: usize, replicas_per_gpu: Option<usize>) -> Result<Settings, String> {
    use moeplan::planners::Value;
    let budget = replicas_per_gpu.map_or(Value::Auto, Value::Count);
    Settings::new()
        .with("groups", Value::Count(groups))
        .and_then(|s| s.with("replicas_per_gpu", budget))
        .map_err(|e| e.to_string())
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
    ws.view_priced(
        req.replicas_per_gpu,
        layer,
        rule,
        req.batches,
        pricing.as_ref(),
    )
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
            file = moeplan::formats::hardware::read_hardware(json.as_bytes())
                .map_err(|e| e.to_string())?;
            &file
        }
        None => moeplan::data::hardware::preset(&req.hardware).map_err(|e| e.to_string())?,
    };
    Ok(Some(Pricing::new(hardware, memory_model(ws, req)?)))
}

/// The page's memory model, else the trace's, else DeepSeek-V3.
fn memory_model(ws: &Workspace, req: &Request) -> Result<&'static model::ModelPreset, String> {
    let name = Some(req.model.as_str())
        .filter(|m| !m.is_empty())
        .or(ws.trace().model())
        .unwrap_or("deepseek-v3");
    model::preset(name)
        .or_else(|_| model::preset("deepseek-v3"))
        .map_err(|e| e.to_string())
}

/// The few figures the page draws of a prediction, per MoE layer and per
/// step.
fn predicted(p: &Prediction) -> Predicted {
    let moe_step_us = p.step_ms * 1e3 - p.dense_us - p.copy_exposed_us - p.attention_us;
    Predicted {
        hardware: p.hardware.clone(),
        step_ms: p.step_ms,
        tokens_per_s: p.tokens_per_s,
        speedup: p.speedup,
        moe_layer_us: p.moe_layer_us,
        compute_us: p.compute_us,
        dispatch_us: p.dispatch_us,
        combine_us: p.combine_us,
        dense_us: p.dense_us,
        copy_exposed_us: p.copy_exposed_us,
        moe_layers: if p.moe_layer_us > 0.0 {
            (moe_step_us / p.moe_layer_us).round().max(0.0) as usize
        } else {
            0
        },
        kv_cache_gib_per_gpu: p.kv_cache_gib_per_gpu,
        error_band: p.error_band.about.clone(),
    }
}

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

/// Local, intra-node and cross-node shares of a plan's pairs.
fn shares(t: &moeplan_view::PairTraffic) -> [f64; 3] {
    let parts = [t.local, t.intra_node, t.cross_node];
    let sum: f64 = parts.iter().sum();
    if sum > 0.0 {
        parts.map(|x| x / sum)
    } else {
        [0.0; 3]
    }
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
            let cfg = TokenGenConfig {
                seed: (*seed).into(),
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
mod tests {
    use super::*;
    use crate::reader::placed_in_model;
    use moeplan::formats;
    use moeplan_view::Cluster;

    fn req(id: u64, source: Option<Source>, cluster: Option<Cluster>, r: Option<usize>) -> Request {
        Request {
            id,
            source,
            cluster,
            replicas_per_gpu: r,
            layer: 0,
            rule: String::new(),
            export: None,
            hardware: String::new(),
            hardware_json: None,
            model: String::new(),
            per_batch: None,
            static_options: None,
            batches: false,
            cross: None,
            serving: None,
            reader: String::new(),
            reader_script: String::new(),
        }
    }

    #[test]
    fn a_moe_only_file_of_a_known_shape_is_placed_in_its_model() {
        use ndarray::Array3;
        let t = LoadTrace::new(Array3::from_elem((1, 26, 64), 1.0), (0..26).collect()).unwrap();
        let (placed, source) = placed_in_model(t, "v2lite.npy");
        assert_eq!(
            placed.layer_ids()[0],
            1,
            "DeepSeek-V2-Lite's layer 0 is dense"
        );
        assert_eq!(placed.known_model_layers(), Some(27));
        assert!(source.contains("placed as deepseek-v2-lite"), "{source}");
        // no preset of this shape: left as read
        let odd = LoadTrace::new(Array3::from_elem((1, 5, 7), 1.0), (0..5).collect()).unwrap();
        let (same, source) = placed_in_model(odd, "odd.npy");
        assert_eq!((same.layer_ids()[0], source.as_str()), (0, "odd.npy"));
    }

    fn gen_source() -> Source {
        Source::Generate {
            preset: "olmoe".into(),
            batches: 4,
            seed: 1,
            routes: false,
        }
    }

    const CLUSTER: Cluster = Cluster {
        nodes: 1,
        gpus_per_node: 8,
        groups: 1,
    };

    fn view_of(r: Response) -> Update {
        match r {
            Response::View { update, .. } => *update,
            other => panic!("expected a view, got {other:?}"),
        }
    }

    /// Everything the page shows after answer `r`: what the worker holds.
    fn shown(s: &WorkerState, r: Response) -> Shown {
        view_of(r);
        s.shown.clone().expect("a view was answered")
    }

    #[test]
    fn broken_file_keeps_the_previous_trace() {
        let mut s = WorkerState::default();
        let first = s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        );
        let v1 = shown(&s, first);
        let bad = Source::File {
            name: "bad.json".into(),
        };
        let r = s.handle(
            &req(2, Some(bad), None, Some(2)),
            Some(b"{\"logical_count\": [[1, -2]]}"),
            || 0.0,
            |_| {},
        );
        match r {
            Response::Error { message, .. } => {
                assert!(message.starts_with("bad.json:"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let again = s.handle(&req(3, None, None, Some(2)), None, || 0.0, |_| {});
        // Nothing changed, so nothing is sent, and the figures are the same.
        assert_eq!(view_of(again.clone()).plans, []);
        assert_eq!(shown(&s, again), v1);
    }

    /// A worker that has planned the generated trace on [`CLUSTER`], R = 2.
    fn loaded() -> WorkerState {
        let mut s = WorkerState::default();
        view_of(s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        s
    }

    fn libra(u: &Update) -> Option<&Figures> {
        u.plans.iter().find(|p| p.name == "libra")
    }

    /// A cluster change answers the static plans and leaves Libra for the
    /// next request (the page's follow-up), which plans it with the options
    /// in use; the result is what planning the cluster whole gives.
    #[test]
    fn a_cluster_change_shows_libra_in_the_next_answer() {
        let other = Cluster {
            gpus_per_node: 4,
            ..CLUSTER
        };
        let mut s = loaded();
        let mut options = req(2, None, None, Some(2));
        options.per_batch = Some(vec![("extra_experts_per_gpu".into(), "2".into())]);
        s.handle(&options, None, || 0.0, |_| {});
        let mut phases = Vec::new();
        let change = s.handle(
            &req(3, None, Some(other), Some(2)),
            None,
            || 0.0,
            |p| phases.push(p.to_string()),
        );
        let first = view_of(change);
        let frame = first.frame.as_ref().expect("a new cluster is drawn afresh");
        assert!(
            !frame.plans.contains(&"libra".to_string()),
            "{:?}",
            frame.plans
        );
        assert!(
            frame.notes.iter().any(|n| n.contains("shown next")),
            "{:?}",
            frame.notes
        );
        assert!(!phases.iter().any(|p| p.contains("(Libra)")), "{phases:?}");
        let mut follow = req(4, None, None, Some(2));
        follow.batches = true;
        let mut phases = Vec::new();
        let next = s.handle(&follow, None, || 0.0, |p| phases.push(p.to_string()));
        let after = shown(&s, next);
        assert!(phases.iter().any(|p| p.contains("(Libra)")), "{phases:?}");
        assert!(!after.frame.notes.iter().any(|n| n.contains("shown next")));
        // The same as a worker that loads the trace on that cluster with
        // those options.
        let mut whole = WorkerState::default();
        let mut load = req(1, Some(gen_source()), Some(other), Some(2));
        load.per_batch = options.per_batch.clone();
        load.batches = true;
        let fresh = whole.handle(&load, None, || 0.0, |_| {});
        let whole = shown(&whole, fresh);
        let find = |v: &Shown| v.plans.iter().find(|p| p.name == "libra").cloned();
        assert!(find(&after).is_some());
        assert_eq!(find(&after), find(&whole));
    }

    /// Libra's options re-plan Libra alone; a predictor the trace cannot
    /// feed is one error and changes nothing; a budget change leaves Libra.
    #[test]
    fn per_batch_options_replan_libra_only() {
        let mut s = WorkerState::default();
        let first = view_of(s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        let l0 = libra(&first).expect("a Libra row").clone();
        assert!(
            l0.label.contains("per batch, libra-rebalance"),
            "{}",
            l0.label
        );
        assert_eq!(l0.per_batch_imbalance.len(), 4);
        assert_eq!(l0.per_batch_bytes.len(), 4);
        let budget = view_of(s.handle(&req(2, None, None, Some(4)), None, || 0.0, |_| {}));
        assert!(
            libra(&budget).is_none(),
            "a budget change does not touch Libra"
        );
        let opts = |n: &str, p: &str| {
            Some(vec![
                ("extra_experts_per_gpu".to_string(), n.to_string()),
                ("predictor".to_string(), p.to_string()),
            ])
        };
        let mut r = req(3, None, None, Some(4));
        r.per_batch = opts("1", "previous-batch");
        let kept = s.shown.clone().unwrap();
        let one = view_of(s.handle(&r, None, || 0.0, |_| {}));
        // Libra's note names N, so the frame is sent again with every plan;
        // all but Libra's figures are as they were.
        for p in &one.plans {
            let old = kept.plans.iter().find(|o| o.name == p.name).unwrap();
            assert_eq!(p == old, p.name != "libra", "{}", p.name);
        }
        let l1 = libra(&one).unwrap();
        assert!(
            l1.imbalance_ratio > l0.imbalance_ratio,
            "fewer copies balance less"
        );
        let before = s.shown.clone();
        let mut bad = req(4, None, None, Some(4));
        bad.per_batch = opts("1", "path-table");
        match s.handle(&bad, None, || 0.0, |_| {}) {
            Response::Error { message, .. } => {
                assert!(message.contains("token routes"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.shown, before);
        // The same options again: nothing to re-plan, nothing to send.
        r.id = 5;
        assert_eq!(view_of(s.handle(&r, None, || 0.0, |_| {})).plans, []);
    }

    #[test]
    fn budget_change_keeps_the_workspace_and_changes_craft() {
        let mut s = WorkerState::default();
        let mut phases = Vec::new();
        let v0 = view_of(s.handle(
            &req(1, Some(gen_source()), Some(CLUSTER), Some(0)),
            None,
            || 0.0,
            |p| phases.push(p.to_string()),
        ));
        assert!(!phases.is_empty());
        phases.clear();
        let v4 = view_of(s.handle(
            &req(2, None, None, Some(4)),
            None,
            || 0.0,
            |p| phases.push(p.to_string()),
        ));
        assert!(
            phases.is_empty(),
            "a budget change must not re-plan: {phases:?}"
        );
        // A new trace sends everything; a budget change only CRAFT's part.
        let f0 = v0.frame.as_ref().expect("a new trace sends the frame");
        assert_eq!(v0.plans.len(), f0.plans.len());
        // A generated trace is counts only: GRACE has no affinity, and the
        // frame carries what it says about that, once.
        let grace: Vec<_> = f0
            .planner_notes
            .iter()
            .filter(|n| n.name == "grace")
            .collect();
        assert_eq!(grace.len(), 1, "{:?}", f0.planner_notes);
        assert!(
            grace[0].text.contains("no token routes"),
            "{}",
            grace[0].text
        );
        assert!(v0.heat.is_some() && v0.placement.is_some());
        assert!(v4.frame.is_none(), "a budget change resends the frame");
        let names: Vec<_> = v4.plans.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["craft"]); // BASE and EPLB unchanged
        assert!(v4.plans[0].replicas > v0.plans[2].replicas);
        assert_eq!(v4.replicas_per_gpu, 4);
        // A layer change sends only the placement.
        let mut r = req(3, None, None, Some(4));
        r.layer = 1;
        let v5 = view_of(s.handle(&r, None, || 0.0, |_| {}));
        assert!(v5.frame.is_none() && v5.plans.is_empty() && v5.heat.is_none());
        assert!(v5.placement.is_some());
    }

    /// Generated DeepSeek-V2-Lite token routes, 2 batches.
    fn v2lite_routes() -> Source {
        Source::Generate {
            preset: "deepseek-v2-lite".into(),
            batches: 2,
            seed: 3,
            routes: true,
        }
    }

    /// Work ahead of time: after a token-routes trace the worker queues
    /// CRAFT's measurements and GRACE's clusterings for every layer of each
    /// neighbouring cluster, a step at a time; the last step names them. A
    /// change to one of them then answers exactly what a worker that never
    /// warmed answers, and queues the new cluster's neighbours; a
    /// count-only trace queues CRAFT's only.
    #[test]
    fn work_ahead_of_time_changes_no_answer() {
        let c = |nodes, gpus_per_node| Cluster {
            nodes,
            gpus_per_node,
            groups: 1,
        };
        let routes = v2lite_routes();
        let mut warm = WorkerState::default();
        view_of(warm.handle(
            &req(1, Some(routes.clone()), Some(c(2, 4)), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        let layers = 26;
        // Per neighbour: CRAFT's layers, GRACE's layers.
        let per_cluster = layers + layers;
        assert_eq!(
            warm.warm.len(),
            4 * per_cluster,
            "2 × 2, 2 × 8, 1 × 4 and 4 × 4"
        );
        let mut steps = 1;
        let done = loop {
            if let Some(done) = warm.warm_step(|| 0.0) {
                break done;
            }
            assert!(warm.warming(), "no answer yet, so work remains");
            steps += 1;
        };
        assert_eq!(steps, 4 * per_cluster);
        let Warmed::Clusters(clusters, _) = done else {
            panic!("the clusters' work comes first: {done:?}")
        };
        assert_eq!(clusters, vec!["2 × 2", "2 × 8", "1 × 4", "4 × 4"]);
        // Then Libra's path-table predictions: one step per later batch and
        // layer, one per batch learnt (2 batches here).
        assert!(warm.warming(), "the path table's predictions follow");
        let mut memo_steps = 1;
        while warm.warm_step(|| 0.0).is_none() {
            assert!(warm.warming(), "no answer yet, so work remains");
            memo_steps += 1;
        }
        assert_eq!(memo_steps, layers + 2);
        assert!(!warm.warming() && warm.warm_step(|| 0.0).is_none());
        let mut cold = WorkerState::default();
        view_of(cold.handle(
            &req(1, Some(routes), Some(c(2, 4)), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        let has_grace = |u: &Update| u.plans.iter().any(|p| p.name == "grace");
        // 1 × 8 is no neighbour of 2 × 4: cold for both.
        for (id, next, warmed) in [(2, c(1, 4), true), (3, c(1, 8), false)] {
            let w = view_of(warm.handle(&req(id, None, Some(next), Some(2)), None, || 0.0, |_| {}));
            let f = view_of(cold.handle(&req(id, None, Some(next), Some(2)), None, || 0.0, |_| {}));
            // Warmed: GRACE in the first answer; cold: in the follow-up.
            assert!(has_grace(&w) == warmed && !has_grace(&f), "{next:?}");
            for s in [&mut warm, &mut cold] {
                view_of(s.handle(&req(id + 10, None, None, Some(2)), None, || 0.0, |_| {}));
            }
            assert_eq!(warm.shown, cold.shown, "{next:?}");
        }
        assert_eq!(warm.warming.0, neighbours(c(1, 8), 64));
        // The path table then: from predictions made ahead (`warm`), half
        // made (a third worker), or none (`cold`), the same answer.
        let mut half = WorkerState::default();
        for (id, cluster) in [(1, c(2, 4)), (2, c(1, 8)), (3, c(1, 8))] {
            let source = (id == 1).then(v2lite_routes);
            view_of(half.handle(
                &req(id, source, Some(cluster), Some(2)),
                None,
                || 0.0,
                |_| {},
            ));
        }
        while half.memo.as_ref().is_some_and(|(b, _)| b.progress() < 0.5) {
            assert!(!matches!(
                half.warm_step(|| 0.0),
                Some(Warmed::PathTable(_))
            ));
        }
        assert!(half.memo.is_some(), "half made");
        let table = vec![("predictor".to_string(), "path-table".to_string())];
        for s in [&mut warm, &mut cold, &mut half] {
            let r = Request {
                per_batch: Some(table.clone()),
                ..req(20, None, None, Some(2))
            };
            view_of(s.handle(&r, None, || 0.0, |_| {}));
        }
        assert!(half.memo.is_none(), "finished for the request");
        assert!(warm.shown == cold.shown && half.shown == cold.shown);
        view_of(warm.handle(
            &req(4, Some(gen_source()), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        assert_eq!(
            warm.warm.len(),
            neighbours(CLUSTER, 64).len()
                * warm
                    .workspace
                    .as_ref()
                    .map_or(0, |ws| ws.trace().num_layers()),
            "counts only: CRAFT's steps, none of GRACE's (it groups by load)"
        );
    }

    /// GRACE's ratio re-plans GRACE only (every other plan's figures as
    /// they were), sends its grouping again, and a cluster change keeps it:
    /// the same as a worker that loads the trace there with that ratio.
    #[test]
    fn graces_ratio_replans_grace_only_and_a_cluster_change_keeps_it() {
        let cluster = Cluster {
            nodes: 2,
            gpus_per_node: 4,
            groups: 1,
        };
        let with_ratio = |id, cluster, r: &str| {
            let mut q = req(id, None, cluster, Some(2));
            q.static_options = Some(vec![("nonuniformity".into(), r.into())]);
            q
        };
        let mut s = WorkerState::default();
        let first = s.handle(
            &req(1, Some(v2lite_routes()), Some(cluster), Some(2)),
            None,
            || 0.0,
            |_| {},
        );
        let before = shown(&s, first);
        let mut phases = Vec::new();
        let answer = s.handle(
            &with_ratio(2, None, "1"),
            None,
            || 0.0,
            |p| phases.push(p.to_string()),
        );
        let update = view_of(answer);
        let after = s.shown.clone().expect("a view was answered");
        assert!(phases.iter().any(|p| p.contains("GRACE")), "{phases:?}");
        assert!(
            !phases
                .iter()
                .any(|p| p.contains("CRAFT") || p.contains("EPLB")),
            "{phases:?}"
        );
        let g = update.grouping.expect("the new grouping is sent");
        assert_ne!(before.grouping.as_ref().map(|g| g.ratio), Some(Some(1.0)));
        assert_eq!(g.ratio, Some(1.0));
        let (b, a): (Vec<_>, Vec<_>) = (
            before.plans.iter().filter(|p| p.name != "grace").collect(),
            after.plans.iter().filter(|p| p.name != "grace").collect(),
        );
        assert_eq!(b, a);
        let grace = |v: &Shown| v.plans.iter().find(|p| p.name == "grace").cloned();
        assert_ne!(grace(&before), grace(&after));
        // Asked again: nothing to re-plan, nothing sent.
        let again = view_of(s.handle(&with_ratio(3, None, "1"), None, || 0.0, |_| {}));
        assert!(
            again.plans.is_empty() && again.grouping.is_none(),
            "{again:?}"
        );
        // A cluster change keeps the ratio.
        let other = Cluster {
            nodes: 1,
            gpus_per_node: 8,
            groups: 1,
        };
        view_of(s.handle(&req(4, None, Some(other), Some(2)), None, || 0.0, |_| {}));
        // 1 × 8 was not clustered: GRACE follows in the next answer.
        let answer = s.handle(&req(6, None, None, Some(2)), None, || 0.0, |_| {});
        let moved = shown(&s, answer);
        let mut whole = WorkerState::default();
        let mut load = with_ratio(1, Some(other), "1");
        load.source = Some(v2lite_routes());
        let answer = whole.handle(&load, None, || 0.0, |_| {});
        let fresh = shown(&whole, answer);
        assert_eq!(moved.grouping.as_ref().map(|g| g.ratio), Some(Some(1.0)));
        assert_eq!(grace(&moved), grace(&fresh));
        assert_eq!(moved.grouping, fresh.grouping);
        // A ratio the registry does not offer is refused, the state kept.
        let bad = s.handle(&with_ratio(5, None, "0.25"), None, || 0.0, |_| {});
        assert!(
            matches!(&bad, Response::Error { message, .. } if message.contains("nonuniformity")),
            "{bad:?}"
        );
        assert_eq!(s.shown.as_ref().map(|v| &v.plans), Some(&moved.plans));
    }

    /// Generated token routes: GRACE groups by affinity and the view
    /// carries the chosen layer's grouping, sent again only when the layer
    /// (or the trace, or the cluster) changes.
    #[test]
    fn token_routes_carry_graces_grouping() {
        let cluster = Cluster {
            nodes: 2,
            gpus_per_node: 4,
            groups: 1,
        };
        let routes = v2lite_routes();
        let mut s = WorkerState::default();
        let v0 = view_of(s.handle(
            &req(1, Some(routes), Some(cluster), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        let f0 = v0.frame.as_ref().expect("a new trace sends the frame");
        assert!(
            f0.planner_notes.iter().all(|n| n.name != "grace"),
            "{:?}",
            f0.planner_notes
        );
        let g = v0.grouping.expect("token routes: GRACE's grouping");
        assert_eq!((g.order.len(), g.sizes.len()), (64, 8));
        assert_eq!(g.affinity.len(), 64 * 64);
        let mut sorted = g.order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..64).collect::<Vec<u32>>());
        let r = g.ratio.expect("grouped by affinity");
        assert!(g.curve.iter().any(|p| p.0 == r));
        let v1 = view_of(s.handle(&req(2, None, None, Some(4)), None, || 0.0, |_| {}));
        assert!(
            v1.grouping.is_none(),
            "a budget change resends the grouping"
        );
        let mut l = req(3, None, None, Some(4));
        l.layer = 5;
        let v2 = view_of(s.handle(&l, None, || 0.0, |_| {}));
        assert_ne!(v2.grouping.map(|g| g.layer), Some(g.layer));
        // Back to counts: no grouping, GRACE's note instead.
        let v3 = view_of(s.handle(
            &req(4, Some(gen_source()), Some(cluster), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
        assert!(v3.grouping.is_none());
        assert!(
            v3.frame
                .unwrap()
                .planner_notes
                .iter()
                .any(|n| n.name == "grace")
        );
    }

    #[test]
    fn a_rule_change_remeasures_every_plan() {
        let cluster = Cluster {
            nodes: 8,
            gpus_per_node: 8,
            groups: 1,
        };
        let mut s = WorkerState::default();
        let even = view_of(s.handle(
            &req(1, Some(gen_source()), Some(cluster), Some(4)),
            None,
            || 0.0,
            |_| {},
        ));
        assert_eq!(even.rule, "even");
        // A per-batch plan (Libra) is served under its own rule whatever
        // the view's, so a rule change leaves it as it is.
        let static_plans: Vec<&Figures> =
            even.plans.iter().filter(|p| p.schedule.is_none()).collect();
        let libra = even.plans.iter().find(|p| p.name == "libra");
        assert_eq!(libra.map(|p| p.rule.as_str()), Some("libra-rebalance"));
        let by_rule = |s: &mut WorkerState, id: u64, rule: &str| {
            let mut r = req(id, None, None, Some(4));
            r.rule = rule.into();
            let u = view_of(s.handle(&r, None, || 0.0, |_| {}));
            assert_eq!(u.rule, rule);
            assert!(u.frame.is_none());
            // Every static plan's figures are re-sent, each naming its rule.
            assert_eq!(u.plans.len(), static_plans.len(), "{rule}");
            for p in &u.plans {
                assert_eq!(p.rule, rule);
                let sum: f64 = p.traffic.iter().sum();
                assert!((sum - 1.0).abs() < 1e-9, "{rule} {}: {sum}", p.name);
            }
            u
        };
        let sglang = by_rule(&mut s, 2, "sglang-static");
        assert_ne!(
            sglang
                .plans
                .iter()
                .map(|p| p.balancedness)
                .collect::<Vec<_>>(),
            static_plans
                .iter()
                .map(|p| p.balancedness)
                .collect::<Vec<_>>()
        );
        let craft = |u: &Update| {
            u.plans
                .iter()
                .find(|p| p.name == "craft")
                .expect("CRAFT is shown")
                .balancedness
        };
        let mut others = vec![craft(&even), craft(&sglang)];
        for (i, rule) in ["vllm", "local-first"].into_iter().enumerate() {
            others.push(craft(&by_rule(&mut s, 3 + i as u64, rule)));
        }
        let best = craft(&by_rule(&mut s, 9, "optimal"));
        for b in others {
            assert!(best >= b - 1e-12, "optimal {best} < {b}");
        }
        // A budget change under a rule sends only CRAFT's part.
        let mut r = req(10, None, None, Some(6));
        r.rule = "optimal".into();
        let u = view_of(s.handle(&r, None, || 0.0, |_| {}));
        let names: Vec<_> = u.plans.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["craft"]);
        // An unknown rule is one error, and the view is kept.
        let mut r = req(11, None, None, Some(6));
        r.rule = "bogus".into();
        assert!(matches!(
            s.handle(&r, None, || 0.0, |_| {}),
            Response::Error { message, .. } if message.contains("unknown dispatch rule")
        ));
    }

    #[test]
    fn export_formats() {
        let mut s = loaded();
        let mut r = req(2, None, None, Some(2));
        r.export = Some("sglang".into());
        match s.handle(&r, None, || 0.0, |_| {}) {
            Response::Export {
                text, file_name, ..
            } => {
                assert!(text.starts_with("{\"physical_to_logical_map\""));
                assert!(file_name.ends_with("sglang.json"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn huge_file_is_refused_before_parsing() {
        let mut s = WorkerState::default();
        let big = vec![b' '; MAX_FILE_BYTES as usize + 1];
        let src = Source::File {
            name: "big.json".into(),
        };
        match s.handle(
            &req(1, Some(src), Some(CLUSTER), None),
            Some(&big),
            || 0.0,
            |_| {},
        ) {
            Response::Error { message, .. } => {
                assert!(
                    message.starts_with("big.json: 513 MiB on disk"),
                    "{message}"
                );
                assert!(message.contains("--max-trace-mib"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(s.workspace.is_none());
    }

    fn summary(s: &mut WorkerState) -> Shown {
        let r = s.handle(&req(99, None, None, Some(2)), None, || 0.0, |_| {});
        shown(s, r)
    }

    #[test]
    fn a_failing_step_after_planning_keeps_the_previous_trace() {
        let mut s = loaded();
        let before = summary(&mut s);
        let other = Source::Generate {
            preset: "olmoe".into(),
            batches: 3,
            seed: 2,
            routes: false,
        };
        // The new trace plans, but the export asked with it fails.
        let mut r = req(2, Some(other.clone()), None, Some(2));
        r.export = Some("bogus".into());
        assert!(matches!(
            s.handle(&r, None, || 0.0, |_| {}),
            Response::Error { .. }
        ));
        // The new trace plans, but its view for this budget fails.
        let r = req(3, Some(other), None, Some(usize::MAX));
        assert!(matches!(
            s.handle(&r, None, || 0.0, |_| {}),
            Response::Error { .. }
        ));
        assert_eq!(summary(&mut s), before);
        assert!(s.source.contains("4 batches"), "{}", s.source);
    }

    /// Every hostile file the core knows of, through the worker: one error
    /// naming the file with the words `EXPECTED` gives, and the trace kept.
    #[test]
    fn every_hostile_fixture_keeps_the_previous_trace() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../crates/moeplan/tests/fixtures/broken"
        );
        let expected = std::fs::read_to_string(format!("{dir}/EXPECTED")).unwrap();
        let words: std::collections::HashMap<&str, &str> = expected
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.split_once('\t'))
            .collect();
        let mut s = loaded();
        let before = summary(&mut s);
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "EXPECTED")
            .collect();
        files.sort();
        assert!(files.len() > 40, "{files:?}");
        for name in files {
            let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
            let src = Source::File { name: name.clone() };
            match s.handle(
                &req(2, Some(src), None, Some(2)),
                Some(&bytes),
                || 0.0,
                |_| {},
            ) {
                Response::Error { message, .. } => {
                    assert!(message.starts_with(&format!("{name}: ")), "{message}");
                    let w = words
                        .get(name.as_str())
                        .unwrap_or_else(|| panic!("{name} is not in EXPECTED"));
                    assert!(
                        message.to_lowercase().contains(&w.to_lowercase()),
                        "{name}: {message:?} lacks {w:?}"
                    );
                    if message.contains("reading limit") {
                        assert!(message.contains(BUDGET_HINT), "{message}");
                    }
                }
                other => panic!("{name}: {other:?}"),
            }
            assert_eq!(summary(&mut s), before, "{name}");
        }
    }

    /// Two generated OLMoE traces (different seeds) as trace JSON bytes,
    /// the way the page sends several files: one after another.
    fn two_files() -> (CrossAsk, Vec<u8>) {
        let file = |seed| {
            let cfg = GenConfig {
                seed,
                ..GenConfig::new(model::preset("olmoe").unwrap(), 4)
            };
            formats::trace_json::write(&generate(&cfg).unwrap()).into_bytes()
        };
        let (a, b) = (file(1), file(2));
        let ask = CrossAsk {
            names: vec!["a.json".into(), "b.json".into()],
            sizes: vec![a.len(), b.len()],
        };
        (ask, [a, b].concat())
    }

    fn cross_req(id: u64, ask: CrossAsk, cluster: Cluster, r: Option<usize>) -> Request {
        Request {
            cross: Some(ask),
            ..req(id, None, Some(cluster), r)
        }
    }

    fn table(r: Response) -> CrossTable {
        match r {
            Response::Cross { table, .. } => table,
            other => panic!("expected a cross table, got {other:?}"),
        }
    }

    #[test]
    fn cross_judges_every_plan_on_every_trace_and_keeps_the_main_trace() {
        let mut s = WorkerState::default();
        let cluster = Cluster {
            nodes: 1,
            gpus_per_node: 8,
            groups: 1,
        };
        s.handle(
            &req(1, Some(gen_source()), Some(cluster), Some(2)),
            None,
            || 0.0,
            |_| {},
        );
        let before = summary(&mut s);
        let (ask, bytes) = two_files();
        let t = table(s.handle(
            &cross_req(2, ask.clone(), cluster, Some(2)),
            Some(&bytes),
            || 0.0,
            |_| {},
        ));
        assert_eq!(t.traces, ask.names);
        assert_eq!(t.rows.len(), 3 * 2 + 3);
        // The core's matrix, cell for cell.
        let traces: Vec<LoadTrace> = [1, 2]
            .map(|seed| {
                generate(&GenConfig {
                    seed,
                    ..GenConfig::new(model::preset("olmoe").unwrap(), 4)
                })
                .unwrap()
            })
            .into();
        let core = moeplan::studies::across::cross_table(
            &traces,
            moeplan::Topology::new(1, 8).unwrap(),
            &cross_settings(1, Some(2)).unwrap(),
        )
        .unwrap();
        for (line, row) in t.rows.iter().zip(&core) {
            assert_eq!(line.name, row.name);
            let b: Vec<f64> = row.cells.iter().map(|c| c.balancedness).collect();
            assert_eq!(line.balancedness, b, "{}", line.name);
            // In-sample exactly where the plan was made on the judged trace.
            for (j, &own) in line.in_sample.iter().enumerate() {
                assert_eq!(
                    own,
                    line.made_on.is_none_or(|i| i == j),
                    "{} on T{j}",
                    line.name
                );
            }
        }
        assert_eq!(
            summary(&mut s),
            before,
            "the main trace and its plans are untouched"
        );
        // A cluster change re-judges the traces held, with no bytes.
        let wider = Cluster {
            gpus_per_node: 4,
            ..cluster
        };
        let again = CrossAsk {
            names: vec![],
            sizes: vec![],
        };
        let t4 = table(s.handle(&cross_req(3, again, wider, Some(2)), None, || 0.0, |_| {}));
        assert_eq!(t4.cluster, "1 node(s) × 4 GPU(s)");
        assert_eq!(t4.traces, t.traces);
        assert_ne!(t4.rows[0].balancedness, t.rows[0].balancedness);
    }

    #[test]
    fn a_bad_cross_request_is_one_error_and_keeps_the_traces_held() {
        let mut s = WorkerState::default();
        let cluster = Cluster {
            nodes: 1,
            gpus_per_node: 8,
            groups: 1,
        };
        let (ask, bytes) = two_files();
        let first = table(s.handle(
            &cross_req(1, ask.clone(), cluster, None),
            Some(&bytes),
            || 0.0,
            |_| {},
        ));
        let error = |r: Response| match r {
            Response::Error { message, .. } => message,
            other => panic!("expected an error, got {other:?}"),
        };
        // One file only.
        let one = CrossAsk {
            names: vec!["a.json".into()],
            sizes: vec![ask.sizes[0]],
        };
        let m = error(s.handle(
            &cross_req(2, one, cluster, None),
            Some(&bytes[..ask.sizes[0]]),
            || 0.0,
            |_| {},
        ));
        assert!(m.contains("at least two traces"), "{m}");
        // Sizes that do not add up to the bytes.
        let short = CrossAsk {
            sizes: vec![ask.sizes[0], ask.sizes[1] + 1],
            ..ask.clone()
        };
        let m = error(s.handle(
            &cross_req(3, short, cluster, None),
            Some(&bytes),
            || 0.0,
            |_| {},
        ));
        assert!(m.contains("did not arrive whole"), "{m}");
        // A broken second file names it.
        let mut broken = bytes.clone();
        broken.truncate(ask.sizes[0] + 10);
        let cut = CrossAsk {
            sizes: vec![ask.sizes[0], 10],
            ..ask.clone()
        };
        let m = error(s.handle(
            &cross_req(4, cut, cluster, None),
            Some(&broken),
            || 0.0,
            |_| {},
        ));
        assert!(m.starts_with("b.json: "), "{m}");
        // Too many files.
        let many = CrossAsk {
            names: vec!["x".into(); MAX_CROSS_TRACES + 1],
            sizes: vec![0; MAX_CROSS_TRACES + 1],
        };
        let m = error(s.handle(
            &cross_req(5, many, cluster, None),
            Some(&[]),
            || 0.0,
            |_| {},
        ));
        assert!(m.contains("at most"), "{m}");
        // The traces first loaded are still the ones judged.
        let again = CrossAsk {
            names: vec![],
            sizes: vec![],
        };
        assert_eq!(
            table(s.handle(&cross_req(6, again, cluster, None), None, || 0.0, |_| {})),
            first
        );
    }

    #[test]
    fn serving_replays_the_main_trace_and_leaves_the_plans_alone() {
        let mut s = WorkerState::default();
        let source = Source::Generate {
            preset: "olmoe".into(),
            batches: 12,
            seed: 1,
            routes: false,
        };
        s.handle(
            &req(1, Some(source), Some(CLUSTER), Some(2)),
            None,
            || 0.0,
            |_| {},
        );
        let before = summary(&mut s);
        let ask = ServingAsk {
            every: 2,
            window: 4,
            sweep: true,
        };
        let serving = |id, ask, hardware: &str| Request {
            serving: Some(ask),
            hardware: hardware.into(),
            ..req(id, None, None, Some(2))
        };
        let view = |r| match r {
            Response::Serving { view, .. } => *view,
            other => panic!("expected a replay, got {other:?}"),
        };
        let v = view(s.handle(&serving(2, ask, ""), None, || 0.0, |_| {}));
        let ws = s.workspace.as_ref().unwrap();
        let bytes = model::preset("olmoe").unwrap().expert_bytes() as f64;
        assert_eq!(
            v,
            ws.serving(ask, moeplan::judge::Rule::Even, None, bytes)
                .unwrap()
        );
        assert_eq!((v.first_served, v.replans.len()), (4, 3));
        assert!(v.sweep.is_some());
        // priced: time and pauses
        let p = view(s.handle(&serving(3, ask, "h100-ib-ndr"), None, || 0.0, |_| {}));
        assert!(p.total_ms.is_some() && p.replans.iter().all(|m| m.pause_ms.is_some()));
        // a window leaving nothing to serve: one line, the plans kept
        let bad = ServingAsk { window: 12, ..ask };
        match s.handle(&serving(4, bad, ""), None, || 0.0, |_| {}) {
            Response::Error { message, .. } => {
                assert!(message.contains("leaves none"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(summary(&mut s), before);
    }

    /// A hardware file sent with a request prices every plan as the preset
    /// it copies does (its name aside); a changed figure moves the prices;
    /// a file that is not hardware is refused in one line, the view kept.
    #[test]
    fn a_hardware_file_prices_like_the_preset_it_copies() {
        let mut s = loaded();
        let h100 = moeplan::data::hardware::preset("h100-ib-ndr").unwrap();
        let priced = |s: &mut WorkerState, id, hardware: &str, json: Option<String>| {
            let r = Request {
                hardware: hardware.into(),
                hardware_json: json,
                ..req(id, None, None, Some(2))
            };
            view_of(s.handle(&r, None, || 0.0, |_| {}))
                .plans
                .into_iter()
                .map(|f| (f.name, f.predicted.expect("priced")))
                .collect::<Vec<_>>()
        };
        let preset = priced(&mut s, 2, "h100-ib-ndr", None);
        let mut mine = h100.clone();
        mine.name = "my-h100".into();
        let json = serde_json::to_string(&mine).unwrap();
        let file = priced(&mut s, 3, "my-h100", Some(json));
        assert!(!preset.is_empty() && preset.len() == file.len());
        for ((n1, p1), (n2, p2)) in preset.iter().zip(&file) {
            assert_eq!((n1, p2.hardware.as_str()), (n2, "my-h100"));
            assert_eq!(
                Predicted {
                    hardware: String::new(),
                    ..p1.clone()
                },
                Predicted {
                    hardware: String::new(),
                    ..p2.clone()
                }
            );
        }
        mine.gpu.hbm_gb_per_s /= 4.0;
        let slower = priced(
            &mut s,
            4,
            "my-h100",
            Some(serde_json::to_string(&mine).unwrap()),
        );
        assert!(
            slower
                .iter()
                .zip(&file)
                .all(|((_, a), (_, b))| a.step_ms > b.step_ms)
        );
        let before = s.shown.clone();
        let bad = Request {
            hardware: "x".into(),
            hardware_json: Some(r#"{"name": "x"}"#.into()),
            ..req(5, None, None, Some(2))
        };
        match s.handle(&bad, None, || 0.0, |_| {}) {
            Response::Error { message, .. } => {
                assert!(message.contains("hardware JSON"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.shown, before);
    }
}
