//! One answer from the worker, handed to the board: a view's figures (only
//! what changed), progress, a study's table, an error or a crash.

use super::*;

impl Ctx {
    /// One answer from worker number `generation`.
    pub(in crate::ui) fn on_response(self, generation: u32, resp: Response, received: f64) {
        if generation != self.generation() {
            return;
        }
        match resp {
            Response::Ready => {
                let timer = self
                    .conn
                    .try_update_value(|c| {
                        c.ready = true;
                        c.start_timer.take()
                    })
                    .flatten();
                if let Some(t) = timer {
                    clear_timer(t);
                }
                self.flush();
            }
            Response::Crashed { message } => self.died(generation, Cause::Panic(message)),
            Response::Progress { id, phase } => {
                if !phase.starts_with(READING_PHASE) {
                    self.disarm_watchdog(id);
                }
                // A restore keeps the message that explains it.
                if !self.restoring(id) {
                    self.status.set(Status::Busy(phase));
                }
            }
            Response::View {
                id,
                stats: s,
                update,
                worker_ms,
                span,
                phase_ms,
            } => {
                self.disarm_watchdog(id);
                let decoded = now();
                // GRACE's own share of a re-plan (its phase names it).
                if let Some((_, ms)) = phase_ms.iter().find(|(p, _)| p.contains("(GRACE)")) {
                    let ms = *ms;
                    self.timings.update(|t| t.grace = Some(ms));
                }
                if let Some((_, ms)) = phase_ms.iter().find(|(p, _)| p.contains("(Libra)")) {
                    let ms = *ms;
                    self.timings.update(|t| t.libra = Some(ms));
                }
                let shared: Vec<String> = phase_ms
                    .iter()
                    .filter(|(p, _)| p.ends_with("(shared)"))
                    .map(|(p, ms)| format!("{p}: {ms:.1}"))
                    .collect();
                if !shared.is_empty() {
                    self.timings.update(|t| t.shared = Some(shared.join("; ")));
                }
                let started = self.pending.try_update_value(|p| p.remove(&id)).flatten();
                if let Some(p) = &started {
                    self.accepted(p);
                }
                let restored = self.take_restore(id);
                if let Some(s) = s {
                    self.stats.set(Some(s));
                }
                // Each answer says what changed since the one before, and
                // they arrive in order (one worker, `postMessage`): every
                // one is applied, in turn.
                let r = update.replicas_per_gpu;
                let mut update = update;
                self.keep_shown(&mut update);
                self.board.apply(*update);
                // A new trace or cluster is drawn first; the timeline's
                // series (a replay per plan) follow in a second answer.
                if started.as_ref().is_some_and(|p| {
                    matches!(
                        p.kind,
                        RequestKind::Trace
                            | RequestKind::Cluster
                            | RequestKind::Model
                            | RequestKind::Restore
                            | RequestKind::Options
                            // Libra's price (a replay of every batch)
                            // follows its new schedule or machine.
                            | RequestKind::PerBatch
                            | RequestKind::Hardware
                    )
                }) {
                    self.send(RequestKind::Timeline, None, None, None, None);
                }
                if started
                    .as_ref()
                    .is_some_and(|p| p.kind == RequestKind::Cluster)
                {
                    self.refresh_cross();
                }
                if started.as_ref().is_some_and(|p| {
                    matches!(
                        p.kind,
                        RequestKind::Trace
                            | RequestKind::Cluster
                            | RequestKind::Model
                            | RequestKind::Restore
                            | RequestKind::Rule
                            | RequestKind::Hardware
                    )
                }) {
                    self.refresh_serving();
                }
                let status = match restored {
                    Some(r) if r.cancelled => Some(Status::Info(format!(
                        "{}; the previous trace and plans are back",
                        r.head
                    ))),
                    Some(r) => Some(Status::Error(format!(
                        "{}; restarted it with the previous trace",
                        r.head
                    ))),
                    // The timeline's follow-up answers nothing the user
                    // asked: it leaves the status line (a message) alone,
                    // unless it said what the follow-up was doing (Libra's
                    // schedule, left by a cluster change for this answer).
                    None if matches!(
                        started,
                        Some(Pending {
                            kind: RequestKind::Timeline,
                            ..
                        })
                    ) =>
                    {
                        self.status
                            .with_untracked(|s| matches!(s, Status::Busy(_)))
                            .then_some(Status::Ready)
                    }
                    None => Some(Status::Ready),
                };
                if let Some(status) = status {
                    if self.status.with_untracked(|s| *s != status) {
                        self.status.set(status);
                    }
                }
                let timings = self.timings;
                // Timed twice: when the DOM holds the new plan (Leptos renders
                // in microtasks queued by the sets above, so a task queued now
                // runs after them), and at the next animation frame.
                if let Some(Pending {
                    t0,
                    kind: RequestKind::Budget,
                    ..
                }) = started
                {
                    wasm_bindgen_futures::spawn_local(async move {
                        let ms = now() - t0;
                        timings.update(|t| {
                            t.budget_dom = Some(ms);
                            t.budget_receive = Some((decoded - t0, decoded - received));
                            t.budget_path = Some((
                                span.0 - epoch_ms(t0),
                                span.1 - span.0,
                                epoch_ms(received) - span.1,
                            ));
                            t.budget_dom_seq += 1;
                            t.budget_r = Some(r);
                        });
                    });
                }
                if let Some(Pending { t0, kind, .. }) = started {
                    let done = Closure::once_into_js(move || {
                        let end = now();
                        let ms = end - t0;
                        timings.update(|t| match kind {
                            RequestKind::Trace => t.trace = Some(ms),
                            RequestKind::Cluster => t.cluster = Some(ms),
                            RequestKind::Budget => {
                                t.budget = Some(ms);
                                t.budget_parts = Some((worker_ms, end - received));
                                t.budget_frame_seq += 1;
                            }
                            RequestKind::Options => t.options_seq += 1,
                            RequestKind::Layer
                            | RequestKind::Rule
                            | RequestKind::Hardware
                            | RequestKind::Model
                            | RequestKind::Export
                            | RequestKind::Restore
                            | RequestKind::PerBatch
                            | RequestKind::Timeline
                            | RequestKind::Cross
                            | RequestKind::Serving => {}
                        });
                    });
                    if let Some(w) = web_sys::window() {
                        let _ = w.request_animation_frame(done.unchecked_ref());
                    }
                }
            }
            Response::Export {
                id,
                file_name,
                text,
                note,
            } => {
                self.pending.update_value(|p| {
                    p.remove(&id);
                });
                download(&file_name, &text);
                self.status.set(match note {
                    Some(n) => Status::Info(format!("saved {file_name} — {n}")),
                    None => Status::Ready,
                });
            }
            Response::Serving { id, view, .. } => {
                let asked = self.pending.try_update_value(|p| p.remove(&id)).flatten();
                // An interval's answer carries no sweep: the curve stays.
                let mut view = *view;
                if let Some(sweep) = view.sweep.take() {
                    self.board.serving_sweep.set(Some(sweep));
                }
                self.board.serving.set(Some(view));
                if let Some(p) = asked {
                    let ms = now() - p.t0;
                    self.timings.update(|t| t.serving = Some(ms));
                }
                if self.status.with_untracked(|s| matches!(s, Status::Busy(_))) {
                    self.status.set(Status::Ready);
                }
            }
            Response::Cross { id, table, .. } => {
                self.disarm_watchdog(id);
                self.pending.update_value(|p| {
                    p.remove(&id);
                });
                self.board.cross.set(Some(table));
                self.status.set(Status::Ready);
            }
            // Nothing to show: the next change to one of these clusters is
            // simply quicker. Kept for the timings (tests read it).
            Response::Warmed {
                clusters,
                worker_ms,
            } => {
                self.timings
                    .update(|t| t.warmed = Some((clusters.join(", "), worker_ms)));
            }
            Response::PathTableMade { worker_ms } => {
                self.timings.update(|t| t.path_table_ms = Some(worker_ms));
            }
            Response::Preparing { what, done } => {
                self.ahead.set(what.map(|w| (w, done)));
            }
            Response::Error { id, message } => {
                self.disarm_watchdog(id);
                let refused = self.pending.try_update_value(|p| p.remove(&id)).flatten();
                // A refused replay is not left on screen as if it were
                // this trace's.
                if refused
                    .as_ref()
                    .is_some_and(|p| p.kind == RequestKind::Serving)
                {
                    self.board.serving.set(None);
                    self.board.serving_sweep.set(None);
                }
                // Refused options: the controls show what is drawn.
                match refused.and_then(|p| p.undo) {
                    Some(Undo::Libra(n, predictor)) => self.settings.update(|s| {
                        s.libra_n = n;
                        s.predictor = predictor;
                    }),
                    Some(Undo::GraceRatio(r)) => self.settings.update(|s| s.grace_ratio = r),
                    None => {}
                }
                match self.take_restore(id) {
                    Some(r) => {
                        self.good.set_value(LastAccepted::default());
                        self.status.set(Status::Error(format!(
                            "{}; restarted it, but {} did not load again ({message}) — \
                             load a file or press Generate",
                            r.head, r.what
                        )));
                    }
                    None => self.status.set(Status::Error(message)),
                }
            }
        }
    }
}
