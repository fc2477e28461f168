//! The moeplan core for JavaScript.
//!
//! A thin facade: one [`Planner`] struct that holds a trace and its planned
//! [`Workspace`], every method returning `Result<_, js_sys::Error>` through
//! one conversion helper, values crossing as plain JS objects
//! (serde-wasm-bindgen). Planner names, options and defaults are the core's
//! registry ([`planners()`] lists them). A documentation page that only wants
//! one plan calls [`plan`]:
//!
//! ```js
//! import init, { plan } from "./moeplan_wasm.js";
//! await init();
//! const bytes = new Uint8Array(await (await fetch("trace.json")).arrayBuffer());
//! const { report, plan: p } = plan(bytes, { nodes: 1, gpusPerNode: 64, algorithm: "craft", replicasPerGpu: 8 });
//! console.log(report.balancedness, p.layers[0].gpus[0]);
//! ```
//!
//! User input never panics the module: a bad trace or setting is a thrown
//! `Error` with one clear message, and a [`Planner`] keeps its previous trace.
//! Every message names things as the caller wrote them and as
//! `moeplan_wasm.d.ts` declares them: the function, the argument, the
//! option in camelCase with the closest known one suggested; arguments are
//! read as JavaScript passes them (`args`), so a wrong type says what was
//! expected instead of failing inside the generated glue.
//!
//! The `.d.ts` is generated, none of it kept by hand: the settings types
//! (`PlanSettings`, `PlanOptions`, `Algorithm`) by `build.rs` from the
//! core's planner registry, the returned objects (`PlanResult`, `View`,
//! `TraceStats`, `EvalReport`, `PlanFile`, …) by `tsify` from the Rust types
//! that serialise them (the core's `typescript` feature), and each function
//! names them through `unchecked_param_type` / `unchecked_return_type`.

use moeplan::Workload;
use moeplan::formats;
use moeplan::judge::cost::Pricing;
use moeplan::judge::{Judge, JudgedSchedule};
use moeplan::planners::{self, CRAFT_ID, PlannerId, Settings};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{EvalReport, LoadTrace, Topology, data::model};
use moeplan_view::{Cluster, Workspace};
use serde::{Deserialize, Serialize};
use tsify::Tsify;
use wasm_bindgen::prelude::*;

mod args;
mod names;
use names::{camel_case, snake_case};

#[wasm_bindgen(typescript_custom_section)]
const SETTINGS_TS: &str = include_str!(concat!(env!("OUT_DIR"), "/api.d.ts"));

/// Installs the panic hook so a bug shows a Rust message in the console.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// What reading one trace may build (the bytes handed in included):
/// 512 MiB, with a hint for JavaScript callers, who have no
/// `--max-trace-mib` to pass.
fn read_options() -> formats::ReadOptions {
    formats::ReadOptions {
        budget: moeplan::ReadLimits::mib(512).with_hint(
            "the JavaScript API reads traces that expand to at most 512 MiB; \
             use the moeplan CLI with --max-trace-mib for larger ones",
        ),
        ..Default::default()
    }
}

/// The one place a Rust error becomes a JavaScript one (in the caller's
/// names, [`args::error`]).
fn js_error(e: impl std::fmt::Display) -> js_sys::Error {
    args::error(e)
}

fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, js_sys::Error> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(js_error)
}

/// The keys [`plan`]'s settings take besides the planners' options.
const PLAN_KEYS: [&str; 5] = ["nodes", "gpusPerNode", "algorithm", "hardware", "model"];

/// Every key [`plan`]'s settings take, as the caller writes them.
fn plan_keys() -> Vec<String> {
    PLAN_KEYS
        .iter()
        .map(|k| k.to_string())
        .chain(planners::all_options().iter().map(|o| camel_case(o.name)))
        .collect()
}

