//! The page: controls on the left, figures on the right. All planning
//! happens in the worker (see `bin/worker.rs`); this module only sends
//! requests, draws answers, and times the round trip.

use std::collections::HashMap;

use leptos::prelude::*;
use moeplan::model::PRESETS;
use moeplan::workspace::{Cluster, View};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{MessageEvent, Worker};

use crate::charts;
use crate::protocol::{Request, Response, Source, TraceStatsLite};
use crate::settings::Settings;
use crate::worker::MAX_FILE_BYTES;

/// What the status line says.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    Ready,
    Busy(String),
    Info(String),
    Error(String),
}

/// Which kind of change a request carried, for the timings shown.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Trace,
    Cluster,
    Budget,
    Layer,
    Export,
}

/// Milliseconds from a change to its plan on screen, last of each kind.
#[derive(Debug, Clone, Default, PartialEq)]
struct Timings {
    trace: Option<f64>,
    cluster: Option<f64>,
    budget: Option<f64>,
    /// Of the last budget change: (worker's planning, receipt to frame).
    budget_parts: Option<(f64, f64)>,
    /// Last budget change: input to the DOM holding the new plan.
    budget_dom: Option<f64>,
}

fn now() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

fn location_hash() -> String {
    web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default()
}

fn replace_hash(hash: &str) {
    if let Some(h) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = h.replace_state_with_url(&JsValue::NULL, "", Some(hash));
    }
}

/// Offers `text` as a download named `name`.
fn download(name: &str, text: &str) {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type("application/json");
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts) else {
        return;
    };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else {
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
    let _ = web_sys::Url::revoke_object_url(&url);
}

fn cluster_of(s: &Settings) -> Cluster {
    Cluster {
        nodes: s.nodes,
        gpus_per_node: s.gpus_per_node,
        groups: s.groups,
    }
}

