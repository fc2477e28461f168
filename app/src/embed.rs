//! The documentation embed: the page's machinery ([`crate::ui`]'s context,
//! worker handling and figures) mounted into any element of a docs page,
//! configured by attributes instead of the URL hash, showing only the
//! charts asked for. `www/embed/moeplan-embed.js` defines `<moeplan-view>`,
//! which gives each embed a shadow root (so the page's element ids stay
//! unique in every embed) and calls [`mount`] with the element's attributes.
//!
//! Each embed has its own `Ctx` (`ui/client.rs`): its own signals and its own worker, so
//! several on one page never see one another's answers. Nothing is written
//! to the URL hash.

use leptos::prelude::*;
use moeplan::data::model;
use moeplan_view::{closest, dispatch_rule};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::settings::Settings;
use crate::ui::{self, Ctx};

/// A chart an embed may show (`charts="curve,summary"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    /// The focus plan's balancedness against its budget.
    Curve,
    /// The table of every plan shown.
    Summary,
    /// Balancedness per layer, one line per plan.
    Layers,
    /// Replicas per layer.
    Replicas,
    /// The focus plan's GPU × layer load map.
    Heat,
    /// One layer's experts on each GPU.
    Placement,
    /// Imbalance per batch.
    Timeline,
    /// Where each plan's dispatch traffic goes.
    Traffic,
}

impl Chart {
    const ALL: [(&'static str, Chart); 8] = [
        ("curve", Chart::Curve),
        ("summary", Chart::Summary),
        ("layers", Chart::Layers),
        ("replicas", Chart::Replicas),
        ("heat", Chart::Heat),
        ("placement", Chart::Placement),
        ("timeline", Chart::Timeline),
        ("traffic", Chart::Traffic),
    ];
}

/// A control an embed may offer (`controls="budget,layer"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// The focus plan's budget: slider, number, automatic.
    Budget,
    /// The placement's layer slider.
    Layer,
    /// The cluster: nodes and GPUs per node (every plan re-planned).
    Cluster,
    /// The dispatch rule every plan is judged under.
    Rule,
    /// A trace file of the reader's own, read in the browser with the
    /// page's readers and limit (a docs page cannot ship engines' dumps it
    /// does not own; a reader can bring theirs).
    File,
}

/// What an embed's attributes ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedOptions {
    /// The generator's and the cluster's settings, the budget and the layer.
    pub settings: Settings,
    /// The charts, in the order asked.
    pub charts: Vec<Chart>,
    /// The planners shown, by id; `None`: every planner the page shows.
    pub planners: Option<Vec<String>>,
    /// The controls offered.
    pub controls: Vec<Control>,
    /// A trace file's URL (fetched by the embed's module; its bytes come
    /// as `traceFile`), instead of a generated trace.
    pub trace: Option<String>,
}

/// The attributes an embed reads, for the error that names an unknown one.
pub const ATTRIBUTES: &[&str] = &[
    "preset",
    "batches",
    "seed",
    "routes",
    "trace",
    "nodes",
    "gpus-per-node",
    "groups",
    "budget",
    "layer",
    "rule",
    "memory",
    "planners",
    "charts",
    "controls",
];

/// "; did you mean \"x\"?" after an unknown `name` among `known`, or
/// nothing when none is close.
fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, known)
        .map(|k| format!("; did you mean \"{k}\"?"))
        .unwrap_or_default()
}

fn whole(key: &str, v: &str, lo: usize, hi: usize) -> Result<usize, String> {
    v.trim()
        .parse::<usize>()
        .ok()
        .filter(|x| (lo..=hi).contains(x))
        .ok_or_else(|| format!("{key}=\"{v}\": a whole number from {lo} to {hi}"))
}

fn words(v: &str) -> impl Iterator<Item = &str> {
    v.split([',', ' ']).map(str::trim).filter(|w| !w.is_empty())
}