/// What [`plan`]'s settings object says: the cluster, the planner
/// (`algorithm`, default `craft`) and planner options — any registered
/// planner's, camelCase (`redundantExperts`, `replicasPerGpu`, `groups`,
/// `objective`, `refine`, …; [`planners`] lists them). Options the chosen
/// planner does not take are ignored; a name no planner takes is an error.
/// `hardware` (a preset, `hardwareNames()`) and `model` (default: the
/// trace's, else DeepSeek-V3) are what CRAFT's `objective: "time"` prices
/// with: returned as names, resolved once the trace is read.
fn plan_config(text: &str) -> Result<(Topology, PlannerId, Settings, Priced), String> {
    let serde_json::Value::Object(map) =
        serde_json::from_str(text).map_err(|e| format!("settings: {e}"))?
    else {
        return Err("settings must be a plain object".into());
    };
    let count = |key: &str| -> Result<usize, String> {
        map.get(key)
            .and_then(serde_json::Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("settings: `{key}` must be a whole number"))
    };
    let topology =
        Topology::new(count("nodes")?, count("gpusPerNode")?).map_err(|e| e.to_string())?;
    let algorithm = match map.get("algorithm") {
        None | Some(serde_json::Value::Null) => CRAFT_ID,
        Some(serde_json::Value::String(s)) => {
            s.parse().map_err(|e: moeplan::Error| e.to_string())?
        }
        Some(other) => {
            return Err(format!(
                "settings: `algorithm` must be a string, got {other}"
            ));
        }
    };
    let word = |key: &str| -> Result<Option<String>, String> {
        match map.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("settings: `{key}` must be a string, got {other}")),
        }
    };
    let priced = Priced {
        hardware: word("hardware")?,
        model: word("model")?,
    };
    let mut settings = Settings::new();
    let known = plan_keys();
    for (key, value) in &map {
        if PLAN_KEYS.contains(&key.as_str()) {
            continue;
        }
        // camelCase only, as the `.d.ts` declares: `replicas_per_gpu` or
        // `replicasPerGPU` is a misspelling of `replicasPerGpu`
        let name = snake_case(key);
        if planners::option(&name).is_none() || camel_case(&name) != *key {
            return Err(format!(
                "settings: unknown option `{key}`{} (known: {})",
                args::suggestion(key, known.iter().map(String::as_str)),
                known.join(", ")
            ));
        }
        settings
            .set_json(&name, value)
            .map_err(|e| format!("settings: {}", args::message_in_js(&e.to_string())))?;
    }
    Ok((topology, algorithm, settings, priced))
}

/// [`plan`]'s `hardware` and `model`, by name.
#[derive(Debug)]
struct Priced {
    hardware: Option<String>,
    model: Option<String>,
}

impl Priced {
    /// The pricing they name, on the judge's model (`None` without a
    /// hardware).
    fn resolve(&self, judge: &Judge) -> Result<Option<Pricing>, moeplan::Error> {
        let Some(h) = &self.hardware else {
            return Ok(None);
        };
        Ok(Some(judge.priced_on(moeplan::data::hardware::preset(h)?)))
    }
}

