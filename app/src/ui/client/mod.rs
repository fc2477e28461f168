//! The page's worker client: one [`Ctx`] per page or docs embed holds the
//! settings, the board and the worker; it sends requests, times them,
//! hands answers to the board, and restarts a worker that dies.
//!
//! # The budget path
//!
//! A budget change is sent at once; the worker answers with CRAFT's part
//! only (its figures, the load map, the placement; its series in one
//! transferred `Float64Array`), and only the elements that show them are
//! touched. The timings paragraph (`#timings`) says where the time went:
//! to the worker, in it (of which planning), back, decoding, drawing.
//!
//! # When the worker dies
//!
//! A hostile file ends in one error message and the worker keeps its trace
//! (`worker.rs`). Should the worker die anyway — out of memory, a panic (in
//! wasm a panic aborts, and the wasm traps), any uncaught error, or no
//! answer within [`READ_DEADLINE_MS`] while it reads a file — the page
//! notices (the worker's `error` event, its [`Response::Crashed`] message or
//! the deadline), says so in the status line, terminates it and starts a
//! fresh one, and sends that one the last trace and cluster the old one
//! accepted ([`LastAccepted`]: the generator settings, or the [`web_sys::File`] to
//! read again), with the current budget and layer. Until the fresh worker
//! has that request, everything else the page sends waits behind it. If the
//! fresh worker dies while restoring, the page starts one more without a
//! trace and says so, so a trace that kills the worker cannot make it loop.

use std::collections::HashMap;

use leptos::prelude::*;
use moeplan_view::{Cluster, ServingAsk};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{MessageEvent, Worker};

use crate::board::Board;
use crate::protocol::{CrossAsk, Request, Response, Source, decode};
use crate::reader::{READING_PHASE, too_large};
use crate::settings::Settings;
use moeplan_view::page::TraceStatsLite;

mod answers;
mod restart;
mod studies;

/// How long the worker may stay silent while it reads a file before the
/// page gives it up for dead: reading is bounded by the 512 MiB budget,
/// which takes seconds, so a minute is generous. (A test may shorten it by
/// setting `globalThis.moeplanReadDeadlineMs` before the page loads.)
pub(super) const READ_DEADLINE_MS: f64 = 60_000.0;

/// The URL hash follows the settings once they have been still this long.
pub(super) const HASH_DELAY_MS: f64 = 250.0;

/// The budgeted plan's per-batch series is asked for once the budget has
/// been still this long: a replay, kept off the budget path, and a drag
/// asks once.
pub(super) const TIMELINE_DELAY_MS: f64 = 500.0;

/// How long a fresh worker may take to say it is listening.
pub(super) const START_DEADLINE_MS: f64 = 60_000.0;

/// What the status line says.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Status {
    Ready,
    Busy(String),
    Info(String),
    Error(String),
}

/// Which kind of change a request carried, for the timings shown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum RequestKind {
    Trace,
    Cluster,
    Budget,
    Layer,
    /// The dispatch rule.
    Rule,
    /// The hardware every plan is priced on.
    Hardware,
    /// The model every plan is judged on (its sizes price the traffic's
    /// bytes, the copies and the time): the cluster planned again on it,
    /// the per-batch planners by the follow-up, as after a cluster change.
    Model,
    Export,
    /// The previous trace, sent to a fresh worker.
    Restore,
    /// Options of the per-batch planners (Libra's N and predictor); it
    /// carries the values to go back to if the worker refuses them.
    PerBatch,
    /// Options of the static planners (GRACE's non-uniformity ratio),
    /// likewise.
    Options,
    /// Every plan's per-batch series, asked for after a new trace or
    /// cluster and once the budget rests (replays the budget path and a
    /// cluster change do not pay).
    Timeline,
    /// Plans across several traces (the cross-workload matrix): new files,
    /// or the ones the worker holds judged again after a cluster change.
    /// Not after a budget change: the matrix re-plans every trace (seconds
    /// on large ones) and would hold up the budget path behind it.
    Cross,
    /// Serving with re-planning: a new interval, or (with the sweep) a new
    /// window, or the replay again after a trace, cluster, rule or
    /// hardware change. Not after a budget change: EPLB re-plans, not the
    /// budgeted plan.
    Serving,
}

