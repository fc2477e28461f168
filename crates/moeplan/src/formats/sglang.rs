//! SGLang's formats.
//!
//! - Reading: the expert-distribution JSON, `{"logical_count": [L][E]}` (one
//!   whole-run total) or `[N][L][E]` (N recorded steps, read as batches).
//!   Layers whose counts are all zero are dense layers and are dropped; the
//!   others keep their row index as layer id, so plans map back to the model.
//! - Writing: the `--init-expert-location` JSON,
//!   `{"physical_to_logical_map": [[...]]}`, one row per model layer (dense
//!   ones included: SGLang indexes rows by layer), each row the logical
//!   expert of every physical slot, GPU-major.

use ndarray::Array3;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::trace::LoadTrace;

const FORMAT: &str = "SGLang expert-distribution JSON";

/// Reads `{"logical_count": ...}` from JSON bytes.
///
/// ```
/// let json = br#"{"logical_count": [[0, 0], [3, 1], [2, 2]]}"#;
/// let t = moeplan::formats::sglang::read_expert_distribution(json)?;
/// assert_eq!(t.layer_ids(), &[1, 2]); // layer 0 is dense
/// assert_eq!(t.model_layers(), 3);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_expert_distribution(bytes: &[u8]) -> Result<LoadTrace> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(FORMAT, e.to_string()))?;
    let lc = value
        .get("logical_count")
        .ok_or_else(|| Error::parse(FORMAT, "no \"logical_count\" key at the top level"))?;
    from_counts_value(lc)
}

/// Reads a `[L][E]` or `[N][L][E]` array of counts (the value of
/// `logical_count`, or a bare array file).
pub(crate) fn from_counts_value(lc: &Value) -> Result<LoadTrace> {
    let batches: Vec<&Value> = match depth(lc) {
        2 => vec![lc],
        3 => array(lc, "logical_count")?.iter().collect(),
        d => {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "logical_count must be a 2-D [layers][experts] or 3-D [steps][layers][experts] array, found depth {d}"
                ),
            ));
        }
    };
    let mut dense: Vec<Vec<Vec<f64>>> = Vec::with_capacity(batches.len());
    for (b, batch) in batches.iter().enumerate() {
        let path = if batches.len() == 1 && depth(lc) == 2 {
            "logical_count".to_string()
        } else {
            format!("logical_count[{b}]")
        };
        dense.push(matrix(batch, &path)?);
    }
    let (l, e) = (dense[0].len(), dense[0].first().map_or(0, Vec::len));
    if l == 0 || e == 0 {
        return Err(Error::parse(FORMAT, "logical_count is empty"));
    }
    for (b, m) in dense.iter().enumerate() {
        if m.len() != l {
            return Err(Error::parse(
                FORMAT,
                format!("step {b} has {} layers, step 0 has {l}", m.len()),
            ));
        }
        if let Some((li, row)) = m.iter().enumerate().find(|(_, r)| r.len() != e) {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "ragged rows: layer {li} of step {b} has {} experts, layer 0 has {e}",
                    row.len()
                ),
            ));
        }
    }
    let moe: Vec<usize> = (0..l)
        .filter(|&li| dense.iter().any(|m| m[li].iter().any(|&x| x != 0.0)))
        .collect();
    if moe.is_empty() {
        return Err(Error::Trace("every layer's counts are zero".into()));
    }
    let counts = Array3::from_shape_fn((dense.len(), moe.len(), e), |(b, li, x)| {
        dense[b][moe[li]][x]
    });
    let ids = moe.iter().map(|&x| x as u32).collect();
    Ok(LoadTrace::new(counts, ids)?.with_model_layers(l))
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.first().map_or(0, depth),
        _ => 0,
    }
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>> {
    v.as_array().ok_or_else(|| {
        Error::parse(
            FORMAT,
            format!("{path}: expected an array, found {}", kind(v)),
        )
    })
}

fn matrix(v: &Value, path: &str) -> Result<Vec<Vec<f64>>> {
    array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, row)| {
            array(row, &format!("{path}[{i}]"))?
                .iter()
                .enumerate()
                .map(|(j, x)| {
                    x.as_f64().ok_or_else(|| {
                        Error::parse(
                            FORMAT,
                            format!("{path}[{i}][{j}]: expected a number, found {}", kind(x)),
                        )
                    })
                })
                .collect()
        })
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[derive(Serialize)]
struct InitExpertLocation {
    physical_to_logical_map: Vec<Vec<u32>>,
}

