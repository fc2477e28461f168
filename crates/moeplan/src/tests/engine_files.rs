//! The plan files moeplan writes, loaded the way each engine loads them.
//!
//! Each engine's loader is modelled below as a small function, worked out
//! from the engine's own source (read, not copied):
//!
//! - SGLang, `python/sglang/srt/eplb/expert_location.py`
//!   (`compute_initial_expert_location_metadata` → `init_by_mapping`): the
//!   `physical_to_logical_map` becomes a `[layers][physical]` tensor whose
//!   row index is the model layer id (every MoE layer looks up its own
//!   `layer_id`, dense layers included in the count); GPU `g` owns physical
//!   slots `g·S .. (g+1)·S`, `S = physical / ep_size`; every logical id must
//!   be below the expert count and every expert needs a slot in every MoE
//!   layer (dispatch picks among its physical copies). Older SGLang takes a
//!   short file silently and fails at dispatch past its last row, newer
//!   SGLang refuses a shape other than `(num_hidden_layers, E + redundant)`:
//!   either way a file must have a row per model layer.
//! - vLLM's EPLB state: `physical_to_logical_map` is `[MoE layers][E +
//!   redundant]`, one row per MoE layer in order, every expert with at least
//!   one replica.
//! - vllm-ascend, `vllm_ascend/eplb/core/eplb_utils.py` (`init_eplb_config`,
//!   `expert_file_to_tensor`, `generate_log2phy_map`) and the fused-MoE layer:
//!   MoE layer `i` reads `layer_list[i]` by position (past
//!   `moe_layer_count` is an error, at it an MTP layer with the default
//!   placement); the device lists become one rectangular tensor, one row per
//!   EP rank; each rank's `expert_map[expert] = local slot` keeps one slot per
//!   expert, and its expert count is the number of distinct experts it holds
//!   (`sum(expert_map != -1)`), one count used for every device (the
//!   adaptor reads it from one layer, the redundant count from device 0): a
//!   device holding an expert twice is short a slot and its second copy is
//!   never routed to. Every expert must sit on some device (`valid_cnts.all()`).
//! - TensorRT-LLM, `tensorrt_llm/llmapi/llm_args.py`
//!   (`validate_moe_load_balancer` loads the YAML) and the fused MoE
//!   (`WideEPMoE`, `get_layer_initial_global_assignments(layer_idx)`): every
//!   MoE layer looks up its own decoder layer index (DeepSeek-V3: 3..60) in
//!   `initial_global_assignments` — a missing key stops start-up
//!   (`KeyError: layer_idx … not found`) —, its list holds `num_slots`
//!   entries, `num_slots` splits evenly over the EP ranks and is at least
//!   the expert count, every expert appears, and rank `r` owns slots
//!   `r·S .. (r+1)·S`.
//! - plan CSV and moeplan JSON: a tool reading `layer,gpu,slot,expert` rows,
//!   or only `layers` of the JSON.
//!
//! Then, per writer, the file is loaded by that model and what the engine
//! would serve is compared with the plan, layer by layer, by model layer id.

use super::common;

use std::collections::BTreeMap;

use crate::formats::{self, csv as plan_csv, plan_json, sglang, trtllm, vllm};
use crate::planners::{EplbConfig, eplb};
use crate::{LoadTrace, Plan, Topology};
use ndarray::Array3;
use serde_json::Value;

/// Per GPU, the logical experts it serves in one layer.
type Served = Vec<Vec<u32>>;

/// What an engine is started with: the model's config and the server's
/// expert-parallel settings.
#[derive(Debug, Clone)]
struct Engine {
    /// `num_hidden_layers`, dense layers included.
    model_layers: usize,
    /// Model layer ids of the MoE layers.
    moe_layers: Vec<u32>,
    /// Logical (routed) experts per MoE layer.
    experts: usize,
    /// EP ranks.
    gpus: usize,
    /// Physical slots per layer: experts + redundant experts.
    physical: usize,
}

impl Engine {
    /// DeepSeek-V3 / R1: 61 layers, the first 3 dense, 256 routed experts.
    fn deepseek_v3(gpus: usize, redundant: usize) -> Engine {
        Engine {
            model_layers: 61,
            moe_layers: (3..61).collect(),
            experts: 256,
            gpus,
            physical: 256 + redundant,
        }
    }
}

fn rows_of(v: &Value, what: &str) -> Result<Vec<Vec<u64>>, String> {
    v.as_array()
        .ok_or(format!("{what} is not a list"))?
        .iter()
        .map(|r| {
            r.as_array()
                .ok_or(format!("{what}: a row is not a list"))?
                .iter()
                .map(|x| x.as_u64().ok_or(format!("{what}: {x} is not an expert id")))
                .collect()
        })
        .collect()
}