/// Plans a trace in one call: returns `{ plan, report, budget }` where
/// `plan` is the project's plan JSON as an object, `report` the in-sample
/// evaluation and `budget` the planner's budget used (`auto` resolved; absent
/// for planners without one). Defaults are the registry's, the same as the
/// CLI's and the page's. A per-batch planner (`algorithm: "libra"`) also
/// gives `schedule`: its per-batch replay (`per_batch_imbalance_ratio`,
/// `per_batch_copies`, …) — `plan` and `report` are then its static base;
/// `schedule` is `null` for the others.
#[wasm_bindgen(unchecked_return_type = "PlanResult")]
pub fn plan(
    #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] trace: JsValue,
    #[wasm_bindgen(js_name = "settings", unchecked_param_type = "PlanSettings")] config: JsValue,
) -> Result<JsValue, js_sys::Error> {
    let bytes = args::bytes("plan", "trace", &trace)?;
    let text = args::object("plan", "settings", &config, "{ nodes: 1, gpusPerNode: 8 }")?;
    // Its messages are in the caller's words already (an unknown key
    // verbatim, even in snake_case).
    let (topology, algorithm, settings, priced) =
        plan_config(&text).map_err(|e| js_sys::Error::new(&format!("plan: {e}")))?;
    let trace = formats::read_trace(&bytes, &read_options()).map_err(js_error)?;
    // One model for the bytes a schedule copies and the prices CRAFT's
    // time objective plans with: asked, else the trace's, else DeepSeek-V3.
    let judge = Judge::new(Workload::new(trace), priced.model.as_deref()).map_err(js_error)?;
    let settings = settings.priced(priced.resolve(&judge).map_err(js_error)?);
    let planner = algorithm.planner().map_err(js_error)?;
    let work = judge.workload();
    let budget = match planner.budget() {
        Some(spec) => settings.budget(spec).map_err(js_error)?,
        None => None,
    };
    let ready = planners::prepare(planner, work, topology, &settings).map_err(js_error)?;
    let planned = ready.plan(budget).map_err(js_error)?;
    let (plan, budget) = (planned.plan, planned.budget);
    let report = judge.eval_report(&plan).map_err(js_error)?.as_ref().clone();
    let schedule = match ready.schedule(&plan, work).map_err(js_error)? {
        Some(s) => Some(ScheduleReplay::of(
            &judge.schedule(&plan, s, None).map_err(js_error)?,
        )),
        None => None,
    };
    let json = formats::write_plan_json(&plan, &Default::default());
    let plan: serde_json::Value = serde_json::from_str(&json).map_err(js_error)?;
    to_js(&PlanResult {
        plan,
        report,
        budget,
        schedule,
    })
}

/// What [`plan`] returns.
#[derive(Serialize, Tsify)]
pub struct PlanResult {
    /// The plan as the project's plan JSON (`moeplan plan`'s file).
    #[tsify(type = "PlanFile")]
    pub plan: serde_json::Value,
    /// The plan replayed on the trace it was made on.
    pub report: EvalReport,
    /// The budget used, in the planner's unit (`auto` resolved); `null` for
    /// planners without one.
    pub budget: Option<usize>,
    /// A per-batch planner's schedule replayed (`plan` and `report` are then
    /// its static base); `null` for the others.
    pub schedule: Option<ScheduleReplay>,
}

/// A per-batch planner's (Libra's) schedule replayed in-sample.
#[derive(Serialize, Tsify)]
pub struct ScheduleReplay {
    /// How it serves (`per batch, libra-rebalance, …`).
    pub about: String,
    /// The dispatch rule it is replayed under (its own).
    pub rule: String,
    /// Mean over batches, then layers, of mean / max GPU load.
    pub balancedness: f64,
    /// Mean of max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Balancedness of each batch.
    pub per_batch_balancedness: Vec<f64>,
    /// Imbalance ratio of each batch.
    pub per_batch_imbalance_ratio: Vec<f64>,
    /// Expert copies made before each batch.
    pub per_batch_copies: Vec<usize>,
    /// Expert bytes those copies move.
    pub per_batch_bytes_copied: Vec<u64>,
    /// Copies each GPU may take per layer (Libra's N).
    pub extra_slots_per_gpu: usize,
    /// Slots each GPU keeps for the copies over all layers (Libra's two
    /// buffers, 2 · N): its replica memory on the fullest GPU.
    pub resident_slots_per_gpu: usize,
}

impl ScheduleReplay {
    /// What a judged schedule shows: its replay under its own rule, its
    /// copies and their bytes on the judge's model.
    fn of(judged: &JudgedSchedule) -> ScheduleReplay {
        let (s, v) = (&judged.schedule, &judged.verdict);
        ScheduleReplay {
            about: s.about.clone(),
            rule: v.replay.rule.clone(),
            balancedness: v.replay.balancedness,
            imbalance_ratio: v.replay.imbalance_ratio,
            per_batch_balancedness: v.replay.per_batch.clone(),
            per_batch_imbalance_ratio: v.replay.per_batch_imbalance_ratio.clone(),
            per_batch_copies: s.copies_per_batch.clone(),
            per_batch_bytes_copied: v.per_batch_bytes_copied.clone(),
            extra_slots_per_gpu: s.extra_slots_per_gpu,
            resident_slots_per_gpu: s.resident_slots_per_gpu,
        }
    }
}