/// A study the worker runs beside the plans shown, leaving them alone.
pub(super) enum Study {
    /// Plans across workloads.
    Cross(CrossAsk),
    /// Serving with re-planning.
    Serving(ServingAsk),
}

/// Milliseconds from a change to its plan on screen, last of each kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Timings {
    pub(super) trace: Option<f64>,
    pub(super) cluster: Option<f64>,
    pub(super) budget: Option<f64>,
    /// Of the last budget change: (worker's planning, receipt to frame).
    pub(super) budget_parts: Option<(f64, f64)>,
    /// Of the last budget change: input to the answer decoded, and of that
    /// the page's decoding.
    pub(super) budget_receive: Option<(f64, f64)>,
    /// Of the last budget change: input to the worker taking the request,
    /// the worker's time, and its posting to the page's receipt.
    pub(super) budget_path: Option<(f64, f64, f64)>,
    /// Last budget change: input to the DOM holding the new plan.
    pub(super) budget_dom: Option<f64>,
    /// Budget changes timed to the DOM, and to the next frame, so far (a
    /// test waits for these to move, so it never reads a stale figure).
    pub(super) budget_dom_seq: u64,
    pub(super) budget_frame_seq: u64,
    /// The budget R of the last view timed.
    pub(super) budget_r: Option<usize>,
    /// Static planners' option changes (GRACE's ratio) on screen so far.
    pub(super) options_seq: u64,
    /// The last replay of serving with re-planning: request to answer
    /// applied.
    pub(super) serving: Option<f64>,
    /// GRACE's preparation in the last re-plan, in the worker.
    pub(super) grace: Option<f64>,
    /// Libra's schedule and its replay in the last re-plan, in the worker.
    pub(super) libra: Option<f64>,
    /// The last re-plan shared with the helper worker: its phases' names
    /// and milliseconds.
    pub(super) shared: Option<String>,
    /// The clusters GRACE last prepared ahead of time, and the worker's
    /// milliseconds for them.
    pub(super) warmed: Option<(String, f64)>,
    /// The worker's milliseconds for Libra's path-table predictions made
    /// ahead of time, last made (`None` until then).
    pub(super) path_table_ms: Option<f64>,
}

/// What the worker prepares ahead of time and the fraction done
/// ([`Response::Preparing`]); `None` when nothing.
pub(super) type Ahead = Option<(String, f64)>;

/// A trace source the page can send again, to a fresh worker.
#[derive(Debug, Clone)]
pub(super) enum ResendableSource {
    /// The generator's settings ([`Source::Generate`]).
    Generated(Source),
    /// A file from the user's disk: its name and the browser's handle on it,
    /// read again on a restart (its bytes went to the worker).
    File(String, web_sys::File),
}

impl ResendableSource {
    pub(super) fn source(&self) -> Source {
        match self {
            ResendableSource::Generated(s) => s.clone(),
            ResendableSource::File(name, _) => Source::File { name: name.clone() },
        }
    }
}

/// A request the worker has not answered yet.
pub(super) struct Pending {
    /// When it was sent.
    t0: f64,
    kind: RequestKind,
    /// The trace it carried, which becomes the last good one if it plans.
    source: Option<ResendableSource>,
    /// The cluster it carried, likewise.
    cluster: Option<Cluster>,
    /// The options before this request changed them, put back if the
    /// worker refuses the new ones.
    undo: Option<Undo>,
}

/// Options a request changes, as they were before it.
#[derive(Debug, Clone)]
pub(super) enum Undo {
    /// Libra's `N` and predictor.
    Libra(usize, String),
    /// GRACE's non-uniformity ratio.
    GraceRatio(String),
}

/// The last trace and cluster the worker accepted: what a fresh worker is
/// sent when the old one dies.
#[derive(Debug, Clone, Default)]
pub(super) struct LastAccepted {
    source: Option<ResendableSource>,
    cluster: Option<Cluster>,
}

/// A restore in progress: the request (once sent), what it restores, and
/// what the page said about the worker that died.
#[derive(Debug, Clone)]
pub(super) struct Restoring {
    id: Option<u64>,
    what: String,
    head: String,
    /// A Cancel, not a failure: said as information once restored.
    cancelled: bool,
}

