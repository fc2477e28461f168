//! The planning web worker: receives `[json, bytes | null]` messages from the
//! page, plans with [`moeplan_app::worker::WorkerState`], posts progress and
//! answers back as `[json, Float64Array | null]` (a view's numbers in one
//! transferred typed array, see [`moeplan_app::protocol`]). Runs everything
//! that can take longer than a frame, so the page never freezes.
//!
//! A request that carries files is read by a reader worker this worker
//! starts for it and stops after (`bin/reader.rs`, which holds the format
//! readers this one does not); requests that arrive meanwhile wait, so
//! every answer still comes in the order asked. A file the reader refuses,
//! or one that kills it (out of memory), is an error answer: the trace
//! held stays.
//!
//! Between requests it does GRACE's clusterings for the clusters a person is
//! likely to pick next, then Libra's path-table predictions for the trace
//! ([`WorkerState::warm_step`]): only after
//! [`QUIET_MS`] without a request (a slider being dragged never waits on
//! it), in steps of about [`STEP_MS`] from timers, so a request that arrives
//! meanwhile is taken after the current step at most.
//!
//! A second after an answer ([`HELPER_SYNC_MS`]) it starts a second instance
//! of its own script as its helper and gives it the trace; a new Libra
//! option is then scheduled and replayed half here, half there
//! ([`moeplan_app::worker::Helper`]), the request waiting for the helper's
//! half as one reading files waits for its reader. Messages to the helper
//! carry a third element, [`HELPER`]; an instance that receives one is a
//! helper for it. This worker answers alone whenever the helper cannot help.
//!
//! A panic is a bug (user input never panics the core), and in wasm it
//! aborts: the panic hook logs it, posts [`Response::Crashed`] so the page
//! can say what happened, and the wasm then traps, which the page also sees
//! as the worker's `error` event. Either way the page starts a fresh worker
//! with its previous trace (see `ui.rs`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use moeplan_app::protocol::{Request, Response, encode, post_with_numbers, why_stopped};
use moeplan_app::reader::{READER_READY, ReadAnswer, ReadAsk, unpack};
use moeplan_app::worker::{
    HELPER, Helper, HelperAnswer, HelperAsk, Read, Shared, Warmed, WorkerState,
};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, ErrorEvent, MessageEvent, Worker};

fn main() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        let crashed = Response::Crashed {
            message: info.to_string(),
        };
        if let Ok(json) = serde_json::to_string(&crashed) {
            let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
            let _ = scope.post_message(&JsValue::from_str(&json));
        }
    }));
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let state = Rc::new(RefCell::new(WorkerState::default()));
    let server = Rc::new(Server {
        warmer: Warmer::new(&scope, &state),
        scope: scope.clone(),
        state,
        reading: RefCell::new(None),
        spent: RefCell::new(None),
        backlog: RefCell::new(VecDeque::new()),
        helper: RefCell::new(None),
        helper_failed: Cell::new(false),
        waiting: RefCell::new(None),
        as_helper: RefCell::new(Helper::default()),
        trace_seen: Cell::new((u64::MAX, 0.0)),
        helper_deferred: Cell::new(false),
    });
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let data = js_sys::Array::from(&ev.data());
        let text = data.get(0).as_string().unwrap_or_default();
        // This instance is another planning worker's helper for this message.
        if data.get(2).as_string().as_deref() == Some(HELPER) {
            let numbers = data
                .get(1)
                .dyn_into::<js_sys::Float64Array>()
                .map(|a| a.to_vec())
                .unwrap_or_default();
            server.help(&text, numbers);
            return;
        }
        let bytes = data.get(1).dyn_into::<js_sys::Uint8Array>().ok();
        server.receive(text, bytes, epoch_ms());
    });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&scope, &Response::Ready);
}