/// The page.
#[component]
pub fn App() -> impl IntoView {
    let settings = RwSignal::new(Settings::from_hash(&location_hash()));
    let view_sig: RwSignal<Option<View>> = RwSignal::new(None);
    let stats: RwSignal<Option<TraceStatsLite>> = RwSignal::new(None);
    let status = RwSignal::new(Status::Busy("starting the planner".into()));
    let timings = RwSignal::new(Timings::default());
    let pending: StoredValue<HashMap<u64, (f64, Kind)>, LocalStorage> =
        StoredValue::new_local(HashMap::new());
    let next_id = StoredValue::new(1u64);
    let shown_id = StoredValue::new(0u64);

    let worker = match Worker::new("./worker_loader.js") {
        Ok(w) => Some(w),
        Err(_) => {
            status.set(Status::Error(
                "this browser cannot start the planning worker".into(),
            ));
            None
        }
    };
    let worker = StoredValue::new_local(worker);
    // Messages wait here until the worker says it is listening.
    let queue: StoredValue<Option<Vec<js_sys::Array>>, LocalStorage> =
        StoredValue::new_local(Some(Vec::new()));
    let post = move |msg: js_sys::Array, bytes: Option<js_sys::Uint8Array>| {
        let queued = queue.try_update_value(|q| match q {
            Some(q) => {
                q.push(msg.clone());
                true
            }
            None => false,
        });
        if queued == Some(true) {
            return;
        }
        worker.with_value(|w| {
            if let Some(w) = w {
                let result = match &bytes {
                    Some(b) => w.post_message_with_transfer(&msg, &js_sys::Array::of1(&b.buffer())),
                    None => w.post_message(&msg),
                };
                if result.is_err() {
                    status.set(Status::Error("could not reach the planning worker".into()));
                }
            }
        });
    };

    // Answers from the worker.
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        let Ok(resp) = serde_json::from_str::<Response>(&text) else {
            return;
        };
        match resp {
            Response::Ready => {
                let waiting = queue
                    .try_update_value(Option::take)
                    .flatten()
                    .unwrap_or_default();
                for msg in waiting {
                    post(msg, None);
                }
            }
            Response::Progress { phase, .. } => status.set(Status::Busy(phase)),
            Response::View {
                id,
                stats: s,
                view,
                worker_ms,
            } => {
                let received = now();
                let started = pending.try_update_value(|p| p.remove(&id)).flatten();
                // A slow answer to an old request never replaces a newer one.
                if id < shown_id.get_value() {
                    return;
                }
                shown_id.set_value(id);
                if let Some(s) = s {
                    stats.set(Some(s));
                }
                view_sig.set(Some(*view));
                status.set(Status::Ready);
                // Timed twice: when the DOM holds the new plan (Leptos renders
                // in microtasks queued by the sets above, so a task queued now
                // runs after them), and at the next animation frame.
                if let Some((t0, Kind::Budget)) = started {
                    wasm_bindgen_futures::spawn_local(async move {
                        let ms = now() - t0;
                        timings.update(|t| t.budget_dom = Some(ms));
                    });
                }
                if let Some((t0, kind)) = started {
                    let done = Closure::once_into_js(move || {
                        let end = now();
                        let ms = end - t0;
                        timings.update(|t| match kind {
                            Kind::Trace => t.trace = Some(ms),
                            Kind::Cluster => t.cluster = Some(ms),
                            Kind::Budget => {
                                t.budget = Some(ms);
                                t.budget_parts = Some((worker_ms, end - received));
                            }
                            Kind::Layer | Kind::Export => {}
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
                pending.update_value(|p| {
                    p.remove(&id);
                });
                download(&file_name, &text);
                status.set(match note {
                    Some(n) => Status::Info(format!("saved {file_name} — {n}")),
                    None => Status::Ready,
                });
            }
            Response::Error { id, message } => {
                pending.update_value(|p| {
                    p.remove(&id);
                });
                status.set(Status::Error(message));
            }
        }
    });
    worker.with_value(|w| {
        if let Some(w) = w {
            w.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        }
    });
    on_message.forget();

    // Sends a request; `bytes` (a file) is transferred, not copied.
    let send = move |kind: Kind,
                     source: Option<Source>,
                     cluster: Option<Cluster>,
                     export: Option<String>,
                     bytes: Option<js_sys::Uint8Array>| {
        let s = settings.get_untracked();
        let id = next_id.get_value();
        next_id.set_value(id + 1);
        let req = Request {
            id,
            source,
            cluster,
            replicas_per_gpu: s.replicas_per_gpu,
            layer: s.layer,
            export,
        };
        let Ok(json) = serde_json::to_string(&req) else {
            return;
        };
        pending.update_value(|p| {
            p.insert(id, (now(), kind));
        });
        if kind != Kind::Budget && kind != Kind::Layer {
            status.set(Status::Busy("planning".into()));
        }
        let msg = js_sys::Array::of2(
            &JsValue::from_str(&json),
            bytes.as_ref().map_or(&JsValue::NULL, |b| b.as_ref()),
        );
        post(msg, bytes);
    };

    let generate = move || {
        let s = settings.get_untracked();
        send(
            Kind::Trace,
            Some(Source::Generate {
                preset: s.preset.clone(),
                batches: s.batches,
                seed: s.seed,
            }),
            Some(cluster_of(&s)),
            None,
            None,
        );
    };
    // The default view: the built-in generator, planned at once.
    generate();

    // Keep the URL hash in step with the settings.
    Effect::new(move |_| replace_hash(&settings.get().to_hash()));

    let load_file = move |file: web_sys::File| {
        let name = file.name();
        if file.size() > MAX_FILE_BYTES as f64 {
            status.set(Status::Error(format!(
                "{name}: {:.0} MiB is more than the {} MiB the page reads",
                file.size() / (1 << 20) as f64,
                MAX_FILE_BYTES >> 20
            )));
            return;
        }
        status.set(Status::Busy(format!("reading {name}")));
        wasm_bindgen_futures::spawn_local(async move {
            match wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await {
                Ok(buf) => {
                    let bytes = js_sys::Uint8Array::new(&buf);
                    let s = settings.get_untracked();
                    send(
                        Kind::Trace,
                        Some(Source::File { name }),
                        Some(cluster_of(&s)),
                        None,
                        Some(bytes),
                    );
                }
                Err(_) => status.set(Status::Error(format!(
                    "{name}: the browser could not read the file"
                ))),
            }
        });
    };

    let on_file = move |ev: leptos::ev::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        if let Some(f) = input.files().and_then(|l| l.get(0)) {
            load_file(f);
        }
        input.set_value("");
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        if let Some(f) = ev
            .data_transfer()
            .and_then(|d| d.files())
            .and_then(|l| l.get(0))
        {
            load_file(f);
        }
    };

    // A numeric cluster field: accepted only as a whole number ≥ 1.
    let cluster_field = move |label: &'static str,
                              id: &'static str,
                              get: fn(&Settings) -> usize,
                              set: fn(&mut Settings, usize)| {
        view! {
            <label for=id>{label}</label>
            <input id=id type="number" min="1" step="1"
                prop:value=move || get(&settings.get()).to_string()
                on:change=move |ev| {
                    match event_target_value(&ev).trim().parse::<usize>() {
                        Ok(v) if (1..=4096).contains(&v) => {
                            settings.update(|s| set(s, v));
                            send(Kind::Cluster, None, Some(cluster_of(&settings.get_untracked())), None, None);
                        }
                        _ => status.set(Status::Error(format!("{label}: a whole number from 1 to 4096"))),
                    }
                }/>
        }
    };

    let max_r = move || {
        view_sig
            .with(|v| {
                v.as_ref()
                    .and_then(|v| v.curve.last().map(|p| p.replicas_per_gpu))
            })
            .unwrap_or(64)
    };
    let set_budget = move |r: Option<usize>| {
        settings.update(|s| s.replicas_per_gpu = r);
        send(Kind::Budget, None, None, None, None);
    };
    let fmt = |x: f64| format!("{x:.4}");
    let gib = move |slots: usize| {
        let bytes = settings.with(|s| s.expert_bytes());
        format!("{:.2}", slots as f64 * bytes as f64 / (1u64 << 30) as f64)
    };

    view! {
        <header>
            <h1>"moeplan"</h1>
            <p class="tagline">"Expert placement and replication for Mixture-of-Experts serving — EPLB, CRAFT, in your browser, offline."</p>
        </header>
        <main>
            <aside class="controls">
                <section>
                    <h2>"Trace"</h2>
                    <div class="drop" on:dragover=|ev: leptos::ev::DragEvent| ev.prevent_default() on:drop=on_drop>
                        <p>"Drop a trace here — SGLang dump (.json, .pt), NumPy (.npy, .npz), vLLM load window, wide or per-rank CSV, moeplan trace — or"</p>
                        <input id="file" type="file" accept=".json,.csv,.txt,.pt,.npy,.npz" on:change=on_file/>
                    </div>
                    <p class="or">"or generate one with a real model's shape:"</p>
                    <label for="preset">"Model"</label>
                    <select id="preset" on:change=move |ev| settings.update(|s| s.preset = event_target_value(&ev))>
                        {PRESETS.iter().map(|p| view! {
                            <option value=p.name selected=move || settings.with(|s| s.preset == p.name)>{p.display}</option>
                        }).collect_view()}
                    </select>
                    <label for="batches">"Batches"</label>
                    <input id="batches" type="number" min="1" max="4096"
                        prop:value=move || settings.with(|s| s.batches.to_string())
                        on:change=move |ev| {
                            match event_target_value(&ev).trim().parse::<usize>() {
                                Ok(b) if (1..=4096).contains(&b) => settings.update(|s| s.batches = b),
                                _ => status.set(Status::Error("Batches: a whole number from 1 to 4096".into())),
                            }
                        }/>
                    <label for="seed">"Seed"</label>
                    <input id="seed" type="number" min="0"
                        prop:value=move || settings.with(|s| s.seed.to_string())
                        on:change=move |ev| {
                            if let Ok(x) = event_target_value(&ev).trim().parse::<u32>() {
                                settings.update(|s| s.seed = x)
                            }
                        }/>
                    <button id="generate" on:click=move |_| generate()>"Generate"</button>
                    {move || stats.get().map(|s| view! {
                        <p class="trace-info" id="trace-info">
                            {format!("{} · {} batch(es) · {} MoE layers × {} experts{}", s.source, s.batches, s.layers, s.experts,
                                s.top_k.map(|k| format!(" · top-{k}")).unwrap_or_default())}
                        </p>
                    })}
                </section>
                <section>
                    <h2>"Cluster"</h2>
                    {cluster_field("Nodes", "nodes", |s| s.nodes, |s, v| s.nodes = v)}
                    {cluster_field("GPUs per node", "gpus", |s| s.gpus_per_node, |s, v| s.gpus_per_node = v)}
                    {cluster_field("EPLB expert groups", "groups", |s| s.groups, |s, v| s.groups = v)}
                </section>
                <section>
                    <h2>"CRAFT budget"</h2>
                    <p class="hint">"R: replicas per GPU, summed over all layers"</p>
                    <input id="budget" type="range" min="0" prop:max=move || max_r().to_string()
                        prop:value=move || view_sig.with(|v| v.as_ref().map_or(0, |v| v.replicas_per_gpu)).to_string()
                        on:input=move |ev| {
                            if let Ok(r) = event_target_value(&ev).parse::<usize>() {
                                set_budget(Some(r))
                            }
                        }/>
                    <input id="budget-number" type="number" min="0"
                        prop:value=move || view_sig.with(|v| v.as_ref().map_or(0, |v| v.replicas_per_gpu)).to_string()
                        on:change=move |ev| {
                            match event_target_value(&ev).trim().parse::<usize>() {
                                Ok(r) if r <= 1 << 16 => set_budget(Some(r)),
                                _ => status.set(Status::Error("Budget: a whole number of replicas per GPU".into())),
                            }
                        }/>
                    <label class="inline"><input id="budget-auto" type="checkbox"
                        prop:checked=move || settings.with(|s| s.replicas_per_gpu.is_none())
                        on:change=move |ev| {
                            let auto = event_target_checked(&ev);
                            let current = view_sig.with_untracked(|v| v.as_ref().map_or(8, |v| v.replicas_per_gpu));
                            set_budget(if auto { None } else { Some(current) })
                        }/>" automatic (knee of the curve)"</label>
                    <label for="mem">"Expert size of"</label>
                    <select id="mem" on:change=move |ev| settings.update(|s| s.memory_model = event_target_value(&ev))>
                        {PRESETS.iter().map(|p| view! {
                            <option value=p.name selected=move || settings.with(|s| s.memory_model == p.name)>
                                {format!("{} ({:.0} MiB)", p.display, p.expert_bytes() as f64 / (1 << 20) as f64)}
                            </option>
                        }).collect_view()}
                    </select>
                </section>
                <section>
                    <h2>"Export CRAFT's plan"</h2>
                    <button id="export-moeplan" on:click=move |_| send(Kind::Export, None, None, Some("moeplan".into()), None)>"moeplan JSON"</button>
                    <button id="export-sglang" on:click=move |_| send(Kind::Export, None, None, Some("sglang".into()), None)>"SGLang --init-expert-location"</button>
                </section>
                <p id="status" class=move || match status.get() { Status::Error(_) => "status error", Status::Busy(_) => "status busy", Status::Ready | Status::Info(_) => "status ready" }>
                    {move || match status.get() {
                        Status::Ready => "ready".to_string(),
                        Status::Busy(p) => format!("working: {p}…"),
                        Status::Info(m) | Status::Error(m) => m,
                    }}
                </p>
                <p id="timings" class="timings"
                    data-budget-ms=move || timings.with(|t| t.budget.map(|x| format!("{x:.2}")).unwrap_or_default())
                    data-cluster-ms=move || timings.with(|t| t.cluster.map(|x| format!("{x:.1}")).unwrap_or_default())
                    data-trace-ms=move || timings.with(|t| t.trace.map(|x| format!("{x:.1}")).unwrap_or_default())
                    data-budget-dom-ms=move || timings.with(|t| t.budget_dom.map(|x| format!("{x:.2}")).unwrap_or_default())
                    data-budget-worker-ms=move || timings.with(|t| t.budget_parts.map(|x| format!("{:.2}", x.0)).unwrap_or_default())
                    data-budget-draw-ms=move || timings.with(|t| t.budget_parts.map(|x| format!("{:.2}", x.1)).unwrap_or_default())>
                    {move || timings.with(|t| format!("last change → plan on screen: budget {} · cluster {} · trace {}",
                        t.budget.map_or("—".into(), |x| format!("{x:.1} ms")),
                        t.cluster.map_or("—".into(), |x| format!("{x:.0} ms")),
                        t.trace.map_or("—".into(), |x| format!("{x:.0} ms"))))}
                </p>
            </aside>
            <section class="figures">
                {move || view_sig.with(|v| v.as_ref().map(|v| {
                    let auto = v.auto_replicas_per_gpu;
                    view! {
                        <table class="summary" id="summary">
                            <thead><tr><th>"plan"</th><th>"balancedness"</th><th>"imbalance"</th><th>"replicas"</th><th>"replica memory / GPU"</th><th>"bound"</th></tr></thead>
                            <tbody>
                                {v.plans.iter().map(|p| {
                                    let name = p.name.clone();
                                    let title = match name.as_str() {
                                        "craft" => format!("CRAFT R = {}", v.replicas_per_gpu),
                                        "eplb" => "EPLB (1 per GPU per layer)".to_string(),
                                        _ => "BASE (no replicas)".to_string(),
                                    };
                                    view! {
                                        <tr id=format!("row-{name}")>
                                            <td><span class="swatch" style=format!("background:{}", charts::colour(&name))></span>{title}</td>
                                            <td class="num" id=format!("bal-{name}")>{fmt(p.balancedness)}</td>
                                            <td class="num">{fmt(p.imbalance_ratio)}</td>
                                            <td class="num" id=format!("replicas-{name}")>{p.replicas.to_string()}</td>
                                            <td class="num">{gib(p.replica_slots_per_gpu)}" GiB"</td>
                                            <td class="num">{fmt(p.bound)}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                        {v.notes.iter().map(|n| view! { <p class="note">{n.clone()}</p> }).collect_view()}
                        <p class="scope">{format!("{} · in-sample over {} batch(es) · automatic R = {auto}", v.topology, v.batches)}</p>
                    }
                }))}
                <Show when=move || view_sig.with(Option::is_some)>
                    <div class="grid">
                        <figure><figcaption>"Balancedness against CRAFT's budget"</figcaption>
                            {move || view_sig.with(|v| v.as_ref().map(charts::curve_chart))}</figure>
                        <figure><figcaption>"Balancedness per layer"</figcaption>
                            {move || view_sig.with(|v| v.as_ref().map(charts::layers_chart))}</figure>
                        <figure><figcaption>"Replicas per layer (bars: CRAFT, line: EPLB)"</figcaption>
                            {move || view_sig.with(|v| v.as_ref().map(charts::replicas_chart))}</figure>
                        <figure><figcaption>"CRAFT: GPU × layer load (red: above the layer's mean, blue: below)"</figcaption>
                            {move || view_sig.with(|v| v.as_ref().map(charts::heat_map))}</figure>
                    </div>
                    <figure class="wide">
                        <figcaption>
                            {move || view_sig.with(|v| v.as_ref().map(|v| format!("CRAFT's placement of layer {} ", v.layer.layer)))}
                            <input id="layer" type="range" min="0"
                                prop:max=move || view_sig.with(|v| v.as_ref().map_or(0, |v| v.layer_ids.len().saturating_sub(1))).to_string()
                                prop:value=move || settings.with(|s| s.layer).to_string()
                                on:input=move |ev| {
                                    if let Ok(l) = event_target_value(&ev).parse::<usize>() {
                                        settings.update(|s| s.layer = l);
                                        send(Kind::Layer, None, None, None, None);
                                    }
                                }/>
                        </figcaption>
                        {move || view_sig.with(|v| v.as_ref().map(charts::layer_placement))}
                    </figure>
                </Show>
            </section>
        </main>
        <footer>"All planning runs in this page (WebAssembly, in a worker); nothing leaves your machine."</footer>
    }
}
