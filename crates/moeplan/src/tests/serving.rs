//! Serving with re-planning (`studies::serving`): an interval longer than
//! the trace is the static plan; relabelled moves keep the fresh plans'
//! balance with fewer copies; a threshold every window meets skips every
//! re-plan; an incremental budget holds per re-plan; bad knobs are refused;
//! and on real HarMoEny data re-planning beats never re-planning while on a
//! generated trace that does not shift it does not.

use super::common;

use crate::Workload;
use crate::data::{hardware, model};
use crate::judge::Rule;
use crate::judge::cost::Pricing;
use crate::planners::shared::incremental::Goal;
use crate::planners::{Settings, eplb};
use crate::studies::serving::{Migrate, Serving, serve};
use crate::synth::generator::{GenConfig, generate};
use crate::{LoadTrace, Topology};

fn knobs(every: usize, window: usize, migrate: Migrate) -> Serving {
    Serving {
        every,
        window,
        min_balancedness: None,
        migrate,
        transfer: Default::default(),
        rule: Rule::Even,
        start: 0,
        libra: false,
    }
}

fn shifting() -> LoadTrace {
    // two workloads back to back: the second half has other hot experts
    let m = model::preset("olmoe").unwrap();
    let mut c = GenConfig::new(m, 12);
    let a = generate(&c).unwrap();
    c.seed = 99;
    let b = generate(&c).unwrap();
    let counts =
        ndarray::concatenate(ndarray::Axis(0), &[a.counts().view(), b.counts().view()]).unwrap();
    LoadTrace::new(counts, a.layer_ids().to_vec()).unwrap()
}

#[test]
fn the_knobs_do_what_they_say() {
    let trace = shifting();
    let topo = Topology::new(2, 4).unwrap();
    let eplb = eplb::ID.planner().unwrap();
    let s = Settings::new();
    // an interval past the end: the static plan, nothing moved
    let never = serve(
        &Workload::new(trace.clone()),
        topo,
        eplb,
        &s,
        knobs(100, 4, Migrate::Relabel),
        None,
    )
    .unwrap();
    assert!(never.replans.is_empty() && never.copies_moved == 0);
    assert_eq!(
        never.per_batch_balancedness,
        never.static_per_batch_balancedness
    );
    // relabelled moves: the fresh plans' balance, fewer copies
    let fresh = serve(
        &Workload::new(trace.clone()),
        topo,
        eplb,
        &s,
        knobs(4, 4, Migrate::Fresh),
        None,
    )
    .unwrap();
    let relabel = serve(
        &Workload::new(trace.clone()),
        topo,
        eplb,
        &s,
        knobs(4, 4, Migrate::Relabel),
        None,
    )
    .unwrap();
    assert_eq!(fresh.replans.len(), 4); // at batches 8, 12, 16, 20
    for (a, b) in fresh
        .per_batch_balancedness
        .iter()
        .zip(&relabel.per_batch_balancedness)
    {
        assert!((a - b).abs() < 1e-12);
    }
    assert!(relabel.copies_moved < fresh.copies_moved);
    // the workload shifts at batch 12: re-planning serves the second half better
    let second_half = |v: &[f64]| v[8..].iter().sum::<f64>() / v[8..].len() as f64;
    assert!(
        second_half(&relabel.per_batch_balancedness)
            > second_half(&relabel.static_per_batch_balancedness)
    );
    // a threshold every window meets: every re-plan skipped
    let mut k = knobs(4, 4, Migrate::Relabel);
    k.min_balancedness = Some(0.0);
    let skipped = serve(&Workload::new(trace.clone()), topo, eplb, &s, k, None).unwrap();
    assert!(skipped.replans.iter().all(|r| r.skipped) && skipped.copies_moved == 0);
    // incremental: the budget holds at every re-plan
    let goal = Goal {
        max_moved_experts: Some(6),
        min_balancedness: None,
    };
    let inc = serve(
        &Workload::new(trace.clone()),
        topo,
        eplb,
        &s,
        knobs(2, 4, Migrate::Incremental(goal)),
        None,
    )
    .unwrap();
    assert!(inc.replans.len() >= 8);
    assert!(inc.replans.iter().all(|r| r.migration.copies() <= 6));
    // runs with another window serve the same batches when given the start
    let mut k = knobs(4, 2, Migrate::Relabel);
    k.start = 4;
    assert_eq!(
        serve(&Workload::new(trace.clone()), topo, eplb, &s, k, None)
            .unwrap()
            .first_served,
        4
    );
    // refused
    for bad in [
        knobs(0, 4, Migrate::Relabel),
        knobs(4, 0, Migrate::Relabel),
        knobs(4, 24, Migrate::Relabel),
    ] {
        assert!(serve(&Workload::new(trace.clone()), topo, eplb, &s, bad, None).is_err());
    }
    let mut k = knobs(4, 4, Migrate::Relabel);
    k.min_balancedness = Some(1.5);
    assert!(serve(&Workload::new(trace.clone()), topo, eplb, &s, k, None).is_err());
}

