//! Arguments as JavaScript passes them, checked in the caller's names.
//!
//! Every exported function takes its arguments as `JsValue` and reads them
//! here, so a wrong type is one message naming the function, the argument
//! as `moeplan_wasm.d.ts` declares it and what it expected — never
//! wasm-bindgen's glue failing inside (`unwrap_throw` on a `None`), and
//! never a Rust type name. Messages from the core pass through [`message`],
//! which writes the registry's option names as JavaScript spells them.

use js_sys::{Array, ArrayBuffer, Object, Uint8Array};
use moeplan_view::closest;
use wasm_bindgen::{JsCast, JsValue};

use crate::names::camel_case;

/// What JavaScript would call `v`'s type, for "got …".
pub(crate) fn kind(v: &JsValue) -> &'static str {
    if v.is_undefined() {
        "undefined"
    } else if v.is_null() {
        "null"
    } else if v.is_string() {
        "a string"
    } else if v.as_f64().is_some() {
        "a number"
    } else if v.as_bool().is_some() {
        "a boolean"
    } else if Array::is_array(v) {
        "an array"
    } else if v.is_function() {
        "a function"
    } else {
        "an object"
    }
}

/// The one place a message becomes a JavaScript error: the registry's
/// `snake_case` option names written as the caller writes them.
pub(crate) fn error(message: impl std::fmt::Display) -> js_sys::Error {
    js_sys::Error::new(&message_in_js(&message.to_string()))
}

/// `message` with every registry option name (`replicas_per_gpu`) in
/// camelCase (`replicasPerGpu`).
pub(crate) fn message_in_js(message: &str) -> String {
    let mut out = message.to_string();
    for o in moeplan::planners::all_options() {
        if o.name.contains('_') {
            out = replace_word(&out, o.name, &camel_case(o.name));
        }
    }
    out
}

/// `text` with `word` replaced where it stands as a whole word.
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(word) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + word.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(is_word) || after.is_some_and(is_word) {
            out.push_str(word);
        } else {
            out.push_str(by);
        }
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}

/// "did you mean `x`?" after an unknown `name` among `known`, or nothing.
pub(crate) fn suggestion<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, known)
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

/// A trace's bytes: a `Uint8Array`, an `ArrayBuffer` or an array of
/// numbers 0–255. `call` and `name` say where, in the caller's words.
pub(crate) fn bytes(call: &str, name: &str, v: &JsValue) -> Result<Vec<u8>, js_sys::Error> {
    if let Some(a) = v.dyn_ref::<Uint8Array>() {
        return Ok(a.to_vec());
    }
    if let Some(b) = v.dyn_ref::<ArrayBuffer>() {
        return Ok(Uint8Array::new(b).to_vec());
    }
    if Array::is_array(v) {
        return Array::from(v)
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_f64()
                    .filter(|f| f.fract() == 0.0 && (0.0..=255.0).contains(f))
                    .map(|f| f as u8)
                    .ok_or_else(|| {
                        error(format!(
                            "{call}: `{name}[{i}]` must be a byte (a whole number from 0 to 255), got {}",
                            kind(&x)
                        ))
                    })
            })
            .collect();
    }
    // a settings object where the bytes go: the arguments swapped
    let swapped = v.is_object()
        && ["nodes", "gpusPerNode", "algorithm"]
            .iter()
            .any(|k| js_sys::Reflect::has(v, &JsValue::from_str(k)).unwrap_or(false));
    Err(error(format!(
        "{call}: `{name}` must be a Uint8Array, ArrayBuffer or number[] (the trace file's bytes), got {}{}",
        kind(v),
        if swapped {
            "; it looks like the settings: they go second, plan(trace, settings)"
        } else {
            ""
        }
    )))
}

/// A plain object (the settings), as JSON text so serde sees every key.
pub(crate) fn object(
    call: &str,
    name: &str,
    v: &JsValue,
    example: &str,
) -> Result<String, js_sys::Error> {
    let plain = v.is_object()
        && !Array::is_array(v)
        && !v.is_function()
        && !v.is_instance_of::<Uint8Array>();
    if !plain {
        return Err(error(format!(
            "{call}: `{name}` must be an object such as {example}, got {}",
            kind(v)
        )));
    }
    Ok(js_sys::JSON::stringify(v)
        .map_err(|_| {
            error(format!(
                "{call}: `{name}` cannot be read as JSON (a cycle or a BigInt)"
            ))
        })?
        .into())
}

/// The keys of a plain object, in order.
pub(crate) fn keys(v: &JsValue) -> Vec<String> {
    v.dyn_ref::<Object>()
        .map(|o| {
            Object::keys(o)
                .iter()
                .filter_map(|k| k.as_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A whole number at most `max`; `undefined` or `null` is `None` when
/// `optional` (what the `.d.ts` writes `?`).
pub(crate) fn count(
    call: &str,
    name: &str,
    v: &JsValue,
    optional: bool,
    max: usize,
) -> Result<Option<usize>, js_sys::Error> {
    if optional && (v.is_undefined() || v.is_null()) {
        return Ok(None);
    }
    v.as_f64()
        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max as f64)
        .map(|f| Some(f as usize))
        .ok_or_else(|| {
            error(format!(
                "{call}: `{name}` must be a whole number from 0 to {max}{}, got {}",
                if optional { " or undefined" } else { "" },
                shown(v)
            ))
        })
}

/// A string; `undefined` or `null` is `None` when `optional`.
pub(crate) fn string(
    call: &str,
    name: &str,
    v: &JsValue,
    optional: bool,
    what: &str,
) -> Result<Option<String>, js_sys::Error> {
    if optional && (v.is_undefined() || v.is_null()) {
        return Ok(None);
    }
    v.as_string().map(Some).ok_or_else(|| {
        error(format!(
            "{call}: `{name}` must be a string ({what}){}, got {}",
            if optional { " or undefined" } else { "" },
            kind(v)
        ))
    })
}

/// `v` as the message shows it: a number or string itself, else its kind.
fn shown(v: &JsValue) -> String {
    if let Some(f) = v.as_f64() {
        return f.to_string();
    }
    if let Some(s) = v.as_string() {
        return format!("the string {s:?}");
    }
    kind(v).to_string()
}