/// The page's one worker, and what is on its way to it.
#[derive(Default)]
pub(super) struct WorkerLink {
    worker: Option<Worker>,
    /// Counts the workers started; events from an older one are ignored.
    generation: u32,
    /// The worker said it is listening.
    ready: bool,
    /// A restore is being prepared (a file read again): everything waits.
    hold: bool,
    /// Messages (and the bytes they transfer) waiting for `ready && !hold`.
    queue: Vec<(js_sys::Array, Option<js_sys::Uint8Array>)>,
    /// The file request being read, and the timer of its deadline.
    watchdog: Option<(u64, i32)>,
    /// The timer of the start deadline.
    start_timer: Option<i32>,
    restoring: Option<Restoring>,
    /// When the last workers died (not cancelled), for [`CRASH_CAP`].
    deaths: Vec<f64>,
}

/// A worker that dies this many times within [`CRASH_WINDOW_MS`] is
/// restarted without a trace: the trace (or the work the worker does on it
/// between requests) is what kills it, and restoring it again would loop.
pub(super) const CRASH_CAP: usize = 3;

/// The window of [`CRASH_CAP`]: a minute, far longer than a restore takes.
pub(super) const CRASH_WINDOW_MS: f64 = 60_000.0;

/// Why the page gave a worker up.
pub(super) enum Cause {
    /// Its `error` event (the message), e.g. a wasm trap.
    Error(String),
    /// It panicked (the panic's message).
    Panic(String),
    /// No answer within this many milliseconds.
    Silent(f64),
    /// The person pressed Cancel while it worked.
    Cancelled,
}

impl Cause {
    pub(super) fn describe(&self) -> String {
        match self {
            Cause::Panic(m) => format!("a bug: {}", m.replace('\n', " ")),
            Cause::Error(m) => crate::protocol::why_stopped(m),
            Cause::Silent(ms) if *ms < 10_000.0 => format!("no answer within {:.1} s", ms / 1000.0),
            Cause::Silent(ms) => format!("no answer within {:.0} s", ms / 1000.0),
            Cause::Cancelled => "cancelled".into(),
        }
    }
}

pub(super) fn now() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

/// The page's clock ([`now`]) in milliseconds since the epoch, as the
/// worker's [`Response::View`] `span` is.
pub(super) fn epoch_ms(t: f64) -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.time_origin() + t)
}

/// Runs `f` once after `ms` milliseconds; the timer's id, to clear it.
pub(super) fn set_timer(ms: f64, f: impl FnOnce() + 'static) -> Option<i32> {
    let callback = Closure::once_into_js(f);
    web_sys::window()?
        .set_timeout_with_callback_and_timeout_and_arguments_0(
            callback.unchecked_ref(),
            ms.min(i32::MAX as f64) as i32,
        )
        .ok()
}

pub(super) fn clear_timer(id: i32) {
    if let Some(w) = web_sys::window() {
        w.clear_timeout_with_handle(id);
    }
}

pub(super) fn location_hash() -> String {
    web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default()
}

pub(super) fn replace_hash(hash: &str) {
    if let Some(h) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = h.replace_state_with_url(&JsValue::NULL, "", Some(hash));
    }
}

/// Where the worker's loader is: `globalThis.moeplanWorkerUrl` when a host
/// sets it (the one-file page's `blob:` URL, an embed served from another
/// folder), else beside the page.
pub(super) fn worker_url() -> String {
    js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("moeplanWorkerUrl"))
        .ok()
        .and_then(|v| v.as_string())
        .unwrap_or_else(|| "./worker_loader.js".into())
}

/// A string a host sets on `globalThis` (empty when it sets none): where
/// the reader worker is (`moeplanReaderUrl`, an embed in another folder) or
/// its whole script (`moeplanReaderScript`, a `file://` page); with
/// neither, the planning worker finds it beside its own script.
pub(super) fn host_string(name: &str) -> String {
    js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str(name))
        .ok()
        .and_then(|v| v.as_string())
        .unwrap_or_default()
}