/// The worker's loop: requests are answered in the order they came; one
/// that carries files waits for the reader worker, and requests arriving
/// meanwhile wait behind it.
struct Server {
    scope: DedicatedWorkerGlobalScope,
    state: Rc<RefCell<WorkerState>>,
    warmer: Warmer,
    /// The request whose files the reader is reading.
    reading: RefCell<Option<Reading>>,
    /// The last read's reader and callbacks, dropped at the next read (not
    /// inside their own callback).
    spent: RefCell<Option<Reading>>,
    /// Requests that came while a file was read or a part was made by the
    /// helper: `[json, bytes]` and when.
    backlog: RefCell<VecDeque<(String, Option<js_sys::Uint8Array>, f64)>>,
    /// The helper worker ([`moeplan_app::worker::Helper`]), once started.
    helper: RefCell<Option<HelperConn>>,
    /// The helper could not start or died: this worker works alone.
    helper_failed: Cell<bool>,
    /// A request whose re-plan is shared with the helper, waiting for its
    /// part.
    waiting: RefCell<Option<Waiting>>,
    /// This instance's state as another worker's helper.
    as_helper: RefCell<Helper>,
    /// The trace held (its number) and when the helper was first due to
    /// take it ([`Server::sync_helper`]).
    trace_seen: Cell<(u64, f64)>,
    /// A deferred [`Server::sync_helper`] is pending.
    helper_deferred: Cell<bool>,
}

/// The helper worker and what it holds.
struct HelperConn {
    worker: Worker,
    /// Its wasm is running (it said [`Response::Ready`]).
    ready: bool,
    /// The trace it holds, and the one it is loading.
    held: Option<u64>,
    loading: Option<u64>,
    /// It is making a part.
    busy: bool,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(ErrorEvent)>,
}

/// A request waiting for the helper's part of its re-plan.
struct Waiting {
    req: Request,
    received: f64,
    shared: Shared,
    /// When this worker started its half and when it had made it.
    marks: (f64, f64),
}

/// A read in progress.
struct Reading {
    req: Request,
    /// The files' names, for a message should the reader die.
    names: String,
    /// When the request arrived (its answer's span starts there).
    received: f64,
    reader: Worker,
    /// The `blob:` URL this worker made for the reader's script, revoked
    /// once it has answered.
    blob_url: Option<String>,
    /// What it is to read (`[json ReadAsk, bytes]`), until it is listening.
    ask: Option<(String, js_sys::Uint8Array)>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(ErrorEvent)>,
}

impl Server {
    fn receive(self: &Rc<Self>, text: String, bytes: Option<js_sys::Uint8Array>, received: f64) {
        self.warmer.cancel();
        if self.reading.borrow().is_some() || self.waiting.borrow().is_some() {
            self.backlog.borrow_mut().push_back((text, bytes, received));
            return;
        }
        self.take(&text, bytes, received);
    }

    /// Answers one request, or starts reading its files.
    fn take(self: &Rc<Self>, text: &str, bytes: Option<js_sys::Uint8Array>, received: f64) {
        let req = match serde_json::from_str::<Request>(text) {
            Ok(req) => req,
            Err(e) => {
                return post(
                    &self.scope,
                    &Response::Error {
                        id: 0,
                        message: format!("bad request from the page: {e}"),
                    },
                );
            }
        };
        let ask = bytes
            .as_ref()
            .and_then(|b| ReadAsk::of(&req, b.length() as usize));
        match (ask, bytes) {
            (Some(ask), Some(bytes)) => self.read(req, ask, bytes, received),
            _ if self.share(&req, received) => {}
            _ => self.answer(&req, None, received),
        }
    }

    /// Shares `req`'s re-plan with the helper when it can: the helper's
    /// part asked for, this worker's made now; the answer waits for the
    /// helper's ([`Server::helped`]). Whether it did.
    fn share(self: &Rc<Self>, req: &Request, received: f64) -> bool {
        let trace = self.state.borrow().trace_number();
        let job = {
            let helper = self.helper.borrow();
            match helper.as_ref() {
                Some(h) if h.ready && !h.busy && h.held == Some(trace) => {
                    self.state.borrow().split_job(req)
                }
                _ => None,
            }
        };
        let Some(job) = job else {
            return false;
        };
        let ask = HelperAsk::Part {
            trace,
            job: job.clone(),
        };
        if !self.ask_helper(&ask) {
            return false;
        }
        post(
            &self.scope,
            &Response::Progress {
                id: req.id,
                phase: "re-placing every batch, half in a second worker".into(),
            },
        );
        let started = now();
        let Some(shared) = self.state.borrow().share(job) else {
            return false;
        };
        *self.waiting.borrow_mut() = Some(Waiting {
            req: req.clone(),
            received,
            shared,
            marks: (started, now()),
        });
        // Never waits on a helper that has stopped answering.
        self.after(HELPER_WAIT_MS, move |me| {
            let same = me
                .waiting
                .borrow()
                .as_ref()
                .is_some_and(|w| w.received == received);
            if same {
                me.helped(None, 0.0);
            }
        });
        true
    }

