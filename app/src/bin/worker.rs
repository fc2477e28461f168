//! The planning web worker: receives `[json, bytes | null]` messages from the
//! page, plans with [`moeplan_app::worker::WorkerState`], posts progress and
//! answers back as `[json, Float64Array | null]` (a view's numbers in one
//! transferred typed array, see [`moeplan_app::protocol`]). Runs everything
//! that can take longer than a frame, so the page never freezes.
//!
//! Between requests it does GRACE's clusterings for the clusters a person is
//! likely to pick next, then Libra's path-table predictions for the trace
//! ([`WorkerState::warm_step`]): only after
//! [`QUIET_MS`] without a request (a slider being dragged never waits on
//! it), in steps of about [`STEP_MS`] from timers, so a request that arrives
//! meanwhile is taken after the current step at most.
//!
//! A panic is a bug (user input never panics the core), and in wasm it
//! aborts: the panic hook logs it, posts [`Response::Crashed`] so the page
//! can say what happened, and the wasm then traps, which the page also sees
//! as the worker's `error` event. Either way the page starts a fresh worker
//! with its previous trace (see `ui.rs`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use moeplan_app::protocol::{Request, Response, encode};
use moeplan_app::worker::{Warmed, WorkerState};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

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
    let warmer = Warmer::new(&scope, &state);
    let post_scope = scope.clone();
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        warmer.cancel();
        let received = epoch_ms();
        let data = js_sys::Array::from(&ev.data());
        let text = data.get(0).as_string().unwrap_or_default();
        let bytes = data
            .get(1)
            .dyn_into::<js_sys::Uint8Array>()
            .ok()
            .map(|a| a.to_vec());
        let post = |r: &Response| post(&post_scope, r);
        let mut response = match serde_json::from_str::<Request>(&text) {
            Ok(req) => {
                let now = || {
                    js_sys::global()
                        .unchecked_into::<web_sys::WorkerGlobalScope>()
                        .performance()
                        .map_or(0.0, |p| p.now())
                };
                let id = req.id;
                state
                    .borrow_mut()
                    .handle(&req, bytes.as_deref(), now, |phase| {
                        post(&Response::Progress {
                            id,
                            phase: phase.to_string(),
                        })
                    })
            }
            Err(e) => Response::Error {
                id: 0,
                message: format!("bad request from the page: {e}"),
            },
        };
        if let Response::View { span, .. } = &mut response {
            *span = (received, epoch_ms());
        }
        post(&response);
        if state.borrow().warming() {
            warmer.schedule(QUIET_MS);
        }
    });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&scope, &Response::Ready);
}

/// Quiet time after a request before work ahead of time starts.
const QUIET_MS: i32 = 250;

/// About how long one run of work ahead of time lasts before it yields to
/// requests (a step may run longer: one layer of one cluster).
const STEP_MS: f64 = 8.0;

/// Runs [`WorkerState::warm_step`] from timers between requests.
#[derive(Clone)]
struct Warmer {
    scope: DedicatedWorkerGlobalScope,
    /// The pending timer, if any.
    timer: Rc<Cell<Option<i32>>>,
    /// The timer's callback; it reschedules itself while work remains.
    run: Rc<RefCell<Option<Tick>>>,
}

/// A timer's callback.
type Tick = Closure<dyn FnMut()>;

impl Warmer {
    fn new(scope: &DedicatedWorkerGlobalScope, state: &Rc<RefCell<WorkerState>>) -> Warmer {
        let warmer = Warmer {
            scope: scope.clone(),
            timer: Rc::new(Cell::new(None)),
            run: Rc::new(RefCell::new(None)),
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
                    return;
                }
                if now() >= deadline {
                    me.schedule(0);
                    return;
                }
            }
        });
        *warmer.run.borrow_mut() = Some(run);
        warmer
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
    let Ok((json, numbers)) = encode(r) else {
        return;
    };
    let json = JsValue::from_str(&json);
    let _ = match numbers {
        Some(xs) => {
            let array = js_sys::Float64Array::new_with_length(xs.len() as u32);
            array.copy_from(&xs);
            let buffer = array.buffer();
            scope.post_message_with_transfer(
                &js_sys::Array::of2(&json, &array),
                &js_sys::Array::of1(&buffer),
            )
        }
        None => scope.post_message(&js_sys::Array::of2(&json, &JsValue::NULL)),
    };
}
