//! Libra's token rebalancer (Algorithm 2), one call per layer per batch on
//! the CPU: the paper hides it under the local MoE compute, so it must stay
//! in microseconds (target < 10 µs for 8 GPUs × 128–256 experts). Inputs:
//! a generated batch of Qwen3-235B (128 experts) or DeepSeek-V3 (256
//! experts), 8 GPUs, even arrival, the contiguous base plus the
//! prefetcher's copies (N = 8, α = 0.5, oracle counts). The prefetcher is
//! timed too, for information, and so is the whole of Libra on the page's
//! default (generated DeepSeek-V3, 64 batches × 58 layers, 8 × 8 GPUs, even
//! arrival, previous-batch predictor): its schedule and its replay, which
//! the page's worker runs on every cluster change.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use moeplan::Workload;
use moeplan::judge::{CostModel, Rebalancer, Served, judge};
use moeplan::planners::contiguous;
use moeplan::planners::{LibraOptions, PredictedCounts, Predictor, libra_schedule, prefetch};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{Topology, data::model};

fn bench(c: &mut Criterion) {
    let topo = Topology::new(1, 8).unwrap();
    let d = topo.num_gpus();
    for preset in ["qwen3-235b-a22b", "deepseek-v3"] {
        let trace = generate(&GenConfig::new(model::preset(preset).unwrap(), 4)).unwrap();
        let e_n = trace.num_experts();
        let base = contiguous(&trace, topo).unwrap();
        // Layer 10 of batch 1, every GPU sending 1 / D of each expert.
        let row: Vec<f64> = (0..e_n).map(|e| trace.counts()[[1, 10, e]]).collect();
        let src: Vec<f64> = (0..d)
            .flat_map(|_| row.iter().map(|n| n / d as f64))
            .collect();
        let predicted = PredictedCounts::new(d, e_n, src.clone()).unwrap();
        let base_layer = &base.layers()[10];
        let layer = prefetch(base_layer, &predicted, 8, 4).unwrap();
        let mut r = Rebalancer::new(&layer, e_n).unwrap();
        let mut group = c.benchmark_group(format!("libra/{d}gpu x {e_n} experts"));
        group.bench_function("rebalance (Algorithm 2)", |b| {
            b.iter(|| black_box(r.solve(black_box(&src), 0.05).unwrap()))
        });
        group.bench_function("prefetch (Algorithm 1)", |b| {
            b.iter(|| black_box(prefetch(base_layer, black_box(&predicted), 8, 4).unwrap()))
        });
        group.finish();
    }
}

fn page_default(c: &mut Criterion) {
    let m = model::preset("deepseek-v3").unwrap();
    let topo = Topology::new(8, 8).unwrap();
    let trace = generate(&GenConfig::new(m, 64)).unwrap();
    let base = contiguous(&trace, topo).unwrap();
    let work = Workload::new(trace);
    let o = LibraOptions::default();
    let mut group = c.benchmark_group("libra/page default, 64 batches x 8x8 GPUs x 256 experts");
    group.sample_size(10);
    group.bench_function("schedule", |b| {
        b.iter(|| black_box(libra_schedule(&work, &base, &Predictor::PreviousBatch, &o).unwrap()))
    });
    let planner = moeplan::planners::find("libra").unwrap();
    let ready = planner
        .prepare(&work, topo, &moeplan::planners::Settings::new())
        .unwrap();
    let s = ready.schedule(&base, &work).unwrap().unwrap();
    let cost = CostModel::for_model(m);
    group.bench_function("replay (judge)", |b| {
        b.iter(|| {
            let served = Served::Schedule {
                base: &base,
                schedule: &s,
            };
            black_box(judge(&work, served, &cost, None, |_, _| {}).unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, bench, page_default);
criterion_main!(benches);
