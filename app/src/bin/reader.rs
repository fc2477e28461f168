//! The reader web worker: the planning worker starts it when a request
//! carries files, waits for its [`READER_READY`] (a message posted before
//! its wasm listens would be lost), posts it `[json ReadAsk, bytes]`, and
//! stops it once it
//! has answered `[json ReadAnswer, Float64Array | null]` (see
//! [`moeplan_app::reader`]). It holds the format readers, so the planning
//! worker does not, and the page loads them only when a file is read.
//!
//! A refused file is an `Err` answer. A panic is a bug: the hook logs it
//! and answers with its message before the wasm traps; running out of
//! memory traps with no message, which the planning worker sees as this
//! worker's `error` event. Either way the planning worker keeps its trace.

use moeplan_app::protocol::post_with_numbers;
use moeplan_app::reader::{READER_READY, ReadAnswer, ReadAsk, pack, read};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

fn main() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        answer(
            &Err(format!("the file reader stopped (a bug: {info})")),
            None,
        );
    }));
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let data = js_sys::Array::from(&ev.data());
        let text = data.get(0).as_string().unwrap_or_default();
        let bytes = data
            .get(1)
            .dyn_into::<js_sys::Uint8Array>()
            .map(|a| a.to_vec())
            .unwrap_or_default();
        let read = serde_json::from_str::<ReadAsk>(&text)
            .map_err(|e| format!("bad request from the planning worker: {e}"))
            .and_then(|ask| read(&ask, &bytes));
        drop(bytes);
        match read {
            Ok(traces) => {
                let (headers, counts) = pack(&traces);
                drop(traces);
                answer(&Ok(headers), Some(&counts));
            }
            Err(message) => answer(&Err(message), None),
        }
    });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post_with_numbers(&scope, READER_READY, None);
}

/// Posts `[json, counts | null]`, the counts' buffer transferred.
fn answer(a: &ReadAnswer, counts: Option<&[f64]>) {
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    if let Ok(json) = serde_json::to_string(a) {
        post_with_numbers(&scope, &json, counts);
    }
}
