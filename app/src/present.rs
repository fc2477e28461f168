//! What a presenter needs: bundled scenarios one click (or key) apart,
//! keyboard shortcuts for the budget and the cluster, a presenter view that
//! reads on a projector, a link to the current view, and each chart as a
//! standalone SVG or PNG for slides and papers.
//!
//! Every change goes through the page's own paths (handed over as
//! [`Actions`]): a key that moves the budget does what the slider does, one
//! that changes the cluster what the cluster fields do, so the URL hash,
//! the timings and the worker's diffs behave the same whichever way a change
//! came.
//!
//! The exported SVG carries its styles inline (each element's computed
//! fill, stroke and font, copied from the page), so it looks the same
//! outside the page; nothing is fetched, fonts included.

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::board::Board;
use crate::scenarios::{SCENARIOS, paper_line};
use crate::settings::Settings;

/// What the page lends the presenter: its own paths for each change.
#[derive(Clone, Copy)]
pub struct Actions {
    /// The slider's path: a budget in replicas per GPU, `None` = automatic.
    pub set_budget: Callback<Option<usize>>,
    /// The cluster fields' path: re-plans for the cluster the settings hold.
    pub cluster_changed: Callback<()>,
    /// Takes every setting at once and generates the trace they name.
    pub apply: Callback<Settings>,
}

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// Budget to the next point of the curve up (`true`) or down.
    Budget(bool),
    /// Automatic budget on or off.
    Auto,
    /// GPUs per node doubled (`true`) or halved.
    Gpus(bool),
    /// Nodes doubled or halved.
    Nodes(bool),
    /// Scenario number (from 0).
    Scenario(usize),
    /// Presenter view on or off.
    Presenter,
    /// The list of keys shown or hidden.
    Help,
}

/// The keys, as shown in the page's list.
pub const KEYS: [(&str, &str); 7] = [
    (
        "] [",
        "budget up / down, along the curve's points (also + −)",
    ),
    ("a", "automatic budget on / off (the curve's knee)"),
    ("g G", "GPUs per node ×2 / ÷2"),
    ("n N", "nodes ×2 / ÷2"),
    ("1 – 6", "scenarios"),
    ("p", "presenter view (large type for a projector)"),
    ("?", "this list"),
];

/// The action of a key (`KeyboardEvent.key`), if it has one.
///
/// ```
/// use moeplan_app::present::{Key, key_action};
/// assert_eq!(key_action("]"), Some(Key::Budget(true)));
/// assert_eq!(key_action("-"), Some(Key::Budget(false)));
/// assert_eq!(key_action("G"), Some(Key::Gpus(false)));
/// assert_eq!(key_action("2"), Some(Key::Scenario(1)));
/// assert_eq!(key_action("x"), None);
/// ```
pub fn key_action(key: &str) -> Option<Key> {
    Some(match key {
        "]" | "+" | "=" => Key::Budget(true),
        "[" | "-" | "_" => Key::Budget(false),
        "a" | "A" => Key::Auto,
        "g" => Key::Gpus(true),
        "G" => Key::Gpus(false),
        "n" => Key::Nodes(true),
        "N" => Key::Nodes(false),
        "p" | "P" => Key::Presenter,
        "?" => Key::Help,
        _ => {
            let n = key.parse::<usize>().ok()?;
            (1..=SCENARIOS.len())
                .contains(&n)
                .then(|| Key::Scenario(n - 1))?
        }
    })
}

