//! Every trace reader behind content detection (SGLang JSON, NumPy .npy /
//! .npz, wide CSV, moeplan trace JSON, vLLM load window, SGLang rank CSV,
//! torch.save), plus the readers the door keeps public called directly
//! (the per-format ones are reached through detection, as the product
//! reaches them): any bytes give a trace or an error, never a panic; a
//! trace that reads also survives stats and a plan. The reading budget is 64 MiB, well under the RSS limit `cargo xtask
//! fuzz` sets, so a reader that escapes its budget is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moeplan::formats::{self, ReadOptions};
use moeplan::{ReadLimits, Meter};

fuzz_target!(|data: &[u8]| {
    let options = ReadOptions {
        budget: ReadLimits::mib(64),
        ..Default::default()
    };
    if let Ok(t) = formats::read_trace(data, &options) {
        let _ = t.stats();
        if let Ok(topo) = moeplan::Topology::new(1, 4) {
            if let Ok(p) = moeplan::planners::contiguous(&t, topo) {
                let _ = moeplan::evaluate(&t, &p);
            }
        }
    }
    let meter = || Meter::new(ReadLimits::mib(64));
    let _ = formats::read_trace_json(data);
    let _ = formats::read_rank_csvs(&[("fuzz".into(), data.to_vec())], None, &mut meter());
});
