//! The page's layout and controls: [`App`], controls on the left and
//! figures on the right, and the figure blocks the docs embed mounts too.
//! Everything it shows comes from the board; everything it asks goes
//! through the client ([`Ctx`]).

use leptos::prelude::*;
use moeplan::data::hardware;
use moeplan::data::model::PRESETS;
use moeplan::planners::PREDICTOR;
use moeplan::studies::ENGINES;
use moeplan_view::dispatch_rules;

use crate::charts::{
    self, AffinityMap, CrossMatrix, CurveChart, GraceCurve, HeatMap, LayersChart, PlacementChart,
    ReplicasChart, ServingPanel, TimelineChart,
};
use crate::figures::{CostPanel, Scope, Summary, TrafficPanel};
use crate::settings::{FILE_HARDWARE, PHASES, Settings, grace_ratios};

use super::client::{
    Ctx, HASH_DELAY_MS, RequestKind, Status, Undo, clear_timer, cluster_of, location_hash,
    replace_hash, set_timer,
};

/// The page.
#[component]
pub fn App() -> impl IntoView {
    let ctx = Ctx::new(Settings::from_hash(&location_hash()), None);
    let Ctx {
        settings,
        board,
        stats,
        status,
        timings,
        ahead,
        restarts,
        ..
    } = ctx;
    ctx.start_worker();
    // The default view: the built-in generator, planned at once.
    ctx.generate();

    // Keep the URL hash in step with the settings: at once on opening, then
    // once they have been still for HASH_DELAY_MS (`replaceState` costs a
    // millisecond or more: it stays off the budget path, and a slider drag
    // writes it once).
    let hash_timer = StoredValue::new(None::<i32>);
    Effect::new(move |opened: Option<()>| {
        let hash = settings.with(Settings::to_hash);
        if opened.is_none() {
            replace_hash(&hash);
            return;
        }
        if let Some(t) = hash_timer.get_value() {
            clear_timer(t);
        }
        hash_timer.set_value(set_timer(HASH_DELAY_MS, move || {
            hash_timer.set_value(None);
            replace_hash(&settings.with_untracked(Settings::to_hash));
        }));
    });
    // Each field reads its own setting: a budget change touches none of them.
    let field = move |get: fn(&Settings) -> String| Memo::new(move |_| settings.with(get));
    let preset = field(|s| s.preset.clone());
    let memory_model = field(|s| s.memory_model.clone());
    let hardware = field(|s| s.hardware.clone());
    let phase = field(|s| s.phase.clone());
    let predictor = field(|s| s.predictor.clone());
    // Libra's options re-plan Libra only (the worker keeps every other
    // plan); refused ones are put back when the error arrives.
    let set_libra = move |n: Option<usize>, p: Option<String>| {
        let before = settings.with_untracked(|s| Undo::Libra(s.libra_n, s.predictor.clone()));
        settings.update(|s| {
            if let Some(n) = n {
                s.libra_n = n;
            }
            if let Some(p) = p {
                s.predictor = p;
            }
        });
        ctx.undo.set_value(Some(before));
        ctx.send(RequestKind::PerBatch, None, None, None, None);
    };
    // GRACE's ratio re-plans GRACE only, likewise.
    let grace_ratio = field(|s| s.grace_ratio.clone());
    let set_ratio = move |r: String| {
        let before = settings.with_untracked(|s| Undo::GraceRatio(s.grace_ratio.clone()));
        settings.update(|s| s.grace_ratio = r);
        ctx.undo.set_value(Some(before));
        ctx.send(RequestKind::Options, None, None, None, None);
    };
    let predictors: &'static [&'static str] = match PREDICTOR.kind {
        moeplan::planners::OptionKind::Choice(words) => words,
        _ => &[],
    };

    let on_file = move |ev: leptos::ev::Event| load_chosen(ctx, &ev);
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        if let Some(f) = ev
            .data_transfer()
            .and_then(|d| d.files())
            .and_then(|l| l.get(0))
        {
            ctx.load_file(f);
        }
    };

    // The registry's name for the planner the budget moves (CRAFT).
    let focus = charts::focus_title();
    // The presenter's scenarios and keys take the page's own paths.
    let present_actions = crate::present::Actions {
        set_budget: Callback::new(move |r| ctx.set_budget(r)),
        cluster_changed: Callback::new(move |()| {
            ctx.send(
                RequestKind::Cluster,
                None,
                Some(cluster_of(&settings.get_untracked())),
                None,
                None,
            );
        }),
        apply: Callback::new(move |s| {
            settings.set(s);
            ctx.generate();
        }),
    };

    view! {
        <header>
            <h1>"moeplan"</h1>
            <p class="tagline">{format!("Expert placement and replication for Mixture-of-Experts serving — {} against BASE, in your browser, offline.", charts::balancer_titles())}</p>
        </header>
        <main>
            <aside class="controls">
                <crate::present::Present settings board actions=present_actions/>
                <section>
                    <h2>"Trace"</h2>
                    <div class="drop" on:dragover=|ev: leptos::ev::DragEvent| ev.prevent_default() on:drop=on_drop>
                        <p>"Drop a trace here — SGLang dump (.json, .pt), NumPy (.npy, .npz), vLLM load window, wide or per-rank CSV, moeplan trace — or"</p>
                        <input id="file" type="file" accept=TRACE_FILES on:change=on_file/>
                    </div>
                    <p class="or">"or generate one with a real model's shape:"</p>
                    <label for="preset">"Model"</label>
                    <select id="preset" on:change=move |ev| settings.update(|s| s.preset = event_target_value(&ev))>
                        <option value="" selected=move || memory_model.with(String::is_empty)>
                            "the trace's model (else DeepSeek-V3)"
                        </option>
                        {PRESETS.iter().map(|p| view! {
                            <option value=p.name selected=move || preset.with(|x| x == p.name)>{p.display}</option>
                        }).collect_view()}
                    </select>
                    <label for="batches">"Batches"</label>
                    <input id="batches" type="number" min="1" max="4096"
                        prop:value=field(|s| s.batches.to_string())
                        on:change=move |ev| {
                            match event_target_value(&ev).trim().parse::<usize>() {
                                Ok(b) if (1..=4096).contains(&b) => settings.update(|s| s.batches = b),
                                _ => status.set(Status::Error("Batches: a whole number from 1 to 4096".into())),
                            }
                        }/>
                    <label for="seed">"Seed"</label>
                    <input id="seed" type="number" min="0"
                        prop:value=field(|s| s.seed.to_string())
                        on:change=move |ev| {
                            if let Ok(x) = event_target_value(&ev).trim().parse::<u32>() {
                                settings.update(|s| s.seed = x)
                            }
                        }/>
                    <label class="inline"><input id="routes" type="checkbox"
                        prop:checked=Memo::new(move |_| settings.with(|s| s.routes))
                        on:change=move |ev| settings.update(|s| s.routes = event_target_checked(&ev))/>
                        " with token routes (GRACE groups by affinity)"</label>
                    <button id="generate" on:click=move |_| ctx.generate()>"Generate"</button>
                    {move || stats.get().map(|s| view! {
                        <p class="trace-info" id="trace-info">
                            {format!("{} · {} batch(es) · {} MoE layers × {} experts{}", s.source, s.batches, s.layers, s.experts,
                                s.top_k.map(|k| format!(" · top-{k}")).unwrap_or_default())}
                        </p>
                    })}
                </section>
                <section>
                    <h2>"Cluster"</h2>
                    {cluster_field(ctx, "Nodes", "nodes", |s| s.nodes, |s, v| s.nodes = v)}
                    {cluster_field(ctx, "GPUs per node", "gpus", |s| s.gpus_per_node, |s, v| s.gpus_per_node = v)}
                    {cluster_field(ctx, charts::groups_title(), "groups", |s| s.groups, |s, v| s.groups = v)}
                </section>
                <section>
                    <h2>{format!("{focus} budget")}</h2>
                    <p class="hint">"R: replicas per GPU, summed over all layers"</p>
                    {budget_inputs(ctx)}
                    <label for="mem">"Expert size of"</label>
                    <select id="mem" on:change=move |ev| {
                        settings.update(|s| s.memory_model = event_target_value(&ev));
                        // Every plan is judged on this model's sizes (its
                        // traffic's bytes, its copies and its prices): the
                        // worker plans the cluster again on it.
                        ctx.send(RequestKind::Model, None, None, None, None);
                    }>
                        <option value="" selected=move || memory_model.with(String::is_empty)>
                            "the trace's model (else DeepSeek-V3)"
                        </option>
                        {PRESETS.iter().map(|p| view! {
                            <option value=p.name selected=move || memory_model.with(|x| x == p.name)>
                                {format!("{} ({:.0} MiB)", p.display, p.expert_bytes() as f64 / (1 << 20) as f64)}
                            </option>
                        }).collect_view()}
                    </select>
                </section>
                <section>
                    <h2>"Dispatch"</h2>
                    {rule_select(ctx)}
                    <p class="hint">"even: split over copies (the planners' own measure); the others replay each plan through the simulator"</p>
                </section>
                <section id="hardware-controls"
                    on:dragover=move |ev: leptos::ev::DragEvent| ev.prevent_default()
                    on:drop=move |ev: leptos::ev::DragEvent| {
                        // A file dropped on this section is hardware, not a
                        // trace: the page's own drop does not see it.
                        ev.prevent_default();
                        ev.stop_propagation();
                        if let Some(f) = ev.data_transfer().and_then(|d| d.files()).and_then(|l| l.get(0)) {
                            ctx.load_hardware(f);
                        }
                    }>
                    <h2>"Hardware"</h2>
                    <label for="hardware">"Price every plan on"</label>
                    <select id="hardware" on:change=move |ev| {
                        settings.update(|s| s.hardware = event_target_value(&ev));
                        ctx.send(RequestKind::Hardware, None, None, None, None);
                    }>
                        <option value="" selected=move || hardware.with(String::is_empty)>"— balance only"</option>
                        {move || settings.with(|s| s.hardware_file.as_ref().map(|f| format!("{} ({}, from {})", f.name, f.provenance, f.file)))
                            .map(|label| view! {
                                <option id="hardware-file-option" value=FILE_HARDWARE
                                    selected=move || hardware.with(|x| x == FILE_HARDWARE)>{label}</option>
                            })}
                        {hardware::listed().map(|(name, about)| {
                            // Which presets were fitted to their own GPU shows in the menu.
                            let label = hardware::preset(name)
                                .map_or_else(|_| name.to_string(), |h| format!("{name} ({})", h.provenance()));
                            view! {
                                <option value=name title=about selected=move || hardware.with(|x| x == name)>{label}</option>
                            }
                        }).collect_view()}
                    </select>
                    <label for="phase">"Batches are"</label>
                    <select id="phase" prop:disabled=move || hardware.with(String::is_empty) on:change=move |ev| {
                        settings.update(|s| s.phase = event_target_value(&ev));
                        ctx.send(RequestKind::Hardware, None, None, None, None);
                    }>
                        {PHASES.iter().map(|&p| view! {
                            <option value=p selected=move || phase.with(|x| x == p)>{p}</option>
                        }).collect_view()}
                    </select>
                    <label for="hardware-file">"or your own hardware file"</label>
                    <input id="hardware-file" type="file" accept=".json,application/json"
                        on:change=move |ev: leptos::ev::Event| {
                            let input: web_sys::HtmlInputElement = event_target(&ev);
                            if let Some(f) = input.files().and_then(|l| l.get(0)) {
                                ctx.load_hardware(f);
                            }
                            input.set_value("");
                        }/>
                    <p class="hint">"A file `moeplan calibrate --out` writes from your GPU's measurements (or any file of schemas/moeplan.hardware.schema.json); dropped here, a file is read as hardware, not as a trace"</p>
                    <p class="hint">"Predicted step time and tokens/s against BASE (the cost model, docs/cost.md), with the sizes of the model chosen above; a static plan is priced on the mean batch, Libra on every batch"</p>
                </section>
                <section id="cross-controls">
                    <h2>"Across workloads"</h2>
                    <p class="hint">"Load two or more traces of one model (yesterday's and today's, prefill and decode): every plan made on each, and on all of them, is judged on every one"</p>
                    <input id="cross-files" type="file" multiple accept=".json,.csv,.txt,.pt,.npy,.npz,.safetensors"
                        on:change=move |ev: leptos::ev::Event| {
                            let input: web_sys::HtmlInputElement = event_target(&ev);
                            let files: Vec<web_sys::File> = input.files()
                                .map(|l| (0..l.length()).filter_map(|i| l.get(i)).collect())
                                .unwrap_or_default();
                            input.set_value("");
                            ctx.load_cross(files);
                        }/>
                </section>
                {serving_controls(ctx)}
                <section id="grace-controls">
                    <h2>"GRACE, grouping"</h2>
                    <p class="hint">"How far GPU group sizes may stray from equal (r: within m/G ± round(m/G·r) experts); auto picks, per layer, the knee of the size-deviation and utilisation curve"</p>
                    <label for="grace-ratio">"Non-uniformity ratio r"</label>
                    <select id="grace-ratio" prop:value=move || grace_ratio.get()
                        on:change=move |ev| set_ratio(event_target_value(&ev))>
                        {grace_ratios().iter().map(|&w| view! {
                            <option value=w selected=move || grace_ratio.with(|x| x == w)>{w}</option>
                        }).collect_view()}
                    </select>
                </section>
                <section id="libra-controls">
                    <h2>"Libra, per batch"</h2>
                    <p class="hint">"Libra copies up to N predicted-hot experts per GPU in every layer of every batch and rebalances tokens over the copies (its own rule, libra-rebalance)"</p>
                    <label for="libra-n">"N: copies per GPU"</label>
                    <input id="libra-n" type="number" min="0" max="1024"
                        prop:value=field(|s| s.libra_n.to_string())
                        on:change=move |ev| {
                            match event_target_value(&ev).trim().parse::<usize>() {
                                Ok(n) if n <= 1024 => set_libra(Some(n), None),
                                _ => status.set(Status::Error("N: a whole number from 0 to 1024".into())),
                            }
                        }/>
                    <label for="predictor">"Predictor of the next layer"</label>
                    <select id="predictor" prop:value=move || predictor.get()
                        on:change=move |ev| set_libra(None, Some(event_target_value(&ev)))>
                        {predictors.iter().map(|&w| view! {
                            <option value=w selected=move || predictor.with(|x| x == w)>{w}</option>
                        }).collect_view()}
                    </select>
                </section>
                <section>
                    <h2>{format!("Export {focus}'s plan")}</h2>
                    <button id="export-moeplan" on:click=move |_| { ctx.send(RequestKind::Export, None, None, Some("moeplan".into()), None); }>"moeplan JSON"</button>
                    <button id="export-sglang" on:click=move |_| { ctx.send(RequestKind::Export, None, None, Some("sglang".into()), None); }>"SGLang --init-expert-location"</button>
                </section>
                <p id="status" role="status" aria-live="polite"
                    data-restarts=move || restarts.get().to_string()
                    class=move || status.with(Status::class)>
                    {move || status.with(Status::text)}
                </p>
                // Long work (a large file, GRACE's clustering, the matrix):
                // shown after 0.4 s of it (style.css), so a quick change
                // never flashes it; Cancel keeps the previous state.
                <div id="busy" class="busy" hidden=move || !status.with(|s| matches!(s, Status::Busy(_)))>
                    <progress aria-label="working"></progress>
                    <button id="cancel" on:click=move |_| ctx.cancel()>"Cancel"</button>
                </div>
                // Work ahead of time, said quietly: it yields to every
                // change (a change waits one step of it at most).
                <p id="ahead" class="ahead" hidden=move || ahead.with(Option::is_none)
                    data-ahead=move || ahead.with(|a| a.as_ref().map(|a| a.0.clone()).unwrap_or_default())>
                    {move || ahead.with(|a| a.as_ref().map(|(what, done)|
                        format!("preparing ahead, between your changes: {what} ({:.0} %)", done * 100.0)).unwrap_or_default())}
                </p>
                <p id="timings" class="timings"
                    data-budget-ms=move || timings.with(|t| t.budget.map(|x| format!("{x:.2}")).unwrap_or_default())
                    data-cluster-ms=move || timings.with(|t| t.cluster.map(|x| format!("{x:.1}")).unwrap_or_default())
                    data-grace-ms=move || timings.with(|t| t.grace.map(|x| format!("{x:.1}")).unwrap_or_default())
                    data-libra-ms=move || timings.with(|t| t.libra.map(|x| format!("{x:.1}")).unwrap_or_default())
                    data-libra-shared=move || timings.with(|t| t.shared.clone().unwrap_or_default())
                    data-warmed=move || timings.with(|t| t.warmed.as_ref().map(|w| w.0.clone()).unwrap_or_default())
                    data-warmed-ms=move || timings.with(|t| t.warmed.as_ref().map(|w| format!("{:.0}", w.1)).unwrap_or_default())
                    data-path-table-ms=move || timings.with(|t| t.path_table_ms.map(|x| format!("{x:.0}")).unwrap_or_default())
                    data-trace-ms=move || timings.with(|t| t.trace.map(|x| format!("{x:.1}")).unwrap_or_default())
                    data-budget-dom-ms=move || timings.with(|t| t.budget_dom.map(|x| format!("{x:.2}")).unwrap_or_default())
                    data-budget-worker-ms=move || timings.with(|t| t.budget_parts.map(|x| format!("{:.2}", x.0)).unwrap_or_default())
                    data-budget-draw-ms=move || timings.with(|t| t.budget_parts.map(|x| format!("{:.2}", x.1)).unwrap_or_default())
                    data-budget-receive-ms=move || timings.with(|t| t.budget_receive.map(|x| format!("{:.2}", x.0)).unwrap_or_default())
                    data-budget-decode-ms=move || timings.with(|t| t.budget_receive.map(|x| format!("{:.3}", x.1)).unwrap_or_default())
                    data-budget-to-worker-ms=move || timings.with(|t| t.budget_path.map(|x| format!("{:.2}", x.0)).unwrap_or_default())
                    data-budget-in-worker-ms=move || timings.with(|t| t.budget_path.map(|x| format!("{:.2}", x.1)).unwrap_or_default())
                    data-budget-from-worker-ms=move || timings.with(|t| t.budget_path.map(|x| format!("{:.2}", x.2)).unwrap_or_default())
                    data-budget-dom-seq=move || timings.with(|t| t.budget_dom_seq.to_string())
                    data-budget-frame-seq=move || timings.with(|t| t.budget_frame_seq.to_string())
                    data-options-seq=move || timings.with(|t| t.options_seq.to_string())
                    data-budget-r=move || timings.with(|t| t.budget_r.map(|r| r.to_string()).unwrap_or_default())
                    data-serving-ms=move || timings.with(|t| t.serving.map(|x| format!("{x:.1}")).unwrap_or_default())>
                    {move || timings.with(|t| format!("last change → plan on screen: budget {} · cluster {} · trace {}",
                        t.budget.map_or("—".into(), |x| format!("{x:.1} ms")),
                        t.cluster.map_or("—".into(), |x| format!("{x:.0} ms")),
                        t.trace.map_or("—".into(), |x| format!("{x:.0} ms"))))}
                </p>
            </aside>
            <section class="figures">
                <Show when=move || board.frame.with(Option::is_some)>
                    <Summary board/>
                    <Scope board/>
                    <CostPanel board/>
                    <TrafficPanel board/>
                    <div class="grid">
                        {curve_figure(ctx)}
                        {layers_figure(ctx)}
                        {replicas_figure(ctx)}
                        {heat_figure(ctx)}
                    </div>
                    {timeline_figure(ctx)}
                    {placement_figure(ctx, true)}
                    <CrossMatrix board/>
                    <ServingPanel board/>
                    // GRACE's views need affinity: token routes only.
                    <Show when=move || board.grouping.with(Option::is_some)>
                        <div class="grid" id="grace-views">
                            <figure><figcaption id="grace-curve-caption">{move || board.grouping.with(|g| g.as_ref().map(|g| format!(
                                "GRACE, layer {}: affinity kept inside GPU groups (U) against group size deviation (S), one point per r; {}",
                                g.layer, g.ratio.map_or("grouped by load".into(), |r| format!("r = {r} chosen ({})",
                                    if grace_ratio.with(|x| x == "auto") { "the knee" } else { "as set" })))))}</figcaption>
                                <GraceCurve board/></figure>
                            <figure><figcaption id="affinity-caption">{move || board.grouping.with(|g| g.as_ref().map(|g| format!(
                                "GRACE, layer {}: expert affinity (tokens choosing both), experts in group order, lines between GPU groups ({} groups)",
                                g.layer, g.sizes.len())))}</figcaption>
                                <AffinityMap board/></figure>
                        </div>
                    </Show>
                </Show>
            </section>
        </main>
        <footer>"All planning runs in this page (WebAssembly, in a worker); nothing leaves your machine."</footer>
    }
}