/// Splits a physical row GPU-major and checks what dispatch needs: ids in
/// range, every expert with a slot.
fn split_row(row: &[u64], eng: &Engine, layer: u32) -> Result<Served, String> {
    if row.len() != eng.physical || eng.physical % eng.gpus != 0 {
        return Err(format!(
            "layer {layer}: {} physical slots, the server has {} over {} GPUs",
            row.len(),
            eng.physical,
            eng.gpus
        ));
    }
    if let Some(bad) = row.iter().find(|&&x| x as usize >= eng.experts) {
        return Err(format!("layer {layer}: logical id {bad} out of range"));
    }
    let mut seen = vec![false; eng.experts];
    for &x in row {
        seen[x as usize] = true;
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return Err(format!(
            "layer {layer}: expert {missing} has no physical slot"
        ));
    }
    let s = eng.physical / eng.gpus;
    Ok(row
        .chunks(s)
        .map(|c| c.iter().map(|&x| x as u32).collect())
        .collect())
}

/// SGLang's `--init-expert-location` loader: per MoE layer (model id), what
/// each GPU serves.
fn sglang_load(json: &str, eng: &Engine) -> Result<BTreeMap<u32, Served>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let map = rows_of(&v["physical_to_logical_map"], "physical_to_logical_map")?;
    if map.len() != eng.model_layers {
        return Err(format!(
            "{} rows for a model of {} layers: SGLang indexes rows by model layer id",
            map.len(),
            eng.model_layers
        ));
    }
    if map.iter().any(|r| r.len() != eng.physical) {
        return Err("rows of different lengths, or not E + redundant".into());
    }
    eng.moe_layers
        .iter()
        .map(|&l| Ok((l, split_row(&map[l as usize], eng, l)?)))
        .collect()
}

/// vLLM's EPLB `physical_to_logical_map`: per MoE layer, in order.
fn vllm_load(json: &str, eng: &Engine) -> Result<Vec<Served>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let map = rows_of(&v, "physical_to_logical_map")?;
    if map.len() != eng.moe_layers.len() {
        return Err(format!(
            "{} rows for {} MoE layers",
            map.len(),
            eng.moe_layers.len()
        ));
    }
    map.iter()
        .zip(&eng.moe_layers)
        .map(|(r, &l)| split_row(r, eng, l))
        .collect()
}

/// TensorRT-LLM's load-balancer YAML: per MoE layer, looked up by its
/// decoder layer index (model id).
fn trtllm_load(yaml: &str, eng: &Engine) -> Result<BTreeMap<u32, Served>, String> {
    #[derive(serde::Deserialize)]
    struct Config {
        num_slots: usize,
        initial_global_assignments: BTreeMap<u32, Vec<u64>>,
    }
    let c: Config = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
    if c.num_slots != eng.physical || c.num_slots % eng.gpus != 0 || c.num_slots < eng.experts {
        return Err(format!(
            "num_slots {} for {} physical slots on {} ranks",
            c.num_slots, eng.physical, eng.gpus
        ));
    }
    eng.moe_layers
        .iter()
        .map(|&l| {
            let row = c.initial_global_assignments.get(&l).ok_or(format!(
                "KeyError: layer_idx {l} not found in initial_global_assignments"
            ))?;
            Ok((l, split_row(row, eng, l)?))
        })
        .collect()
}