/// With a hardware: the run's time is its batches' MoE time plus every
/// pause, and on a generated trace that does not shift, re-planning every
/// 16 batches is slower than never (every move pays, nothing is gained).
#[test]
fn on_a_trace_that_does_not_shift_never_re_planning_wins() {
    let m = model::preset("deepseek-v3").unwrap();
    let mut c = GenConfig::new(m, 48);
    c.seed = 5;
    let trace = generate(&c).unwrap();
    let pricing = Pricing::new(hardware::preset("h100-ib-ndr").unwrap(), m);
    let r = serve(
        &Workload::new(trace.clone()),
        Topology::new(4, 8).unwrap(),
        eplb::ID.planner().unwrap(),
        &Settings::new(),
        knobs(16, 16, Migrate::Relabel),
        Some(&pricing),
    )
    .unwrap();
    let (total, kept) = r.total_us.unwrap();
    let batches: f64 = r.per_batch_moe_us.as_ref().unwrap().iter().sum();
    let pauses: f64 = r.replans.iter().filter_map(|p| p.pause_us).sum();
    assert!(pauses > 0.0 && (total - batches - pauses).abs() < 1e-6 * total);
    assert!(total > kept, "re-planning {total} µs, never {kept} µs");
    // a move takes longer than the interval to pay back, if ever
    let saved = (kept - batches) / r.served_batches as f64;
    let moves = r.replans.iter().filter(|p| !p.skipped).count() as f64;
    match r.payback_batches {
        Some(p) => {
            assert!((p - pauses / moves / saved).abs() < 1e-9 * p);
            assert!(p > 16.0, "payback {p}");
        }
        None => assert!(saved <= 0.0),
    }
    // unpriced: no payback
    let plain = serve(
        &Workload::new(trace.clone()),
        Topology::new(4, 8).unwrap(),
        eplb::ID.planner().unwrap(),
        &Settings::new(),
        knobs(16, 16, Migrate::Relabel),
        None,
    )
    .unwrap();
    assert!(plain.payback_batches.is_none());
}

/// HarMoEny's CSV (`None` where the shared data is absent outside CI),
/// its model, and EPLB with 4 redundant experts.
fn harmoeny() -> Option<(Vec<u8>, &'static model::ModelPreset, Settings)> {
    let p = common::shared_data("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv")?;
    let settings = Settings::new()
        .with("redundant_experts", crate::planners::Value::Count(4))
        .unwrap();
    let m = model::preset("qwen1.5-moe-a2.7b").unwrap();
    Some((std::fs::read(p).unwrap(), m, settings))
}

