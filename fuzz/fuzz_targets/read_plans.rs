//! Every plan reader: moeplan JSON, SGLang --init-expert-location, vLLM's
//! physical_to_logical list, vllm-ascend's expert map and the plan CSV.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::formats::{csv, plan_json, sglang, vllm};
use moeplan::Topology;

fuzz_target!(|data: &[u8]| {
    let _ = plan_json::read(data);
    let Ok(topo) = Topology::new(2, 2) else { return };
    let ids = [1u32, 3];
    let _ = sglang::read_init_expert_location(data, topo, &ids, 8);
    let _ = vllm::read_physical_to_logical(data, topo, &ids, 8);
    let _ = vllm::read_ascend_expert_map(data, None, &ids, 8);
    let _ = csv::read_plan_csv(data, topo, 8);
});