/// The next budget from `r` up or down: the next of the curve's points
/// (`points`, ascending), or one step when there is no curve; `None` at the
/// end of the curve.
///
/// ```
/// use moeplan_app::present::step_budget;
/// let pts = [0, 1, 2, 4, 8, 16];
/// assert_eq!(step_budget(&pts, 4, true), Some(8));
/// assert_eq!(step_budget(&pts, 5, false), Some(4));
/// assert_eq!(step_budget(&pts, 16, true), None);
/// assert_eq!(step_budget(&pts, 0, false), None);
/// assert_eq!(step_budget(&[], 3, false), Some(2));
/// ```
pub fn step_budget(points: &[usize], r: usize, up: bool) -> Option<usize> {
    if points.is_empty() {
        return if up {
            r.checked_add(1)
        } else {
            r.checked_sub(1)
        };
    }
    if up {
        points.iter().copied().find(|&p| p > r)
    } else {
        points.iter().rev().copied().find(|&p| p < r)
    }
}

/// A cluster count doubled or halved, within the fields' 1 to 4096; `None`
/// when it would not change.
///
/// ```
/// use moeplan_app::present::step_count;
/// assert_eq!(step_count(8, true), Some(16));
/// assert_eq!(step_count(3, false), Some(1));
/// assert_eq!(step_count(1, false), None);
/// assert_eq!(step_count(4096, true), None);
/// ```
pub fn step_count(v: usize, up: bool) -> Option<usize> {
    let next = if up {
        v.saturating_mul(2).min(4096)
    } else {
        (v / 2).max(1)
    };
    (next != v).then_some(next)
}

/// A file-name piece from a chart's label (`CRAFT balancedness …` →
/// `craft-balancedness-…`).
///
/// ```
/// assert_eq!(moeplan_app::present::slug("GPU by layer load"), "gpu-by-layer-load");
/// assert_eq!(moeplan_app::present::slug(" R = 4 · x "), "r-4-x");
/// ```
pub fn slug(label: &str) -> String {
    let mut s = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.is_empty() && !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_end_matches('-').chars().take(60).collect()
}