/// EPLB serving `trace` on 1 × 8 with Libra beside it, priced on `hw`.
fn eplb_on_1x8(
    trace: &LoadTrace,
    settings: &Settings,
    knobs: Serving,
    hw: &str,
    m: &'static model::ModelPreset,
) -> crate::studies::serving::ServingReport {
    let pricing = Pricing::new(hardware::preset(hw).unwrap(), m);
    let knobs = Serving {
        libra: true,
        ..knobs
    };
    let eplb = eplb::ID.planner().unwrap();
    serve(
        &Workload::new(trace.clone()),
        Topology::new(1, 8).unwrap(),
        eplb,
        settings,
        knobs,
        Some(&pricing),
    )
    .unwrap()
}

/// Real HarMoEny Qwen1.5-MoE (60 batches of shifting datasets), 1 × 8,
/// EPLB +4: re-planning every 4 batches on the last 4 beats never
/// re-planning on `h200-ib-ndr` and on `4090-pcie4-25gbe` (docs/replan.md).
#[test]
fn real_harmoeny_re_planning_pays() {
    let Some((bytes, m, settings)) = harmoeny() else {
        return;
    };
    let trace = crate::formats::read_trace(&bytes, &Default::default()).unwrap();
    let mut rows = 0;
    for hw in ["h200-ib-ndr", "4090-pcie4-25gbe"] {
        let mut k = knobs(4, 4, Migrate::Relabel);
        k.start = 16;
        let r = eplb_on_1x8(&trace, &settings, k, hw, m);
        let (total, kept) = r.total_us.unwrap();
        eprintln!(
            "{hw}: K = 4, W = 4 from batch 16: {:.1} ms against {:.1} ms never re-planning ({:.3}×), balancedness {:.4} vs {:.4}, {} copies",
            total / 1e3,
            kept / 1e3,
            total / kept,
            r.balancedness,
            r.static_balancedness,
            r.copies_moved
        );
        assert!(total < kept * 0.9, "{hw}");
        // each move pays back within the interval
        assert!(
            r.payback_batches.is_some_and(|p| p < 4.0),
            "{hw}: {:?}",
            r.payback_batches
        );
        let libra = r.libra.as_ref().unwrap();
        assert_eq!(libra.per_batch_balancedness.len(), r.served_batches);
        eprintln!(
            "{hw}: Libra on the same batches: {:.1} ms, balancedness {:.4}, {:.0} copies per batch",
            libra.total_us.unwrap() / 1e3,
            libra.balancedness,
            libra.copies_per_batch
        );
        rows += 1;
    }
    assert_eq!(rows, 2);
}

/// Real HarMoEny, one dataset at a time (20 batches each, no shift): on
/// both machines never re-planning beats re-planning every 8 batches on the
/// last 4, and Libra beats never re-planning (docs/replan.md).
#[test]
fn real_harmoeny_one_dataset_never_re_planning_wins() {
    let Some((bytes, m, settings)) = harmoeny() else {
        return;
    };
    let mut rows = 0;
    for dataset in ["bookcorpus", "wikitext", "random"] {
        let options = crate::formats::ReadOptions {
            dataset: Some(dataset.into()),
            ..Default::default()
        };
        let trace = crate::formats::read_trace(&bytes, &options).unwrap();
        assert_eq!(trace.num_batches(), 20);
        for hw in ["h200-ib-ndr", "4090-pcie4-25gbe"] {
            let r = eplb_on_1x8(&trace, &settings, knobs(8, 4, Migrate::Relabel), hw, m);
            let (total, kept) = r.total_us.unwrap();
            let libra = r.libra.as_ref().and_then(|l| l.total_us).unwrap();
            eprintln!(
                "{dataset} on {hw}: K = 8, W = 4 {:.3}× never, Libra {:.3}×, payback {:?}",
                total / kept,
                libra / kept,
                r.payback_batches
            );
            assert!(total > kept, "{dataset} on {hw}");
            assert!(libra < kept, "{dataset} on {hw}");
            rows += 1;
        }
    }
    assert_eq!(rows, 6);
}

