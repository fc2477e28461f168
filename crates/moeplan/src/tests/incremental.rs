//! Incremental re-planning from the served plan: within its copy budget,
//! never less balanced than it started, slots per GPU kept, stopping at the
//! target; and on real DeepSeek-V3 workloads against a fresh plan
//! relabelled (the figures in docs/replan.md).

use super::common;

use crate::judge::migration::{MoveCost, migration, relabel};
use crate::planners::shared::incremental::{Goal, incremental};
use crate::planners::{EplbConfig, eplb};
use crate::synth::generator::{GenConfig, generate};
use crate::{Plan, Topology, data::hardware, data::model, evaluate};

fn slots(p: &Plan) -> Vec<Vec<usize>> {
    p.layers()
        .iter()
        .map(|l| l.gpus.iter().map(Vec::len).collect())
        .collect()
}

/// On generated traces whose second half differs from the first (another
/// seed), at several budgets: copies within the budget and as reported,
/// balance never lower, memory unchanged, and a larger budget never worse.
#[test]
fn within_budget_never_worse_same_memory() {
    let mut checked = 0;
    for (m, nodes, gpn, seed) in [
        ("olmoe", 1, 8, 1),
        ("qwen3-30b-a3b", 2, 4, 2),
        ("deepseek-v3", 4, 8, 3),
    ] {
        let preset = model::preset(m).unwrap();
        let mut c = GenConfig::new(preset, 4);
        c.seed = seed;
        let old = generate(&c).unwrap();
        c.seed = seed + 100;
        let new = generate(&c).unwrap();
        let topo = Topology::new(nodes, gpn).unwrap();
        let cfg = EplbConfig {
            redundant_experts: topo.num_gpus(),
            groups: 1,
        };
        let served = eplb(&old, topo, cfg).unwrap();
        let loads = new.summed();
        let mut last = f64::NEG_INFINITY;
        for budget in [0, 4, 16, 64, 256] {
            let goal = Goal {
                max_moved_experts: Some(budget),
                min_balancedness: None,
            };
            let r = incremental(&served, loads.view(), goal).unwrap();
            assert!(
                r.copies <= budget,
                "{m} budget {budget}: {} copies",
                r.copies
            );
            assert_eq!(migration(&served, &r.plan).unwrap().copies(), r.copies);
            assert!(r.balancedness.1 >= r.balancedness.0 - 1e-12);
            assert_eq!(slots(&r.plan), slots(&served));
            let judged = evaluate(&new, &r.plan).unwrap().balancedness;
            assert!(
                judged >= last - 1e-9,
                "{m}: budget {budget} gave {judged} < {last}"
            );
            last = judged;
            checked += 1;
        }
        // a reachable target stops the search there
        let start = incremental(&served, loads.view(), Goal::default()).unwrap();
        let target = (start.balancedness.0 + start.balancedness.1) / 2.0;
        let goal = Goal {
            max_moved_experts: None,
            min_balancedness: Some(target),
        };
        let r = incremental(&served, loads.view(), goal).unwrap();
        assert!(
            r.balancedness.1 >= target && r.copies <= start.copies,
            "{m}"
        );
    }
    assert_eq!(checked, 15);
}

/// The real DeepSeek-V3 dumps at 8 × 8: EPLB served for `prefill_in4096`,
/// the workload becomes `decode_in1000out1000`. The incremental re-plan at
/// a few budgets against the fresh EPLB plan relabelled.
#[test]
fn real_deepseek_incremental_against_fresh_relabelled() {
    let read = |f: &str| common::read_shared_trace(&format!("sglang-deepseek-v3/{f}.json"));
    let (Some(before), Some(after)) = (read("prefill_in4096"), read("decode_in1000out1000")) else {
        return;
    };
    let topo = Topology::new(8, 8).unwrap();
    let cfg = EplbConfig {
        redundant_experts: 64,
        groups: 8,
    };
    let served = eplb(&before, topo, cfg).unwrap();
    let fresh = eplb(&after, topo, cfg).unwrap();
    let cost = MoveCost::for_hardware(hardware::preset("h100-ib-ndr").unwrap());
    let relabelled = relabel(&served, &fresh, cost).unwrap();
    let bal = |p: &Plan| evaluate(&after, p).unwrap().balancedness;
    let fresh_copies = migration(&served, &relabelled).unwrap().copies();
    eprintln!(
        "served as is: {:.4}; fresh relabelled: {:.4} with {fresh_copies} copies",
        bal(&served),
        bal(&relabelled)
    );
    let loads = after.summed();
    let mut rows = 0;
    for budget in [58, 290, 1160] {
        let goal = Goal {
            max_moved_experts: Some(budget),
            min_balancedness: None,
        };
        let r = incremental(&served, loads.view(), goal).unwrap();
        eprintln!(
            "incremental, {budget} copies at most: {:.4} with {} copies ({} moves)",
            bal(&r.plan),
            r.copies,
            r.moves
        );
        assert!(bal(&r.plan) > bal(&served));
        assert!(r.copies < fresh_copies);
        rows += 1;
    }
    assert_eq!(rows, 3);
}

/// The same with CRAFT (R = 8) served: the incremental re-plan starts from
/// any plan, and with a tenth of the copies beats CRAFT planned afresh and
/// relabelled (docs/replan.md).
#[test]
fn real_deepseek_incremental_from_craft() {
    let read = |f: &str| common::read_shared_trace(&format!("sglang-deepseek-v3/{f}.json"));
    let (Some(before), Some(after)) = (read("prefill_in4096"), read("decode_in1000out1000")) else {
        return;
    };
    let topo = Topology::new(8, 8).unwrap();
    let craft = crate::planners::craft::ID.planner().unwrap();
    let settings = crate::planners::Settings::new()
        .with("replicas_per_gpu", crate::planners::Value::Count(8))
        .unwrap();
    let plan_on = |t: &crate::LoadTrace| {
        crate::planners::plan(craft, &crate::Workload::new(t.clone()), topo, &settings)
            .unwrap()
            .plan
    };
    let served = plan_on(&before);
    let cost = MoveCost::for_hardware(hardware::preset("h100-ib-ndr").unwrap());
    let relabelled = relabel(&served, &plan_on(&after), cost).unwrap();
    let bal = |p: &Plan| evaluate(&after, p).unwrap().balancedness;
    let fresh_copies = migration(&served, &relabelled).unwrap().copies();
    let goal = Goal {
        max_moved_experts: Some(1160),
        min_balancedness: None,
    };
    let r = incremental(&served, after.summed().view(), goal).unwrap();
    eprintln!(
        "CRAFT served as is: {:.4}; fresh relabelled: {:.4} with {fresh_copies} copies; incremental: {:.4} with {} copies",
        bal(&served),
        bal(&relabelled),
        bal(&r.plan),
        r.copies
    );
    assert!(bal(&r.plan) > bal(&served));
    assert!(r.copies <= 1160 && r.copies * 5 < fresh_copies);
    assert_eq!(slots(&r.plan), slots(&served));
}