/// Every registered planner with its options (camelCase names, kinds,
/// defaults — `auto` for a budget the planner chooses), in the order the
/// CLI's `compare` and the page list them.
#[wasm_bindgen(unchecked_return_type = "PlannerInfo[]")]
pub fn planners() -> Result<JsValue, js_sys::Error> {
    to_js(&planner_list())
}

fn planner_list() -> serde_json::Value {
    let mut list = serde_json::to_value(planners::describe()).unwrap_or_default();
    if let Some(list) = list.as_array_mut() {
        for option in list
            .iter_mut()
            .filter_map(|p| p.get_mut("options").and_then(|o| o.as_array_mut()))
            .flatten()
        {
            if let Some(name) = option.get("name").and_then(|n| n.as_str()) {
                option["name"] = camel_case(name).into();
            }
        }
    }
    list
}

/// The hardware presets `Planner.viewPriced` takes, by name
/// (`moeplan hardware` lists them with their figures).
#[wasm_bindgen(js_name = hardwareNames, unchecked_return_type = "string[]")]
pub fn hardware_names() -> Result<JsValue, js_sys::Error> {
    let names: Vec<&str> = moeplan::data::hardware::listed().map(|(n, _)| n).collect();
    to_js(&names)
}

/// The built-in model shapes (name, layers, experts, top-k, bytes per expert).
#[wasm_bindgen(unchecked_return_type = "Preset[]")]
pub fn presets() -> Result<JsValue, js_sys::Error> {
    let v: Vec<Preset> = model::PRESETS
        .iter()
        .map(|p| Preset {
            name: p.name,
            display: p.display,
            moe_layers: p.moe_layers(),
            experts: p.experts,
            top_k: p.top_k,
            groups: p.groups,
            expert_bytes: p.expert_bytes(),
        })
        .collect();
    to_js(&v)
}

/// A built-in model shape, as [`presets`] lists it.
#[derive(Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct Preset {
    /// What [`Planner::generate`] takes (`deepseek-v3`).
    pub name: &'static str,
    /// How it is printed.
    pub display: &'static str,
    /// MoE layers.
    pub moe_layers: usize,
    /// Routed experts per MoE layer.
    pub experts: usize,
    /// Experts each token is routed to.
    pub top_k: usize,
    /// Router expert groups.
    pub groups: usize,
    /// Bytes of one expert's weights.
    pub expert_bytes: u64,
}

/// What [`Planner::configure`] reads: the cluster to plan on.
#[derive(Deserialize, Tsify)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSettings {
    /// Nodes (at least 1).
    pub nodes: usize,
    /// GPUs per node (at least 1).
    pub gpus_per_node: usize,
    /// Router expert groups for EPLB's hierarchical policy (default: the
    /// model's, as SGLang and vLLM pass it: DeepSeek-V3 / R1 8, else 1).
    #[serde(default)]
    pub groups: Option<usize>,
}

/// A trace and its plans, kept between calls so a budget change is cheap.
#[wasm_bindgen]
#[derive(Default)]
pub struct Planner {
    trace: Option<LoadTrace>,
    workspace: Option<Workspace>,
}

#[wasm_bindgen]
impl Planner {
    /// An empty planner.
    #[wasm_bindgen(constructor)]
    pub fn new() -> Planner {
        Planner::default()
    }

    /// Reads a trace (any supported format, detected by content) and returns
    /// its statistics. On error the previous trace stays.
    #[wasm_bindgen(js_name = loadTrace, unchecked_return_type = "TraceStats")]
    pub fn load_trace(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | number[]")] bytes: JsValue,
    ) -> Result<JsValue, js_sys::Error> {
        let bytes = args::bytes("Planner.loadTrace", "bytes", &bytes)?;
        let trace = formats::read_trace(&bytes, &read_options()).map_err(js_error)?;
        self.set_trace(trace)
    }