/// Writes SGLang's `--init-expert-location` JSON for a model of
/// `model_layers` layers in all, dense ones included. Needs the same slot
/// count on every GPU in every layer (SGLang has one physical-expert count
/// per GPU); rows of dense layers hold the plain mapping `slot mod E`, which
/// SGLang never reads.
///
/// SGLang (`eplb/expert_location.py`, `init_by_mapping`) turns the map into
/// a `[layers][physical]` tensor and every MoE layer reads the row of its own
/// model layer id; GPU `g` owns slots `g·S .. (g+1)·S`. Older SGLang accepts
/// a file with too few rows silently, serves each MoE layer another layer's
/// placement and fails at dispatch past the last row. So the row count must
/// be the model's real layer count and the plan's layer ids model layer
/// ids: `model_layers` is `None` when the trace does not know them
/// ([`LoadTrace::known_model_layers`]), and the file is then refused with
/// how to name the model.
///
/// ```
/// use moeplan::{formats::sglang, planners::eplb, LoadTrace, Topology};
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![1])?;
/// let plan = eplb::base(&trace, Topology::new(1, 2)?, 1)?;
/// let json = sglang::write_init_expert_location(&plan, Some(2))?;
/// assert!(json.starts_with(r#"{"physical_to_logical_map":[[0,1,2,3],["#));
/// // a trace that only knows its MoE layers: refused, not a short file
/// assert!(sglang::write_init_expert_location(&plan, trace.known_model_layers()).is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn write_init_expert_location(plan: &Plan, model_layers: Option<usize>) -> Result<String> {
    let export = |m: String| Error::Export {
        format: "SGLang --init-expert-location",
        message: m,
    };
    let Some(model_layers) = model_layers else {
        return Err(export(unknown_layers_message(plan)));
    };
    let per_gpu = plan.uniform_slots_per_gpu().ok_or_else(|| {
        export(
            "slot counts differ between GPUs or layers; SGLang needs the same number of \
             physical experts on every GPU in every layer"
                .into(),
        )
    })?;
    let slots = per_gpu * plan.topology().num_gpus();
    let rows = plan.physical_to_logical();
    let last = plan.layers().last().map_or(0, |l| l.layer as usize);
    if model_layers <= last {
        return Err(export(format!(
            "the plan has MoE layer {last} but the model only {model_layers} layers"
        )));
    }
    let e = plan.num_experts() as u32;
    let mut map: Vec<Vec<u32>> = (0..model_layers)
        .map(|_| (0..slots as u32).map(|s| s % e).collect())
        .collect();
    for (lp, row) in plan.layers().iter().zip(rows) {
        map[lp.layer as usize] = row;
    }
    serde_json::to_string(&InitExpertLocation {
        physical_to_logical_map: map,
    })
    .map_err(|x| export(x.to_string()))
}

/// Why a file cannot be written without the model's layer count, and how
/// to give it: the preset of the same shape when there is one.
fn unknown_layers_message(plan: &Plan) -> String {
    let moe = plan.layers().len();
    let (name, total) = crate::model::PRESETS
        .iter()
        .find(|p| p.experts == plan.num_experts() && p.moe_layers() == moe)
        .map_or(("deepseek-v3", 61), |p| (p.name, p.total_layers));
    format!(
        "the model's layer count is unknown (the trace holds only its {moe} MoE layers) \
         and SGLang indexes rows by model layer: a short file loads silently and serves every \
         layer another layer's experts; name the model with --model {name}, or --model-layers \
         {total} when the trace's layer ids are the model's"
    )
}

#[derive(serde::Deserialize)]
struct InitExpertLocationIn {
    physical_to_logical_map: Vec<Vec<u32>>,
}