/// Serving with re-planning: shown or not, the interval K and the
/// window W. K answers alone; a new W (or showing it) brings the sweep.
/// The largest K, W or tokens a pass the serving controls take (the URL
/// hash's bound on a number).
const MAX_KNOB: usize = 1 << 16;

fn serving_controls(ctx: Ctx) -> impl IntoView {
    let (settings, board, status) = (ctx.settings, ctx.board, ctx.status);
    let serve = Memo::new(move |_| settings.with(|s| s.serve));
    let engine = Memo::new(move |_| settings.with(|s| s.engine.clone()));
    // K and W count trace batches, or an engine's forward passes
    let unit = move || {
        if engine.with(String::is_empty) {
            "batches"
        } else {
            "forward passes"
        }
    };
    let knob = move |label: &'static str,
                     id: &'static str,
                     get: fn(&Settings) -> usize,
                     set: fn(&mut Settings, usize),
                     sweep: bool| {
        let value = Memo::new(move |_| settings.with(get));
        view! {
            <label for=id>{move || format!("{label} ({})", unit())}</label>
            <input id=id type="number" min="1" max=MAX_KNOB step="1"
                prop:value=move || value.get().to_string()
                on:change=move |ev| {
                    match event_target_value(&ev).trim().parse::<usize>() {
                        Ok(v) if (1..=MAX_KNOB).contains(&v) => {
                            // a new window changes the whole curve
                            let sweep = sweep || !settings.with_untracked(|s| s.serve);
                            settings.update(|s| {
                                set(s, v);
                                s.serve = true;
                            });
                            ctx.ask_serving(sweep);
                        }
                        _ => status.set(Status::Error(format!("{label}: a whole number of {} from 1 to {MAX_KNOB}", unit()))),
                    }
                }/>
        }
    };
    let per_pass = Memo::new(move |_| settings.with(|s| s.tokens_per_pass));
    view! {
        <section id="serving-controls">
            <h2>"Re-planning while serving"</h2>
            <p class="hint">"EPLB planned on the first W, then again every K on the last W: in trace batches, each new plan renumbered onto the GPUs to move the fewest experts; or in an engine's own knobs (forward passes), refused as it refuses them, with its own move, and its flags for the setting shown"</p>
            <label class="inline"><input id="serve" type="checkbox" prop:checked=serve
                on:change=move |ev| {
                    let on = event_target_checked(&ev);
                    settings.update(|s| s.serve = on);
                    if on {
                        ctx.ask_serving(true);
                    } else {
                        board.serving.set(None);
                        board.serving_sweep.set(None);
                    }
                }/>" replay serving with re-planning"</label>
            <label for="engine">"Knobs of"</label>
            <select id="engine" on:change=move |ev| {
                settings.update(|s| {
                    s.engine = event_target_value(&ev);
                    s.serve = true;
                });
                ctx.ask_serving(true);
            }>
                <option value="" selected=move || engine.with(String::is_empty)>"moeplan: trace batches, relabelled moves"</option>
                {ENGINES.iter().map(|e| {
                    let name = e.name;
                    view! { <option value=name selected=move || engine.with(|x| x == name)>{e.display}</option> }
                }).collect_view()}
            </select>
            {knob("K: re-plan every", "every", |s| s.every, |s, v| s.every = v, false)}
            {knob("W: on the last", "window", |s| s.window, |s, v| s.window = v, true)}
            <span hidden=move || engine.with(String::is_empty)>
                <label for="tokens-per-pass">"Tokens a forward pass serves (0: a trace batch)"</label>
                <input id="tokens-per-pass" type="number" min="0" max=MAX_KNOB step="1"
                    prop:value=move || per_pass.get().to_string()
                    on:change=move |ev| {
                        match event_target_value(&ev).trim().parse::<usize>() {
                            Ok(v) if v <= MAX_KNOB => {
                                settings.update(|s| s.tokens_per_pass = v);
                                ctx.ask_serving(true);
                            }
                            _ => status.set(Status::Error(format!("tokens a forward pass: a whole number from 0 to {MAX_KNOB}"))),
                        }
                    }/>
            </span>
        </section>
    }
}

