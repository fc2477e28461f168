//! The simulator on a generated DeepSeek-V3 trace (256 batches × 58 layers
//! × 256 experts) with EPLB plans (+64 redundant experts) on 64 GPUs, as
//! 1 × 64 and 8 × 8: `Even` and `Vllm` (the closed forms, target < 50 ms),
//! and for information `SglangStatic`, `LocalFirst` and `Optimal`. Then
//! the page's token-route default (DeepSeek-V3, 64 batches of 128 generated
//! tokens, 8 × 8 GPUs, EPLB +64) under `even` and `local-first`: the replay
//! counts every token's messages (`MessageTally`); `pairs` the same replay
//! without them (`simulate_pairs`), what a budget change pays on that page.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use moeplan::Workload;
use moeplan::judge::{CostModel, Rule, SglangVersion, Strategy, simulate, simulate_pairs};
use moeplan::planners::{EplbConfig, eplb};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{Topology, data::model};

fn bench(c: &mut Criterion) {
    let trace = generate(&GenConfig::new(model::preset("deepseek-v3").unwrap(), 256)).unwrap();
    let work = Workload::new(trace.clone());
    let cost = CostModel::default();
    for (nodes, gpn, groups) in [(1, 64, 1), (8, 8, 8)] {
        let topo = Topology::new(nodes, gpn).unwrap();
        let cfg = EplbConfig {
            redundant_experts: 64,
            groups,
        };
        let plan = eplb(&trace, topo, cfg).unwrap();
        let mut group =
            c.benchmark_group(format!("sim/generated 256x58x256 {nodes}x{gpn}gpu eplb+64"));
        for rule in [
            Rule::Even,
            Rule::Vllm,
            Rule::SglangStatic(SglangVersion::Nearest),
            Rule::LocalFirst,
            Rule::Optimal,
        ] {
            if rule == Rule::Optimal {
                group.sample_size(10);
            }
            let strategy = Strategy::fixed(plan.clone(), rule);
            group.bench_function(rule.name(), |b| {
                b.iter(|| simulate(black_box(&work), &strategy, &cost).unwrap())
            });
        }
        group.finish();
    }
}

fn routes(c: &mut Criterion) {
    use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    let m = model::preset("deepseek-v3").unwrap();
    let tokens = generate_tokens(&TokenGenConfig::new(m, 64 * 128)).unwrap();
    let work = Workload::from_tokens(tokens, 128).unwrap();
    let topo = Topology::new(8, 8).unwrap();
    let cfg = EplbConfig {
        redundant_experts: 64,
        groups: 8,
    };
    let plan = eplb(work.trace(), topo, cfg).unwrap();
    let cost = CostModel::for_model(m);
    let mut group = c.benchmark_group("sim/token routes 64x128 tokens 8x8gpu eplb+64");
    group.sample_size(20);
    for rule in [Rule::Even, Rule::LocalFirst] {
        let strategy = Strategy::fixed(plan.clone(), rule);
        group.bench_function(rule.name(), |b| {
            b.iter(|| simulate(black_box(&work), &strategy, &cost).unwrap())
        });
        group.bench_function(format!("{} pairs", rule.name()), |b| {
            b.iter(|| simulate_pairs(black_box(&work), &strategy, &cost).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench, routes);
criterion_main!(benches);
