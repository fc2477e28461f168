//! The project's own plan JSON.
//!
//! ```json
//! {
//!   "format": "moeplan.plan", "version": 1, "algorithm": "eplb",
//!   "topology": {"nodes": 1, "gpus_per_node": 64},
//!   "num_experts": 256, "model_layers": 61, "model": "deepseek-v3",
//!   "holdout": 0.25,
//!   "summary": {"replicas": 64, "slots_per_gpu": [...], ...},
//!   "layers": [{"layer": 3, "gpus": [[12, 200, 7, 31, 90], ...]}, ...]
//! }
//! ```
//! Other tools read only `layers`: for every MoE layer its model layer id and,
//! per GPU, the logical experts it hosts. The reader needs only `layers` too:
//! a missing topology means one node holding every listed GPU, missing
//! `num_experts` means the highest expert id + 1.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::plan::{LayerPlacement, Plan, PlanSummary};
use crate::topology::Topology;

const FORMAT: &str = "moeplan plan JSON";
/// Value of the `format` field.
pub const PLAN_FORMAT: &str = "moeplan.plan";
/// Current schema version.
pub const PLAN_VERSION: u32 = 1;

/// What a plan file records beside the plan itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanMeta {
    /// Layers of the model in all (dense ones included).
    pub model_layers: Option<usize>,
    /// Model name.
    pub model: Option<String>,
    /// Fraction of the trace's last batches the planner did not see.
    pub holdout: Option<f64>,
}

#[derive(Serialize)]
struct PlanOut<'a> {
    format: &'static str,
    version: u32,
    algorithm: &'a str,
    topology: Topology,
    num_experts: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_layers: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holdout: Option<f64>,
    summary: PlanSummary,
    layers: &'a [LayerPlacement],
}

#[derive(Deserialize)]
struct PlanIn {
    format: Option<String>,
    version: Option<u32>,
    algorithm: Option<String>,
    topology: Option<Topology>,
    num_experts: Option<usize>,
    model_layers: Option<usize>,
    model: Option<String>,
    holdout: Option<f64>,
    layers: Vec<LayerPlacement>,
}

/// Writes a plan as JSON.
///
/// ```
/// use moeplan::{formats::plan_json, planners::contiguous, LoadTrace, Topology};
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![2])?;
/// let plan = contiguous(&trace, Topology::new(1, 2)?)?;
/// let json = plan_json::write(&plan, &Default::default());
/// let (back, _) = plan_json::read(json.as_bytes())?;
/// assert_eq!(back, plan);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn write(plan: &Plan, meta: &PlanMeta) -> String {
    let out = PlanOut {
        format: PLAN_FORMAT,
        version: PLAN_VERSION,
        algorithm: plan.algorithm(),
        topology: plan.topology(),
        num_experts: plan.num_experts(),
        model_layers: meta.model_layers,
        model: meta.model.as_deref(),
        holdout: meta.holdout,
        summary: plan.summary(),
        layers: plan.layers(),
    };
    // Serialising plain integers, strings and finite floats cannot fail.
    serde_json::to_string(&out).unwrap_or_default()
}

/// Reads a plan JSON and validates the plan.
pub fn read(bytes: &[u8]) -> Result<(Plan, PlanMeta)> {
    let raw: PlanIn =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(FORMAT, e.to_string()))?;
    if let Some(f) = raw.format.as_deref().filter(|f| *f != PLAN_FORMAT) {
        return Err(Error::parse(
            FORMAT,
            format!("format is {f:?}, expected {PLAN_FORMAT:?}"),
        ));
    }
    if let Some(v) = raw.version.filter(|&v| v > PLAN_VERSION) {
        return Err(Error::parse(
            FORMAT,
            format!("version {v} is newer than this moeplan understands ({PLAN_VERSION})"),
        ));
    }
    let first = raw
        .layers
        .first()
        .ok_or_else(|| Error::parse(FORMAT, "\"layers\" is empty"))?;
    let topology = match raw.topology {
        Some(t) => t,
        None => Topology::new(1, first.gpus.len())?,
    };
    let num_experts = raw.num_experts.unwrap_or_else(|| {
        raw.layers
            .iter()
            .flat_map(|l| l.gpus.iter().flatten())
            .max()
            .map_or(0, |&m| m as usize + 1)
    });
    if raw.holdout.is_some_and(|h| !(h > 0.0 && h < 1.0)) {
        return Err(Error::parse(
            FORMAT,
            "holdout must be strictly between 0 and 1",
        ));
    }
    let plan = Plan::new(
        topology,
        num_experts,
        raw.layers,
        raw.algorithm.unwrap_or_else(|| "imported".into()),
    )?;
    Ok((
        plan,
        PlanMeta {
            model_layers: raw.model_layers,
            model: raw.model,
            holdout: raw.holdout,
        },
    ))
}