/// The "Scenarios" and "Share" sections of the controls, and the keys.
#[component]
pub fn Present(settings: RwSignal<Settings>, board: Board, actions: Actions) -> impl IntoView {
    let root = NodeRef::<leptos::html::Section>::new();
    let note = RwSignal::new(String::new());
    let help = RwSignal::new(false);
    let presenting = RwSignal::new(false);
    // The link, shown to copy by hand where the clipboard is out of reach.
    let fallback = RwSignal::new(None::<String>);
    let figures = RwSignal::new(Vec::<(String, String)>::new());
    let chosen = RwSignal::new(String::new());

    // The scenario applied last (or whose link opened the page), shown
    // while its trace and cluster are on the page.
    let applied = RwSignal::new(
        settings.with_untracked(|s| SCENARIOS.iter().position(|sc| sc.settings() == *s)),
    );
    let apply = move |i: usize| {
        if let Some(sc) = SCENARIOS.get(i) {
            applied.set(Some(i));
            actions.apply.run(sc.settings());
            note.set(String::new());
        }
    };
    let active = Memo::new(move |_| {
        let i = applied.get()?;
        let sc = SCENARIOS.get(i)?;
        settings.with(|s| sc.matches(s)).then_some(i)
    });

    // The active paper scenario's comparison with its paper, from the
    // figures shown (until both rows are priced, nothing).
    let paper = Memo::new(move |_| {
        let sc = SCENARIOS.get(active.get()?)?;
        board
            .plans
            .with(|plans| paper_line(sc.paper.as_ref()?, plans))
    });

    // The presenter class goes on the app's own root (the page's body, or
    // an embedding's host element): the header and main both follow it.
    Effect::new(move |_| {
        let on = presenting.get();
        if let Some(host) = root.get().and_then(|r| app_host(&r)) {
            let _ = host.class_list().toggle_with_force("presenter", on);
        }
    });

    // The figures to export: refreshed when the set of charts may change,
    // once the page has drawn them. Any new frame may (a planner's row
    // appears or goes with the trace and cluster — Libra's, for one), so
    // each is followed, not only the first.
    let shape = Memo::new(move |_| {
        (
            board.frame.with(|f| f.as_ref().map(|f| f.plans.len())),
            board.grouping.with(Option::is_some),
        )
    });
    let refresh = move || {
        let list = root
            .get_untracked()
            .map(|r| chart_list(&r))
            .unwrap_or_default();
        if !list.iter().any(|(s, _)| *s == chosen.get_untracked()) {
            chosen.set(list.first().map(|(s, _)| s.clone()).unwrap_or_default());
        }
        if figures.with_untracked(|f| *f != list) {
            figures.set(list);
        }
    };
    Effect::new(move |_| {
        shape.track();
        // The charts appear once the page has rendered the answer, which
        // may take a while (every plan's series, Libra's per batch): look
        // again a few times; opening the menu looks again too.
        for ms in [0.0, 100.0, 400.0, 1500.0, 3000.0, 6000.0] {
            later(ms, refresh);
        }
    });

    let step_budget_key = move |up: bool| {
        let r = settings
            .with_untracked(|s| s.replicas_per_gpu)
            .unwrap_or_else(|| board.replicas_per_gpu.get_untracked());
        let points: Vec<usize> = board.frame.with_untracked(|f| {
            f.as_ref()
                .map(|f| f.curve.iter().map(|p| p.replicas_per_gpu).collect())
                .unwrap_or_default()
        });
        if let Some(next) = step_budget(&points, r, up) {
            actions.set_budget.run(Some(next));
        }
    };
    let step_cluster = move |gpus: bool, up: bool| {
        let v = settings.with_untracked(|s| if gpus { s.gpus_per_node } else { s.nodes });
        if let Some(next) = step_count(v, up) {
            settings.update(|s| {
                if gpus {
                    s.gpus_per_node = next
                } else {
                    s.nodes = next
                }
            });
            actions.cluster_changed.run(());
        }
    };
    let toggle_auto = move || {
        let auto = settings.with_untracked(|s| s.replicas_per_gpu.is_none());
        actions.set_budget.run(if auto {
            Some(board.replicas_per_gpu.get_untracked())
        } else {
            None
        });
    };

    let handle = window_event_listener(leptos::ev::keydown, move |ev: web_sys::KeyboardEvent| {
        if ev.default_prevented() || ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
            return;
        }
        let Some(key) = key_action(&ev.key()) else {
            return;
        };
        let target = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok());
        if target.as_ref().is_some_and(typing_in) {
            return;
        }
        // Embedded in a docs page, the keys belong to the page unless the
        // reader is inside this planner.
        if embedded() {
            let inside = root
                .get_untracked()
                .and_then(|r| app_host(&r))
                .zip(target.as_ref())
                .is_some_and(|(host, t)| host.contains(Some(t)));
            if !inside {
                return;
            }
        }
        ev.prevent_default();
        match key {
            Key::Budget(up) => step_budget_key(up),
            Key::Auto => toggle_auto(),
            Key::Gpus(up) => step_cluster(true, up),
            Key::Nodes(up) => step_cluster(false, up),
            Key::Scenario(i) => apply(i),
            Key::Presenter => presenting.update(|p| *p = !*p),
            Key::Help => help.update(|h| *h = !*h),
        }
    });
    on_cleanup(move || handle.remove());

    let copy_link = move |_| {
        let url = format!(
            "{}{}",
            page_address(),
            settings.with_untracked(Settings::to_hash)
        );
        note.set(String::new());
        wasm_bindgen_futures::spawn_local(async move {
            if write_clipboard(&url).await {
                fallback.set(None);
                note.set("link copied".into());
                return;
            }
            // No clipboard (a file:// page, a refused permission): the link
            // in a field, selected, for Ctrl+C.
            fallback.set(Some(url));
            later(0.0, move || {
                let copied = root
                    .get_untracked()
                    .and_then(|r| r.query_selector("#share-link").ok().flatten())
                    .and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok())
                    .is_some_and(|input| {
                        input.select();
                        exec_copy()
                    });
                note.set(if copied {
                    "link copied".into()
                } else {
                    "the clipboard is out of reach here: the link is selected, press Ctrl+C".into()
                });
            });
        });
    };

    let export = move |png: bool| {
        refresh();
        let slug = chosen.get_untracked();
        let Some(r) = root.get_untracked() else {
            return;
        };
        let found = charts_of(&r).into_iter().find(|(s, _, _)| *s == slug);
        let Some((slug, caption, svg)) = found else {
            note.set("that figure is not on the page now".into());
            return;
        };
        let desc = format!(
            "moeplan, {}",
            settings
                .with_untracked(Settings::to_hash)
                .trim_start_matches('#')
        );
        let Some((text, w, h)) = standalone_svg(&svg, &caption, &desc) else {
            note.set("this browser could not serialise the chart".into());
            return;
        };
        let name = format!("moeplan-{slug}");
        if png {
            to_png(text, w, h, format!("{name}.png"), note);
        } else {
            match blob(&text, "image/svg+xml") {
                Some(b) => {
                    download_blob(&format!("{name}.svg"), &b);
                    note.set(format!("saved {name}.svg"));
                }
                None => note.set("this browser could not make the file".into()),
            }
        }
    };

    view! {
        <section id="present" node_ref=root>
            <div class="scenario-block">
                <h2>"Scenarios"</h2>
                <div class="scenarios">
                    {SCENARIOS.iter().enumerate().map(|(i, sc)| view! {
                        <button id=format!("scenario-{}", sc.id) title=sc.what
                            aria-keyshortcuts=(i + 1).to_string()
                            class:active=move || active.get() == Some(i)
                            on:click=move |_| apply(i)>
                            <kbd>{(i + 1).to_string()}</kbd>" "{sc.title}
                        </button>
                    }).collect_view()}
                </div>
                <p class="scenario-note" id="scenario-note">
                    {move || active.get().and_then(|i| SCENARIOS.get(i)).map(|sc| sc.what)}
                </p>
                <p class="scenario-paper" id="scenario-paper">{move || paper.get().unwrap_or_default()}</p>
            </div>
            <div class="share-block">
                <h2>"Share"</h2>
                <button id="copy-link" on:click=copy_link>"Copy link"</button>
                <button id="presenter-toggle" aria-keyshortcuts="p"
                    aria-pressed=move || presenting.get().to_string()
                    on:click=move |_| presenting.update(|p| *p = !*p)>
                    {move || if presenting.get() { "Normal view" } else { "Presenter view" }}
                </button>
                {move || fallback.get().map(|url| view! {
                    <input id="share-link" class="share-link" type="text" readonly prop:value=url
                        on:focus=|ev| { let i: web_sys::HtmlInputElement = event_target(&ev); i.select(); }/>
                })}
                <div class="export">
                    <label for="export-figure">"Chart for slides"</label>
                    <select id="export-figure" on:focus=move |_| refresh() on:pointerdown=move |_| refresh()
                        prop:value=move || chosen.get()
                        on:change=move |ev| chosen.set(event_target_value(&ev))>
                        {move || figures.get().into_iter().map(|(slug, caption)| {
                            let selected = slug == chosen.get_untracked();
                            view! { <option value=slug selected=selected>{caption}</option> }
                        }).collect_view()}
                    </select>
                    <button id="export-svg" on:click=move |_| export(false)>"SVG"</button>
                    <button id="export-png" on:click=move |_| export(true)>"PNG"</button>
                </div>
                <p class="hint" id="present-note" role="status" aria-live="polite">{move || note.get()}</p>
            </div>
            <div class="keys-block">
                <p class="hint shortcuts" id="shortcuts">
                    "Keys: "<kbd>"["</kbd>" "<kbd>"]"</kbd>" budget · "<kbd>"a"</kbd>" automatic · "
                    <kbd>"g"</kbd>" "<kbd>"G"</kbd>" GPUs per node · "<kbd>"1"</kbd>"–"<kbd>"6"</kbd>" scenarios · "
                    <kbd>"p"</kbd>" presenter · "<kbd>"?"</kbd>" all keys"
                </p>
                <Show when=move || help.get()>
                    <dl class="keys" id="shortcut-list">
                        {KEYS.iter().map(|(k, what)| view! { <dt><kbd>{*k}</kbd></dt><dd>{*what}</dd> }).collect_view()}
                    </dl>
                </Show>
            </div>
        </section>
    }
}

