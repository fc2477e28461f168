//! CRAFT on a generated DeepSeek-V3 trace (256 batches × 58 layers × 256
//! experts, 64 GPUs): full preparation (Algorithm 1 + bounds) and a budget
//! change alone (Algorithms 2–3 + placement), with and without the
//! refinement; plus how preparation grows with batches, layers, experts and
//! GPUs.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use moeplan::data::model::{ModelPreset, preset};
use moeplan::planners::{Craft, CraftOptions, ReplicaBudget};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{LoadTrace, Topology};

fn trace(p: &'static ModelPreset, batches: usize) -> LoadTrace {
    generate(&GenConfig::new(p, batches)).unwrap()
}

fn bench(c: &mut Criterion) {
    let v3 = preset("deepseek-v3").unwrap();
    let t = trace(v3, 256);
    let topo = Topology::new(1, 64).unwrap();
    let mut g = c.benchmark_group("craft");
    g.sample_size(20);
    for (name, refine) in [("refined", true), ("paper", false)] {
        let opts = CraftOptions {
            refine,
            ..Default::default()
        };
        g.bench_function(format!("prepare 256x58x256 64gpu {name}"), |b| {
            b.iter(|| Craft::prepare(black_box(&t), topo, &opts).unwrap())
        });
        let craft = Craft::prepare(&t, topo, &opts).unwrap();
        g.bench_function(format!("budget change R=8 {name}"), |b| {
            b.iter(|| {
                craft
                    .plan(black_box(ReplicaBudget::ReplicasPerGpu(8)))
                    .unwrap()
            })
        });
    }
    g.finish();

    // How preparation scales (refined, the default).
    let opts = CraftOptions::default();
    let mut g = c.benchmark_group("craft scaling");
    g.sample_size(10);
    for batches in [64, 256, 1024] {
        let t = trace(v3, batches);
        g.bench_with_input(BenchmarkId::new("batches", batches), &t, |b, t| {
            b.iter(|| Craft::prepare(t, topo, &opts).unwrap())
        });
    }
    let kimi = preset("kimi-k2").unwrap();
    let t = trace(kimi, 256);
    g.bench_with_input(BenchmarkId::new("kimi-k2 60x384 gpus", 64), &t, |b, t| {
        b.iter(|| Craft::prepare(t, topo, &opts).unwrap())
    });
    let t128 = Topology::new(16, 8).unwrap();
    g.bench_with_input(BenchmarkId::new("kimi-k2 60x384 gpus", 128), &t, |b, t| {
        b.iter(|| Craft::prepare(t, t128, &opts).unwrap())
    });
    let q = preset("qwen3-235b-a22b").unwrap();
    let t = trace(q, 256);
    g.bench_with_input(
        BenchmarkId::new("qwen3-235b 94x128 gpus", 64),
        &t,
        |b, t| b.iter(|| Craft::prepare(t, topo, &opts).unwrap()),
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