    /// The helper's part (`None`: none comes) for the waiting request: kept
    /// when it is one, then the request answered.
    fn helped(self: &Rc<Self>, part: Option<&[f64]>, helper_ms: f64) {
        let Some(w) = self.waiting.borrow_mut().take() else {
            return;
        };
        let came = now();
        if let Some(numbers) = part {
            let mut state = self.state.borrow_mut();
            match state.keep_shared(w.shared, numbers) {
                Ok(()) => {
                    let (started, made) = w.marks;
                    state.phases_before(vec![
                        ("Libra: the first half here (shared)".into(), made - started),
                        (
                            "Libra: the helper's half awaited (shared)".into(),
                            came - made,
                        ),
                        ("Libra: the helper's half made (shared)".into(), helper_ms),
                        ("Libra: the halves joined (shared)".into(), now() - came),
                    ]);
                }
                Err(e) => {
                    web_sys::console::warn_1(&format!("moeplan: the helper's part: {e}").into())
                }
            }
        }
        self.answer(&w.req, None, w.received);
    }

    /// Posts `ask` to the helper; whether it went.
    fn ask_helper(&self, ask: &HelperAsk) -> bool {
        let mut helper = self.helper.borrow_mut();
        let Some(h) = helper.as_mut() else {
            return false;
        };
        let (text, numbers) = ask.to_message();
        let array = js_sys::Float64Array::new_with_length(numbers.len() as u32);
        array.copy_from(&numbers);
        let msg = js_sys::Array::of3(
            &JsValue::from_str(&text),
            &array,
            &JsValue::from_str(HELPER),
        );
        let sent = h
            .worker
            .post_message_with_transfer(&msg, &js_sys::Array::of1(&array.buffer()))
            .is_ok();
        match (sent, ask) {
            (true, HelperAsk::Part { .. }) => h.busy = true,
            (true, HelperAsk::Load { trace, .. }) => h.loading = Some(*trace),
            _ => {}
        }
        sent
    }

    /// Starts the helper, or gives it the trace held, a second after an
    /// answer: never while a request waits. While the neighbouring
    /// clusters are still prepared for a trace loaded less than
    /// [`HELPER_DEFER_MS`] ago, a second later: its seconds of loading on
    /// the other core slowed the first changes after the page opened
    /// (issue 52), and the work ahead of time those changes use comes first.
    fn sync_helper(self: &Rc<Self>) {
        if self.helper_failed.get()
            || self.waiting.borrow().is_some()
            || self.reading.borrow().is_some()
            || !self.state.borrow().wants_helper()
        {
            return;
        }
        let trace = self.state.borrow().trace_number();
        if self.trace_seen.get().0 != trace {
            self.trace_seen.set((trace, now()));
        }
        let young = now() - self.trace_seen.get().1 < f64::from(HELPER_DEFER_MS);
        if young && self.state.borrow().preparing_neighbours() {
            // One retry pending at a time, however many answers ask.
            if !self.helper_deferred.replace(true) {
                self.after(HELPER_SYNC_MS, |me| {
                    me.helper_deferred.set(false);
                    me.sync_helper()
                });
            }
            return;
        }
        if self.helper.borrow().is_none() {
            return self.start_helper();
        }
        let due = self.helper.borrow().as_ref().is_some_and(|h| {
            h.ready && !h.busy && h.held != Some(trace) && h.loading != Some(trace)
        });
        if !due {
            return;
        }
        let Some(ask) = self.state.borrow().helper_load() else {
            return;
        };
        self.ask_helper(&ask);
    }