/// The read deadline: [`READ_DEADLINE_MS`], or a test's shorter one.
pub(super) fn read_deadline_ms() -> f64 {
    js_sys::Reflect::get(
        &js_sys::global(),
        &JsValue::from_str("moeplanReadDeadlineMs"),
    )
    .ok()
    .and_then(|v| v.as_f64())
    .filter(|ms| ms.is_finite() && *ms > 0.0)
    .unwrap_or(READ_DEADLINE_MS)
}

/// Offers `text` as a download named `name`.
pub(super) fn download(name: &str, text: &str) {
    if let Some(b) = crate::present::blob(text, "application/json") {
        crate::present::download_blob(name, &b);
    }
}

pub(super) fn cluster_of(s: &Settings) -> Cluster {
    s.cluster()
}

/// The page's state and its worker, as one `Copy` handle the event
/// handlers share. The page has one; each docs embed ([`crate::embed`]) has
/// its own, with its own worker.
#[derive(Clone, Copy)]
pub(crate) struct Ctx {
    pub(super) settings: RwSignal<Settings>,
    pub(super) board: Board,
    pub(super) stats: RwSignal<Option<TraceStatsLite>>,
    pub(super) status: RwSignal<Status>,
    pub(super) timings: RwSignal<Timings>,
    /// What the worker prepares between requests (`#ahead`).
    pub(super) ahead: RwSignal<Ahead>,
    /// Workers restarted so far (shown as `data-restarts`).
    pub(super) restarts: RwSignal<u32>,
    pub(super) pending: StoredValue<HashMap<u64, Pending>, LocalStorage>,
    pub(super) next_id: StoredValue<u64>,
    pub(super) conn: StoredValue<WorkerLink, LocalStorage>,
    pub(super) good: StoredValue<LastAccepted, LocalStorage>,
    /// The options before the change the next request carries
    /// ([`Pending::undo`]).
    pub(super) undo: StoredValue<Option<Undo>>,
    pub(super) read_deadline_ms: f64,
    /// The timer that asks for the budgeted plan's per-batch series once
    /// the budget rests ([`TIMELINE_DELAY_MS`]).
    pub(super) timeline_timer: StoredValue<Option<i32>>,
    /// The planners shown, by id (an embed's `planners`); `None`: all.
    pub(super) only: StoredValue<Option<Vec<String>>>,
}

impl Ctx {
    /// Fresh state for `settings`, showing only the planners in `only`
    /// (all with `None`). No worker yet: [`Ctx::start_worker`].
    pub(crate) fn new(settings: Settings, only: Option<Vec<String>>) -> Ctx {
        Ctx {
            settings: RwSignal::new(settings),
            board: Board::new(),
            stats: RwSignal::new(None),
            status: RwSignal::new(Status::Busy("starting the planner".into())),
            timings: RwSignal::new(Timings::default()),
            ahead: RwSignal::new(None),
            restarts: RwSignal::new(0),
            pending: StoredValue::new_local(HashMap::new()),
            next_id: StoredValue::new(1),
            conn: StoredValue::new_local(WorkerLink::default()),
            good: StoredValue::new_local(LastAccepted::default()),
            undo: StoredValue::new(None),
            read_deadline_ms: read_deadline_ms(),
            timeline_timer: StoredValue::new(None),
            only: StoredValue::new(only),
        }
    }

    /// Shows the error `message` in the status line.
    pub(crate) fn error(self, message: String) {
        self.status.set(Status::Error(message));
    }

    /// Sets the budget (`None`: automatic) and re-plans; the budgeted plan's
    /// per-batch series follows once the budget rests.
    pub(crate) fn set_budget(self, r: Option<usize>) {
        self.settings.update(|s| s.replicas_per_gpu = r);
        self.send(RequestKind::Budget, None, None, None, None);
        if let Some(t) = self.timeline_timer.get_value() {
            clear_timer(t);
        }
        self.timeline_timer
            .set_value(set_timer(TIMELINE_DELAY_MS, move || {
                self.timeline_timer.set_value(None);
                self.send(RequestKind::Timeline, None, None, None, None);
            }));
    }

    /// Shows the layer with index `layer` in the placement view.
    pub(crate) fn set_layer(self, layer: usize) {
        self.settings.update(|s| s.layer = layer);
        self.send(RequestKind::Layer, None, None, None, None);
    }