/// vllm-ascend's expert-map loader: per MoE layer, in order.
fn ascend_load(json: &str, eng: &Engine) -> Result<Vec<Served>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let count = v["moe_layer_count"].as_u64().ok_or("no moe_layer_count")? as usize;
    let list = v["layer_list"].as_array().ok_or("no layer_list")?;
    let mut local_experts: Option<usize> = None;
    let mut out = Vec::new();
    for (i, &model_layer) in eng.moe_layers.iter().enumerate() {
        if i > count {
            return Err("Invalid EPLB Table".into());
        }
        if i == count {
            return Err(format!(
                "MoE layer {model_layer} (index {i}) is at moe_layer_count: taken for an MTP layer with the default placement"
            ));
        }
        let layer = list.get(i).ok_or(format!("no layer_list[{i}]"))?;
        let devices = layer["device_list"]
            .as_array()
            .ok_or(format!("layer {i}: no device_list"))?;
        if layer["device_count"].as_u64() != Some(devices.len() as u64) {
            return Err(format!("layer {i}: device_count does not match"));
        }
        if devices.len() != eng.gpus {
            return Err(format!(
                "layer {i}: {} devices for {} EP ranks",
                devices.len(),
                eng.gpus
            ));
        }
        let mut served: Served = Vec::new();
        for d in devices {
            let experts = rows_of(
                &Value::Array(vec![d["device_expert"].clone()]),
                "device_expert",
            )?
            .remove(0);
            served.push(experts.iter().map(|&x| x as u32).collect());
        }
        // One tensor: every device the same length.
        if served.iter().any(|s| s.len() != served[0].len()) {
            return Err(format!("layer {i}: ragged device lists"));
        }
        let mut seen = vec![false; eng.experts];
        for (g, s) in served.iter().enumerate() {
            let mut distinct: Vec<u32> = s.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if let Some(&bad) = distinct.last().filter(|&&x| x as usize >= eng.experts) {
                return Err(format!("layer {i}, device {g}: expert {bad} out of range"));
            }
            // The rank's expert count is its distinct experts; the same count
            // serves every device and layer, first taken from device 0.
            let local = *local_experts.get_or_insert(distinct.len());
            if distinct.len() != s.len() {
                return Err(format!(
                    "layer {i}, device {g}: {} slots hold only {} distinct experts: a second copy on one device is never routed to",
                    s.len(),
                    distinct.len()
                ));
            }
            if s.len() != local {
                return Err(format!(
                    "layer {i}, device {g}: {} experts, device 0 has {local}",
                    s.len()
                ));
            }
            for &x in &distinct {
                seen[x as usize] = true;
            }
        }
        if let Some(missing) = seen.iter().position(|s| !s) {
            return Err(format!("layer {i}: expert {missing} is on no device"));
        }
        out.push(served);
    }
    Ok(out)
}

/// A tool reading the plan CSV: per layer id, per GPU, experts in slot order.
fn csv_load(text: &str) -> Result<BTreeMap<u32, Served>, String> {
    let mut lines = text.lines();
    if lines.next() != Some("layer,gpu,slot,expert") {
        return Err("header".into());
    }
    let mut out: BTreeMap<u32, Served> = BTreeMap::new();
    for line in lines {
        let f: Vec<usize> = line
            .split(',')
            .map(|x| x.parse().map_err(|_| format!("bad line {line}")))
            .collect::<Result<_, _>>()?;
        let [layer, gpu, slot, expert] = f[..] else {
            return Err(format!("bad line {line}"));
        };
        let gpus = out.entry(layer as u32).or_default();
        if gpus.len() <= gpu {
            gpus.resize(gpu + 1, Vec::new());
        }
        if gpus[gpu].len() != slot {
            return Err(format!("slots out of order in {line}"));
        }
        gpus[gpu].push(expert as u32);
    }
    Ok(out)
}

/// A tool reading only `layers` of the plan JSON.
fn json_load(text: &str) -> Result<BTreeMap<u32, Served>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    v["layers"]
        .as_array()
        .ok_or("no layers")?
        .iter()
        .map(|l| {
            let id = l["layer"].as_u64().ok_or("no layer id")? as u32;
            let gpus = rows_of(&l["gpus"], "gpus")?
                .into_iter()
                .map(|g| g.into_iter().map(|x| x as u32).collect())
                .collect();
            Ok((id, gpus))
        })
        .collect()
}

/// The engine serves exactly the plan: the same MoE layers (by model id)
/// with the same experts on every GPU.
fn check_serves(plan: &Plan, served: &BTreeMap<u32, Served>, what: &str) -> Result<(), String> {
    let plan_ids: Vec<u32> = plan.layers().iter().map(|l| l.layer).collect();
    let served_ids: Vec<u32> = served.keys().copied().collect();
    if plan_ids != served_ids {
        return Err(format!(
            "{what}: the engine serves MoE layers {served_ids:?}, the plan is for {plan_ids:?}"
        ));
    }
    for lp in plan.layers() {
        if served[&lp.layer] != lp.gpus {
            return Err(format!(
                "{what}: model layer {} is served another placement than planned",
                lp.layer
            ));
        }
    }
    Ok(())
}

/// In-order engines (vLLM, vllm-ascend): MoE layer `i` of the engine is the
/// plan's layer `i`, which must be the model's `i`-th MoE layer.
fn check_serves_in_order(
    plan: &Plan,
    served: &[Served],
    eng: &Engine,
    what: &str,
) -> Result<(), String> {
    let by_id: BTreeMap<u32, Served> = eng
        .moe_layers
        .iter()
        .copied()
        .zip(served.iter().cloned())
        .collect();
    check_serves(plan, &by_id, what)
}