/// An embed's status line (the page's carries an id and its timings).
pub(crate) fn status_line(ctx: Ctx) -> impl IntoView {
    let status = ctx.status;
    view! {
        <p class=move || status.with(Status::class) role="status" aria-live="polite"
            data-restarts=move || ctx.restarts.get().to_string()>
            {move || status.with(Status::text)}
        </p>
    }
}

/// The file types a trace chooser offers (every reader's).
pub(crate) const TRACE_FILES: &str = ".json,.csv,.txt,.pt,.npy,.npz";

/// A trace file chosen in a file input (the page's, or an embed's `file`
/// control): read by the worker; the input is cleared so the same file can
/// be chosen again.
pub(crate) fn load_chosen(ctx: Ctx, ev: &leptos::ev::Event) {
    let input: web_sys::HtmlInputElement = event_target(ev);
    if let Some(f) = input.files().and_then(|l| l.get(0)) {
        ctx.load_file(f);
    }
    input.set_value("");
}

/// A numeric cluster field (the page's and an embed's): accepted only as a
/// whole number from 1 to 4096; a change re-plans for the new cluster.
pub(crate) fn cluster_field(
    ctx: Ctx,
    label: &'static str,
    id: &'static str,
    get: fn(&Settings) -> usize,
    set: fn(&mut Settings, usize),
) -> impl IntoView {
    let (settings, status) = (ctx.settings, ctx.status);
    let value = Memo::new(move |_| settings.with(get));
    view! {
        <label for=id>{label}</label>
        <input id=id type="number" min="1" step="1"
            prop:value=move || value.get().to_string()
            on:change=move |ev| {
                match event_target_value(&ev).trim().parse::<usize>() {
                    Ok(v) if (1..=4096).contains(&v) => {
                        settings.update(|s| set(s, v));
                        ctx.send(RequestKind::Cluster, None, Some(cluster_of(&settings.get_untracked())), None, None);
                    }
                    _ => status.set(Status::Error(format!("{label}: a whole number from 1 to 4096"))),
                }
            }/>
    }
}

