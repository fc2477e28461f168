//! The view model against the core it shows: the same planners, the same
//! defaults, and GRACE's analysis handed on only where it belongs.

use moeplan::data::model;
use moeplan::planners::{EPLB_ID, Settings, default_redundant_experts, plan};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan::{Topology, Workload};
use moeplan_view::{Cluster, Workspace};

fn cluster(nodes: usize, gpus_per_node: usize) -> Cluster {
    Cluster {
        nodes,
        gpus_per_node,
        groups: 1,
    }
}

/// EPLB's default redundant experts is one rule for every front end:
/// the CLI and the JavaScript API both plan through
/// `plan(.., &Settings::new())` / `Prepared::plan(None)`, and the page
/// through the workspace — all three give the same count, for E % D = 0
/// and for E % D ≠ 0 (OLMoE's 64 experts on 6 GPUs, Qwen1.5-MoE's 60 on 8).
#[test]
fn eplb_default_is_one_rule_everywhere() {
    for (preset, nodes, per_node, want) in [
        ("olmoe", 1, 6, 8),              // 64 + 8 = 72 = 6 × 12
        ("qwen1.5-moe-a2.7b", 1, 8, 12), // 60 + 12 = 72 = 8 × 9
        ("olmoe", 2, 4, 8),              // 64 + 8 = 72 = 8 × 9
        ("deepseek-v2-lite", 1, 16, 16),
    ] {
        let t = generate(&GenConfig::new(model::preset(preset).unwrap(), 2)).unwrap();
        let topo = Topology::new(nodes, per_node).unwrap();
        let (e, d) = (t.num_experts(), topo.num_gpus());
        assert_eq!(default_redundant_experts(e, d), want, "{preset}");
        let work = Workload::new(t.clone());
        let p = plan(EPLB_ID.planner().unwrap(), &work, topo, &Settings::new()).unwrap();
        assert_eq!(p.budget, Some(want));
        assert_eq!(p.plan.summary().replicas, want * t.num_layers());
        let ws = Workspace::new(t, cluster(nodes, per_node)).unwrap();
        let v = ws.view(None, 0).unwrap();
        let row = v.plans.iter().find(|p| p.name == "eplb").unwrap();
        assert_eq!(row.budget, Some(want), "{preset}");
        assert_eq!(row.replicas, want * v.layer_ids.len());
        assert_eq!(row.label, format!("EPLB +{want}"));
    }
}

/// The workspace hands GRACE's analysis on only for the same routes: a
/// workspace for other routes, built "reusing" one made from the first
/// routes, is the fresh one.
#[test]
fn a_workspace_reuses_the_analysis_only_for_its_routes() {
    let work = |seed| {
        let mut cfg = TokenGenConfig::new(model::preset("olmoe").unwrap(), 512);
        cfg.seed = seed;
        Workload::from_tokens(generate_tokens(&cfg).unwrap(), 128).unwrap()
    };
    let (a, b) = (work(1), work(2));
    let first = Workspace::of_workload(a.clone(), cluster(2, 4), |_| {}).unwrap();
    for (work, c) in [
        (a.clone(), cluster(1, 8)),
        (b.clone(), cluster(2, 4)),
        (a, cluster(2, 4)),
    ] {
        let reused = Workspace::of_workload_reusing(work.clone(), c, Some(&first), |_| {}).unwrap();
        let fresh = Workspace::of_workload(work, c, |_| {}).unwrap();
        for layer in [0, 1] {
            assert_eq!(
                reused.view(None, layer).unwrap(),
                fresh.view(None, layer).unwrap()
            );
        }
    }
}

/// The page offers the current engine rules and the optimum, filtered from
/// the core's one list, in its order.
#[test]
fn the_page_offers_the_current_rules_of_the_core_list() {
    let names: Vec<&str> = moeplan_view::dispatch_rules().map(|r| r.name()).collect();
    assert_eq!(
        names,
        [
            "even",
            "vllm",
            "sglang-static",
            "local-first",
            "grace-weighted",
            "grace-topology",
            "optimal"
        ]
    );
    for rule in moeplan::judge::Rule::ALL {
        assert_eq!(
            moeplan_view::dispatch_rule(rule.name()).is_ok(),
            moeplan_view::offered(&rule),
            "{rule}"
        );
    }
}