/// The SGLang file for `plan` made from `trace`, as the CLI writes it: the
/// row count is the model's, when the trace knows it.
fn sglang_file(plan: &Plan, trace: &LoadTrace) -> crate::Result<String> {
    sglang::write_init_expert_location(plan, trace.known_model_layers())
}

/// The vllm-ascend file for `plan`, as the CLI writes it: second copies on
/// one device moved away first.
fn ascend_file(plan: &Plan, trace: &LoadTrace) -> crate::Result<String> {
    vllm::write_ascend_expert_map(&plan.without_same_gpu_duplicates(trace.summed().view())?)
}

/// A NumPy `.npy` of little-endian f64, as `np.save` writes it.
fn npy_f64(shape: &[usize], data: &[f64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    let pad = (64 - (10 + header.len() + 1) % 64) % 64;
    header.push_str(&" ".repeat(pad));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    for v in data {
        out.extend(v.to_le_bytes());
    }
    out
}

/// A trace's summed counts as a `[MoE layers][experts]` `.npy`, read back:
/// what a user holding only the MoE rows has (no dense-layer information).
fn as_moe_only_npy(trace: &LoadTrace) -> LoadTrace {
    let summed = trace.summed();
    let (l, e) = summed.dim();
    let bytes = npy_f64(&[l, e], summed.as_slice().unwrap());
    formats::read_trace(&bytes, &Default::default()).unwrap()
}

fn eplb_plan(trace: &LoadTrace, gpus: usize, redundant: usize) -> Plan {
    eplb(
        trace,
        Topology::new(1, gpus).unwrap(),
        EplbConfig {
            redundant_experts: redundant,
            groups: 1,
        },
    )
    .unwrap()
}

/// A small SGLang dump: 5 layers, the first dense, 8 experts, skewed so
/// EPLB replicates.
fn small_sglang_trace() -> LoadTrace {
    let rows: Vec<Vec<u32>> = (0..5)
        .map(|l| {
            (0..8)
                .map(|e| {
                    if l == 0 {
                        0
                    } else {
                        1 + ((e * 7 + l * 3) % 11) * (1 + (e == l) as u32 * 20)
                    }
                })
                .collect()
        })
        .collect();
    let json = serde_json::json!({ "logical_count": rows }).to_string();
    formats::read_trace(json.as_bytes(), &Default::default()).unwrap()
}

fn small_engine(gpus: usize, redundant: usize) -> Engine {
    Engine {
        model_layers: 5,
        moe_layers: vec![1, 2, 3, 4],
        experts: 8,
        gpus,
        physical: 8 + redundant,
    }
}

// ---------------------------------------------------------------------------
// The engine models themselves catch the files an engine would misread.

#[test]
fn engine_models_catch_files_they_would_misread() {
    let trace = small_sglang_trace();
    let plan = eplb_plan(&trace, 4, 4);
    let eng = small_engine(4, 4);
    let good = sglang::write_init_expert_location(&plan, Some(5)).unwrap();
    check_serves(&plan, &sglang_load(&good, &eng).unwrap(), "sglang").unwrap();
    // a row short: SGLang would fail at dispatch for the last layer
    let mut v: Value = serde_json::from_str(&good).unwrap();
    v["physical_to_logical_map"].as_array_mut().unwrap().pop();
    assert!(sglang_load(&v.to_string(), &eng).is_err());
    // every row there, but the MoE rows one layer early: loads, and serves
    // each layer another layer's placement
    let mut v: Value = serde_json::from_str(&good).unwrap();
    let rows = v["physical_to_logical_map"].as_array_mut().unwrap();
    let first = rows.remove(0);
    rows.push(first);
    let shifted = sglang_load(&v.to_string(), &eng).unwrap();
    assert!(check_serves(&plan, &shifted, "sglang").is_err());
    // vllm-ascend: a device holding an expert twice, a missing device
    let dup = r#"{"moe_layer_count": 1, "layer_list": [{"layer_id": 0, "device_count": 2,
        "device_list": [{"device_id": 0, "device_expert": [0, 0]}, {"device_id": 1, "device_expert": [1, 2]}]}]}"#;
    let eng3 = Engine {
        model_layers: 1,
        moe_layers: vec![0],
        experts: 3,
        gpus: 2,
        physical: 4,
    };
    assert!(
        ascend_load(dup, &eng3)
            .unwrap_err()
            .contains("never routed")
    );
    let ok = dup.replace("[0, 0]", "[0, 2]").replace("[1, 2]", "[1, 0]");
    assert!(ascend_load(&ok, &eng3).is_ok());
    let one_device = Engine {
        gpus: 1,
        ..eng3.clone()
    };
    assert!(ascend_load(&ok, &one_device).is_err());
    // a file for fewer MoE layers than the model has
    let two_layers = Engine {
        moe_layers: vec![0, 1],
        model_layers: 2,
        ..eng3
    };
    assert!(ascend_load(&ok, &two_layers).unwrap_err().contains("MTP"));
}

