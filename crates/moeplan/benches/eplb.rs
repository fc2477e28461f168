//! EPLB and the replay on the real DeepSeek-V3 prefill trace (58 × 256, 64
//! GPUs, 64 redundant experts) when ../shared/data is present, and on a
//! generated trace of the same shape always.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use moeplan::planners::{EplbConfig, eplb};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{LoadTrace, Topology, data::model, evaluate, formats};

fn real_trace() -> Option<LoadTrace> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/sglang-deepseek-v3/prefill_in4096.json");
    match std::fs::read(&p) {
        Ok(bytes) => formats::read_trace(&bytes, &Default::default()).ok(),
        Err(_) => {
            eprintln!("SKIP real-data benchmarks: {} not found", p.display());
            None
        }
    }
}

fn bench(c: &mut Criterion) {
    let topo = Topology::new(1, 64).unwrap();
    let cfg = EplbConfig {
        redundant_experts: 64,
        groups: 1,
    };
    if let Some(real) = real_trace() {
        c.bench_function("eplb/real prefill_in4096 58x256 64gpu +64", |b| {
            b.iter(|| eplb(black_box(&real), topo, cfg).unwrap())
        });
    }
    let generated = generate(&GenConfig::new(model::preset("deepseek-v3").unwrap(), 256)).unwrap();
    let one_batch = generated.slice_batches(0..1).unwrap();
    c.bench_function("eplb/generated 58x256 64gpu +64", |b| {
        b.iter(|| eplb(black_box(&one_batch), topo, cfg).unwrap())
    });
    let topo8 = Topology::new(8, 8).unwrap();
    let cfg8 = EplbConfig {
        redundant_experts: 64,
        groups: 8,
    };
    c.bench_function("eplb/generated 58x256 8x8gpu +64 hierarchical", |b| {
        b.iter(|| eplb(black_box(&one_batch), topo8, cfg8).unwrap())
    });
    let plan = eplb(&generated, topo, cfg).unwrap();
    c.bench_function("evaluate/generated 256 batches x58x256 64gpu", |b| {
        b.iter(|| evaluate(black_box(&generated), &plan).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