    /// Generates a trace with a model preset's shape (`presets()` lists
    /// them): `batches` batches, seeded by `seed`.
    #[wasm_bindgen(unchecked_return_type = "TraceStats")]
    pub fn generate(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] preset: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] batches: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] seed: JsValue,
    ) -> Result<JsValue, js_sys::Error> {
        const CALL: &str = "Planner.generate";
        let preset = args::string(CALL, "preset", &preset, false, "a preset's name, presets()")?
            .unwrap_or_default();
        let batches = args::count(CALL, "batches", &batches, false, 1 << 16)?.unwrap_or(0);
        let seed = args::count(CALL, "seed", &seed, false, u32::MAX as usize)?.unwrap_or(0);
        let p = model::preset(&preset).map_err(|e| {
            let names = model::PRESETS.iter().map(|p| p.name);
            js_error(format!("{CALL}: {e}{}", args::suggestion(&preset, names)))
        })?;
        let trace = generate(&GenConfig {
            seed: seed as u64,
            ..GenConfig::new(p, batches)
        })
        .map_err(js_error)?;
        self.set_trace(trace)
    }

    fn set_trace(&mut self, trace: LoadTrace) -> Result<JsValue, js_sys::Error> {
        let stats = to_js(&trace.stats())?;
        self.trace = Some(trace);
        self.workspace = None;
        Ok(stats)
    }

    /// Plans the current trace on `{ nodes, gpusPerNode, groups }` (the
    /// expensive step) and returns the view for `replicasPerGpu` (`undefined`
    /// = automatic).
    #[wasm_bindgen(unchecked_return_type = "View")]
    pub fn configure(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ClusterSettings")] cluster: JsValue,
        #[wasm_bindgen(
            js_name = "replicasPerGpu",
            unchecked_optional_param_type = "number | null"
        )]
        replicas_per_gpu: JsValue,
    ) -> Result<JsValue, js_sys::Error> {
        const CALL: &str = "Planner.configure";
        let c = ClusterSettings::read(CALL, &cluster)?;
        let replicas_per_gpu = replicas(CALL, &replicas_per_gpu)?;
        let trace = self
            .trace
            .clone()
            .ok_or_else(|| js_error("load or generate a trace first"))?;
        let groups = match c.groups {
            Some(g) => g,
            None => moeplan::planners::groups(&Default::default(), &trace).map_err(js_error)?,
        };
        let ws = Workspace::new(
            trace,
            Cluster {
                nodes: c.nodes,
                gpus_per_node: c.gpus_per_node,
                groups,
            },
        )
        .map_err(js_error)?;
        let view = ws.view(replicas_per_gpu, 0).map_err(js_error)?;
        self.workspace = Some(ws);
        to_js(&view)
    }

    /// The view for a budget and a layer index (cheap).
    #[wasm_bindgen(unchecked_return_type = "View")]
    pub fn view(
        &self,
        #[wasm_bindgen(
            js_name = "replicasPerGpu",
            unchecked_param_type = "number | null | undefined"
        )]
        replicas_per_gpu: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] layer: JsValue,
    ) -> Result<JsValue, js_sys::Error> {
        const CALL: &str = "Planner.view";
        let replicas_per_gpu = replicas(CALL, &replicas_per_gpu)?;
        let layer = args::count(CALL, "layer", &layer, false, 1 << 16)?.unwrap_or(0);
        let ws = self.workspace()?;
        to_js(&ws.view(replicas_per_gpu, layer).map_err(js_error)?)
    }

    /// [`Planner::view`] with every plan priced on a hardware preset
    /// (`hardwareNames()`): each plan's `predicted` holds its step time,
    /// tokens/s, speedup over BASE, the MoE layer's compute, dispatch and
    /// combine, and its KV cache (docs/cost.md). `model`: whose sizes the
    /// prices and the traffic's bytes use (`undefined`: the trace's, else
    /// DeepSeek-V3); another model than the last call's plans the cluster
    /// again on it, as [`Planner::configure`] does.
    #[wasm_bindgen(js_name = viewPriced, unchecked_return_type = "View")]
    pub fn view_priced(
        &mut self,
        #[wasm_bindgen(
            js_name = "replicasPerGpu",
            unchecked_param_type = "number | null | undefined"
        )]
        replicas_per_gpu: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] layer: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] hardware: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "string | null")] model: JsValue,
    ) -> Result<JsValue, js_sys::Error> {
        const CALL: &str = "Planner.viewPriced";
        let replicas_per_gpu = replicas(CALL, &replicas_per_gpu)?;
        let layer = args::count(CALL, "layer", &layer, false, 1 << 16)?.unwrap_or(0);
        let hardware = args::string(
            CALL,
            "hardware",
            &hardware,
            false,
            "a preset's name, hardwareNames()",
        )?
        .unwrap_or_default();
        let model = args::string(CALL, "model", &model, true, "a preset's name, presets()")?;
        if moeplan::data::hardware::preset(&hardware).is_err() {
            let names: Vec<&str> = moeplan::data::hardware::listed().map(|(n, _)| n).collect();
            return Err(js_error(format!(
                "{CALL}: unknown hardware `{hardware}`{} (hardwareNames(): {})",
                args::suggestion(&hardware, names.iter().copied()),
                names.join(", ")
            )));
        }
        let ws = self.workspace()?;
        if ws.asked_model() != model.as_deref() {
            let next = Workspace::of_workload_deferring(
                ws.workload().clone(),
                ws.cluster(),
                Some(ws),
                false,
                &ws.options().clone(),
                model.as_deref(),
                |_| {},
            )
            .map_err(js_error)?;
            self.workspace = Some(next);
        }
        let ws = self.workspace()?;
        let named = Priced {
            hardware: Some(hardware),
            model,
        };
        let pricing = named
            .resolve(ws.judge())
            .map_err(js_error)?
            .ok_or_else(|| js_error("no hardware"))?;
        let view = ws
            .view_priced(
                replicas_per_gpu,
                layer,
                moeplan::judge::Rule::Even,
                // With the series: the view that prices a per-batch
                // schedule (Libra) too, so every plan comes priced.
                true,
                Some(&pricing),
            )
            .map_err(js_error)?;
        to_js(&view)
    }

    /// CRAFT's plan as `moeplan` JSON or SGLang `--init-expert-location` JSON.
    pub fn export(
        &self,
        #[wasm_bindgen(
            js_name = "replicasPerGpu",
            unchecked_param_type = "number | null | undefined"
        )]
        replicas_per_gpu: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] format: JsValue,
    ) -> Result<String, js_sys::Error> {
        const CALL: &str = "Planner.export";
        let replicas_per_gpu = replicas(CALL, &replicas_per_gpu)?;
        let format = args::string(
            CALL,
            "format",
            &format,
            false,
            "a plan format, e.g. \"moeplan\"",
        )?
        .unwrap_or_default();
        Ok(self
            .workspace()?
            .export(replicas_per_gpu, &format)
            .map_err(|e| js_error(format!("{CALL}: {e}")))?
            .text)
    }

    fn workspace(&self) -> Result<&Workspace, js_sys::Error> {
        self.workspace.as_ref().ok_or_else(|| {
            js_error("configure a cluster first: planner.configure({ nodes, gpusPerNode })")
        })
    }
}

