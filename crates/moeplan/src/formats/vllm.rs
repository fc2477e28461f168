//! vLLM's plan formats.
//!
//! - vLLM's EPLB keeps `physical_to_logical_map` as a tensor `[MoE layers,
//!   physical experts]`; written here as that JSON list of lists, one row
//!   per MoE layer (no dense rows), GPU-major slots.
//! - vllm-ascend's expert-map JSON: `{"moe_layer_count": L, "layer_list":
//!   [{"layer_id": i, "device_count": D, "device_list": [{"device_id": g,
//!   "device_expert": [experts on device g]}]}]}`, `layer_id` the MoE layer
//!   index; vllm-ascend turns it into one tensor, so every device holds the
//!   same number of experts in every layer.
//!
//! Both need the same slot count on every GPU in every layer; a plan that
//! varies is refused with the reason (the CLI offers `--pad`).

use serde::{Deserialize, Serialize};

use crate::data::plan::{LayerPlacement, Plan};
use crate::data::topology::Topology;
use crate::error::{Error, Result};

fn uniform(plan: &Plan, format: &'static str) -> Result<usize> {
    plan.uniform_slots_per_gpu().ok_or_else(|| Error::Export {
        format,
        message: "slot counts differ between GPUs or layers, and this format has one expert count per device; pad the plan first (moeplan plan --pad)".into(),
    })
}

/// vLLM's `physical_to_logical_map` as a JSON list, one row per MoE layer.
pub(crate) fn write_physical_to_logical(plan: &Plan) -> Result<String> {
    uniform(plan, "vLLM physical_to_logical_map")?;
    serde_json::to_string(&plan.physical_to_logical()).map_err(|e| Error::Export {
        format: "vLLM physical_to_logical_map",
        message: e.to_string(),
    })
}

/// Reads a `physical_to_logical_map` list back into a plan for `topology`,
/// with the model ids of its MoE layers and the number of logical experts.
pub fn read_physical_to_logical(
    bytes: &[u8],
    topology: Topology,
    layer_ids: &[u32],
    num_experts: usize,
) -> Result<Plan> {
    let rows: Vec<Vec<u32>> = serde_json::from_slice(bytes)
        .map_err(|e| Error::parse("vLLM physical_to_logical_map", e.to_string()))?;
    plan_from_rows(
        &rows,
        topology,
        layer_ids,
        num_experts,
        "vLLM physical_to_logical_map",
    )
}