/// The dispatch rule every plan is judged under (the page's and an
/// embed's), and whether each planner keeps its own system's rule (GRACE's
/// routing): a change re-measures every plan.
pub(crate) fn rule_select(ctx: Ctx) -> impl IntoView {
    let settings = ctx.settings;
    let rule = Memo::new(move |_| settings.with(|s| s.rule.clone()));
    let own = Memo::new(move |_| settings.with(|s| !s.one_rule));
    view! {
        <label for="rule">"Rule each engine uses to pick a copy"</label>
        <select id="rule" on:change=move |ev| {
            settings.update(|s| s.rule = event_target_value(&ev));
            ctx.send(RequestKind::Rule, None, None, None, None);
        }>
            {dispatch_rules().map(|r| {
                let name = r.name();
                view! { <option value=name selected=move || rule.with(|x| x == name)>{name}</option> }
            }).collect_view()}
        </select>
        <label class="inline" title="GRACE under its topology-aware routing and Libra under its rebalancer, as their papers serve them; unticked, every row under the rule above">
            <input id="own-rules" type="checkbox" prop:checked=own
                on:change=move |ev| {
                    let own = event_target_checked(&ev);
                    settings.update(|s| s.one_rule = !own);
                    ctx.send(RequestKind::Rule, None, None, None, None);
                }/>" each system under its own rule"</label>
    }
}

