//! The planner page's entry point: mounts the Leptos app on `<body>`, unless
//! the host is a docs page that embeds it (`globalThis.moeplanEmbed` set
//! before the wasm starts, as `www/embed/moeplan-embed.js` does): then
//! nothing mounts until the embed module calls [`mount`] for each element.

use wasm_bindgen::prelude::*;

fn main() {
    console_error_panic_hook::set_once();
    let embedded = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("moeplanEmbed"))
        .is_ok_and(|v| v.is_truthy());
    if !embedded {
        leptos::mount::mount_to_body(moeplan_app::ui::App);
    }
}

/// Mounts one embed into `element` (exported to JavaScript): `options` are
/// its attributes as strings (see `moeplan_app::embed::EmbedOptions`), and
/// `traceFile`, a `File`, when `trace` names one. Bad options show as one
/// line in the element, and are returned as the error.
#[wasm_bindgen]
pub fn mount(element: web_sys::HtmlElement, options: JsValue) -> Result<(), JsValue> {
    moeplan_app::embed::mount(element, &options)
}