/// Splits GPU-major physical rows into a plan.
pub(crate) fn plan_from_rows(
    rows: &[Vec<u32>],
    topology: Topology,
    layer_ids: &[u32],
    num_experts: usize,
    format: &'static str,
) -> Result<Plan> {
    if rows.len() != layer_ids.len() {
        return Err(Error::parse(
            format,
            format!("{} rows for {} MoE layers", rows.len(), layer_ids.len()),
        ));
    }
    let d = topology.num_gpus();
    let layers = rows
        .iter()
        .zip(layer_ids)
        .map(|(row, &layer)| {
            if row.is_empty() || row.len() % d != 0 {
                return Err(Error::parse(
                    format,
                    format!(
                        "layer {layer}: {} slots do not split over {d} GPUs",
                        row.len()
                    ),
                ));
            }
            Ok(LayerPlacement {
                layer,
                gpus: row.chunks(row.len() / d).map(<[u32]>::to_vec).collect(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Plan::new(topology, num_experts, layers, "imported")
}

#[derive(Serialize, Deserialize)]
struct AscendMap {
    moe_layer_count: usize,
    layer_list: Vec<AscendLayer>,
}

#[derive(Serialize, Deserialize)]
struct AscendLayer {
    layer_id: usize,
    device_count: usize,
    device_list: Vec<AscendDevice>,
}

#[derive(Serialize, Deserialize)]
struct AscendDevice {
    device_id: usize,
    device_expert: Vec<u32>,
}

/// vllm-ascend's expert-map JSON: `layer_list[i]` is the plan's `i`-th MoE
/// layer, `device_expert` the experts of each device in slot order.
///
/// What vllm-ascend does with it (`eplb/core/eplb_utils.py`,
/// `init_eplb_config`, and its fused-MoE layer): MoE layer `i` reads
/// `layer_list[i]` by position; the device lists are stacked into one tensor
/// (every device the same length, one per EP rank); each rank maps every
/// expert it holds to one local slot (`expert_map[expert] = slot`), and its
/// expert count — which sizes its weights, one count for all devices, the
/// redundant count taken from device 0's list — is the number of distinct
/// experts it holds. A device holding an expert twice is therefore a slot
/// short and its second copy is never routed to, so vllm-ascend's placement
/// rule forbids it. Such a plan (DeepSeek's EPLB makes them: 29 on the real
/// DeepSeek-V3 trace at 64 redundant experts on 64 devices) is refused here
/// with the reason; [`Plan::without_same_gpu_duplicates`] repairs it
/// (`moeplan plan --format vllm-ascend` does so). Without such copies every
/// device holds exactly its slot count of distinct experts, the count
/// vllm-ascend reads from device 0.
pub(crate) fn write_ascend_expert_map(plan: &Plan) -> Result<String> {
    uniform(plan, "vllm-ascend expert map")?;
    for lp in plan.layers() {
        if let Some((g, i)) = crate::data::plan::second_copy(&lp.gpus) {
            let x = lp.gpus[g][i];
            return Err(Error::Export {
                format: "vllm-ascend expert map",
                message: format!(
                    "layer {}: device {g} holds expert {x} twice ({} such copies in the plan); vllm-ascend gives each expert one slot per device, so the second copy would never be routed to and the device would be a slot short; repair the plan first (Plan::without_same_gpu_duplicates, which moeplan plan --format vllm-ascend applies)",
                    lp.layer,
                    plan.summary().same_gpu_duplicates
                ),
            });
        }
    }
    let map = AscendMap {
        moe_layer_count: plan.layers().len(),
        layer_list: plan
            .layers()
            .iter()
            .enumerate()
            .map(|(i, lp)| AscendLayer {
                layer_id: i,
                device_count: lp.gpus.len(),
                device_list: lp
                    .gpus
                    .iter()
                    .enumerate()
                    .map(|(g, e)| AscendDevice {
                        device_id: g,
                        device_expert: e.clone(),
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_string(&map).map_err(|e| Error::Export {
        format: "vllm-ascend expert map",
        message: e.to_string(),
    })
}

/// Reads a vllm-ascend expert map; its MoE layer `i` gets `layer_ids[i]`,
/// its devices form one node unless `topology` says otherwise.
pub fn read_ascend_expert_map(
    bytes: &[u8],
    topology: Option<Topology>,
    layer_ids: &[u32],
    num_experts: usize,
) -> Result<Plan> {
    const F: &str = "vllm-ascend expert map";
    let map: AscendMap =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(F, e.to_string()))?;
    if map.moe_layer_count != map.layer_list.len() || map.layer_list.len() != layer_ids.len() {
        return Err(Error::parse(
            F,
            format!(
                "moe_layer_count {} with {} layers listed, for {} MoE layers",
                map.moe_layer_count,
                map.layer_list.len(),
                layer_ids.len()
            ),
        ));
    }
    let d = map.layer_list.first().map_or(0, |l| l.device_list.len());
    let topology = match topology {
        Some(t) => t,
        None => Topology::new(1, d)?,
    };
    let mut layers = Vec::with_capacity(layer_ids.len());
    for (i, l) in map.layer_list.into_iter().enumerate() {
        if l.layer_id != i || l.device_count != l.device_list.len() {
            return Err(Error::parse(
                F,
                format!(
                    "layer entry {i}: layer_id {} / device_count {} do not match its place and devices",
                    l.layer_id, l.device_count
                ),
            ));
        }
        let mut gpus = vec![Vec::new(); l.device_list.len()];
        for dev in l.device_list {
            let slot = gpus.get_mut(dev.device_id).ok_or_else(|| {
                Error::parse(
                    F,
                    format!("layer {i}: device_id {} out of range", dev.device_id),
                )
            })?;
            *slot = dev.device_expert;
        }
        layers.push(LayerPlacement {
            layer: layer_ids[i],
            gpus,
        });
    }
    Plan::new(topology, num_experts, layers, "imported")
}

#[derive(Deserialize)]
struct LoadWindowIn {
    expert_load_window: Vec<Vec<Vec<f64>>>,
    physical_to_logical_map: Vec<Vec<i64>>,
    #[serde(default)]
    layer_ids: Option<Vec<u32>>,
    #[serde(default)]
    num_logical_experts: Option<usize>,
}

/// vLLM's EPLB load window, dumped as JSON from its `EplbState`:
/// `{"expert_load_window": [window][MoE layers][physical experts],
/// "physical_to_logical_map": [MoE layers][physical experts]}` (optional
/// `layer_ids`, `num_logical_experts`). Each window step becomes a batch;
/// physical counts are summed onto their logical experts.
pub(crate) fn read_load_window(
    bytes: &[u8],
    meter: &mut crate::Meter,
) -> Result<crate::data::trace::LoadTrace> {
    const F: &str = "vLLM expert load window";
    let doc: LoadWindowIn =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(F, e.to_string()))?;
    physical_to_logical_counts(
        &doc.expert_load_window,
        &doc.physical_to_logical_map,
        doc.layer_ids,
        doc.num_logical_experts,
        F,
        meter,
    )
}

/// Sums physical-slot counts onto logical experts: `window[b][l][p]` lands
/// on `map[l][p]`. Shared by every engine dump that counts per physical slot.
pub(crate) fn physical_to_logical_counts(
    window: &[Vec<Vec<f64>>],
    map: &[Vec<i64>],
    layer_ids: Option<Vec<u32>>,
    num_logical: Option<usize>,
    format: &'static str,
    meter: &mut crate::Meter,
) -> Result<crate::data::trace::LoadTrace> {
    let l = map.len();
    let p = map.first().map_or(0, Vec::len);
    if l == 0 || p == 0 || window.is_empty() {
        return Err(Error::parse(format, "empty window or map"));
    }
    if let Some(i) = map.iter().position(|r| r.len() != p) {
        return Err(Error::parse(
            format,
            format!("map row {i} has {} slots, row 0 has {p}", map[i].len()),
        ));
    }
    if let Some(&bad) = map
        .iter()
        .flatten()
        .find(|&&x| x < 0 || x > crate::data::trace::MAX_EXPERTS as i64)
    {
        return Err(Error::parse(
            format,
            format!("logical expert id {bad} in the map is out of range"),
        ));
    }
    let max_id = map.iter().flatten().copied().max().unwrap_or(0) as usize;
    let e = num_logical.unwrap_or(max_id + 1);
    if e <= max_id {
        return Err(Error::parse(
            format,
            format!("the map names expert {max_id} but there are {e}"),
        ));
    }
    // One large id in the map makes every step × layer row that wide.
    meter.values(
        (window.len() as u64)
            .saturating_mul(l as u64)
            .saturating_mul(e as u64),
        8,
        "the window × layers × experts counts",
    )?;
    let mut counts = ndarray::Array3::zeros((window.len(), l, e));
    for (b, step) in window.iter().enumerate() {
        if step.len() != l {
            return Err(Error::parse(
                format,
                format!("window step {b} has {} layers, the map {l}", step.len()),
            ));
        }
        for (li, (row, m)) in step.iter().zip(map).enumerate() {
            if row.len() != p {
                return Err(Error::parse(
                    format,
                    format!(
                        "window step {b}, layer {li}: {} slots, the map {p}",
                        row.len()
                    ),
                ));
            }
            for (&c, &x) in row.iter().zip(m) {
                counts[[b, li, x as usize]] += c;
            }
        }
    }
    let ids = layer_ids.unwrap_or_else(|| (0..l as u32).collect());
    crate::data::trace::LoadTrace::new(counts, ids)
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn read_load_window() -> crate::Result<()> {
        let json =
            br#"{"expert_load_window": [[[5, 1, 3]]], "physical_to_logical_map": [[0, 1, 0]]}"#;
        let mut meter = crate::Meter::new(crate::ReadLimits::default());
        let t = crate::formats::vllm::read_load_window(json, &mut meter)?;
        assert_eq!(t.counts()[[0, 0, 0]], 8.0);
        Ok(())
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn vllm_write_physical_to_logical_example() {
        let run = || {
            use moeplan::{LayerPlacement, Plan, Topology, formats::vllm};
            let plan = Plan::new(
                Topology::new(1, 2)?,
                3,
                vec![LayerPlacement {
                    layer: 4,
                    gpus: vec![vec![0, 1], vec![2, 0]],
                }],
                "x",
            )?;
            assert_eq!(vllm::write_physical_to_logical(&plan)?, "[[0,1,2,0]]");
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn vllm_write_ascend_expert_map_example() {
        let run = || {
            use moeplan::{LayerPlacement, Plan, Topology, formats::vllm};
            let plan = Plan::new(
                Topology::new(1, 2)?,
                3,
                vec![LayerPlacement {
                    layer: 4,
                    gpus: vec![vec![0, 1], vec![2, 0]],
                }],
                "x",
            )?;
            let json = vllm::write_ascend_expert_map(&plan)?;
            assert!(json.starts_with(
                r#"{"moe_layer_count":1,"layer_list":[{"layer_id":0,"device_count":2"#
            ));
            let twice = Plan::new(
                Topology::new(1, 2)?,
                3,
                vec![LayerPlacement {
                    layer: 4,
                    gpus: vec![vec![0, 0], vec![1, 2]],
                }],
                "x",
            )?;
            assert!(vllm::write_ascend_expert_map(&twice).is_err());
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