// ---------------------------------------------------------------------------
// Every writer, loaded by its engine.

fn check_every_writer(trace: &LoadTrace, plan: &Plan, eng: &Engine) {
    let text = sglang_file(plan, trace).unwrap();
    check_serves(plan, &sglang_load(&text, eng).unwrap(), "sglang").unwrap();
    let text = vllm::write_physical_to_logical(plan).unwrap();
    check_serves_in_order(plan, &vllm_load(&text, eng).unwrap(), eng, "vllm").unwrap();
    match plan.without_same_gpu_duplicates(trace.summed().view()) {
        Ok(fixed) => {
            let text = ascend_file(plan, trace).unwrap();
            let served = ascend_load(&text, eng).unwrap();
            check_serves_in_order(&fixed, &served, eng, "vllm-ascend").unwrap();
        }
        // an expert with more copies than devices: no file, and the reason
        Err(e) => {
            assert!(e.to_string().contains("copies on"), "{e}");
            assert!(ascend_file(plan, trace).is_err());
        }
    }
    let text = trtllm::write_placement(plan, trace.known_model_layers()).unwrap();
    check_serves(plan, &trtllm_load(&text, eng).unwrap(), "trtllm").unwrap();
    let text = plan_csv::write_plan_csv(plan);
    check_serves(plan, &csv_load(&text).unwrap(), "csv").unwrap();
    let text = plan_json::write(plan, &Default::default());
    check_serves(plan, &json_load(&text).unwrap(), "moeplan json").unwrap();
}

#[test]
fn every_writer_loads_in_its_engine() {
    let trace = small_sglang_trace();
    assert_eq!(trace.layer_ids(), &[1, 2, 3, 4]);
    for (gpus, redundant) in [(2, 0), (4, 4), (4, 8), (2, 6)] {
        let plan = eplb_plan(&trace, gpus, redundant);
        check_every_writer(&trace, &plan, &small_engine(gpus, redundant));
    }
}

#[test]
fn every_writer_loads_in_its_engine_on_real_deepseek_v3() {
    let Some(trace) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    for redundant in [0, 64] {
        let plan = eplb_plan(&trace, 64, redundant);
        check_every_writer(&trace, &plan, &Engine::deepseek_v3(64, redundant));
    }
}

// ---------------------------------------------------------------------------
// Defect 1: an SGLang file from a trace that does not know the model's
// layer count.

#[test]
fn sglang_refuses_a_trace_without_dense_layer_information() {
    // the small dump's 4 MoE rows as a .npy: the dense row is gone
    let full = small_sglang_trace();
    let npy = as_moe_only_npy(&full);
    assert_eq!(npy.layer_ids(), &[0, 1, 2, 3]);
    let plan = eplb_plan(&npy, 4, 4);
    // SGLang for the 5-layer model must not get a file it misreads
    match sglang_file(&plan, &npy) {
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("--model-layers") && m.contains("--model"), "{m}");
        }
        Ok(text) => check_serves(
            &eplb_plan(&full, 4, 4),
            &sglang_load(&text, &small_engine(4, 4)).unwrap(),
            "sglang",
        )
        .unwrap(),
    }
}

#[test]
fn sglang_file_from_a_58_row_npy_of_deepseek_v3() {
    let Some(full) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let npy = as_moe_only_npy(&full);
    assert_eq!((npy.num_layers(), npy.layer_ids()[0]), (58, 0));
    let plan = eplb_plan(&npy, 64, 64);
    let eng = Engine::deepseek_v3(64, 64);
    match sglang_file(&plan, &npy) {
        Err(e) => {
            let m = e.to_string();
            // (ids 0..57 are the model's own only in a 58-layer model)
            assert!(
                m.contains("--model deepseek-v3") && m.contains("--model-layers 58"),
                "{m}"
            );
        }
        Ok(text) => check_serves(
            &eplb_plan(&full, 64, 64),
            &sglang_load(&text, &eng).unwrap(),
            "sglang",
        )
        .unwrap(),
    }
}