    /// Starts another instance of this worker's script as its helper.
    fn start_helper(self: &Rc<Self>) {
        let url = js_sys::global()
            .unchecked_into::<web_sys::WorkerGlobalScope>()
            .location()
            .href();
        // A `file://` page's blob: URL may not start from here: then alone.
        let Ok(worker) = Worker::new(&url) else {
            return self.helper_failed.set(true);
        };
        let me = Rc::clone(self);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let data = js_sys::Array::from(&ev.data());
            let text = data.get(0).as_string().unwrap_or_default();
            let numbers = data
                .get(1)
                .dyn_into::<js_sys::Float64Array>()
                .map(|a| a.to_vec())
                .unwrap_or_default();
            me.from_helper(&text, numbers);
        });
        let me = Rc::clone(self);
        let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |ev: ErrorEvent| {
            ev.prevent_default();
            me.helper_lost(&ev.message());
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        *self.helper.borrow_mut() = Some(HelperConn {
            worker,
            ready: false,
            held: None,
            loading: None,
            busy: false,
            _on_message: on_message,
            _on_error: on_error,
        });
    }

    /// A message from the helper.
    fn from_helper(self: &Rc<Self>, text: &str, numbers: Vec<f64>) {
        if text.starts_with('[') {
            let answer = HelperAnswer::from_message(text, numbers)
                .unwrap_or_else(|message| HelperAnswer::Refused { message });
            if let Some(h) = self.helper.borrow_mut().as_mut() {
                match &answer {
                    HelperAnswer::Loaded { trace } => {
                        h.held = Some(*trace);
                        h.loading = None;
                    }
                    HelperAnswer::Part { .. } => h.busy = false,
                    HelperAnswer::Refused { .. } => {
                        // A load refused, or a part: either way idle.
                        h.busy = false;
                        h.loading = None;
                    }
                }
            }
            match answer {
                HelperAnswer::Part {
                    job,
                    worker_ms,
                    numbers,
                } => {
                    let mine = self
                        .waiting
                        .borrow()
                        .as_ref()
                        .is_some_and(|w| w.shared.job == job);
                    if mine {
                        self.helped(Some(&numbers), worker_ms);
                    }
                }
                HelperAnswer::Refused { message } => {
                    web_sys::console::warn_1(&format!("moeplan: the helper: {message}").into());
                    self.helped(None, 0.0);
                }
                HelperAnswer::Loaded { .. } => self.sync_helper(),
            }
            return;
        }
        // Its own start and its panic hook's last words, read by their kind
        // only: deserializing a whole `Response` would put every answer's
        // reader in this worker (60 KB gzip).
        #[derive(serde::Deserialize)]
        struct Said {
            kind: String,
            #[serde(default)]
            message: String,
        }
        match serde_json::from_str::<Said>(text) {
            Ok(said) if said.kind == "ready" => {
                if let Some(h) = self.helper.borrow_mut().as_mut() {
                    h.ready = true;
                }
                self.sync_helper();
            }
            Ok(said) if said.kind == "crashed" => self.helper_lost(&said.message),
            _ => {}
        }
    }

    /// The helper died: this worker works alone from now on, and a request
    /// waiting for it is answered.
    fn helper_lost(self: &Rc<Self>, message: &str) {
        web_sys::console::warn_1(
            &format!(
                "moeplan: the helper stopped ({}); planning alone",
                why_stopped(message)
            )
            .into(),
        );
        if let Some(h) = self.helper.borrow_mut().take() {
            h.worker.terminate();
            h.worker.set_onmessage(None);
            h.worker.set_onerror(None);
            // Its callbacks are dropped by a timer, not inside their own call.
            let (m, e) = (h._on_message, h._on_error);
            self.after(0, move |_| drop((m, e)));
        }
        self.helper_failed.set(true);
        self.helped(None, 0.0);
    }

    /// Runs `f` in `ms` milliseconds, once (the callback frees itself
    /// when run).
    fn after(self: &Rc<Self>, ms: i32, f: impl FnOnce(&Rc<Server>) + 'static) {
        let me = Rc::clone(self);
        let tick = Closure::once_into_js(move || f(&me));
        let _ = self
            .scope
            .set_timeout_with_callback_and_timeout_and_arguments_0(tick.unchecked_ref(), ms);
    }

    /// As another worker's helper: answers its ask.
    fn help(&self, text: &str, numbers: Vec<f64>) {
        let started = now();
        let mut answer = match HelperAsk::from_message(text, numbers) {
            Ok(ask) => self.as_helper.borrow_mut().handle(ask),
            Err(message) => HelperAnswer::Refused { message },
        };
        if let HelperAnswer::Part { worker_ms, .. } = &mut answer {
            *worker_ms = now() - started;
        }
        let (text, numbers) = answer.to_message();
        post_with_numbers(&self.scope, &text, Some(&numbers));
    }

    /// Plans `req` with the traces its files held, posts the answer, and
    /// goes on with the requests that waited.
    fn answer(self: &Rc<Self>, req: &Request, read: Option<Read>, received: f64) {
        let id = req.id;
        let mut response = self
            .state
            .borrow_mut()
            .handle_read(req, read, now, |phase| {
                post(
                    &self.scope,
                    &Response::Progress {
                        id,
                        phase: phase.to_string(),
                    },
                )
            });
        if let Response::View { span, .. } = &mut response {
            *span = (received, epoch_ms());
        }
        post(&self.scope, &response);
        self.next();
    }

    /// Takes the requests that waited, until one reads files again; then
    /// work ahead of time once all is quiet.
    fn next(self: &Rc<Self>) {
        let free = || self.reading.borrow().is_none() && self.waiting.borrow().is_none();
        while free() {
            let Some((text, bytes, received)) = self.backlog.borrow_mut().pop_front() else {
                break;
            };
            self.take(&text, bytes, received);
        }
        if free() && self.state.borrow().warming() {
            self.warmer.schedule(QUIET_MS);
        } else if free() {
            // An answer that left nothing to prepare (a path table it made
            // itself): the page stops saying something is.
            self.warmer.tell(&self.state.borrow());
        }
        // The helper takes its copy of the trace a second after an answer (a
        // request meanwhile waits for nothing: it is answered alone).
        if free() && !self.helper_failed.get() {
            self.after(HELPER_SYNC_MS, |me| me.sync_helper());
        }
    }

    /// Starts a reader worker on the files `req` carries (their bytes
    /// transferred to it); [`Server::read_done`] takes its answer.
    fn read(self: &Rc<Self>, req: Request, ask: ReadAsk, bytes: js_sys::Uint8Array, received: f64) {
        self.spent.borrow_mut().take();
        let phase = ask.phase();
        post(
            &self.scope,
            &Response::Progress {
                id: req.id,
                phase: phase.clone(),
            },
        );
        let (reader, blob_url) = match start_reader(&req) {
            Ok(w) => w,
            Err(e) => {
                let why = e.as_string().unwrap_or_else(|| format!("{e:?}"));
                return self.refuse(
                    &req,
                    format!(
                        "{}: the page could not start its file reader: {why}",
                        ask.names.join(", ")
                    ),
                );
            }
        };
        let me = Rc::clone(self);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let data = js_sys::Array::from(&ev.data());
            let text = data.get(0).as_string().unwrap_or_default();
            if text == READER_READY {
                me.reader_ready();
                return;
            }
            let counts = data.get(1).dyn_into::<js_sys::Float64Array>().ok();
            me.read_done(Ok((text, counts)));
        });
        let me = Rc::clone(self);
        let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |ev: ErrorEvent| {
            ev.prevent_default();
            me.read_done(Err(ev.message()));
        });
        reader.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        reader.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let json = serde_json::to_string(&ask).unwrap_or_default();
        *self.reading.borrow_mut() = Some(Reading {
            req,
            names: ask.names.join(", "),
            received,
            reader,
            blob_url,
            ask: Some((json, bytes)),
            _on_message: on_message,
            _on_error: on_error,
        });
    }

    /// The reader is listening (its wasm has started): give it the files.
    fn reader_ready(&self) {
        let mut reading = self.reading.borrow_mut();
        let Some(reading) = reading.as_mut() else {
            return;
        };
        let Some((json, bytes)) = reading.ask.take() else {
            return;
        };
        let msg = js_sys::Array::of2(&JsValue::from_str(&json), &bytes);
        if reading
            .reader
            .post_message_with_transfer(&msg, &js_sys::Array::of1(&bytes.buffer()))
            .is_err()
        {
            let _ = reading.reader.post_message(&msg);
        }
    }

    /// The reader's answer (`[json, counts]`), or its error event's message.
    fn read_done(self: &Rc<Self>, answer: Result<(String, Option<js_sys::Float64Array>), String>) {
        let Some(reading) = self.reading.borrow_mut().take() else {
            return;
        };
        reading.reader.terminate();
        reading.reader.set_onmessage(None);
        reading.reader.set_onerror(None);
        if let Some(url) = &reading.blob_url {
            let _ = web_sys::Url::revoke_object_url(url);
        }
        let (req, received, names) = (reading.req.clone(), reading.received, reading.names.clone());
        *self.spent.borrow_mut() = Some(reading);
        let read = match answer {
            Ok((text, counts)) => match serde_json::from_str::<ReadAnswer>(&text) {
                Ok(Ok(headers)) => {
                    let counts = counts.map(|a| a.to_vec()).unwrap_or_default();
                    unpack(&headers, &counts)
                }
                Ok(Err(message)) => Err(message),
                Err(e) => Err(format!("the file reader answered nonsense: {e}")),
            },
            Err(message) => Err(format!(
                "{names}: the file reader stopped ({}); the page keeps what it had",
                why_stopped(&message)
            )),
        };
        match read {
            Ok(traces) => self.answer(&req, Some(traces), received),
            Err(message) => self.refuse(&req, message),
        }
    }

    /// Answers `req` with an error (the state stays as it was) and goes on.
    fn refuse(self: &Rc<Self>, req: &Request, message: String) {
        post(
            &self.scope,
            &Response::Error {
                id: req.id,
                message,
            },
        );
        self.next();
    }
}