/// Runs `f` once after `ms` milliseconds.
fn later(ms: f64, f: impl FnOnce() + 'static) {
    let callback = Closure::once_into_js(f);
    if let Some(w) = web_sys::window() {
        let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(
            callback.unchecked_ref(),
            ms as i32,
        );
    }
}

/// The element the app is mounted in: `<main>`'s parent.
fn app_host(inside: &web_sys::Element) -> Option<web_sys::Element> {
    inside.closest("main").ok().flatten()?.parent_element()
}

/// The page runs inside a host page (`globalThis.moeplanEmbed`).
fn embedded() -> bool {
    js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("moeplanEmbed"))
        .ok()
        .is_some_and(|v| v.is_truthy())
}

/// A key pressed here is text, not a command.
fn typing_in(el: &web_sys::Element) -> bool {
    match el.tag_name().to_ascii_lowercase().as_str() {
        "textarea" | "select" => true,
        "input" => !matches!(
            el.get_attribute("type")
                .unwrap_or_default()
                .to_ascii_lowercase()
                .as_str(),
            "range" | "checkbox" | "radio" | "button" | "submit" | "file"
        ),
        _ => el
            .dyn_ref::<web_sys::HtmlElement>()
            .is_some_and(|h| h.is_content_editable()),
    }
}