    /// Leaves out of `u` the plans this context does not show.
    pub(super) fn keep_shown(self, u: &mut moeplan_view::page::Update) {
        self.only.with_value(|only| {
            let Some(only) = only else { return };
            let shown = |name: &str| only.iter().any(|o| o == name);
            u.plans.retain(|p| shown(&p.name));
            if let Some(f) = &mut u.frame {
                f.plans.retain(|p| shown(p));
                f.planner_notes.retain(|n| shown(&n.name));
            }
        });
    }
    pub(super) fn generation(self) -> u32 {
        self.conn.with_value(|c| c.generation)
    }

    /// Starts a worker, replacing the one (if any) the page had.
    pub(crate) fn start_worker(self) {
        // The matrix's traces lived in the worker being replaced.
        self.board.cross.set(None);
        let worker = match Worker::new(&worker_url()) {
            Ok(w) => w,
            Err(_) => {
                self.status.set(Status::Error(
                    "this browser cannot start the planning worker".into(),
                ));
                return;
            }
        };
        let generation = self.generation() + 1;
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let received = now();
            // `[json, Float64Array | null]`, or a bare JSON string (the
            // panic hook's last words).
            let data = ev.data();
            let (text, numbers) = match data.as_string() {
                Some(text) => (text, None),
                None => {
                    let parts = js_sys::Array::from(&data);
                    let numbers = parts
                        .get(1)
                        .dyn_into::<js_sys::Float64Array>()
                        .ok()
                        .map(|a| a.to_vec());
                    (parts.get(0).as_string().unwrap_or_default(), numbers)
                }
            };
            match decode(&text, numbers.as_deref()) {
                Ok(resp) => self.on_response(generation, resp, received),
                Err(e) => self.status.set(Status::Error(format!(
                    "the planning worker's answer was garbled ({e})"
                ))),
            }
        });
        let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
            // Handled here: not also an uncaught error in the console.
            ev.prevent_default();
            let message = ev
                .dyn_ref::<web_sys::ErrorEvent>()
                .map(|e| e.message())
                .unwrap_or_default();
            self.died(generation, Cause::Error(message));
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        // A worker lives as long as the page or until it dies; the handlers
        // of a dead one check its generation and do nothing.
        on_message.forget();
        on_error.forget();
        let start_timer = set_timer(START_DEADLINE_MS, move || {
            if self
                .conn
                .with_value(|c| c.generation == generation && !c.ready)
            {
                self.died(generation, Cause::Silent(START_DEADLINE_MS));
            }
        });
        self.conn.update_value(|c| {
            c.worker = Some(worker);
            c.generation = generation;
            c.ready = false;
            c.hold = false;
            c.queue.clear();
            c.watchdog = None;
            c.start_timer = start_timer;
        });
    }

    /// Posts a message now, or queues it until the worker listens (`first`:
    /// ahead of everything queued, and the end of a restore's hold).
    pub(super) fn post(self, msg: js_sys::Array, bytes: Option<js_sys::Uint8Array>, first: bool) {
        self.conn.update_value(|c| {
            if first {
                c.queue.insert(0, (msg, bytes));
                c.hold = false;
            } else {
                c.queue.push((msg, bytes));
            }
        });
        self.flush();
    }

    /// Sends what is queued, if the worker listens and no restore holds it.
    pub(super) fn flush(self) {
        let Some((worker, queue)) = self
            .conn
            .try_update_value(|c| {
                if c.ready && !c.hold {
                    c.worker.clone().map(|w| (w, std::mem::take(&mut c.queue)))
                } else {
                    None
                }
            })
            .flatten()
        else {
            return;
        };
        for (msg, bytes) in queue {
            // Bytes are transferred, not copied.
            let result = match &bytes {
                Some(b) => {
                    worker.post_message_with_transfer(&msg, &js_sys::Array::of1(&b.buffer()))
                }
                None => worker.post_message(&msg),
            };
            if result.is_err() {
                self.status
                    .set(Status::Error("could not reach the planning worker".into()));
            }
        }
    }

    /// Sends a request with the current budget and layer; `bytes` (a
    /// file's) are transferred. Returns its id.
    pub(super) fn send(
        self,
        kind: RequestKind,
        source: Option<ResendableSource>,
        cluster: Option<Cluster>,
        export: Option<String>,
        bytes: Option<js_sys::Uint8Array>,
    ) -> Option<u64> {
        self.send_with(kind, source, cluster, export, bytes, None)
    }

    /// [`Ctx::send`], for the studies beside the plans too.
    pub(super) fn send_with(
        self,
        kind: RequestKind,
        source: Option<ResendableSource>,
        cluster: Option<Cluster>,
        export: Option<String>,
        bytes: Option<js_sys::Uint8Array>,
        study: Option<Study>,
    ) -> Option<u64> {
        let (cross, serving) = match study {
            Some(Study::Cross(a)) => (Some(a), None),
            Some(Study::Serving(a)) => (None, Some(a)),
            None => (None, None),
        };
        let s = self.settings.get_untracked();
        let id = self.next_id.get_value();
        self.next_id.set_value(id + 1);
        let req = Request {
            cross,
            serving,
            reader: if bytes.is_some() {
                host_string("moeplanReaderUrl")
            } else {
                String::new()
            },
            reader_script: if bytes.is_some() {
                host_string("moeplanReaderScript")
            } else {
                String::new()
            },
            ..Request::from_settings(
                id,
                &s,
                source.as_ref().map(ResendableSource::source),
                cluster,
                export,
                kind == RequestKind::Timeline,
            )
        };
        let json = serde_json::to_string(&req).ok()?;
        let reading = matches!(source, Some(ResendableSource::File(..)));
        // What the status line says while it works: a file by its name.
        let doing = match &source {
            Some(ResendableSource::File(name, _)) => format!("reading {name}"),
            _ => "planning".into(),
        };
        self.pending.update_value(|p| {
            p.insert(
                id,
                Pending {
                    t0: now(),
                    kind,
                    source,
                    cluster,
                    undo: self.undo.try_update_value(Option::take).flatten(),
                },
            );
        });
        if matches!(
            kind,
            RequestKind::Trace | RequestKind::Cluster | RequestKind::Model | RequestKind::Export
        ) {
            self.status.set(Status::Busy(doing));
        }
        if kind == RequestKind::Cross {
            self.status.set(Status::Busy(
                "planning on every trace and judging on every trace".into(),
            ));
        }
        if kind == RequestKind::Serving {
            let unit = if s.engine.is_empty() {
                "batches".to_string()
            } else {
                format!("{} forward passes", s.engine)
            };
            self.status.set(Status::Busy(format!(
                "serving with EPLB re-planned every {} {unit} on the last {}",
                s.every, s.window
            )));
        }
        if kind == RequestKind::PerBatch {
            self.status
                .set(Status::Busy("planning Libra per batch".into()));
        }
        if kind == RequestKind::Options {
            self.status.set(Status::Busy(format!(
                "grouping GRACE at non-uniformity ratio {}",
                s.grace_ratio
            )));
        }
        if kind == RequestKind::Rule {
            self.status.set(Status::Busy(format!(
                "replaying every plan under {}",
                s.rule
            )));
        }
        if kind == RequestKind::Hardware {
            self.status
                .set(Status::Busy("pricing every plan on the hardware".into()));
        }
        if reading {
            self.arm_watchdog(id);
        }
        let msg = js_sys::Array::of2(
            &JsValue::from_str(&json),
            bytes.as_ref().map_or(&JsValue::NULL, |b| b.as_ref()),
        );
        self.post(msg, bytes, kind == RequestKind::Restore);
        Some(id)
    }

    /// Gives the worker [`Ctx::read_deadline_ms`] to read request `id`'s
    /// file (until it reports a later phase or answers).
    pub(super) fn arm_watchdog(self, id: u64) {
        let generation = self.generation();
        let ms = self.read_deadline_ms;
        let timer = set_timer(ms, move || {
            let silent = self.conn.with_value(|c| {
                c.generation == generation && c.watchdog.is_some_and(|w| w.0 == id)
            });
            if silent {
                self.died(generation, Cause::Silent(ms));
            }
        });
        let old = self
            .conn
            .try_update_value(|c| std::mem::replace(&mut c.watchdog, timer.map(|t| (id, t))));
        if let Some(Some((_, t))) = old {
            clear_timer(t);
        }
    }

    pub(super) fn disarm_watchdog(self, id: u64) {
        let timer = self
            .conn
            .try_update_value(|c| match c.watchdog {
                Some((w, t)) if w == id => {
                    c.watchdog = None;
                    Some(t)
                }
                _ => None,
            })
            .flatten();
        if let Some(t) = timer {
            clear_timer(t);
        }
    }

    /// A request was answered: what it carried is what the worker holds.
    pub(super) fn accepted(self, p: &Pending) {
        self.good.update_value(|g| {
            if let Some(s) = &p.source {
                g.source = Some(s.clone());
            }
            if let Some(c) = p.cluster {
                g.cluster = Some(c);
            }
        });
    }

    /// The restore this answer ends, if it is one.
    pub(super) fn take_restore(self, id: u64) -> Option<Restoring> {
        self.conn
            .try_update_value(|c| {
                if c.restoring.as_ref().is_some_and(|r| r.id == Some(id)) {
                    c.restoring.take()
                } else {
                    None
                }
            })
            .flatten()
    }

    pub(super) fn restoring(self, id: u64) -> bool {
        self.conn
            .with_value(|c| c.restoring.as_ref().is_some_and(|r| r.id == Some(id)))
    }

    /// Generates a trace with the current settings and plans it.
    pub(crate) fn generate(self) {
        let s = self.settings.get_untracked();
        self.send(
            RequestKind::Trace,
            Some(ResendableSource::Generated(Source::generated(&s))),
            Some(cluster_of(&s)),
            None,
            None,
        );
    }

    /// Reads a file the user chose and sends it to the worker.
    pub(crate) fn load_file(self, file: web_sys::File) {
        let name = file.name();
        if let Some(message) = too_large(&name, file.size()) {
            self.status.set(Status::Error(message));
            return;
        }
        self.status.set(Status::Busy(format!("reading {name}")));
        wasm_bindgen_futures::spawn_local(async move {
            match wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await {
                Ok(buf) => {
                    let bytes = js_sys::Uint8Array::new(&buf);
                    let cluster = cluster_of(&self.settings.get_untracked());
                    self.send(
                        RequestKind::Trace,
                        Some(ResendableSource::File(name, file)),
                        Some(cluster),
                        None,
                        Some(bytes),
                    );
                }
                Err(_) => self.status.set(Status::Error(format!(
                    "{name}: the browser could not read the file"
                ))),
            }
        });
    }
}