impl EmbedOptions {
    /// Reads an embed's attributes (name, value); the error is one line
    /// naming the attribute at fault.
    ///
    /// ```
    /// use moeplan_app::embed::{Chart, EmbedOptions};
    /// let o = EmbedOptions::parse(&[
    ///     ("preset".into(), "olmoe".into()),
    ///     ("nodes".into(), "2".into()),
    ///     ("gpus-per-node".into(), "4".into()),
    ///     ("budget".into(), "8".into()),
    ///     ("charts".into(), "curve, placement".into()),
    ///     ("planners".into(), "eplb,craft".into()),
    /// ])
    /// .unwrap();
    /// assert_eq!((o.settings.nodes, o.settings.gpus_per_node), (2, 4));
    /// assert_eq!(o.settings.replicas_per_gpu, Some(8));
    /// assert_eq!(o.charts, [Chart::Curve, Chart::Placement]);
    /// let e = EmbedOptions::parse(&[("chart".into(), "curve".into())]).unwrap_err();
    /// assert!(e.contains("unknown attribute \"chart\""), "{e}");
    /// ```
    pub fn parse(pairs: &[(String, String)]) -> Result<EmbedOptions, String> {
        // Counts unless the `routes` attribute asks for token routes: a
        // boolean attribute is off when absent, and an embed in a book
        // page should load in well under a second. Balance only: an
        // embed shows what its attributes ask for, and none prices.
        let mut s = Settings {
            routes: false,
            hardware: String::new(),
            ..Settings::default()
        };
        let mut charts = vec![Chart::Summary, Chart::Curve];
        let mut planners = None;
        let mut controls = Vec::new();
        let mut trace = None;
        for (key, v) in pairs {
            let key = key.as_str();
            match key {
                "preset" => {
                    model::preset(v).map_err(|e| format!("preset=\"{v}\": {e}"))?;
                    s.preset = v.to_ascii_lowercase();
                }
                "memory" => {
                    model::preset(v).map_err(|e| format!("memory=\"{v}\": {e}"))?;
                    s.memory_model = v.to_ascii_lowercase();
                }
                "batches" => s.batches = whole(key, v, 1, 4096)?,
                "seed" => {
                    s.seed = v
                        .trim()
                        .parse()
                        .map_err(|_| format!("seed=\"{v}\": a whole number from 0 to 4294967295"))?
                }
                // A boolean attribute: present (empty) or "true" / "1".
                "routes" => {
                    s.routes = match v.trim() {
                        "" | "true" | "1" | "routes" => true,
                        "false" | "0" => false,
                        _ => return Err(format!("routes=\"{v}\": true or false")),
                    }
                }
                "trace" if v.trim().is_empty() => return Err("trace=\"\": a file's URL".into()),
                "trace" => trace = Some(v.trim().to_string()),
                "nodes" => s.nodes = whole(key, v, 1, 4096)?,
                "gpus-per-node" => s.gpus_per_node = whole(key, v, 1, 4096)?,
                "groups" => s.groups = whole(key, v, 1, 4096)?,
                "budget" if v.trim() == "auto" => s.replicas_per_gpu = None,
                "budget" => s.replicas_per_gpu = Some(whole(key, v, 0, 1 << 16)?),
                "layer" => s.layer = whole(key, v, 0, 1 << 16)?,
                "rule" => {
                    dispatch_rule(v).map_err(|e| format!("rule=\"{v}\": {e}"))?;
                    s.rule = v.trim().to_string();
                }
                "planners" => {
                    let names: Vec<String> = words(v).map(str::to_string).collect();
                    if names.is_empty() {
                        return Err("planners=\"\": planner ids, e.g. \"eplb,craft\"".into());
                    }
                    if let Some(n) = names.iter().find(|n| moeplan::planners::spec(n).is_none()) {
                        let known: Vec<&str> = moeplan::planners::SPECS
                            .iter()
                            .map(|p| p.id.as_str())
                            .collect();
                        return Err(format!(
                            "planners: unknown planner \"{n}\"{} (one of {})",
                            did_you_mean(n, known.iter().copied()),
                            known.join(", ")
                        ));
                    }
                    planners = Some(names);
                }
                "charts" => {
                    charts = words(v)
                        .map(|w| {
                            Chart::ALL
                                .iter()
                                .find(|(name, _)| *name == w)
                                .map(|&(_, c)| c)
                                .ok_or_else(|| {
                                    format!(
                                        "charts: unknown chart \"{w}\"{} (one of {})",
                                        did_you_mean(w, Chart::ALL.map(|(n, _)| n)),
                                        Chart::ALL.map(|(n, _)| n).join(", ")
                                    )
                                })
                        })
                        .collect::<Result<_, _>>()?;
                    if charts.is_empty() {
                        return Err("charts=\"\": e.g. \"curve,summary\"".into());
                    }
                }
                "controls" => {
                    controls = words(v)
                        .map(|w| match w {
                            "budget" => Ok(Control::Budget),
                            "layer" => Ok(Control::Layer),
                            "cluster" => Ok(Control::Cluster),
                            "rule" => Ok(Control::Rule),
                            "file" => Ok(Control::File),
                            _ => Err(format!(
                                "controls: unknown control \"{w}\"{} (budget, layer, cluster, rule, file)",
                                did_you_mean(w, ["budget", "layer", "cluster", "rule", "file"])
                            )),
                        })
                        .collect::<Result<_, _>>()?;
                }
                _ => {
                    return Err(format!(
                        "unknown attribute \"{key}\"{} (one of {})",
                        did_you_mean(key, ATTRIBUTES.iter().copied()),
                        ATTRIBUTES.join(", ")
                    ));
                }
            }
        }
        Ok(EmbedOptions {
            settings: s,
            charts,
            planners,
            controls,
            trace,
        })
    }
}

