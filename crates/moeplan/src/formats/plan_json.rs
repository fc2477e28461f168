//! The project's own plan JSON.
//!
//! ```json
//! {
//!   "format": "moeplan.plan", "version": 1, "algorithm": "eplb",
//!   "topology": {"nodes": 1, "gpus_per_node": 64},
//!   "num_experts": 256, "model_layers": 61, "model": "deepseek-v3",
//!   "holdout": 0.25,
//!   "provenance": {"traces": [{"fingerprint": "fnv1a64:…", "batches": 64, "planned": [0, 48]}]},
//!   "summary": {"replicas": 64, "slots_per_gpu": [...], ...},
//!   "layers": [{"layer": 3, "gpus": [[12, 200, 7, 31, 90], ...]}, ...]
//! }
//! ```
//! Other tools read only `layers`: for every MoE layer its model layer id and,
//! per GPU, the logical experts it hosts. The reader needs only `layers` too:
//! a missing topology means one node holding every listed GPU, missing
//! `num_experts` means the highest expert id + 1. `provenance` (optional,
//! absent from older files) records the traces the plan was made on
//! ([`crate::data::Provenance`]), so `eval` can tell in-sample figures from
//! figures on another trace. `options` (optional) records the planner's
//! options as it ran (`{"extra_experts_per_gpu": 4, "predictor": "noisy",
//! …}`), so a plan `eval` re-makes (Libra's per-batch copies) is re-made as
//! it was made.

use serde::{Deserialize, Serialize};

use crate::data::plan::{LayerPlacement, Plan, PlanSummary, Provenance};
use crate::data::topology::Topology;
use crate::error::{Error, Result};
use crate::planners::Settings;

const FORMAT: &str = "moeplan plan JSON";
/// Value of the `format` field.
pub(crate) const PLAN_FORMAT: &str = "moeplan.plan";
/// Current schema version.
pub(crate) const PLAN_VERSION: u32 = 1;

/// What a plan file records beside the plan itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanMeta {
    /// Layers of the model in all (dense ones included).
    pub model_layers: Option<usize>,
    /// Model name.
    pub model: Option<String>,
    /// Fraction of the trace's last batches the planner did not see.
    pub holdout: Option<f64>,
    /// The planner's options as it ran, every one of its options at its
    /// value ([`Settings::resolved_for`]): `eval` re-makes a per-batch
    /// planner's plan (Libra's copies) with them. `None` in older files.
    pub options: Option<Settings>,
}

/// A plan file (`moeplan plan`'s JSON; schema in `schemas/`).
#[derive(Serialize)]
#[cfg_attr(
    feature = "typescript",
    derive(tsify::Tsify),
    tsify(rename = "PlanFile")
)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<&'a Provenance>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "typescript",
        tsify(optional, type = "Record<string, unknown>")
    )]
    options: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<Vec<Vec<f64>>>,
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
    #[serde(default)]
    provenance: Option<Provenance>,
    #[serde(default)]
    options: Option<serde_json::Value>,
    #[serde(default)]
    profile: Option<Vec<Vec<f64>>>,
    layers: Vec<LayerPlacement>,
}