/// The page's address without its hash.
fn page_address() -> String {
    let href = web_sys::window()
        .and_then(|w| w.location().href().ok())
        .unwrap_or_default();
    match href.split_once('#') {
        Some((base, _)) => base.to_string(),
        None => href,
    }
}

/// `navigator.clipboard.writeText(text)`; `false` where there is no
/// clipboard or it refuses.
async fn write_clipboard(text: &str) -> bool {
    let get = |o: &JsValue, k: &str| js_sys::Reflect::get(o, &JsValue::from_str(k)).ok();
    let Some(clipboard) = get(&js_sys::global(), "navigator")
        .and_then(|n| get(&n, "clipboard"))
        .filter(|c| c.is_object())
    else {
        return false;
    };
    let Some(write) =
        get(&clipboard, "writeText").and_then(|f| f.dyn_into::<js_sys::Function>().ok())
    else {
        return false;
    };
    let Ok(promise) = write.call1(&clipboard, &JsValue::from_str(text)) else {
        return false;
    };
    let Ok(promise) = promise.dyn_into::<js_sys::Promise>() else {
        return false;
    };
    wasm_bindgen_futures::JsFuture::from(promise).await.is_ok()
}

/// `document.execCommand("copy")` on the selection (the old way, which
/// still works where the clipboard API is withheld, as on `file://`).
fn exec_copy() -> bool {
    let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
        return false;
    };
    js_sys::Reflect::get(&doc, &JsValue::from_str("execCommand"))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .and_then(|f| f.call1(&doc, &JsValue::from_str("copy")).ok())
        .is_some_and(|v| v.is_truthy())
}

/// The app's charts: (file-name slug, caption, the `<svg>`), in page order.
fn charts_of(inside: &web_sys::Element) -> Vec<(String, String, web_sys::Element)> {
    let Some(main) = inside.closest("main").ok().flatten() else {
        return Vec::new();
    };
    let Ok(list) = main.query_selector_all("figure svg.chart") else {
        return Vec::new();
    };
    let mut out: Vec<(String, String, web_sys::Element)> = Vec::new();
    for i in 0..list.length() {
        let Some(svg) = list
            .item(i)
            .and_then(|n| n.dyn_into::<web_sys::Element>().ok())
        else {
            continue;
        };
        let label = svg.get_attribute("aria-label").unwrap_or_default();
        let mut slug = slug(&label);
        if slug.is_empty() || out.iter().any(|(s, _, _)| *s == slug) {
            slug = format!("chart-{}", i + 1);
        }
        let caption = svg
            .closest("figure")
            .ok()
            .flatten()
            .and_then(|f| f.query_selector("figcaption").ok().flatten())
            .and_then(|c| c.text_content())
            .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| label.clone());
        out.push((slug, caption, svg));
    }
    out
}

