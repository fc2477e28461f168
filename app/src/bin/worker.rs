//! The planning web worker: receives `[json, bytes | null]` messages from the
//! page, plans with [`moeplan_app::worker::WorkerState`], posts progress and
//! answers back as `[json, Float64Array | null]` (a view's numbers in one
//! transferred typed array, see [`moeplan_app::protocol`]). Runs everything
//! that can take longer than a frame, so the page never freezes.
//!
//! A panic is a bug (user input never panics the core), and in wasm it
//! aborts: the panic hook logs it, posts [`Response::Crashed`] so the page
//! can say what happened, and the wasm then traps, which the page also sees
//! as the worker's `error` event. Either way the page starts a fresh worker
//! with its previous trace (see `ui.rs`).

use std::cell::RefCell;
use std::rc::Rc;

use moeplan_app::protocol::{Request, Response, encode};
use moeplan_app::worker::WorkerState;
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
    let post_scope = scope.clone();
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
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
    });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&scope, &Response::Ready);
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
