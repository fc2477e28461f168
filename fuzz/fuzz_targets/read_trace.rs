//! Every trace reader behind content detection (SGLang JSON, NumPy .npy /
//! .npz, wide CSV, moeplan trace JSON, vLLM load window, SGLang rank CSV),
//! plus the readers called directly: any bytes give a trace or an error,
//! never a panic; a trace that reads also survives stats and a plan.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::formats::{self, csv, npy, sglang, trace_json, vllm};

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = formats::read_trace(data, &Default::default()) {
        let _ = t.stats();
        if let Ok(topo) = moeplan::Topology::new(1, 4) {
            if let Ok(p) = moeplan::planners::contiguous(&t, topo) {
                let _ = moeplan::evaluate(&t, &p);
            }
        }
    }
    let _ = sglang::read_expert_distribution(data);
    let _ = csv::read_wide_csv(data, None);
    let _ = trace_json::read(data);
    let _ = npy::read_npy(data);
    let _ = npy::read_npz(data);
    let _ = vllm::read_load_window(data);
    let _ = sglang::read_rank_csvs(&[("fuzz".into(), data.to_vec())], None);
});