/// The `(name, value)` string pairs of a JavaScript options object; values
/// that are not strings are given as JavaScript would print them (`8`,
/// `true`), and `traceFile` is left out (it is the trace's bytes).
fn pairs(options: &JsValue) -> Vec<(String, String)> {
    let Some(object) = options.dyn_ref::<js_sys::Object>() else {
        return Vec::new();
    };
    js_sys::Object::entries(object)
        .iter()
        .filter_map(|entry| {
            let entry = js_sys::Array::from(&entry);
            let key = entry.get(0).as_string()?;
            let value = entry.get(1);
            if key == "traceFile" || value.is_undefined() || value.is_null() {
                return None;
            }
            let value = value
                .as_string()
                .or_else(|| value.as_f64().map(|x| x.to_string()))
                .or_else(|| value.as_bool().map(|b| b.to_string()))
                .unwrap_or_default();
            Some((key, value))
        })
        .collect()
}

/// Mounts an embed into `element`: options are the attributes (`preset`,
/// `nodes`, `gpus-per-node`, `planners`, `budget`, `charts`, …, see
/// [`EmbedOptions::parse`]) as strings, plus `traceFile`, a `File` with
/// the bytes of `trace`. Bad options are one line shown in the element (and
/// the error returned).
pub fn mount(element: web_sys::HtmlElement, options: &JsValue) -> Result<(), JsValue> {
    let parsed = EmbedOptions::parse(&pairs(options));
    let file = js_sys::Reflect::get(options, &JsValue::from_str("traceFile"))
        .ok()
        .and_then(|f| f.dyn_into::<web_sys::File>().ok());
    let parsed = parsed.and_then(|o| match (&o.trace, &file) {
        (Some(url), None) => Err(format!(
            "trace=\"{url}\": the file's bytes did not come with it (use <moeplan-view>)"
        )),
        _ => Ok(o),
    });
    match parsed {
        Ok(o) => {
            leptos::mount::mount_to(element, move || embed_view(o, file)).forget();
            Ok(())
        }
        Err(message) => {
            let shown = message.clone();
            leptos::mount::mount_to(element, move || {
                view! { <p class="status error moeplan-error" role="alert">{shown}</p> }
            })
            .forget();
            Err(JsValue::from_str(&message))
        }
    }
}