impl Ctx {
    /// A hardware file chosen or dropped: read and checked here, then every
    /// plan priced on it. A file refused (too large, not a hardware preset)
    /// leaves the prices as they were and says why in the status line.
    pub(crate) fn load_hardware(self, file: web_sys::File) {
        let name = file.name();
        let limit = moeplan::formats::HARDWARE_MAX_BYTES;
        if file.size() > limit as f64 {
            self.status.set(Status::Error(format!(
                "{name}: {} bytes is more than the {limit}-byte limit for a hardware file",
                file.size()
            )));
            return;
        }
        wasm_bindgen_futures::spawn_local(async move {
            let read = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await;
            let Ok(buf) = read else {
                self.status.set(Status::Error(format!(
                    "{name}: the browser could not read the file"
                )));
                return;
            };
            match crate::settings::HardwareFile::read(
                &name,
                &js_sys::Uint8Array::new(&buf).to_vec(),
            ) {
                Ok(f) => {
                    self.settings.update(|s| {
                        s.hardware_file = Some(f);
                        s.hardware = crate::settings::FILE_HARDWARE.into();
                    });
                    self.send(RequestKind::Hardware, None, None, None, None);
                }
                Err(message) => self.status.set(Status::Error(message)),
            }
        });
    }
}

impl Status {
    /// The status line's classes.
    pub(super) fn class(&self) -> &'static str {
        match self {
            Status::Error(_) => "status error",
            Status::Busy(_) => "status busy",
            Status::Ready | Status::Info(_) => "status ready",
        }
    }

    /// The status line's words.
    pub(super) fn text(&self) -> String {
        match self {
            Status::Ready => "ready".to_string(),
            Status::Busy(p) => format!("working: {p}…"),
            Status::Info(m) | Status::Error(m) => m.clone(),
        }
    }
}