/// The replicas-per-GPU budget argument: a whole number, or `undefined`
/// for the automatic one.
fn replicas(call: &str, v: &JsValue) -> Result<Option<usize>, js_sys::Error> {
    args::count(call, "replicasPerGpu", v, true, 1 << 16)
}

impl ClusterSettings {
    /// The cluster object `call` was given, every key checked in the
    /// caller's names.
    fn read(call: &str, v: &JsValue) -> Result<ClusterSettings, js_sys::Error> {
        const KEYS: [&str; 3] = ["nodes", "gpusPerNode", "groups"];
        args::object(call, "cluster", v, "{ nodes: 1, gpusPerNode: 8 }")?;
        for key in args::keys(v) {
            if !KEYS.contains(&key.as_str()) {
                return Err(js_error(format!(
                    "{call}: unknown cluster setting `{key}`{} (known: {})",
                    args::suggestion(&key, KEYS),
                    KEYS.join(", ")
                )));
            }
        }
        let field = |k: &str| js_sys::Reflect::get(v, &JsValue::from_str(k)).unwrap_or_default();
        let at = |k: &str| format!("cluster.{k}");
        let count = |k: &str, optional: bool| args::count(call, &at(k), &field(k), optional, 4096);
        Ok(ClusterSettings {
            nodes: count("nodes", false)?.unwrap_or(0),
            gpus_per_node: count("gpusPerNode", false)?.unwrap_or(0),
            groups: count("groups", true)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_settings_read_into_the_registry() {
        let (topo, algo, s, _) = plan_config(
            r#"{"nodes": 1, "gpusPerNode": 6, "algorithm": "eplb", "redundantExperts": 8, "groups": 2}"#,
        )
        .unwrap();
        assert_eq!((topo.num_gpus(), algo.as_str()), (6, "eplb"));
        assert_eq!(s.get("redundant_experts"), Some(&planners::Value::Count(8)));
        let (_, algo, s, priced) = plan_config(r#"{"nodes": 1, "gpusPerNode": 2}"#).unwrap();
        assert_eq!(algo, CRAFT_ID);
        assert!(s.is_empty(), "absent options are the registry's defaults");
        assert!(priced.hardware.is_none() && priced.model.is_none());
        // objective time prices on the named hardware, the trace's model
        let (_, _, s, priced) = plan_config(
            r#"{"nodes": 1, "gpusPerNode": 8, "objective": "time", "hardware": "h100-ib-ndr"}"#,
        )
        .unwrap();
        assert_eq!(
            s.get("objective"),
            Some(&planners::Value::Word("time".into()))
        );
        let trace = generate(&GenConfig::new(model::preset("olmoe").unwrap(), 2)).unwrap();
        let judge = Judge::new(Workload::new(trace), priced.model.as_deref()).unwrap();
        let p = priced.resolve(&judge).unwrap().unwrap();
        assert_eq!(
            (p.hardware.name.as_ref(), p.model.name),
            ("h100-ib-ndr", "olmoe")
        );
        for (bad, needle) in [
            (r#"{"nodes": 1, "gpusPerNode": 2, "typo": 1}"#, "typo"),
            (
                r#"{"nodes": 1, "gpusPerNode": 2, "replicasPerGPU": 1}"#,
                "unknown option `replicasPerGPU`; did you mean `replicasPerGpu`?",
            ),
            (
                r#"{"nodes": 1, "gpusPerNode": 2, "replicas_per_gpu": 1}"#,
                "unknown option `replicas_per_gpu`; did you mean `replicasPerGpu`?",
            ),
            (
                r#"{"nodes": 1, "gpusPerNode": 2, "replicasPerGpu": "lots"}"#,
                "settings: invalid argument: replicasPerGpu: expected",
            ),
            (
                r#"{"nodes": 1, "gpusPerNode": 2, "algorithm": "bogus"}"#,
                "unknown planner",
            ),
            (
                r#"{"nodes": 1, "gpusPerNode": 2, "replicasPerGpu": "lots"}"#,
                "auto",
            ),
            (r#"{"nodes": 0, "gpusPerNode": 2}"#, "node"),
            (r#"{"gpusPerNode": 2}"#, "nodes"),
            (
                r#"{"nodes": 1, "gpusPerNode": 2, "hardware": 3}"#,
                "hardware",
            ),
        ] {
            let e = plan_config(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    /// The listing is the registry's, with JavaScript's names.
    #[test]
    fn planners_are_listed_with_camel_case_options() {
        let list = planner_list();
        let ids: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap())
            .collect();
        let registered: Vec<&str> = planners::registry()
            .iter()
            .map(|p| p.id().as_str())
            .collect();
        assert_eq!(ids, registered);
        let eplb = &list[2];
        assert_eq!(eplb["options"][0]["name"], "redundantExperts");
        assert_eq!(eplb["options"][0]["default"], "auto");
        for p in list.as_array().unwrap() {
            for o in p["options"].as_array().unwrap() {
                let name = o["name"].as_str().unwrap();
                assert!(planners::option(&snake_case(name)).is_some(), "{name}");
            }
        }
    }
}