/// Real ESFT token routes, intent then summary (512-token batches), 2 × 4,
/// EPLB +8: the shift is real (re-planning raises balancedness), but a
/// move's pause does not pay back within the 26 batches served on either
/// machine (docs/replan.md).
#[test]
fn real_esft_intent_then_summary_shifts_but_moves_do_not_pay() {
    let Some(dir) = common::shared_data("esft-deepseek-v2-lite") else {
        return;
    };
    let read = |task: &str| {
        let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join(task))
            .unwrap()
            .map(|f| {
                let f = f.unwrap();
                (
                    f.file_name().to_string_lossy().into_owned(),
                    std::fs::read(f.path()).unwrap(),
                )
            })
            .collect();
        let mut meter = crate::Meter::new(crate::ReadLimits::default());
        crate::formats::esft::read_esft(&files, 64, 6, &mut meter)
            .unwrap()
            .to_load_trace(512)
            .unwrap()
    };
    let trace = read("intent").then(&read("summary")).unwrap();
    assert_eq!(trace.num_batches(), 34);
    let m = model::preset("deepseek-v2-lite").unwrap();
    let settings = Settings::new()
        .with("redundant_experts", crate::planners::Value::Count(8))
        .unwrap()
        .with("groups", crate::planners::Value::Count(1))
        .unwrap();
    for hw in ["4090-pcie4-25gbe", "h100-ib-ndr"] {
        let pricing = Pricing::new(hardware::preset(hw).unwrap(), m);
        let mut k = knobs(16, 8, Migrate::Relabel);
        k.start = 8;
        let r = serve(
            &Workload::new(trace.clone()),
            Topology::new(2, 4).unwrap(),
            eplb::ID.planner().unwrap(),
            &settings,
            k,
            Some(&pricing),
        )
        .unwrap();
        let (total, kept) = r.total_us.unwrap();
        eprintln!(
            "{hw}: balancedness {:.4} against {:.4} kept, {:.3}× never, payback {:?} batches",
            r.balancedness,
            r.static_balancedness,
            total / kept,
            r.payback_batches
        );
        assert!(r.balancedness > r.static_balancedness + 0.02, "{hw}");
        assert!(total > kept, "{hw}");
        assert!(
            r.payback_batches
                .is_some_and(|p| p > r.served_batches as f64),
            "{hw}"
        );
    }
}

/// The min-balancedness gate reads the served plan's balance under the
/// rule served, not the even split: under SGLang's static rule a window's
/// figure is the static rule's, and a threshold between the two figures
/// skips under one rule and re-plans under the other.
#[test]
fn the_gate_judges_under_the_rule_served() {
    let trace = shifting();
    let topo = Topology::new(2, 4).unwrap();
    let eplb = eplb::ID.planner().unwrap();
    let s = Settings::new();
    let run = |rule: Rule, gate: Option<f64>| {
        let k = Serving {
            rule,
            min_balancedness: gate,
            ..knobs(4, 4, Migrate::Relabel)
        };
        serve(&Workload::new(trace.clone()), topo, eplb, &s, k, None).unwrap()
    };
    let even = run(Rule::Even, None);
    let stat = run(
        Rule::SglangStatic(crate::judge::SglangVersion::Nearest),
        None,
    );
    let (e, t) = (
        even.replans[0].window_balancedness_before,
        stat.replans[0].window_balancedness_before,
    );
    assert!(
        (e - t).abs() > 1e-3,
        "even {e}, sglang-static {t}: the rules agree here"
    );
    let gate = (e + t) / 2.0;
    let skipped = |r: &crate::studies::serving::ServingReport| r.replans[0].skipped;
    // the higher figure meets the gate, the lower does not
    assert_eq!(skipped(&run(Rule::Even, Some(gate))), e >= gate);
    assert_eq!(
        skipped(&run(
            Rule::SglangStatic(crate::judge::SglangVersion::Nearest),
            Some(gate)
        )),
        t >= gate
    );
    assert_ne!(e >= gate, t >= gate);
}