/// The focus plan's budget: a slider, the number, and "automatic".
pub(crate) fn budget_inputs(ctx: Ctx) -> impl IntoView {
    let (settings, board) = (ctx.settings, ctx.board);
    let max_r = move || {
        board
            .frame
            .with(|f| {
                f.as_ref()
                    .and_then(|f| f.curve.last().map(|p| p.replicas_per_gpu))
            })
            .unwrap_or(64)
    };
    let shown_r = move || board.replicas_per_gpu.get().to_string();
    let auto_budget = Memo::new(move |_| settings.with(|s| s.replicas_per_gpu.is_none()));
    view! {
        <input id="budget" type="range" min="0" prop:max=move || max_r().to_string()
            prop:value=shown_r
            on:input=move |ev| {
                if let Ok(r) = event_target_value(&ev).parse::<usize>() {
                    ctx.set_budget(Some(r))
                }
            }/>
        <input id="budget-number" type="number" min="0"
            prop:value=shown_r
            on:change=move |ev| {
                match event_target_value(&ev).trim().parse::<usize>() {
                    Ok(r) if r <= 1 << 16 => ctx.set_budget(Some(r)),
                    _ => ctx.error("Budget: a whole number of replicas per GPU".into()),
                }
            }/>
        <label class="inline"><input id="budget-auto" type="checkbox"
            prop:checked=auto_budget
            on:change=move |ev| {
                let auto = event_target_checked(&ev);
                let current = match board.frame.with_untracked(Option::is_some) {
                    true => board.replicas_per_gpu.get_untracked(),
                    false => 8,
                };
                ctx.set_budget(if auto { None } else { Some(current) })
            }/>" automatic (knee of the curve)"</label>
    }
}