/// The export menu's entries: (slug, a short caption).
fn chart_list(inside: &web_sys::Element) -> Vec<(String, String)> {
    charts_of(inside)
        .into_iter()
        .map(|(slug, caption, _)| {
            let short: String = caption.chars().take(70).collect();
            let short = if short.len() < caption.len() {
                format!("{short}…")
            } else {
                short
            };
            (slug, short)
        })
        .collect()
}

const SVG_NS: &str = "http://www.w3.org/2000/svg";

/// The computed styles an exported chart keeps (the page's CSS classes do
/// not travel with the file).
const KEPT_STYLES: [&str; 12] = [
    "fill",
    "fill-opacity",
    "stroke",
    "stroke-width",
    "stroke-dasharray",
    "stroke-opacity",
    "opacity",
    "visibility",
    "font-family",
    "font-size",
    "font-weight",
    "text-anchor",
];

/// The chart as a standalone SVG file (styles inline, size, a white
/// background, a title and a description), with its width and height.
fn standalone_svg(svg: &web_sys::Element, title: &str, desc: &str) -> Option<(String, f64, f64)> {
    let window = web_sys::window()?;
    let doc = window.document()?;
    let copy: web_sys::Element = svg.clone_node_with_deep(true).ok()?.dyn_into().ok()?;
    let originals = svg.query_selector_all("*").ok()?;
    let copies = copy.query_selector_all("*").ok()?;
    let mut pairs = vec![(svg.clone(), copy.clone())];
    for i in 0..originals.length().min(copies.length()) {
        let a = originals.item(i).and_then(|n| n.dyn_into().ok());
        let b = copies.item(i).and_then(|n| n.dyn_into().ok());
        if let (Some(a), Some(b)) = (a, b) {
            pairs.push((a, b));
        }
    }
    for (original, copied) in &pairs {
        let Ok(Some(style)) = window.get_computed_style(original) else {
            continue;
        };
        let mut css = String::new();
        for p in KEPT_STYLES {
            let v = style.get_property_value(p).unwrap_or_default();
            if !v.is_empty() {
                css.push_str(&format!("{p}:{v};"));
            }
        }
        let _ = copied.set_attribute("style", &css);
    }
    let (w, h) = view_box(svg)?;
    let _ = copy.set_attribute("width", &w.to_string());
    let _ = copy.set_attribute("height", &h.to_string());
    let _ = copy.remove_attribute("class");
    let add = |tag: &str| doc.create_element_ns(Some(SVG_NS), tag).ok();
    let background = add("rect")?;
    for (k, v) in [
        ("x", "0".to_string()),
        ("y", "0".into()),
        ("width", w.to_string()),
        ("height", h.to_string()),
        ("fill", "#fff".into()),
    ] {
        let _ = background.set_attribute(k, &v);
    }
    let title_el = add("title")?;
    title_el.set_text_content(Some(title));
    let desc_el = add("desc")?;
    desc_el.set_text_content(Some(desc));
    let first = copy.first_child();
    for el in [&title_el, &desc_el, &background] {
        copy.insert_before(el, first.as_ref()).ok()?;
    }
    let xml = web_sys::XmlSerializer::new()
        .ok()?
        .serialize_to_string(&copy)
        .ok()?
        // Leptos marks its places with empty comments: not the chart's.
        .replace("<!---->", "");
    Some((
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{xml}\n"),
        w,
        h,
    ))
}