/// TensorRT-LLM's YAML from the 58 MoE rows of DeepSeek-V3 was
/// keyed 0..57: TensorRT-LLM served layers 3..57 the slots planned for
/// 6..60 and stopped at layer 58. Refused now; placed by the preset, the
/// file loads in the engine's model and serves the dump's plan.
#[test]
fn trtllm_file_from_a_58_row_npy_of_deepseek_v3() {
    let Some(full) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let npy = as_moe_only_npy(&full);
    let eng = Engine::deepseek_v3(64, 64);
    let plan = eplb_plan(&npy, 64, 64);
    let e = trtllm::write_placement(&plan, npy.known_model_layers()).unwrap_err();
    assert!(e.to_string().contains("--model deepseek-v3"), "{e}");
    // what the old file did in the engine: a missing key at layer 58
    let positions = trtllm::write_placement(&plan, Some(61)).unwrap();
    let err = trtllm_load(&positions, &eng).unwrap_err();
    assert!(err.contains("layer_idx 58 not found"), "{err}");
    let placed = npy.in_model(61, Some(3)).unwrap();
    let plan = eplb_plan(&placed, 64, 64);
    let text = trtllm::write_placement(&plan, placed.known_model_layers()).unwrap();
    let served = trtllm_load(&text, &eng).unwrap();
    check_serves(&eplb_plan(&full, 64, 64), &served, "trtllm").unwrap();
}

// ---------------------------------------------------------------------------
// Defect 2: vllm-ascend and two copies of an expert on one device.

#[test]
fn vllm_ascend_never_gets_two_copies_on_one_device() {
    let plan = Plan::new(
        Topology::new(1, 2).unwrap(),
        3,
        vec![crate::LayerPlacement {
            layer: 0,
            gpus: vec![vec![0, 0], vec![1, 2]],
        }],
        "by-hand",
    )
    .unwrap();
    let trace = LoadTrace::new(
        Array3::from_shape_vec((1, 1, 3), vec![10.0, 4.0, 2.0]).unwrap(),
        vec![0],
    )
    .unwrap();
    let eng = Engine {
        model_layers: 1,
        moe_layers: vec![0],
        experts: 3,
        gpus: 2,
        physical: 4,
    };
    match ascend_file(&plan, &trace) {
        Err(e) => assert!(e.to_string().contains("twice"), "{e}"),
        Ok(text) => {
            ascend_load(&text, &eng).unwrap();
        }
    }
}

#[test]
fn vllm_ascend_file_of_real_eplb_plus_64_loads() {
    let Some(trace) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let plan = eplb_plan(&trace, 64, 64);
    assert_eq!(plan.summary().same_gpu_duplicates, 29);
    let text = ascend_file(&plan, &trace).unwrap();
    let served = ascend_load(&text, &Engine::deepseek_v3(64, 64)).unwrap();
    assert_eq!(served.len(), 58);
}

// ---------------------------------------------------------------------------
// The fixes themselves: placing a trace in its model, and the repair.

#[test]
fn a_moe_only_trace_placed_in_its_model_writes_the_dumps_file() {
    let full = small_sglang_trace();
    let npy = as_moe_only_npy(&full);
    assert_eq!(npy.known_model_layers(), None);
    // dense layers first, as the preset says: ids shifted to model ids
    let placed = npy.clone().in_model(5, Some(1)).unwrap();
    assert_eq!(placed.layer_ids(), full.layer_ids());
    assert_eq!(placed.known_model_layers(), Some(5));
    let plan = eplb_plan(&placed, 4, 4);
    assert_eq!(plan, eplb_plan(&full, 4, 4));
    let text = sglang_file(&plan, &placed).unwrap();
    assert_eq!(text, sglang_file(&eplb_plan(&full, 4, 4), &full).unwrap());
    check_serves(
        &plan,
        &sglang_load(&text, &small_engine(4, 4)).unwrap(),
        "sglang",
    )
    .unwrap();
    // a layer count alone cannot say which layers are dense
    let e = npy.clone().in_model(5, None).unwrap_err().to_string();
    assert!(e.contains("--model"), "{e}");
    // an all-MoE model of 4 layers needs no shift
    assert_eq!(
        npy.clone().in_model(4, None).unwrap().layer_ids(),
        &[0, 1, 2, 3]
    );
}