/// Reads `--init-expert-location` JSON back into a plan: the rows of the
/// MoE layers `layer_ids` (rows are indexed by model layer), split over
/// `topology`'s GPUs.
pub fn read_init_expert_location(
    bytes: &[u8],
    topology: crate::topology::Topology,
    layer_ids: &[u32],
    num_experts: usize,
) -> Result<Plan> {
    const F: &str = "SGLang --init-expert-location";
    let doc: InitExpertLocationIn =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(F, e.to_string()))?;
    let rows = layer_ids
        .iter()
        .map(|&l| {
            doc.physical_to_logical_map
                .get(l as usize)
                .cloned()
                .ok_or_else(|| Error::parse(F, format!("no row for layer {l}")))
        })
        .collect::<Result<Vec<_>>>()?;
    super::vllm::plan_from_rows(&rows, topology, layer_ids, num_experts, F)
}

/// SGLang's legacy per-rank expert-count CSVs (`layer_id,expert_id,count`,
/// one file per rank): summed over ranks into one batch. Experts that never
/// appear get 0; `num_experts` fixes the count (default: highest id + 1).
///
/// ```
/// let r0 = (String::from("rank0.csv"), b"layer_id,expert_id,count\n3,0,5\n3,1,2\n".to_vec());
/// let r1 = (String::from("rank1.csv"), b"layer_id,expert_id,count\n3,1,4\n".to_vec());
/// let mut meter = moeplan::Meter::new(moeplan::Budget::default());
/// let t = moeplan::formats::sglang::read_rank_csvs(&[r0, r1], None, &mut meter)?;
/// assert_eq!(t.counts()[[0, 0, 1]], 6.0);
/// assert_eq!(t.layer_ids(), &[3]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_rank_csvs(
    files: &[(String, Vec<u8>)],
    num_experts: Option<usize>,
    meter: &mut crate::Meter,
) -> Result<LoadTrace> {
    const F: &str = "SGLang per-rank CSV";
    let mut cells: std::collections::BTreeMap<(u32, u32), f64> = Default::default();
    for (name, bytes) in files {
        let mut reader = ::csv::ReaderBuilder::new().from_reader(bytes.as_slice());
        let header = reader
            .headers()
            .map_err(|e| Error::parse(F, format!("{name}: {e}")))?
            .clone();
        if header.iter().map(str::trim).collect::<Vec<_>>() != ["layer_id", "expert_id", "count"] {
            return Err(Error::parse(
                F,
                format!("{name}: header must be layer_id,expert_id,count"),
            ));
        }
        for (i, rec) in reader.records().enumerate() {
            let rec = rec.map_err(|e| Error::parse(F, format!("{name}, line {}: {e}", i + 2)))?;
            let id = |k: usize| -> Result<u32> {
                rec[k].trim().parse().map_err(|_| {
                    Error::parse(
                        F,
                        format!(
                            "{name}, line {}: {:?} is not a whole number",
                            i + 2,
                            &rec[k]
                        ),
                    )
                })
            };
            let c: f64 = rec[2].trim().parse().map_err(|_| {
                Error::parse(
                    F,
                    format!(
                        "{name}, line {}: count {:?} is not a number",
                        i + 2,
                        &rec[2]
                    ),
                )
            })?;
            let (l, e) = (id(0)?, id(1)?);
            if e as usize >= crate::trace::MAX_EXPERTS {
                return Err(Error::parse(
                    F,
                    format!("{name}, line {}: expert {e} is out of range", i + 2),
                ));
            }
            *cells.entry((l, e)).or_insert(0.0) += c;
        }
    }
    if cells.is_empty() {
        return Err(Error::parse(F, "no counts"));
    }
    let max_e = cells.keys().map(|&(_, e)| e as usize).max().unwrap_or(0);
    let e = num_experts.unwrap_or(max_e + 1);
    if e <= max_e {
        return Err(Error::parse(
            F,
            format!("expert {max_e} appears but there are {e} experts"),
        ));
    }
    let mut layers: Vec<u32> = cells.keys().map(|&(l, _)| l).collect();
    layers.dedup();
    // A few sparse lines can name a huge layer × expert grid.
    meter.values(
        (layers.len() as u64).saturating_mul(e as u64),
        8,
        "the layer × expert counts",
    )?;
    let mut counts = Array3::zeros((1, layers.len(), e));
    for (&(l, x), &c) in &cells {
        if let Ok(li) = layers.binary_search(&l) {
            counts[[0, li, x as usize]] = c;
        }
    }
    LoadTrace::new(counts, layers)
}