/// Starts a reader worker: from the script the request carries (made a
/// `blob:` URL here, which this worker may start whatever the page's
/// origin), else from its URL, else from `reader_loader.js` beside this
/// worker's own script.
fn start_reader(req: &Request) -> Result<(Worker, Option<String>), JsValue> {
    if req.reader_script.is_empty() {
        let url = if req.reader.is_empty() {
            "./reader_loader.js"
        } else {
            &req.reader
        };
        return Ok((Worker::new(url)?, None));
    }
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("text/javascript");
    let parts = js_sys::Array::of1(&JsValue::from_str(&req.reader_script));
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    match Worker::new(&url) {
        Ok(w) => Ok((w, Some(url))),
        Err(e) => {
            let _ = web_sys::Url::revoke_object_url(&url);
            Err(e)
        }
    }
}

/// Quiet time after a request before work ahead of time starts.
const QUIET_MS: i32 = 250;

/// Time after each answer before the helper is started or given the trace
/// (it reads or generates the trace again: seconds, on the other core).
/// Not a quiet period: waiting for a second without requests starved the
/// helper on a page changed continuously (the e2e's count default).
const HELPER_SYNC_MS: i32 = 1000;

/// How long after a trace arrives the helper waits for the neighbouring
/// clusters to be prepared before it loads the trace anyway (a page changed
/// continuously never lets that work finish).
const HELPER_DEFER_MS: i32 = 4000;