#[test]
fn placing_in_a_model_refuses_what_does_not_fit() {
    let full = small_sglang_trace(); // knows: 5 layers, MoE 1..4
    assert!(full.clone().in_model(6, None).is_err());
    assert_eq!(full.clone().in_model(5, Some(1)).unwrap(), full);
    let npy = as_moe_only_npy(&full); // MoE rows 0..3 only
    assert!(npy.clone().in_model(3, None).is_err()); // fewer layers than MoE rows
    assert!(npy.clone().in_model(7, Some(1)).is_err()); // 6 MoE layers in the model, 4 here
    assert!(npy.clone().in_model(4, Some(1)).is_err()); // layer 0 routes tokens, the preset says dense
    // ids that are model ids already (a legacy CSV's, ESFT's) stay
    let ids = LoadTrace::new(Array3::from_elem((1, 2, 4), 1.0), vec![3, 4]).unwrap();
    assert_eq!(ids.in_model(6, None).unwrap().layer_ids(), &[3, 4]);
}

#[test]
fn generated_traces_know_their_model() {
    let p = crate::data::model::preset("deepseek-v3").unwrap();
    let t =
        crate::synth::generator::generate(&crate::synth::generator::GenConfig::new(p, 2)).unwrap();
    assert_eq!(t.known_model_layers(), Some(61));
    let plan = eplb_plan(&t, 8, 8);
    let text = sglang_file(&plan, &t).unwrap();
    check_serves(
        &plan,
        &sglang_load(&text, &Engine::deepseek_v3(8, 8)).unwrap(),
        "sglang",
    )
    .unwrap();
}

#[test]
fn a_58_row_npy_of_deepseek_v3_placed_by_its_preset_matches_the_dump() {
    let Some(full) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let npy = as_moe_only_npy(&full);
    let placed = npy.in_model(61, Some(3)).unwrap();
    assert_eq!(placed.layer_ids(), full.layer_ids());
    let plan = eplb_plan(&placed, 64, 64);
    let text = sglang_file(&plan, &placed).unwrap();
    assert_eq!(text, sglang_file(&eplb_plan(&full, 64, 64), &full).unwrap());
    check_serves(
        &plan,
        &sglang_load(&text, &Engine::deepseek_v3(64, 64)).unwrap(),
        "sglang",
    )
    .unwrap();
}

/// Per layer: slots of every GPU, and copies of every expert.
fn shape(plan: &Plan) -> Vec<(Vec<usize>, Vec<u32>)> {
    plan.layers()
        .iter()
        .map(|l| {
            (
                l.gpus.iter().map(Vec::len).collect(),
                l.copies(plan.num_experts()),
            )
        })
        .collect()
}

/// Busiest GPU of every layer, all batches summed, under even split.
fn busiest(trace: &LoadTrace, plan: &Plan) -> Vec<f64> {
    let summed = trace.summed();
    plan.layers()
        .iter()
        .zip(summed.outer_iter())
        .map(|(lp, w)| {
            let copies = lp.copies(plan.num_experts());
            lp.gpus
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&x| w[x as usize] / f64::from(copies[x as usize]))
                        .sum::<f64>()
                })
                .fold(0.0, f64::max)
        })
        .collect()
}

#[test]
fn repair_on_real_eplb_plans_keeps_counts_and_never_makes_a_layer_busier() {
    let Some(trace) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    for (redundant, dups) in [(64, 29), (128, 62), (192, 121), (256, 172)] {
        let plan = eplb_plan(&trace, 64, redundant);
        assert_eq!(plan.summary().same_gpu_duplicates, dups);
        let fixed = plan
            .without_same_gpu_duplicates(trace.summed().view())
            .unwrap();
        assert_eq!(fixed.summary().same_gpu_duplicates, 0);
        assert_eq!(shape(&fixed), shape(&plan));
        for (l, (a, b)) in busiest(&trace, &fixed)
            .iter()
            .zip(busiest(&trace, &plan))
            .enumerate()
        {
            assert!(
                *a <= b * (1.0 + 1e-12),
                "+{redundant}, layer index {l}: {b} → {a}"
            );
        }
        let before = crate::evaluate(&trace, &plan).unwrap().balancedness;
        let after = crate::evaluate(&trace, &fixed).unwrap().balancedness;
        eprintln!(
            "+{redundant}: {dups} second copies moved, balancedness {before:.4} → {after:.4}"
        );
        assert!(after >= before - 1e-12);
        let text = vllm::write_ascend_expert_map(&fixed).unwrap();
        let eng = Engine::deepseek_v3(64, redundant);
        check_serves_in_order(
            &fixed,
            &ascend_load(&text, &eng).unwrap(),
            &eng,
            "vllm-ascend",
        )
        .unwrap();
    }
}

