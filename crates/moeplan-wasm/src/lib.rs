//! The moeplan core for JavaScript.
//!
//! A thin facade: one [`Planner`] struct that holds a trace and its planned
//! [`Workspace`], every method returning `Result<_, js_sys::Error>` through
//! one conversion helper, values crossing as plain JS objects
//! (serde-wasm-bindgen). A documentation page that only wants one plan calls
//! [`plan`]:
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

use moeplan::formats::{self, plan_json};
use moeplan::generator::{GenConfig, generate};
use moeplan::planners::{Budget, EplbConfig, base, contiguous, craft, eplb};
use moeplan::workspace::{Cluster, Workspace};
use moeplan::{LoadTrace, Topology, evaluate, model};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

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
        budget: moeplan::Budget::mib(512).with_hint(
            "the JavaScript API reads traces that expand to at most 512 MiB; \
             use the moeplan CLI with --max-trace-mib for larger ones",
        ),
        ..Default::default()
    }
}

/// The one place a Rust error becomes a JavaScript one.
fn js_error(e: impl std::fmt::Display) -> js_sys::Error {
    js_sys::Error::new(&e.to_string())
}

fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, js_sys::Error> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(js_error)
}

/// Settings objects go through JSON so serde's `deny_unknown_fields` sees
/// every key: a misspelt option is an error, not silently ignored.
fn from_js<T: for<'de> Deserialize<'de>>(value: JsValue) -> Result<T, js_sys::Error> {
    let text: String = js_sys::JSON::stringify(&value)
        .map_err(|_| js_error("settings must be a plain object"))?
        .into();
    serde_json::from_str(&text).map_err(|e| js_error(format!("settings: {e}")))
}

/// Settings of [`plan`], camelCase in JavaScript; everything but the
/// cluster has a default.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PlanConfig {
    nodes: usize,
    gpus_per_node: usize,
    #[serde(default = "one")]
    groups: usize,
    /// `craft` (default), `eplb`, `base` or `contiguous`.
    #[serde(default)]
    algorithm: Option<String>,
    /// CRAFT's budget; absent = automatic.
    #[serde(default)]
    replicas_per_gpu: Option<usize>,
    /// EPLB's redundant experts per layer; absent = one per GPU.
    #[serde(default)]
    redundant_experts: Option<usize>,
}

fn one() -> usize {
    1
}

/// Plans a trace in one call: returns `{ plan, report }` where `plan` is the
/// project's plan JSON as an object and `report` the in-sample evaluation.
#[wasm_bindgen]
pub fn plan(trace: &[u8], config: JsValue) -> Result<JsValue, js_sys::Error> {
    let cfg: PlanConfig = from_js(config)?;
    let trace = formats::read_trace(trace, &read_options()).map_err(js_error)?;
    let topology = Topology::new(cfg.nodes, cfg.gpus_per_node).map_err(js_error)?;
    let d = topology.num_gpus();
    let e = trace.num_experts();
    let plan = match cfg.algorithm.as_deref().unwrap_or("craft") {
        "craft" => craft(
            &trace,
            topology,
            cfg.replicas_per_gpu
                .map_or(Budget::Auto, Budget::ReplicasPerGpu),
        ),
        "eplb" => eplb(
            &trace,
            topology,
            EplbConfig {
                redundant_experts: cfg.redundant_experts.unwrap_or(d - e % d),
                groups: cfg.groups,
            },
        ),
        "base" => base(&trace, topology, cfg.groups),
        "contiguous" => contiguous(&trace, topology),
        other => {
            return Err(js_error(format!(
                "unknown algorithm {other:?}: craft, eplb, base or contiguous"
            )));
        }
    }
    .map_err(js_error)?;
    let report = evaluate(&trace, &plan).map_err(js_error)?;
    let json = plan_json::write(&plan, &Default::default());
    let plan_value: serde_json::Value = serde_json::from_str(&json).map_err(js_error)?;
    to_js(&serde_json::json!({ "plan": plan_value, "report": report }))
}

/// The built-in model shapes (name, layers, experts, top-k, bytes per expert).
#[wasm_bindgen]
pub fn presets() -> Result<JsValue, js_sys::Error> {
    let v: Vec<serde_json::Value> = model::PRESETS
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name, "display": p.display, "moeLayers": p.moe_layers(),
                "experts": p.experts, "topK": p.top_k, "groups": p.groups,
                "expertBytes": p.expert_bytes(),
            })
        })
        .collect();
    to_js(&v)
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
    #[wasm_bindgen(js_name = loadTrace)]
    pub fn load_trace(&mut self, bytes: &[u8]) -> Result<JsValue, js_sys::Error> {
        let trace = formats::read_trace(bytes, &read_options()).map_err(js_error)?;
        self.set_trace(trace)
    }

    /// Generates a trace with a model preset's shape.
    pub fn generate(
        &mut self,
        preset: &str,
        batches: usize,
        seed: u32,
    ) -> Result<JsValue, js_sys::Error> {
        let p = model::preset(preset).map_err(js_error)?;
        let trace = generate(&GenConfig {
            seed: seed.into(),
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
    pub fn configure(
        &mut self,
        cluster: JsValue,
        replicas_per_gpu: Option<usize>,
    ) -> Result<JsValue, js_sys::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct C {
            nodes: usize,
            gpus_per_node: usize,
            #[serde(default = "one")]
            groups: usize,
        }
        let c: C = from_js(cluster)?;
        let trace = self
            .trace
            .clone()
            .ok_or_else(|| js_error("load or generate a trace first"))?;
        let ws = Workspace::new(
            trace,
            Cluster {
                nodes: c.nodes,
                gpus_per_node: c.gpus_per_node,
                groups: c.groups,
            },
        )
        .map_err(js_error)?;
        let view = ws.view(replicas_per_gpu, 0).map_err(js_error)?;
        self.workspace = Some(ws);
        to_js(&view)
    }

    /// The view for a budget and a layer index (cheap).
    pub fn view(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
    ) -> Result<JsValue, js_sys::Error> {
        let ws = self.workspace()?;
        to_js(&ws.view(replicas_per_gpu, layer).map_err(js_error)?)
    }

    /// CRAFT's plan as `moeplan` JSON or SGLang `--init-expert-location` JSON.
    pub fn export(
        &self,
        replicas_per_gpu: Option<usize>,
        format: &str,
    ) -> Result<String, js_sys::Error> {
        Ok(self
            .workspace()?
            .export(replicas_per_gpu, format)
            .map_err(js_error)?
            .text)
    }

    fn workspace(&self) -> Result<&Workspace, js_sys::Error> {
        self.workspace
            .as_ref()
            .ok_or_else(|| js_error("configure a cluster first"))
    }
}