/// The focus plan's balancedness against its budget.
pub(crate) fn curve_figure(ctx: Ctx) -> impl IntoView {
    let (board, focus) = (ctx.board, charts::focus_title());
    view! {
        <figure><figcaption>{format!("Balancedness against {focus}'s budget (predicted, rule: even)")}</figcaption>
            <CurveChart board/></figure>
    }
}

/// Every plan's balancedness per layer.
pub(crate) fn layers_figure(ctx: Ctx) -> impl IntoView {
    let board = ctx.board;
    view! {
        <figure><figcaption id="layers-caption">{move || format!("Balancedness per layer (rule: {})", board.rule.get())}</figcaption>
            <LayersChart board/></figure>
    }
}

/// Replicas per layer: the focus plan's bars, the others' lines.
pub(crate) fn replicas_figure(ctx: Ctx) -> impl IntoView {
    let (board, focus) = (ctx.board, charts::focus_title());
    view! {
        <figure><figcaption>{move || board.references().with(|r| {
            let lines: Vec<&str> = r.iter().map(|p| charts::label(&p.name)).collect();
            let lines = if lines.is_empty() { String::new() } else { format!(", line: {}", lines.join(", ")) };
            format!("Replicas per layer (bars: {focus}{lines})")
        })}</figcaption>
            <ReplicasChart board/></figure>
    }
}