/// The longest a request waits for the helper's part before it is
/// answered alone (the part takes about as long as this worker's).
const HELPER_WAIT_MS: i32 = 20_000;

/// About how long one run of work ahead of time lasts before it yields to
/// requests (a step may run longer: one layer of one cluster).
const STEP_MS: f64 = 8.0;

/// How far the work ahead of time moves on between two messages saying so.
const TELL_EVERY: f64 = 0.02;

/// Runs [`WorkerState::warm_step`] from timers between requests.
#[derive(Clone)]
struct Warmer {
    scope: DedicatedWorkerGlobalScope,
    /// The pending timer, if any.
    timer: Rc<Cell<Option<i32>>>,
    /// The timer's callback; it reschedules itself while work remains.
    run: Rc<RefCell<Option<Tick>>>,
    /// What the page was last told is being prepared, and how far it was.
    told: Rc<RefCell<(Option<String>, f64)>>,
}

/// A timer's callback.
type Tick = Closure<dyn FnMut()>;

impl Warmer {
    fn new(scope: &DedicatedWorkerGlobalScope, state: &Rc<RefCell<WorkerState>>) -> Warmer {
        let warmer = Warmer {
            scope: scope.clone(),
            timer: Rc::new(Cell::new(None)),
            run: Rc::new(RefCell::new(None)),
            told: Rc::new(RefCell::new((None, 0.0))),
        };
        let (me, state) = (warmer.clone(), Rc::clone(state));
        let run = Closure::<dyn FnMut()>::new(move || {
            me.timer.set(None);
            let deadline = now() + STEP_MS;
            loop {
                let done = state.borrow_mut().warm_step(now);
                match done {
                    Some(Warmed::Clusters(clusters, worker_ms)) => post(
                        &me.scope,
                        &Response::Warmed {
                            clusters,
                            worker_ms,
                        },
                    ),
                    Some(Warmed::PathTable(worker_ms)) => {
                        post(&me.scope, &Response::PathTableMade { worker_ms })
                    }
                    None => {}
                }
                if !state.borrow().warming() {
                    me.tell(&state.borrow());
                    return;
                }
                if now() >= deadline {
                    me.tell(&state.borrow());
                    me.schedule(0);
                    return;
                }
            }
        });
        *warmer.run.borrow_mut() = Some(run);
        warmer
    }