/// Writes a plan as JSON.
///
/// ```
/// use moeplan::{LoadTrace, Topology, formats, planners::contiguous};
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![2])?;
/// let plan = contiguous(&trace, Topology::new(1, 2)?)?;
/// let json = formats::write_plan_json(&plan, &Default::default());
/// let (back, _) = formats::read_plan_json(json.as_bytes())?;
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
        provenance: plan.provenance(),
        options: meta.options.as_ref().map(Settings::to_json),
        profile: plan
            .profile()
            .map(|p| p.outer_iter().map(|r| r.to_vec()).collect()),
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
    if let Some(p) = &raw.provenance {
        p.validate()
            .map_err(|e| Error::parse(FORMAT, e.to_string()))?;
    }
    let options = raw
        .options
        .as_ref()
        .map(Settings::from_json)
        .transpose()
        .map_err(|e| Error::parse(FORMAT, format!("options: {e}")))?;
    let layers = raw.layers.len();
    let profile = raw
        .profile
        .map(|rows| {
            if rows.len() != layers || rows.iter().any(|r| r.len() != num_experts) {
                return Err(Error::parse(
                    FORMAT,
                    format!(
                        "profile: expected {layers} rows of {num_experts} loads, one per MoE layer"
                    ),
                ));
            }
            ndarray::Array2::from_shape_vec((layers, num_experts), rows.concat())
                .map_err(|e| Error::parse(FORMAT, format!("profile: {e}")))
        })
        .transpose()?;
    let plan = Plan::new(
        topology,
        num_experts,
        raw.layers,
        raw.algorithm.unwrap_or_else(|| "imported".into()),
    )?
    .with_provenance(raw.provenance)
    .with_profile(profile)
    .map_err(|e| Error::parse(FORMAT, e.to_string()))?;
    Ok((
        plan,
        PlanMeta {
            model_layers: raw.model_layers,
            model: raw.model,
            holdout: raw.holdout,
            options,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::trace::LoadTrace;
    use crate::planners::contiguous;
    use ndarray::Array3;

    fn plan_and_trace() -> (Plan, LoadTrace) {
        let trace = LoadTrace::new(Array3::from_elem((4, 1, 4), 1.0), vec![0]).unwrap();
        let plan = contiguous(&trace, Topology::new(1, 2).unwrap()).unwrap();
        (plan, trace)
    }

    #[test]
    fn provenance_round_trips_and_is_in_the_schema() {
        let (plan, trace) = plan_and_trace();
        let plan = plan.with_provenance(Some(Provenance::of(&trace, 0..3).unwrap()));
        let json = write(&plan, &PlanMeta::default());
        let (back, _) = read(json.as_bytes()).unwrap();
        assert_eq!(back.provenance(), plan.provenance());
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../../../schemas/moeplan.plan.schema.json"))
                .unwrap();
        let written: serde_json::Value = serde_json::from_str(&json).unwrap();
        let p = &schema["properties"]["provenance"]["properties"]["traces"]["items"]["properties"];
        for key in written["provenance"]["traces"][0]
            .as_object()
            .unwrap()
            .keys()
        {
            assert!(p.get(key).is_some(), "{key} is not in the schema");
        }
    }

    #[test]
    fn older_files_load_without_provenance_and_bad_claims_are_refused() {
        let (plan, _) = plan_and_trace();
        let json = write(&plan, &PlanMeta::default());
        assert!(!json.contains("provenance"));
        assert_eq!(read(json.as_bytes()).unwrap().0.provenance(), None);
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        for bad in [
            serde_json::json!({"traces": []}),
            serde_json::json!({"traces": [{"fingerprint": "x", "batches": 2, "planned": [1, 3]}]}),
            serde_json::json!({"traces": [{"fingerprint": "x", "batches": 2, "planned": [1, 1]}]}),
            serde_json::json!({"traces": [{"fingerprint": "x", "batches": 2, "planned": [0, 2], "weight": -1.0}]}),
        ] {
            v["provenance"] = bad.clone();
            let err = read(v.to_string().as_bytes()).unwrap_err().to_string();
            assert!(err.contains("provenance"), "{bad}: {err}");
        }
    }

    #[test]
    fn profile_round_trips_and_a_wrong_shape_is_refused() {
        let (plan, trace) = plan_and_trace();
        let profile = trace.counts().sum_axis(ndarray::Axis(0));
        let plan = plan.with_profile(Some(profile)).unwrap();
        let json = write(&plan, &PlanMeta::default());
        let (back, _) = read(json.as_bytes()).unwrap();
        assert_eq!(back, plan);
        assert_eq!(back.profile().unwrap()[[0, 2]], 4.0);
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../../../schemas/moeplan.plan.schema.json"))
                .unwrap();
        assert!(schema["properties"].get("profile").is_some());
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        for bad in [
            serde_json::json!([[1.0, 1.0, 1.0]]),
            serde_json::json!([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]),
            serde_json::json!([[1.0, -1.0, 1.0, 1.0]]),
        ] {
            v["profile"] = bad.clone();
            let err = read(v.to_string().as_bytes()).unwrap_err().to_string();
            assert!(err.contains("profile"), "{bad}: {err}");
        }
    }
}