/// The focus plan's GPU × layer load map.
pub(crate) fn heat_figure(ctx: Ctx) -> impl IntoView {
    let (board, focus) = (ctx.board, charts::focus_title());
    view! {
        <figure><figcaption>{format!("{focus}: GPU × layer load, rule: even (red: above the layer's mean, blue: below)")}</figcaption>
            <HeatMap board/></figure>
    }
}

/// Every plan's imbalance per batch.
pub(crate) fn timeline_figure(ctx: Ctx) -> impl IntoView {
    let board = ctx.board;
    view! {
        <figure id="timeline-figure">
            <figcaption id="timeline-caption">{move || format!(
                "Imbalance ratio per batch (max / mean GPU load, mean over layers; rule: {}, a per-batch plan under its own) and the expert bytes a per-batch plan copies in each batch",
                board.rule.get())}</figcaption>
            <TimelineChart board/>
        </figure>
    }
}

/// One layer's placement under the focus plan, with a layer slider when
/// `slider`.
pub(crate) fn placement_figure(ctx: Ctx, slider: bool) -> impl IntoView {
    let (board, settings, focus) = (ctx.board, ctx.settings, charts::focus_title());
    let layer = Memo::new(move |_| settings.with(|s| s.layer.to_string()));
    view! {
        <figure class="wide">
            <figcaption>
                {move || board.placement.with(|p| format!("{focus}'s placement of layer {} ", p.layer))}
                {slider.then(|| view! {
                    <input id="layer" type="range" min="0"
                        prop:max=move || board.frame.with(|f| f.as_ref().map_or(0, |f| f.layer_ids.len().saturating_sub(1))).to_string()
                        prop:value=layer
                        on:input=move |ev| {
                            if let Ok(l) = event_target_value(&ev).parse::<usize>() {
                                ctx.set_layer(l);
                            }
                        }/>
                })}
            </figcaption>
            <PlacementChart board/>
        </figure>
    }
}

/// The summary table of every plan shown.
pub(crate) fn summary_table(ctx: Ctx) -> impl IntoView {
    let board = ctx.board;
    view! { <Summary board/> }
}

/// Where each plan's dispatch traffic goes.
pub(crate) fn traffic_panel(ctx: Ctx) -> impl IntoView {
    let board = ctx.board;
    view! { <TrafficPanel board/> }
}

/// Whether the status line shows an error.
pub(crate) fn is_error(ctx: Ctx) -> bool {
    ctx.status.with(|s| matches!(s, Status::Error(_)))
}

/// Whether the first answer has arrived (the charts have something to draw).
pub(crate) fn has_frame(ctx: Ctx) -> bool {
    ctx.board.frame.with(Option::is_some)
}