    /// Tells the page what is being prepared when that changed, or moved
    /// on by a step of [`TELL_EVERY`] (not after every run: a message each
    /// 8 ms would keep the page's main thread busy for nothing).
    fn tell(&self, state: &WorkerState) {
        let now = state.preparing();
        let what = now.as_ref().map(|p| p.what.clone());
        let done = now.as_ref().map_or(1.0, |p| p.done);
        let mut told = self.told.borrow_mut();
        if told.0 == what && (done - told.1).abs() < TELL_EVERY {
            return;
        }
        *told = (what.clone(), done);
        post(&self.scope, &Response::Preparing { what, done });
    }

    /// Runs the next steps in `ms` milliseconds, unless a request comes first.
    fn schedule(&self, ms: i32) {
        self.cancel();
        if let Some(run) = self.run.borrow().as_ref() {
            if let Ok(handle) = self
                .scope
                .set_timeout_with_callback_and_timeout_and_arguments_0(
                    run.as_ref().unchecked_ref(),
                    ms,
                )
            {
                self.timer.set(Some(handle));
            }
        }
    }

    /// Drops the pending run: a request is being answered.
    fn cancel(&self) {
        if let Some(handle) = self.timer.take() {
            self.scope.clear_timeout_with_handle(handle);
        }
    }
}

/// `performance.now()` in the worker.
fn now() -> f64 {
    js_sys::global()
        .unchecked_into::<web_sys::WorkerGlobalScope>()
        .performance()
        .map_or(0.0, |p| p.now())
}

/// Milliseconds since the epoch, as precise as `performance.now()`.
fn epoch_ms() -> f64 {
    js_sys::global()
        .unchecked_into::<web_sys::WorkerGlobalScope>()
        .performance()
        .map_or(0.0, |p| p.time_origin() + p.now())
}

/// Posts `[json, numbers | null]`, the numbers' buffer transferred.
fn post(scope: &DedicatedWorkerGlobalScope, r: &Response) {
    if let Ok((json, numbers)) = encode(r) {
        post_with_numbers(scope, &json, numbers.as_deref());
    }
}
