//! What the cost model adds to a replay, on the page's default (generated
//! DeepSeek-V3, 64 batches × 58 layers × 256 experts, 8 × 8 GPUs, CRAFT
//! R = 8 under `even`): the replay alone, the replay timing every (batch,
//! layer) on `h100-ib-ndr`, and the whole priced judgement (memory, replay,
//! step and throughput). The page's budget-change target: the cost model
//! adds at most 2 ms (docs/speed.md). Then CRAFT planning for time on the
//! same trace: its preparation against the balancedness objective's, and a
//! plan at R = 8 and at `auto` (the fastest budget).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use moeplan::Workload;
use moeplan::data::hardware;
use moeplan::judge::cost::Pricing;
use moeplan::judge::{CostModel, Rule, Served, Strategy, judge, simulate};
use moeplan::planners::{Craft, CraftOptions, Objective, ReplicaBudget, craft};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{Topology, data::model};

fn bench(c: &mut Criterion) {
    let m = model::preset("deepseek-v3").unwrap();
    let mut cfg = GenConfig::new(m, 64);
    cfg.seed = 7;
    let trace = generate(&cfg).unwrap();
    let topo = Topology::new(8, 8).unwrap();
    let plan = craft(&trace, topo, ReplicaBudget::ReplicasPerGpu(8)).unwrap();
    let work = Workload::new(trace);
    let cost = CostModel::for_model(m);
    let pricing = Pricing::new(hardware::preset("h100-ib-ndr").unwrap(), m);
    let timed = CostModel {
        time: Some(pricing.time_cost()),
        ..cost
    };
    let strategy = Strategy::fixed(plan.clone(), Rule::Even);
    let mut group = c.benchmark_group("cost/page default 64x58x256 8x8gpu craft R=8");
    group.bench_function("replay", |b| {
        b.iter(|| simulate(black_box(&work), &strategy, &cost).unwrap())
    });
    group.bench_function("replay timed", |b| {
        b.iter(|| simulate(black_box(&work), &strategy, &timed).unwrap())
    });
    let served = Served::Plan {
        plan: &plan,
        rule: Rule::Even,
    };
    group.bench_function("judge priced", |b| {
        b.iter(|| judge(black_box(&work), served, &cost, Some(&pricing), |_, _| {}).unwrap())
    });
    // What the page pays per budget change: CRAFT's plan priced on the
    // mean batch.
    let mean = Workload::new(work.trace().mean_batch());
    let mean_strategy = Strategy::fixed(plan.clone(), Rule::Even);
    group.bench_function("mean batch replay", |b| {
        b.iter(|| simulate(black_box(&mean), &mean_strategy, &cost).unwrap())
    });
    group.bench_function("mean batch replay timed", |b| {
        b.iter(|| simulate(black_box(&mean), &mean_strategy, &timed).unwrap())
    });
    group.bench_function("plan summary", |b| b.iter(|| black_box(&plan).summary()));
    group.bench_function("price mean batch", |b| {
        b.iter(|| moeplan::judge::price(black_box(&mean), served, &cost, &pricing).unwrap())
    });
    group.finish();
    // Planning for time: what pricing Algorithm 1's placements adds to
    // CRAFT's preparation, and `auto` choosing the fastest budget.
    let mut group = c.benchmark_group("cost/craft planning for time 64x58x256 8x8gpu");
    group.sample_size(10);
    let options = |objective| CraftOptions {
        objective,
        pricing: Some(pricing.clone()),
        ..CraftOptions::default()
    };
    group.bench_function("prepare mean", |b| {
        b.iter(|| {
            Craft::prepare(
                black_box(work.trace()),
                topo,
                &options(Objective::MeanBalancedness),
            )
            .unwrap()
        })
    });
    group.bench_function("prepare time", |b| {
        b.iter(|| Craft::prepare(black_box(work.trace()), topo, &options(Objective::Time)).unwrap())
    });
    let ready = Craft::prepare(work.trace(), topo, &options(Objective::Time)).unwrap();
    group.bench_function("plan R=8 time", |b| {
        b.iter(|| {
            ready
                .plan(black_box(ReplicaBudget::ReplicasPerGpu(8)))
                .unwrap()
        })
    });
    // The fastest R is searched once per preparation and kept: each
    // iteration plans `auto` on a fresh copy.
    group.bench_function("plan auto time (fastest R, first time)", |b| {
        b.iter_batched(
            || ready.clone(),
            |fresh| fresh.plan(black_box(ReplicaBudget::Auto)).unwrap(),
            criterion::BatchSize::LargeInput,
        )
    });
    ready.plan(ReplicaBudget::Auto).unwrap();
    group.bench_function("plan auto time (fastest R kept)", |b| {
        b.iter(|| ready.plan(black_box(ReplicaBudget::Auto)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