/// One embed: its own context and worker, the controls and charts asked
/// for, the page's own figure components.
fn embed_view(o: EmbedOptions, file: Option<web_sys::File>) -> impl IntoView {
    let ctx = Ctx::new(o.settings, o.planners);
    ctx.start_worker();
    match file {
        Some(f) => ctx.load_file(f),
        None => ctx.generate(),
    }
    let layer_slider = o.controls.contains(&Control::Layer);
    let budget = o.controls.contains(&Control::Budget).then(|| {
        view! {
            <div class="embed-controls">
                <span class="embed-label">{format!("{} budget R", crate::charts::focus_title())}</span>
                {ui::budget_inputs(ctx)}
            </div>
        }
    });
    let cluster = o.controls.contains(&Control::Cluster).then(|| {
        view! {
            <div class="embed-controls">
                {ui::cluster_field(ctx, "Nodes", "nodes", |s| s.nodes, |s, v| s.nodes = v)}
                {ui::cluster_field(ctx, "GPUs per node", "gpus", |s| s.gpus_per_node, |s, v| s.gpus_per_node = v)}
            </div>
        }
    });
    let rule = o
        .controls
        .contains(&Control::Rule)
        .then(|| view! { <div class="embed-controls">{ui::rule_select(ctx)}</div> });
    let own_file = o.controls.contains(&Control::File).then(|| {
        view! {
            <div class="embed-controls">
                <label class="embed-label">"Your trace: "
                    <input class="embed-file" type="file" accept=ui::TRACE_FILES
                        on:change=move |ev| ui::load_chosen(ctx, &ev)/>
                </label>
            </div>
        }
    });
    let charts = o.charts;
    view! {
        <div class="moeplan-embed">
            {own_file}
            {budget}
            {cluster}
            {rule}
            <Show when=move || ui::has_frame(ctx) fallback=move || ui::status_line(ctx)>
                {charts.iter().map(|c| match c {
                    Chart::Curve => ui::curve_figure(ctx).into_any(),
                    Chart::Summary => ui::summary_table(ctx).into_any(),
                    Chart::Layers => ui::layers_figure(ctx).into_any(),
                    Chart::Replicas => ui::replicas_figure(ctx).into_any(),
                    Chart::Heat => ui::heat_figure(ctx).into_any(),
                    Chart::Placement => ui::placement_figure(ctx, layer_slider).into_any(),
                    Chart::Timeline => ui::timeline_figure(ctx).into_any(),
                    Chart::Traffic => ui::traffic_panel(ctx).into_any(),
                }).collect_view()}
                // Errors after the first view (a refused budget, a worker
                // restarted) show under the charts.
                <Show when=move || ui::is_error(ctx)>{ui::status_line(ctx)}</Show>
            </Show>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<EmbedOptions, String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EmbedOptions::parse(&owned)
    }

    #[test]
    fn defaults_and_every_attribute() {
        let d = parse(&[]).unwrap();
        let counts = Settings {
            routes: false,
            hardware: String::new(),
            ..Settings::default()
        };
        assert_eq!(d.settings, counts);
        assert_eq!(d.charts, [Chart::Summary, Chart::Curve]);
        assert_eq!((d.planners, d.controls, d.trace), (None, vec![], None));
        let o = parse(&[
            ("preset", "OLMoE"),
            ("batches", "16"),
            ("seed", "3"),
            ("routes", ""),
            ("nodes", "1"),
            ("gpus-per-node", "16"),
            ("groups", "1"),
            ("budget", "auto"),
            ("layer", "3"),
            ("rule", "vllm"),
            ("memory", "GLM-4.5"),
            ("planners", "eplb craft"),
            ("charts", "placement,traffic,timeline,heat,replicas,layers"),
            ("controls", "budget, layer, cluster, rule, file"),
            ("trace", "traces/a.json"),
        ])
        .unwrap();
        let s = &o.settings;
        assert_eq!(
            (s.preset.as_str(), s.batches, s.seed, s.routes),
            ("olmoe", 16, 3, true)
        );
        assert_eq!((s.nodes, s.gpus_per_node, s.groups), (1, 16, 1));
        assert_eq!(s.memory_model, "glm-4.5");
        assert_eq!(
            (s.replicas_per_gpu, s.layer, s.rule.as_str()),
            (None, 3, "vllm")
        );
        assert_eq!(o.planners, Some(vec!["eplb".into(), "craft".into()]));
        assert_eq!(o.charts.len(), 6);
        assert_eq!(
            o.controls,
            [
                Control::Budget,
                Control::Layer,
                Control::Cluster,
                Control::Rule,
                Control::File
            ]
        );
        assert_eq!(o.trace.as_deref(), Some("traces/a.json"));
    }

    #[test]
    fn bad_attributes_are_one_line_naming_them() {
        for (pairs, words) in [
            (
                &[("nodes", "0")][..],
                "nodes=\"0\": a whole number from 1 to 4096",
            ),
            (&[("gpus-per-node", "x")], "gpus-per-node=\"x\""),
            (&[("budget", "-1")], "budget=\"-1\""),
            (&[("preset", "gpt-9")], "preset=\"gpt-9\""),
            (&[("planners", "eplb,magic")], "planners: unknown planner"),
            (&[("charts", "curve,pie")], "unknown chart \"pie\""),
            (&[("charts", " ")], "charts=\"\""),
            (&[("controls", "seed")], "unknown control \"seed\""),
            (&[("rule", "round-robin")], "rule=\"round-robin\""),
            (&[("routes", "maybe")], "routes=\"maybe\""),
            (
                &[("gpus", "8")],
                "unknown attribute \"gpus\"; did you mean \"gpus-per-node\"?",
            ),
            (&[("gpusPerNode", "8")], "did you mean \"gpus-per-node\"?"),
            (&[("planners", "eplb,crafts")], "did you mean \"craft\"?"),
            (&[("charts", "curves")], "did you mean \"curve\"?"),
            (&[("controls", "budgets")], "did you mean \"budget\"?"),
        ] {
            let e = parse(pairs).unwrap_err();
            assert!(e.contains(words), "{pairs:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
