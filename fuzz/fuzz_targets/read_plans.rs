//! Every plan reader: moeplan JSON, SGLang --init-expert-location, vLLM's
//! physical_to_logical list, vllm-ascend's expert map and the plan CSV,
//! directly and behind content detection (`plan_any`, what `eval --plan`
//! uses), with and without a known model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::formats::{PlanContext, read_any_plan};
use moeplan::formats;
use moeplan::{ReadLimits, Topology};

fuzz_target!(|data: &[u8]| {
    let _ = formats::read_plan_json(data);
    let Ok(topo) = Topology::new(2, 2) else { return };
    let ids = [1u32, 3];
    let _ = formats::read_init_expert_location(data, topo, &ids, 8);
    let _ = formats::read_physical_to_logical(data, topo, &ids, 8);
    let _ = formats::read_ascend_expert_map(data, None, &ids, 8);
    let _ = formats::read_plan_csv(data, topo, 8);
    for (topology, model_layers) in [(Some(topo), Some(5)), (None, None)] {
        let ctx = PlanContext {
            topology,
            layer_ids: &ids,
            num_experts: 8,
            model_layers,
            budget: ReadLimits::mib(64),
        };
        let _ = read_any_plan(data, &ctx);
    }
});