#[test]
fn the_writer_alone_refuses_two_copies_on_one_device() {
    let plan = Plan::new(
        Topology::new(1, 2).unwrap(),
        3,
        vec![crate::LayerPlacement {
            layer: 0,
            gpus: vec![vec![0, 0], vec![1, 2]],
        }],
        "by-hand",
    )
    .unwrap();
    let e = vllm::write_ascend_expert_map(&plan)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("twice") && e.contains("without_same_gpu_duplicates"),
        "{e}"
    );
    // more copies than devices: no repair, and the reason
    let crowded = Plan::new(
        Topology::new(1, 2).unwrap(),
        2,
        vec![crate::LayerPlacement {
            layer: 0,
            gpus: vec![vec![0, 0], vec![0, 1]],
        }],
        "by-hand",
    )
    .unwrap();
    let e = crowded
        .without_same_gpu_duplicates(ndarray::array![[5.0, 1.0]].view())
        .unwrap_err()
        .to_string();
    assert!(e.contains("3 copies on 2 GPUs"), "{e}");
}

fn random_trace(layers: usize, experts: usize, weights: &[u32]) -> LoadTrace {
    let counts = Array3::from_shape_fn((1, layers, experts), |(_, l, e)| {
        weights[(l * experts + e * 7) % weights.len()] as f64
    });
    LoadTrace::new(counts, (0..layers as u32).collect()).unwrap()
}

/// The case proptest found: EPLB on 2 × 2 GPUs puts an expert twice on a
/// GPU where every GPU lacking it holds only experts that GPU has, so no
/// single swap moves the second copy; the layer is laid out again, and
/// still loads in vllm-ascend with every slot and copy count kept.
#[test]
fn a_second_copy_no_single_swap_can_move_is_laid_out_again() {
    let topo = Topology::new(2, 2).unwrap();
    let trace = random_trace(1, 8, &[0, 189, 703, 568]);
    let plan = eplb(
        &trace,
        topo,
        EplbConfig {
            redundant_experts: 12,
            groups: 1,
        },
    )
    .unwrap();
    assert!(
        plan.summary().same_gpu_duplicates > 0,
        "{:?}",
        plan.layers()[0].gpus
    );
    let fixed = plan
        .without_same_gpu_duplicates(trace.summed().view())
        .unwrap();
    assert_eq!(
        fixed.summary().same_gpu_duplicates,
        0,
        "{:?}",
        fixed.layers()[0].gpus
    );
    assert_eq!(shape(&fixed), shape(&plan));
    let eng = Engine {
        model_layers: 1,
        moe_layers: vec![0],
        experts: 8,
        gpus: 4,
        physical: 20,
    };
    let text = vllm::write_ascend_expert_map(&fixed).unwrap();
    let served = ascend_load(&text, &eng).unwrap();
    check_serves_in_order(&fixed, &served, &eng, "vllm-ascend").unwrap();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
    /// Any EPLB plan: the repair keeps every slot and copy count and loads
    /// in vllm-ascend, or says why no placement can.
    #[test]
    fn repair_loads_in_vllm_ascend_or_says_why_not(
        layers in 1usize..4,
        nodes in 1usize..3,
        gpn in 1usize..5,
        per_gpu in 1usize..4,
        extra in 0usize..4,
        weights in proptest::collection::vec(0u32..1000, 4..40),
    ) {
        let topo = Topology::new(nodes, gpn).unwrap();
        let d = topo.num_gpus();
        let e = d * per_gpu;
        let trace = random_trace(layers, e, &weights);
        let plan = eplb(&trace, topo, EplbConfig { redundant_experts: extra * d, groups: 1 }).unwrap();
        match plan.without_same_gpu_duplicates(trace.summed().view()) {
            Ok(fixed) => {
                proptest::prop_assert_eq!(fixed.summary().same_gpu_duplicates, 0);
                proptest::prop_assert_eq!(shape(&fixed), shape(&plan));
                let eng = Engine {
                    model_layers: layers,
                    moe_layers: (0..layers as u32).collect(),
                    experts: e,
                    gpus: d,
                    physical: e + extra * d,
                };
                let text = vllm::write_ascend_expert_map(&fixed).unwrap();
                let served = ascend_load(&text, &eng);
                proptest::prop_assert!(served.is_ok(), "{:?}", served);
                proptest::prop_assert!(check_serves_in_order(&fixed, &served.unwrap(), &eng, "vllm-ascend").is_ok());
            }
            Err(why) => {
                // only where no placement exists: an expert with more copies
                // than GPUs, or more slots on a GPU than experts
                let impossible = plan.layers().iter().any(|l| {
                    l.copies(e).iter().any(|&c| c as usize > d) || l.gpus.iter().any(|g| g.len() > e)
                });
                proptest::prop_assert!(impossible, "{}", why);
            }
        }
    }
}
