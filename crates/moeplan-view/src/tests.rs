//! The workspace's unit tests: kept schedules, deferred GRACE, and the
//! view's traffic and per-batch series against the simulator's.

use super::*;
use moeplan::judge::{Replay, Served};
use moeplan::{data::model, synth::generator};

/// The core's whole replay of `served` (token messages and all) by a judge
/// of its own, on the workspace's workload and model: nothing kept from the
/// view's judge, none of its shortcuts (the closed form of even arrival,
/// the summed batch, the evaluator's series).
fn whole(ws: &Workspace, served: Served<'_>) -> Replay {
    let judge = Judge::new(ws.work().clone(), ws.asked_model()).unwrap();
    judge.verdict(served, None, |_, _| {}).unwrap().replay
}

fn even(plan: &Plan) -> Served<'_> {
    Served::Plan {
        plan,
        rule: Rule::Even,
    }
}

/// Libra's options and back: a schedule kept from before is shown as a
/// fresh replay would show it, priced anew (the prediction kept for
/// the options before is not the schedule's now), and at most
/// [`KEPT_SCHEDULES`] are kept.
#[test]
fn kept_schedules_show_what_a_replay_would() {
    use moeplan::judge::cost::Pricing;
    use moeplan::planners::Value;
    let m = model::preset("olmoe").unwrap();
    let t = generator::generate(&generator::GenConfig::new(m, 4)).unwrap();
    let c = Cluster {
        nodes: 1,
        gpus_per_node: 8,
        groups: 1,
    };
    let p = Pricing::new(moeplan::data::hardware::preset("h100-ib-ndr").unwrap(), m);
    let libra = |ws: &Workspace| {
        let v = ws
            .view_priced(Some(2), 0, Rule::Even, true, Some(&p))
            .unwrap();
        v.plans
            .into_iter()
            .find(|f| f.name == "libra")
            .expect("a Libra row")
    };
    let n = |n| {
        Settings::new()
            .with("extra_experts_per_gpu", Value::Count(n))
            .unwrap()
    };
    let mut ws = Workspace::new(t.clone(), c).unwrap();
    let mut shown = Vec::new();
    for k in [8, 1, 2, 3, 8, 2, 1] {
        ws.replan_scheduled(&n(k)).unwrap();
        let mut fresh = Workspace::new(t.clone(), c).unwrap();
        fresh.replan_scheduled(&n(k)).unwrap();
        let (kept, want) = (libra(&ws), libra(&fresh));
        assert_eq!(kept, want, "N = {k}");
        assert!(ws.schedules.len() <= KEPT_SCHEDULES);
        shown.push((k, kept));
    }
    // Different options were shown differently (the test can fail).
    let (one, eight) = (&shown[1].1, &shown[0].1);
    assert!(one.imbalance_ratio > eight.imbalance_ratio);
    assert_ne!(one.predicted, eight.predicted);
    // N = 8 came back from the kept schedules (1, 2, 3 in between
    // pushed it out; 8 was replayed again and 2 then kept).
    let kept: Vec<usize> = ws
        .schedules
        .iter()
        .map(|(_, k, ..)| match k.get("extra_experts_per_gpu") {
            Some(Value::Count(x)) => *x,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(kept, vec![8, 2, 1]);
}

/// Two plans' pair traffic, equal to rounding.
fn same_traffic(a: &PairTraffic, b: &PairTraffic, what: &str) {
    for (x, y) in [
        (a.pairs, b.pairs),
        (a.local, b.local),
        (a.intra_node, b.intra_node),
        (a.cross_node, b.cross_node),
        (a.cross_node_bytes, b.cross_node_bytes),
    ] {
        assert!(
            (x - y).abs() <= 1e-9 * y.abs().max(1.0),
            "{what}: {x} vs {y}"
        );
    }
}

/// A cluster change GRACE's analysis has not clustered leaves GRACE
/// (and Libra) for the follow-up, which then shows what a fresh
/// workspace shows; a warmed cluster plans GRACE at once.
#[test]
fn a_cold_cluster_defers_grace_to_the_follow_up() {
    use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    let t = generate_tokens(&TokenGenConfig::new(
        model::preset("deepseek-v2-lite").unwrap(),
        256,
    ))
    .unwrap();
    let work = Workload::from_tokens(t, 128).unwrap();
    let c = |nodes, gpus_per_node| Cluster {
        nodes,
        gpus_per_node,
        groups: 1,
    };
    let opts = Settings::new();
    let first = Workspace::of_workload(work.clone(), c(2, 4), |_| {}).unwrap();
    let names = |ws: &Workspace| -> Vec<String> {
        let v = ws.view(Some(2), 0).unwrap();
        v.plans.iter().map(|p| p.name.clone()).collect()
    };
    // A cluster change on the page: the per-batch planners and a cold
    // GRACE deferred.
    let deferring = |cluster, first: &Workspace| {
        Workspace::of_workload_deferring(
            work.clone(),
            cluster,
            Some(first),
            true,
            &opts,
            None,
            |_| {},
        )
        .unwrap()
    };
    let mut cold = deferring(c(4, 2), &first);
    assert!(cold.has_pending());
    let shown = names(&cold);
    assert!(!shown.contains(&"grace".to_string()), "{shown:?}");
    assert!(shown.contains(&"eplb".to_string()), "{shown:?}");
    let v = cold.view(Some(2), 0).unwrap();
    assert!(
        v.notes.iter().any(|n| n.contains("co-activation")),
        "{:?}",
        v.notes
    );
    let mut phases = Vec::new();
    assert!(
        cold.plan_pending(&opts, |p| phases.push(p.to_string()))
            .unwrap()
    );
    assert!(!cold.has_pending() && phases.len() >= 2, "{phases:?}");
    let fresh = Workspace::of_workload(work.clone(), c(4, 2), |_| {}).unwrap();
    assert_eq!(
        cold.view(Some(2), 1).unwrap(),
        fresh.view(Some(2), 1).unwrap()
    );
    // Warmed ahead (as the page's idle steps do): GRACE at once.
    for layer in 0..work.trace().num_layers() {
        first.warm_grace(c(1, 8), layer).unwrap();
    }
    let warm = deferring(c(1, 8), &first);
    assert!(names(&warm).contains(&"grace".to_string()));
}

/// The closed form the view uses under `even` is the simulator's.
#[test]
fn even_traffic_is_the_simulators() {
    let t = generator::generate(&generator::GenConfig::new(
        model::preset("olmoe").unwrap(),
        3,
    ))
    .unwrap();
    let cluster = Cluster {
        nodes: 2,
        gpus_per_node: 4,
        groups: 1,
    };
    let ws = Workspace::new(t, cluster).unwrap();
    let v = ws.view(Some(3), 0).unwrap();
    let plan = ws.focus_plan(Some(3)).unwrap();
    let sim = whole(&ws, even(&plan));
    same_traffic(
        &v.plans[2].traffic,
        &PairTraffic::from(&sim.traffic),
        "craft",
    );
    assert_eq!(v.rule, "even");
}

/// With token routes, every plan's traffic under `even` (the one summed
/// batch's) and its series (the evaluator's) are the full replay's.
#[test]
fn token_routes_even_traffic_is_the_simulators() {
    use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    let tokens = generate_tokens(&TokenGenConfig::new(
        model::preset("deepseek-v2-lite").unwrap(),
        6 * 128,
    ))
    .unwrap();
    let work = Workload::from_tokens(tokens, 128).unwrap();
    let cluster = Cluster {
        nodes: 2,
        gpus_per_node: 4,
        groups: 1,
    };
    let ws = Workspace::of_workload(work, cluster, |_| {}).unwrap();
    let v = ws.view_with_batches(Some(2), 0, Rule::Even).unwrap();
    let mut checked = 0;
    for (i, entry) in ws.entries.iter().enumerate() {
        let plan = match &entry.state {
            State::Fixed(f) => f.plan.clone(),
            State::Slider(_) if i == ws.focus => ws.focus_plan(Some(2)).unwrap(),
            _ => continue,
        };
        let name = entry.id.to_string();
        let shown = v.plans.iter().find(|p| p.name == name).unwrap();
        let sim = whole(&ws, even(&plan));
        same_traffic(&shown.traffic, &PairTraffic::from(&sim.traffic), &name);
        let b = &sim.traffic;
        assert!(b.cross_node > 0.0 && b.local > 0.0, "{name}: {b:?}");
        assert_eq!(
            shown.per_batch_imbalance, sim.per_batch_imbalance_ratio,
            "{name}"
        );
        checked += 1;
    }
    assert!(checked >= 4, "checked {checked} plans");
}

/// The per-batch series the page's timeline draws are the simulator's:
/// CRAFT's under `even` (summed without the simulator, to the bit),
/// the fixed plans' and Libra's schedule under libra-rebalance.
#[test]
fn per_batch_series_are_the_simulators() {
    use moeplan::planners::{LibraOptions, Predictor, libra_schedule};
    let t = generator::generate(&generator::GenConfig::new(
        model::preset("olmoe").unwrap(),
        5,
    ))
    .unwrap();
    let cluster = Cluster {
        nodes: 2,
        gpus_per_node: 4,
        groups: 1,
    };
    let ws = Workspace::new(t.clone(), cluster).unwrap();
    let v = ws.view_with_batches(Some(3), 0, Rule::Even).unwrap();
    let plan = |name: &str| v.plans.iter().find(|p| p.name == name).unwrap();
    let craft = ws.focus_plan(Some(3)).unwrap();
    let sim = whole(&ws, even(&craft));
    assert_eq!(
        plan("craft").per_batch_imbalance,
        sim.per_batch_imbalance_ratio
    );
    let eplb = moeplan::planners::plan(
        moeplan::planners::EPLB_ID.planner().unwrap(),
        ws.work(),
        ws.topology,
        &Settings::new(),
    )
    .unwrap();
    let sim = whole(&ws, even(&eplb.plan));
    assert_eq!(
        plan("eplb").per_batch_imbalance,
        sim.per_batch_imbalance_ratio
    );
    let base = moeplan::planners::contiguous(&t, ws.topology).unwrap();
    let s = libra_schedule(
        ws.work(),
        &base,
        &Predictor::PreviousBatch,
        &LibraOptions::default(),
    )
    .unwrap();
    let schedule = moeplan::judge::Schedule {
        strategy: s.strategy(),
        copies_per_batch: s.copies.clone(),
        extra_slots_per_gpu: 0,
        resident_slots_per_gpu: 0,
        about: String::new(),
    };
    let sim = whole(
        &ws,
        Served::Schedule {
            base: &base,
            schedule: &schedule,
        },
    );
    let libra = plan("libra");
    assert_eq!(libra.per_batch_imbalance, sim.per_batch_imbalance_ratio);
    assert_eq!(libra.imbalance_ratio, sim.imbalance_ratio);
    assert_eq!(libra.label, "LIBRA (per batch, libra-rebalance)");
    let bytes: Vec<f64> = s
        .copies
        .iter()
        .map(|&c| c as f64 * ws.judge().cost().expert_bytes as f64)
        .collect();
    assert_eq!(libra.per_batch_bytes, bytes);
    assert!(plan("eplb").per_batch_bytes.is_empty() && plan("eplb").schedule.is_none());
    // Libra's figures do not follow the view's rule: its own is part of it.
    let optimal = ws.view_under(Some(3), 0, Rule::Optimal).unwrap();
    let again = optimal.plans.iter().find(|p| p.name == "libra").unwrap();
    assert_eq!(again.imbalance_ratio, libra.imbalance_ratio);
}

/// The page's GRACE goes through the registry's preparation, as the CLI's
/// does: its plan records the loads it was planned on (what GRACE's rules
/// predict from), on token routes (its own prepared type kept for the
/// views) and on counts alike.
#[test]
fn graces_plan_records_its_profile_as_every_planners_does() {
    use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    let t = generate_tokens(&TokenGenConfig::new(
        model::preset("deepseek-v2-lite").unwrap(),
        256,
    ))
    .unwrap();
    let routes = Workload::from_tokens(t, 128).unwrap();
    let counts = Workload::new(routes.trace().clone());
    let c = Cluster {
        nodes: 2,
        gpus_per_node: 4,
        groups: 1,
    };
    for work in [routes, counts] {
        let ws = Workspace::of_workload(work.clone(), c, |_| {}).unwrap();
        let mut seen = 0;
        for entry in &ws.entries {
            let plan = match &entry.state {
                State::Fixed(f) => f.plan.clone(),
                State::Slider(p) => p.plan(Some(2)).unwrap().plan,
                _ => continue,
            };
            let summed = work.trace().summed();
            assert_eq!(
                plan.profile(),
                Some(summed.view()),
                "{} on {}",
                entry.id,
                work.sources()
            );
            seen += 1;
        }
        assert!(
            ws.entries
                .iter()
                .any(|e| e.id == grace::ID && matches!(e.state, State::Fixed(_))),
            "GRACE planned on {}",
            work.sources()
        );
        assert!(seen >= 3, "{seen} plans checked on {}", work.sources());
    }
}

/// Libra's re-plan split between two workers (the second one holding the
/// workload as given, with more source ranks than GPUs on the small
/// cluster), its part sent as numbers: shown exactly as one replay of
/// every batch shows it, priced the same, on token routes and on counts;
/// a job kept is not asked for again, and a part that is not one is
/// refused with the workspace unchanged.
#[test]
fn a_re_plan_split_between_two_workers_shows_what_one_replay_would() {
    use moeplan::judge::cost::Pricing;
    use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    let m = model::preset("deepseek-v2-lite").unwrap();
    let p = Pricing::new(moeplan::data::hardware::preset("h100-ib-ndr").unwrap(), m);
    let routes = Workload::from_tokens(
        generate_tokens(&TokenGenConfig::new(m, 5 * 128)).unwrap(),
        128,
    )
    .unwrap();
    let counts = Workload::new(generator::generate(&generator::GenConfig::new(m, 5)).unwrap());
    let libra = |ws: &Workspace| {
        let v = ws
            .view_priced(Some(2), 0, Rule::Even, true, Some(&p))
            .unwrap();
        v.plans
            .into_iter()
            .find(|f| f.name == "libra")
            .expect("a Libra row")
    };
    let mut checked = 0;
    // Routes folded onto fewer GPUs than ranks with a new N, counts with a
    // new predictor (each case builds two workspaces: seconds in debug).
    let c = |nodes, gpus_per_node| Cluster {
        nodes,
        gpus_per_node,
        groups: 1,
    };
    let n3 = vec![("extra_experts_per_gpu".to_string(), "3".to_string())];
    let oracle = vec![("predictor".to_string(), "oracle".to_string())];
    for (work, cluster, options) in [(&routes, c(1, 4), n3), (&counts, c(2, 4), oracle)] {
        let settings = {
            let mut s = Settings::new();
            for (k, v) in &options {
                s.set_str(k, v).unwrap();
            }
            s
        };
        let mut one = Workspace::of_workload(work.clone(), cluster, |_| {}).unwrap();
        one.replan_scheduled(&settings).unwrap();
        let mut two = Workspace::of_workload(work.clone(), cluster, |_| {}).unwrap();
        let job = two.split_job(&options).expect("a job to split");
        assert_eq!((job.mine(), job.theirs()), (0..3, 3..5));
        let mine = two.schedule_part(&job).unwrap().expect("Libra splits");
        let theirs = schedule_part(work, &job, job.theirs())
            .unwrap()
            .expect("Libra splits");
        let before = libra(&two);
        // A part cut short, or of another base, changes nothing.
        let numbers = theirs.to_numbers();
        assert!(SchedulePart::from_numbers(&numbers[..numbers.len() - 1], &mine).is_err());
        assert!(two.keep_parts(&job, vec![theirs.clone()]).is_err());
        assert_eq!(libra(&two), before);
        let sent = SchedulePart::from_numbers(&numbers, &mine).unwrap();
        two.keep_parts(&job, vec![mine, sent]).unwrap();
        assert!(two.split_job(&options).is_none(), "kept: nothing to split");
        two.replan_scheduled(&settings).unwrap();
        let (a, b) = (libra(&one), libra(&two));
        assert_eq!(a, b, "{cluster:?} {options:?}");
        assert_ne!(a, before, "the options changed Libra's row");
        checked += 1;
    }
    assert_eq!(checked, 2);
}