/// The width and height of an SVG's `viewBox`.
fn view_box(svg: &web_sys::Element) -> Option<(f64, f64)> {
    let vb = svg.get_attribute("viewBox")?;
    let nums: Vec<f64> = vb
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    match nums[..] {
        [_, _, w, h] if w > 0.0 && h > 0.0 => Some((w, h)),
        _ => None,
    }
}

/// `text` as a blob of type `mime`.
pub(crate) fn blob(text: &str, mime: &str) -> Option<web_sys::Blob> {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts).ok()
}

/// Offers `blob` as a download named `name` (the page's exports too).
pub(crate) fn download_blob(name: &str, blob: &web_sys::Blob) {
    let Ok(url) = web_sys::Url::create_object_url_with_blob(blob) else {
        return;
    };
    if let Some(doc) = web_sys::window().and_then(|w| w.document()) {
        if let Ok(a) = doc.create_element("a") {
            let a: web_sys::HtmlAnchorElement = a.unchecked_into();
            a.set_href(&url);
            a.set_download(name);
            a.click();
        }
    }
    // The download has started from the URL by then.
    later(1000.0, move || {
        let _ = web_sys::Url::revoke_object_url(&url);
    });
}

/// Draws the SVG at twice its size into a canvas and downloads it as PNG.
fn to_png(svg: String, w: f64, h: f64, name: String, note: RwSignal<String>) {
    let fail = move || note.set("this browser could not draw the chart as PNG".into());
    let Some(b) = blob(&svg, "image/svg+xml") else {
        return fail();
    };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&b) else {
        return fail();
    };
    let Ok(img) = web_sys::HtmlImageElement::new() else {
        return fail();
    };
    let drawn = img.clone();
    let src = url.clone();
    let on_load = Closure::once_into_js(move || {
        let _ = web_sys::Url::revoke_object_url(&src);
        let canvas = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.create_element("canvas").ok())
            .and_then(|c| c.dyn_into::<web_sys::HtmlCanvasElement>().ok());
        let Some(canvas) = canvas else {
            return fail();
        };
        canvas.set_width((w * 2.0).round() as u32);
        canvas.set_height((h * 2.0).round() as u32);
        let ctx = canvas
            .get_context("2d")
            .ok()
            .flatten()
            .and_then(|c| c.dyn_into::<web_sys::CanvasRenderingContext2d>().ok());
        let Some(ctx) = ctx else {
            return fail();
        };
        if ctx
            .draw_image_with_html_image_element_and_dw_and_dh(&drawn, 0.0, 0.0, w * 2.0, h * 2.0)
            .is_err()
        {
            return fail();
        }
        let done =
            Closure::once_into_js(move |png: JsValue| match png.dyn_into::<web_sys::Blob>() {
                Ok(png) => {
                    download_blob(&name, &png);
                    note.set(format!("saved {name}"));
                }
                Err(_) => fail(),
            });
        if canvas
            .to_blob_with_type(done.unchecked_ref(), "image/png")
            .is_err()
        {
            fail();
        }
    });
    let on_error = Closure::once_into_js(fail);
    img.set_onload(Some(on_load.unchecked_ref()));
    img.set_onerror(Some(on_error.unchecked_ref()));
    img.set_src(&url);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_listed() {
        for c in ['[', ']', 'a', 'g', 'G', 'n', 'N', '1', '2', '3', 'p', '?'] {
            let k = key_action(&c.to_string());
            assert!(k.is_some(), "{c}");
            assert!(
                KEYS.iter()
                    .any(|(keys, _)| keys.contains(c) || c.is_ascii_digit()),
                "{c}"
            );
        }
        assert_eq!(key_action("6"), Some(Key::Scenario(5)));
        assert_eq!(key_action("7"), None);
        assert_eq!(key_action("Enter"), None);
        assert_eq!(key_action("0"), None);
    }
}
