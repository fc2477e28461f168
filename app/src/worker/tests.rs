//! The worker's tests: every request kind answered natively, and a
//! failing request keeping the state it found.

use super::studies::cross_settings;
use super::*;
use crate::protocol::CrossAsk;
use crate::reader::{BUDGET_HINT, MAX_CROSS_TRACES, MAX_FILE_BYTES, placed_in_model};
use moeplan::formats;
use moeplan_view::Cluster;
use moeplan_view::ServingAsk;
use moeplan_view::page::{CrossTable, Figures, Predicted};

fn req(id: u64, source: Option<Source>, cluster: Option<Cluster>, r: Option<usize>) -> Request {
    Request {
        id,
        source,
        cluster,
        replicas_per_gpu: r,
        layer: 0,
        rule: String::new(),
        export: None,
        hardware: String::new(),
        hardware_json: None,
        phase: String::new(),
        // Every row under the request's rule: what most tests measure
        // (`each_planner_under_its_systems_rule` checks the page's default).
        one_rule: true,
        model: String::new(),
        per_batch: None,
        static_options: None,
        batches: false,
        cross: None,
        serving: None,
        reader: String::new(),
        reader_script: String::new(),
    }
}

#[test]
fn a_moe_only_file_of_a_known_shape_is_placed_in_its_model() {
    use ndarray::Array3;
    let t = LoadTrace::new(Array3::from_elem((1, 26, 64), 1.0), (0..26).collect()).unwrap();
    let (placed, source) = placed_in_model(t, "v2lite.npy");
    assert_eq!(
        placed.layer_ids()[0],
        1,
        "DeepSeek-V2-Lite's layer 0 is dense"
    );
    assert_eq!(placed.known_model_layers(), Some(27));
    assert!(source.contains("placed as deepseek-v2-lite"), "{source}");
    // no preset of this shape: left as read
    let odd = LoadTrace::new(Array3::from_elem((1, 5, 7), 1.0), (0..5).collect()).unwrap();
    let (same, source) = placed_in_model(odd, "odd.npy");
    assert_eq!((same.layer_ids()[0], source.as_str()), (0, "odd.npy"));
}

fn gen_source() -> Source {
    Source::Generate {
        preset: "olmoe".into(),
        batches: 4,
        seed: 1,
        routes: false,
    }
}

const CLUSTER: Cluster = Cluster {
    nodes: 1,
    gpus_per_node: 8,
    groups: 1,
};

fn view_of(r: Response) -> Update {
    match r {
        Response::View { update, .. } => *update,
        other => panic!("expected a view, got {other:?}"),
    }
}

/// Everything the page shows after answer `r`: what the worker holds.
fn shown(s: &WorkerState, r: Response) -> Shown {
    view_of(r);
    s.shown.clone().expect("a view was answered")
}

#[test]
fn broken_file_keeps_the_previous_trace() {
    let mut s = WorkerState::default();
    let first = s.handle(
        &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
        None,
        || 0.0,
        |_| {},
    );
    let v1 = shown(&s, first);
    let bad = Source::File {
        name: "bad.json".into(),
    };
    let r = s.handle(
        &req(2, Some(bad), None, Some(2)),
        Some(b"{\"logical_count\": [[1, -2]]}"),
        || 0.0,
        |_| {},
    );
    match r {
        Response::Error { message, .. } => {
            assert!(message.starts_with("bad.json:"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let again = s.handle(&req(3, None, None, Some(2)), None, || 0.0, |_| {});
    // Nothing changed, so nothing is sent, and the figures are the same.
    assert_eq!(view_of(again.clone()).plans, []);
    assert_eq!(shown(&s, again), v1);
}

/// A worker that has planned the generated trace on [`CLUSTER`], R = 2.
fn loaded() -> WorkerState {
    let mut s = WorkerState::default();
    view_of(s.handle(
        &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
        None,
        || 0.0,
        |_| {},
    ));
    s
}

fn libra(u: &Update) -> Option<&Figures> {
    u.plans.iter().find(|p| p.name == "libra")
}

/// A cluster change answers the static plans and leaves Libra for the
/// next request (the page's follow-up), which plans it with the options
/// in use; the result is what planning the cluster whole gives.
#[test]
fn a_cluster_change_shows_libra_in_the_next_answer() {
    let other = Cluster {
        gpus_per_node: 4,
        ..CLUSTER
    };
    let mut s = loaded();
    let mut options = req(2, None, None, Some(2));
    options.per_batch = Some(vec![("extra_experts_per_gpu".into(), "2".into())]);
    s.handle(&options, None, || 0.0, |_| {});
    let mut phases = Vec::new();
    let change = s.handle(
        &req(3, None, Some(other), Some(2)),
        None,
        || 0.0,
        |p| phases.push(p.to_string()),
    );
    let first = view_of(change);
    let frame = first.frame.as_ref().expect("a new cluster is drawn afresh");
    assert!(
        !frame.plans.contains(&"libra".to_string()),
        "{:?}",
        frame.plans
    );
    assert!(
        frame.notes.iter().any(|n| n.contains("shown next")),
        "{:?}",
        frame.notes
    );
    assert!(!phases.iter().any(|p| p.contains("(Libra)")), "{phases:?}");
    let mut follow = req(4, None, None, Some(2));
    follow.batches = true;
    let mut phases = Vec::new();
    let next = s.handle(&follow, None, || 0.0, |p| phases.push(p.to_string()));
    let after = shown(&s, next);
    assert!(phases.iter().any(|p| p.contains("(Libra)")), "{phases:?}");
    assert!(!after.frame.notes.iter().any(|n| n.contains("shown next")));
    // The same as a worker that loads the trace on that cluster with
    // those options.
    let mut whole = WorkerState::default();
    let mut load = req(1, Some(gen_source()), Some(other), Some(2));
    load.per_batch = options.per_batch.clone();
    load.batches = true;
    let fresh = whole.handle(&load, None, || 0.0, |_| {});
    let whole = shown(&whole, fresh);
    let find = |v: &Shown| v.plans.iter().find(|p| p.name == "libra").cloned();
    assert!(find(&after).is_some());
    assert_eq!(find(&after), find(&whole));
}

/// Libra's options re-plan Libra alone; a predictor the trace cannot
/// feed is one error and changes nothing; a budget change leaves Libra.
#[test]
fn per_batch_options_replan_libra_only() {
    let mut s = WorkerState::default();
    let first = view_of(s.handle(
        &req(1, Some(gen_source()), Some(CLUSTER), Some(2)),
        None,
        || 0.0,
        |_| {},
    ));
    let l0 = libra(&first).expect("a Libra row").clone();
    assert!(
        l0.label.contains("per batch, libra-rebalance"),
        "{}",
        l0.label
    );
    assert_eq!(l0.per_batch_imbalance.len(), 4);
    assert_eq!(l0.per_batch_bytes.len(), 4);
    let budget = view_of(s.handle(&req(2, None, None, Some(4)), None, || 0.0, |_| {}));
    assert!(
        libra(&budget).is_none(),
        "a budget change does not touch Libra"
    );
    let opts = |n: &str, p: &str| {
        Some(vec![
            ("extra_experts_per_gpu".to_string(), n.to_string()),
            ("predictor".to_string(), p.to_string()),
        ])
    };
    let mut r = req(3, None, None, Some(4));
    r.per_batch = opts("1", "previous-batch");
    let kept = s.shown.clone().unwrap();
    let one = view_of(s.handle(&r, None, || 0.0, |_| {}));
    // Libra's note names N, so the frame is sent again with every plan;
    // all but Libra's figures are as they were.
    for p in &one.plans {
        let old = kept.plans.iter().find(|o| o.name == p.name).unwrap();
        assert_eq!(p == old, p.name != "libra", "{}", p.name);
    }
    let l1 = libra(&one).unwrap();
    assert!(
        l1.imbalance_ratio > l0.imbalance_ratio,
        "fewer copies balance less"
    );
    let before = s.shown.clone();
    let mut bad = req(4, None, None, Some(4));
    bad.per_batch = opts("1", "path-table");
    match s.handle(&bad, None, || 0.0, |_| {}) {
        Response::Error { message, .. } => {
            assert!(message.contains("token routes"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.shown, before);
    // The same options again: nothing to re-plan, nothing to send.
    r.id = 5;
    assert_eq!(view_of(s.handle(&r, None, || 0.0, |_| {})).plans, []);
}

#[test]
fn budget_change_keeps_the_workspace_and_changes_craft() {
    let mut s = WorkerState::default();
    let mut phases = Vec::new();
    let v0 = view_of(s.handle(
        &req(1, Some(gen_source()), Some(CLUSTER), Some(0)),
        None,
        || 0.0,
        |p| phases.push(p.to_string()),
    ));
    assert!(!phases.is_empty());
    phases.clear();
    let v4 = view_of(s.handle(
        &req(2, None, None, Some(4)),
        None,
        || 0.0,
        |p| phases.push(p.to_string()),
    ));
    assert!(
        phases.is_empty(),
        "a budget change must not re-plan: {phases:?}"
    );
    // A new trace sends everything; a budget change only CRAFT's part.
    let f0 = v0.frame.as_ref().expect("a new trace sends the frame");
    assert_eq!(v0.plans.len(), f0.plans.len());
    // A generated trace is counts only: GRACE has no affinity, and the
    // frame carries what it says about that, once.
    let grace: Vec<_> = f0
        .planner_notes
        .iter()
        .filter(|n| n.name == "grace")
        .collect();
    assert_eq!(grace.len(), 1, "{:?}", f0.planner_notes);
    assert!(
        grace[0].text.contains("no token routes"),
        "{}",
        grace[0].text
    );
    assert!(v0.heat.is_some() && v0.placement.is_some());
    assert!(v4.frame.is_none(), "a budget change resends the frame");
    let names: Vec<_> = v4.plans.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["craft"]); // BASE and EPLB unchanged
    assert!(v4.plans[0].replicas > v0.plans[2].replicas);
    assert_eq!(v4.replicas_per_gpu, 4);
    // A layer change sends only the placement.
    let mut r = req(3, None, None, Some(4));
    r.layer = 1;
    let v5 = view_of(s.handle(&r, None, || 0.0, |_| {}));
    assert!(v5.frame.is_none() && v5.plans.is_empty() && v5.heat.is_none());
    assert!(v5.placement.is_some());
}

/// The page's route default deals each batch's tokens to its ranks in
/// equal shares, as an engine's scheduler does: every rank within 10 % of
/// the batch's mean (whole 256-token sequences put a 512-token batch on 2
/// of the 8 ranks, at 4× the mean).
#[test]
fn the_route_default_deals_every_batch_evenly() {
    let source = Source::generated(&crate::settings::Settings::default());
    assert!(matches!(source, Source::Generate { routes: true, .. }));
    let (work, _) = load(&source, None, &mut |_| {}).expect("the default loads");
    let tokens = work.tokens().expect("token routes");
    let ranks = 8;
    let mut batches = 0;
    for batch in tokens.source_rank().chunks(TOKENS_PER_BATCH) {
        let mut held = vec![0usize; ranks];
        for &r in batch {
            held[r as usize] += 1;
        }
        let mean = batch.len() as f64 / ranks as f64;
        for h in held {
            assert!(
                (h as f64 - mean).abs() <= 0.1 * mean,
                "batch {batches}: {h} against {mean}"
            );
        }
        batches += 1;
    }
    assert_eq!(batches, work.trace().num_batches());
}

/// Generated DeepSeek-V2-Lite token routes, 2 batches.
fn v2lite_routes() -> Source {
    Source::Generate {
        preset: "deepseek-v2-lite".into(),
        batches: 2,
        seed: 3,
        routes: true,
    }
}

/// Work ahead of time: after a token-routes trace the worker queues
/// CRAFT's measurements and GRACE's clusterings for every layer of each
/// neighbouring cluster, a step at a time; the last step names them. A
/// change to one of them then answers exactly what a worker that never
/// warmed answers, and queues the new cluster's neighbours; a
/// count-only trace queues CRAFT's only.
#[test]
fn work_ahead_of_time_changes_no_answer() {
    let c = |nodes, gpus_per_node| Cluster {
        nodes,
        gpus_per_node,
        groups: 1,
    };
    let routes = v2lite_routes();
    let mut warm = WorkerState::default();
    view_of(warm.handle(
        &req(1, Some(routes.clone()), Some(c(2, 4)), Some(2)),
        None,
        || 0.0,
        |_| {},
    ));
    let layers = 26;
    // Per neighbour: CRAFT's layers, GRACE's layers.
    let per_cluster = layers + layers;
    assert_eq!(
        warm.warm.len(),
        4 * per_cluster,
        "2 × 2, 2 × 8, 1 × 4 and 4 × 4"
    );
    // What the page is told it prepares (issue 52): the clusters, moving
    // on a step at a time, then the path table, then nothing.
    let told = |w: &WorkerState| w.preparing().map(|p| (p.what, p.done));
    let (what, done) = told(&warm).expect("the neighbours are prepared");
    assert!(
        what.starts_with(
            "GRACE's clusterings and CRAFT's measurements for 2 × 2, 2 × 8, 1 × 4, 4 × 4"
        ) && done == 0.0,
        "{what} {done}"
    );
    let mut last = 0.0;
    let mut steps = 1;
    let done = loop {
        let kind = warm.next_step().map(|s| s.0);
        assert!(
            matches!(kind, Some(k) if k.starts_with("CRAFT") || k.starts_with("GRACE")),
            "{kind:?}"
        );
        if let Some(done) = warm.warm_step(|| 0.0) {
            break done;
        }
        let (_, now) = told(&warm).expect("still preparing");
        assert!(now > last && now < 1.0, "{last} → {now}");
        last = now;
        assert!(warm.warming(), "no answer yet, so work remains");
        steps += 1;
    };
    assert_eq!(steps, 4 * per_cluster);
    let Warmed::Clusters(clusters, _) = done else {
        panic!("the clusters' work comes first: {done:?}")
    };
    assert_eq!(clusters, vec!["2 × 2", "2 × 8", "1 × 4", "4 × 4"]);
    // Then Libra's path-table predictions: one step per later batch and
    // layer, one per batch learnt (2 batches here).
    assert!(warm.warming(), "the path table's predictions follow");
    assert!(
        told(&warm).is_some_and(|(w, d)| w.starts_with("Libra's path-table") && d == 0.0),
        "{:?}",
        told(&warm)
    );
    let mut memo_steps = 1;
    while warm.warm_step(|| 0.0).is_none() {
        assert!(warm.warming(), "no answer yet, so work remains");
        assert_eq!(
            warm.next_step().map(|s| s.0),
            Some("Libra's path table, a step")
        );
        memo_steps += 1;
    }
    // A step per later batch and layer, and each batch learnt in parts of
    // 8 layers (a request waits behind one part, not a whole batch).
    assert_eq!(memo_steps, layers + 2 * layers.div_ceil(8));
    assert!(!warm.warming() && warm.warm_step(|| 0.0).is_none());
    assert_eq!(told(&warm), None, "nothing left to say");
    assert_eq!(warm.next_step(), None);
    let mut cold = WorkerState::default();
    view_of(cold.handle(
        &req(1, Some(routes), Some(c(2, 4)), Some(2)),
        None,
        || 0.0,
        |_| {},
    ));
    let has_grace = |u: &Update| u.plans.iter().any(|p| p.name == "grace");
    // 1 × 8 is no neighbour of 2 × 4: cold for both.
    for (id, next, warmed) in [(2, c(1, 4), true), (3, c(1, 8), false)] {
        let w = view_of(warm.handle(&req(id, None, Some(next), Some(2)), None, || 0.0, |_| {}));
        let f = view_of(cold.handle(&req(id, None, Some(next), Some(2)), None, || 0.0, |_| {}));
        // Warmed: GRACE in the first answer; cold: in the follow-up.
        assert!(has_grace(&w) == warmed && !has_grace(&f), "{next:?}");
        for s in [&mut warm, &mut cold] {
            view_of(s.handle(&req(id + 10, None, None, Some(2)), None, || 0.0, |_| {}));
        }
        assert_eq!(warm.shown, cold.shown, "{next:?}");
    }
    assert_eq!(warm.warming.0, neighbours(c(1, 8), 64));
    // The path table then: from predictions made ahead (`warm`), half
    // made (a third worker), or none (`cold`), the same answer.
    let mut half = WorkerState::default();
    for (id, cluster) in [(1, c(2, 4)), (2, c(1, 8)), (3, c(1, 8))] {
        let source = (id == 1).then(v2lite_routes);
        view_of(half.handle(
            &req(id, source, Some(cluster), Some(2)),
            None,
            || 0.0,
            |_| {},
        ));
    }
    while half.memo.as_ref().is_some_and(|(b, _)| b.progress() < 0.5) {
        assert!(!matches!(
            half.warm_step(|| 0.0),
            Some(Warmed::PathTable(_))
        ));
    }
    assert!(half.memo.is_some(), "half made");
    let table = vec![("predictor".to_string(), "path-table".to_string())];
    for s in [&mut warm, &mut cold, &mut half] {
        let r = Request {
            per_batch: Some(table.clone()),
            ..req(20, None, None, Some(2))
        };
        view_of(s.handle(&r, None, || 0.0, |_| {}));
    }
    assert!(half.memo.is_none(), "finished for the request");
    assert!(warm.shown == cold.shown && half.shown == cold.shown);
    view_of(warm.handle(
        &req(4, Some(gen_source()), Some(CLUSTER), Some(2)),
        None,
        || 0.0,
        |_| {},
    ));
    assert_eq!(
        warm.warm.len(),
        neighbours(CLUSTER, 64).len()
            * warm
                .workspace
                .as_ref()
                .map_or(0, |ws| ws.trace().num_layers()),
        "counts only: CRAFT's steps, none of GRACE's (it groups by load)"
    );
}

/// GRACE's ratio re-plans GRACE only (every other plan's figures as
/// they were), sends its grouping again, and a cluster change keeps it:
/// the same as a worker that loads the trace there with that ratio.
#[test]
fn graces_ratio_replans_grace_only_and_a_cluster_change_keeps_it() {
    let cluster = Cluster {
        nodes: 2,
        gpus_per_node: 4,
        groups: 1,
    };
    let with_ratio = |id, cluster, r: &str| {
        let mut q = req(id, None, cluster, Some(2));
        q.static_options = Some(vec![("nonuniformity".into(), r.into())]);
        q
    };
    let mut s = WorkerState::default();
    let first = s.handle(
        &req(1, Some(v2lite_routes()), Some(cluster), Some(2)),
        None,
        || 0.0,
        |_| {},
    );
    let before = shown(&s, first);
    let mut phases = Vec::new();
    let answer = s.handle(
        &with_ratio(2, None, "1"),
        None,
        || 0.0,
        |p| phases.push(p.to_string()),
    );
    let update = view_of(answer);
    let after = s.shown.clone().expect("a view was answered");
    assert!(phases.iter().any(|p| p.contains("GRACE")), "{phases:?}");
    assert!(
        !phases
            .iter()
            .any(|p| p.contains("CRAFT") || p.contains("EPLB")),
        "{phases:?}"
    );
    let g = update.grouping.expect("the new grouping is sent");
    assert_ne!(before.grouping.as_ref().map(|g| g.ratio), Some(Some(1.0)));
    assert_eq!(g.ratio, Some(1.0));
    let (b, a): (Vec<_>, Vec<_>) = (
        before.plans.iter().filter(|p| p.name != "grace").collect(),
        after.plans.iter().filter(|p| p.name != "grace").collect(),
    );
    assert_eq!(b, a);
    let grace = |v: &Shown| v.plans.iter().find(|p| p.name == "grace").cloned();
    assert_ne!(grace(&before), grace(&after));
    // Asked again: nothing to re-plan, nothing sent.
    let again = view_of(s.handle(&with_ratio(3, None, "1"), None, || 0.0, |_| {}));
    assert!(
        again.plans.is_empty() && again.grouping.is_none(),
        "{again:?}"
    );
    // A cluster change keeps the ratio.
    let other = Cluster {
        nodes: 1,
        gpus_per_node: 8,
        groups: 1,
    };
    view_of(s.handle(&req(4, None, Some(other), Some(2)), None, || 0.0, |_| {}));
    // 1 × 8 was not clustered: GRACE follows in the next answer.
    let answer = s.handle(&req(6, None, None, Some(2)), None, || 0.0, |_| {});
    let moved = shown(&s, answer);
    let mut whole = WorkerState::default();
    let mut load = with_ratio(1, Some(other), "1");
    load.source = Some(v2lite_routes());
    let answer = whole.handle(&load, None, || 0.0, |_| {});
    let fresh = shown(&whole, answer);
    assert_eq!(moved.grouping.as_ref().map(|g| g.ratio), Some(Some(1.0)));
    assert_eq!(grace(&moved), grace(&fresh));
    assert_eq!(moved.grouping, fresh.grouping);
    // A ratio the registry does not offer is refused, the state kept.
    let bad = s.handle(&with_ratio(5, None, "0.25"), None, || 0.0, |_| {});
    assert!(
        matches!(&bad, Response::Error { message, .. } if message.contains("nonuniformity")),
        "{bad:?}"
    );
    assert_eq!(s.shown.as_ref().map(|v| &v.plans), Some(&moved.plans));
}

/// Generated token routes: GRACE groups by affinity and the view
/// carries the chosen layer's grouping, sent again only when the layer
/// (or the trace, or the cluster) changes.
#[test]
fn token_routes_carry_graces_grouping() {
    let cluster = Cluster {
        nodes: 2,
        gpus_per_node: 4,
        groups: 1,
    };
    let routes = v2lite_routes();
    let mut s = WorkerState::default();
    let v0 = view_of(s.handle(
        &req(1, Some(routes), Some(cluster), Some(2)),
        None,
        || 0.0,
        |_| {},
    ));
    let f0 = v0.frame.as_ref().expect("a new trace sends the frame");
    assert!(
        f0.planner_notes.iter().all(|n| n.name != "grace"),
        "{:?}",
        f0.planner_notes
    );
    let g = v0.grouping.expect("token routes: GRACE's grouping");
    assert_eq!((g.order.len(), g.sizes.len()), (64, 8));
    assert_eq!(g.affinity.len(), 64 * 64);
    let mut sorted = g.order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..64).collect::<Vec<u32>>());
    let r = g.ratio.expect("grouped by affinity");
    assert!(g.curve.iter().any(|p| p.0 == r));
    let v1 = view_of(s.handle(&req(2, None, None, Some(4)), None, || 0.0, |_| {}));
    assert!(
        v1.grouping.is_none(),
        "a budget change resends the grouping"
    );
    let mut l = req(3, None, None, Some(4));
    l.layer = 5;
    let v2 = view_of(s.handle(&l, None, || 0.0, |_| {}));
    assert_ne!(v2.grouping.map(|g| g.layer), Some(g.layer));
    // Back to counts: no grouping, GRACE's note instead.
    let v3 = view_of(s.handle(
        &req(4, Some(gen_source()), Some(cluster), Some(2)),
        None,
        || 0.0,
        |_| {},
    ));
    assert!(v3.grouping.is_none());
    assert!(
        v3.frame
            .unwrap()
            .planner_notes
            .iter()
            .any(|n| n.name == "grace")
    );
}

/// The page's default judges each planner under its system's own rule
/// (GRACE under its topology-aware routing), the rest under the one
/// chosen, each row naming its rule; one rule for all judges GRACE like
/// the rest. Priced, every row but BASE says why it wins or loses.
#[test]
fn each_planner_under_its_systems_rule() {
    let mut s = WorkerState::default();
    let mut r = req(1, Some(gen_source()), Some(CLUSTER), Some(4));
    r.rule = "vllm".into();
    r.one_rule = false;
    r.hardware = "h100-ib-ndr".into();
    let own = view_of(s.handle(&r, None, || 0.0, |_| {}));
    let rule = |u: &Update, name: &str| {
        u.plans
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.rule.clone())
    };
    assert_eq!(rule(&own, "grace").as_deref(), Some("grace-topology"));
    assert_eq!(rule(&own, "craft").as_deref(), Some("vllm"));
    assert_eq!(rule(&own, "base").as_deref(), Some("vllm"));
    // Libra's price is a replay of every batch: it follows with the
    // series (the page's follow-up), the static plans are priced at once.
    let libra = |u: &Update| {
        u.plans
            .iter()
            .find(|p| p.name == "libra")
            .map(|p| p.predicted.is_some())
    };
    assert_eq!(libra(&own), Some(false));
    assert!(
        own.plans
            .iter()
            .filter(|p| p.name != "libra")
            .all(|p| p.predicted.is_some())
    );
    let mut follow = req(2, None, None, Some(4));
    follow.rule = "vllm".into();
    follow.one_rule = false;
    follow.hardware = "h100-ib-ndr".into();
    follow.batches = true;
    let later = view_of(s.handle(&follow, None, || 0.0, |_| {}));
    assert_eq!(libra(&later), Some(true));
    let own = Update {
        plans: own
            .plans
            .iter()
            .map(|p| {
                later
                    .plans
                    .iter()
                    .find(|q| q.name == p.name)
                    .unwrap_or(p)
                    .clone()
            })
            .collect(),
        ..own
    };
    for p in own.plans.iter().filter(|p| p.name != "base") {
        let reason = p
            .predicted
            .as_ref()
            .and_then(|x| x.reason.clone())
            .unwrap_or_default();
        assert!(
            reason.starts_with("wins on")
                || reason.starts_with("loses on")
                || reason.starts_with("even with"),
            "{}: {reason:?}",
            p.name
        );
    }
    // A new Libra schedule on a priced request is timed in its own replay:
    // priced in the change's answer, no follow-up needed.
    let mut n2 = req(4, None, None, Some(4));
    n2.rule = "vllm".into();
    n2.one_rule = false;
    n2.hardware = "h100-ib-ndr".into();
    n2.per_batch = Some(vec![("extra_experts_per_gpu".into(), "2".into())]);
    let changed = view_of(s.handle(&n2, None, || 0.0, |_| {}));
    assert_eq!(libra(&changed), Some(true));
    // Timed or not, the replay gives the same figures.
    let mut plain = WorkerState::default();
    plain.handle(
        &req(1, Some(gen_source()), Some(CLUSTER), Some(4)),
        None,
        || 0.0,
        |_| {},
    );
    let mut unpriced = req(2, None, None, Some(4));
    unpriced.per_batch = n2.per_batch.clone();
    let figures = |u: &Update| {
        u.plans
            .iter()
            .find(|p| p.name == "libra")
            .map(|p| (p.balancedness, p.imbalance_ratio, p.traffic))
    };
    let unpriced = view_of(plain.handle(&unpriced, None, || 0.0, |_| {}));
    assert!(figures(&unpriced).is_some());
    assert_eq!(figures(&unpriced), figures(&changed));
    let mut one = req(3, None, None, Some(4));
    one.rule = "vllm".into();
    one.hardware = "h100-ib-ndr".into();
    let all = view_of(s.handle(&one, None, || 0.0, |_| {}));
    assert_eq!(rule(&all, "grace").as_deref(), Some("vllm"));
    // GRACE's figures moved with its rule; CRAFT's did not.
    assert!(all.plans.iter().any(|p| p.name == "grace"));
    assert!(
        !all.plans.iter().any(|p| p.name == "craft"),
        "CRAFT's row is unchanged, so not re-sent"
    );
}

/// Each paper's scenario opens priced, and its line compares the paper's
/// figure with the ratio of the two rows' predicted tokens/s the page
/// shows, to the two decimals it prints.
#[test]
fn paper_scenarios_compare_with_their_papers() {
    use crate::scenarios::{SCENARIOS, paper_line};
    let mut checked = 0;
    for sc in SCENARIOS.iter().filter(|sc| sc.paper.is_some()) {
        let settings = crate::settings::Settings::from_hash(sc.hash);
        assert!(!settings.hardware.is_empty(), "{}: priced", sc.id);
        let mut s = WorkerState::default();
        // A smaller trace than the page's: the same shapes, fewer batches.
        let mut small = settings.clone();
        small.batches = 4;
        let mut r = Request::from_settings(
            1,
            &small,
            Some(Source::generated(&small)),
            Some(small.cluster()),
            None,
            false,
        );
        r.batches = true;
        view_of(s.handle(&r, None, || 0.0, |_| {}));
        // The follow-up that plans Libra.
        let next = Request::from_settings(2, &small, None, None, None, true);
        let answer = s.handle(&next, None, || 0.0, |_| {});
        let shown = shown(&s, answer);
        let paper = sc.paper.unwrap();
        let line = paper_line(&paper, &shown.plans).unwrap_or_else(|| panic!("{}: no line", sc.id));
        let tput = |name: &str| {
            shown
                .plans
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| p.predicted.as_ref())
                .map(|p| p.tokens_per_s)
                .unwrap()
        };
        let ratio = tput(paper.planner) / tput(paper.against);
        assert!(
            line.contains(&format!(" serves {ratio:.2}× ")),
            "{}: {line} against {ratio}",
            sc.id
        );
        assert!(line.starts_with(paper.reported), "{line}");
        let (lo, hi) = paper.range;
        let r2 = (ratio * 100.0).round() / 100.0;
        let said = if r2 < lo {
            "below"
        } else if r2 > hi {
            "above"
        } else {
            "within"
        };
        assert!(line.contains(&format!("{said} the paper's")), "{line}");
        eprintln!("{}: {line}", sc.id);
        checked += 1;
    }
    assert_eq!(checked, 3);
}

#[test]
fn a_rule_change_remeasures_every_plan() {
    let cluster = Cluster {
        nodes: 8,
        gpus_per_node: 8,
        groups: 1,
    };
    let mut s = WorkerState::default();
    let even = view_of(s.handle(
        &req(1, Some(gen_source()), Some(cluster), Some(4)),
        None,
        || 0.0,
        |_| {},
    ));
    assert_eq!(even.rule, "even");
    // A per-batch plan (Libra) is served under its own rule whatever
    // the view's, so a rule change leaves it as it is.
    let static_plans: Vec<&Figures> = even.plans.iter().filter(|p| p.schedule.is_none()).collect();
    let libra = even.plans.iter().find(|p| p.name == "libra");
    assert_eq!(libra.map(|p| p.rule.as_str()), Some("libra-rebalance"));
    let by_rule = |s: &mut WorkerState, id: u64, rule: &str| {
        let mut r = req(id, None, None, Some(4));
        r.rule = rule.into();
        let u = view_of(s.handle(&r, None, || 0.0, |_| {}));
        assert_eq!(u.rule, rule);
        assert!(u.frame.is_none());
        // Every static plan's figures are re-sent, each naming its rule.
        assert_eq!(u.plans.len(), static_plans.len(), "{rule}");
        for p in &u.plans {
            assert_eq!(p.rule, rule);
            let sum: f64 = p.traffic.iter().sum();
            assert!((sum - 1.0).abs() < 1e-9, "{rule} {}: {sum}", p.name);
        }
        u
    };
    let sglang = by_rule(&mut s, 2, "sglang-static");
    assert_ne!(
        sglang
            .plans
            .iter()
            .map(|p| p.balancedness)
            .collect::<Vec<_>>(),
        static_plans
            .iter()
            .map(|p| p.balancedness)
            .collect::<Vec<_>>()
    );
    let craft = |u: &Update| {
        u.plans
            .iter()
            .find(|p| p.name == "craft")
            .expect("CRAFT is shown")
            .balancedness
    };
    let mut others = vec![craft(&even), craft(&sglang)];
    for (i, rule) in ["vllm", "local-first"].into_iter().enumerate() {
        others.push(craft(&by_rule(&mut s, 3 + i as u64, rule)));
    }
    let best = craft(&by_rule(&mut s, 9, "optimal"));
    for b in others {
        assert!(best >= b - 1e-12, "optimal {best} < {b}");
    }
    // A budget change under a rule sends only CRAFT's part.
    let mut r = req(10, None, None, Some(6));
    r.rule = "optimal".into();
    let u = view_of(s.handle(&r, None, || 0.0, |_| {}));
    let names: Vec<_> = u.plans.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["craft"]);
    // An unknown rule is one error, and the view is kept.
    let mut r = req(11, None, None, Some(6));
    r.rule = "bogus".into();
    assert!(matches!(
        s.handle(&r, None, || 0.0, |_| {}),
        Response::Error { message, .. } if message.contains("unknown dispatch rule")
    ));
}

#[test]
fn export_formats() {
    let mut s = loaded();
    let mut r = req(2, None, None, Some(2));
    r.export = Some("sglang".into());
    match s.handle(&r, None, || 0.0, |_| {}) {
        Response::Export {
            text, file_name, ..
        } => {
            assert!(text.starts_with("{\"physical_to_logical_map\""));
            assert!(file_name.ends_with("sglang.json"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_file_is_refused_before_parsing() {
    let mut s = WorkerState::default();
    let big = vec![b' '; MAX_FILE_BYTES as usize + 1];
    let src = Source::File {
        name: "big.json".into(),
    };
    match s.handle(
        &req(1, Some(src), Some(CLUSTER), None),
        Some(&big),
        || 0.0,
        |_| {},
    ) {
        Response::Error { message, .. } => {
            assert!(
                message.starts_with("big.json: 513 MiB on disk"),
                "{message}"
            );
            assert!(message.contains("--max-trace-mib"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(s.workspace.is_none());
}

fn summary(s: &mut WorkerState) -> Shown {
    let r = s.handle(&req(99, None, None, Some(2)), None, || 0.0, |_| {});
    shown(s, r)
}

#[test]
fn a_failing_step_after_planning_keeps_the_previous_trace() {
    let mut s = loaded();
    let before = summary(&mut s);
    let other = Source::Generate {
        preset: "olmoe".into(),
        batches: 3,
        seed: 2,
        routes: false,
    };
    // The new trace plans, but the export asked with it fails.
    let mut r = req(2, Some(other.clone()), None, Some(2));
    r.export = Some("bogus".into());
    assert!(matches!(
        s.handle(&r, None, || 0.0, |_| {}),
        Response::Error { .. }
    ));
    // The new trace plans, but its view for this budget fails.
    let r = req(3, Some(other), None, Some(usize::MAX));
    assert!(matches!(
        s.handle(&r, None, || 0.0, |_| {}),
        Response::Error { .. }
    ));
    assert_eq!(summary(&mut s), before);
    assert!(s.source.contains("4 batches"), "{}", s.source);
}

/// Every hostile file the core knows of, through the worker: one error
/// naming the file with the words `EXPECTED` gives, and the trace kept.
#[test]
fn every_hostile_fixture_keeps_the_previous_trace() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/moeplan/tests/fixtures/broken"
    );
    let expected = std::fs::read_to_string(format!("{dir}/EXPECTED")).unwrap();
    let words: std::collections::HashMap<&str, &str> = expected
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .collect();
    let mut s = loaded();
    let before = summary(&mut s);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "EXPECTED")
        .collect();
    files.sort();
    assert!(files.len() > 40, "{files:?}");
    for name in files {
        let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
        let src = Source::File { name: name.clone() };
        match s.handle(
            &req(2, Some(src), None, Some(2)),
            Some(&bytes),
            || 0.0,
            |_| {},
        ) {
            Response::Error { message, .. } => {
                assert!(message.starts_with(&format!("{name}: ")), "{message}");
                let w = words
                    .get(name.as_str())
                    .unwrap_or_else(|| panic!("{name} is not in EXPECTED"));
                assert!(
                    message.to_lowercase().contains(&w.to_lowercase()),
                    "{name}: {message:?} lacks {w:?}"
                );
                if message.contains("reading limit") {
                    assert!(message.contains(BUDGET_HINT), "{message}");
                }
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(summary(&mut s), before, "{name}");
    }
}

/// Two generated OLMoE traces (different seeds) as trace JSON bytes,
/// the way the page sends several files: one after another.
fn two_files() -> (CrossAsk, Vec<u8>) {
    let file = |seed| {
        let cfg = GenConfig {
            seed,
            ..GenConfig::new(model::preset("olmoe").unwrap(), 4)
        };
        formats::write_trace_json(&generate(&cfg).unwrap()).into_bytes()
    };
    let (a, b) = (file(1), file(2));
    let ask = CrossAsk {
        names: vec!["a.json".into(), "b.json".into()],
        sizes: vec![a.len(), b.len()],
    };
    (ask, [a, b].concat())
}

fn cross_req(id: u64, ask: CrossAsk, cluster: Cluster, r: Option<usize>) -> Request {
    Request {
        cross: Some(ask),
        ..req(id, None, Some(cluster), r)
    }
}

fn table(r: Response) -> CrossTable {
    match r {
        Response::Cross { table, .. } => table,
        other => panic!("expected a cross table, got {other:?}"),
    }
}

#[test]
fn cross_judges_every_plan_on_every_trace_and_keeps_the_main_trace() {
    let mut s = WorkerState::default();
    let cluster = Cluster {
        nodes: 1,
        gpus_per_node: 8,
        groups: 1,
    };
    s.handle(
        &req(1, Some(gen_source()), Some(cluster), Some(2)),
        None,
        || 0.0,
        |_| {},
    );
    let before = summary(&mut s);
    let (ask, bytes) = two_files();
    let t = table(s.handle(
        &cross_req(2, ask.clone(), cluster, Some(2)),
        Some(&bytes),
        || 0.0,
        |_| {},
    ));
    assert_eq!(t.traces, ask.names);
    assert_eq!(t.rows.len(), 3 * 2 + 3);
    // The core's matrix, cell for cell.
    let traces: Vec<LoadTrace> = [1, 2]
        .map(|seed| {
            generate(&GenConfig {
                seed,
                ..GenConfig::new(model::preset("olmoe").unwrap(), 4)
            })
            .unwrap()
        })
        .into();
    let core = moeplan::studies::cross_table(
        &traces,
        moeplan::Topology::new(1, 8).unwrap(),
        &cross_settings(1, Some(2)).unwrap(),
    )
    .unwrap();
    for (line, row) in t.rows.iter().zip(&core) {
        assert_eq!(line.name, row.name);
        let b: Vec<f64> = row.cells.iter().map(|c| c.balancedness).collect();
        assert_eq!(line.balancedness, b, "{}", line.name);
        // In-sample exactly where the plan was made on the judged trace.
        for (j, &own) in line.in_sample.iter().enumerate() {
            assert_eq!(
                own,
                line.made_on.is_none_or(|i| i == j),
                "{} on T{j}",
                line.name
            );
        }
    }
    assert_eq!(
        summary(&mut s),
        before,
        "the main trace and its plans are untouched"
    );
    // A cluster change re-judges the traces held, with no bytes.
    let wider = Cluster {
        gpus_per_node: 4,
        ..cluster
    };
    let again = CrossAsk {
        names: vec![],
        sizes: vec![],
    };
    let t4 = table(s.handle(&cross_req(3, again, wider, Some(2)), None, || 0.0, |_| {}));
    assert_eq!(t4.cluster, "1 node(s) × 4 GPU(s)");
    assert_eq!(t4.traces, t.traces);
    assert_ne!(t4.rows[0].balancedness, t.rows[0].balancedness);
}

#[test]
fn a_bad_cross_request_is_one_error_and_keeps_the_traces_held() {
    let mut s = WorkerState::default();
    let cluster = Cluster {
        nodes: 1,
        gpus_per_node: 8,
        groups: 1,
    };
    let (ask, bytes) = two_files();
    let first = table(s.handle(
        &cross_req(1, ask.clone(), cluster, None),
        Some(&bytes),
        || 0.0,
        |_| {},
    ));
    let error = |r: Response| match r {
        Response::Error { message, .. } => message,
        other => panic!("expected an error, got {other:?}"),
    };
    // One file only.
    let one = CrossAsk {
        names: vec!["a.json".into()],
        sizes: vec![ask.sizes[0]],
    };
    let m = error(s.handle(
        &cross_req(2, one, cluster, None),
        Some(&bytes[..ask.sizes[0]]),
        || 0.0,
        |_| {},
    ));
    assert!(m.contains("at least two traces"), "{m}");
    // Sizes that do not add up to the bytes.
    let short = CrossAsk {
        sizes: vec![ask.sizes[0], ask.sizes[1] + 1],
        ..ask.clone()
    };
    let m = error(s.handle(
        &cross_req(3, short, cluster, None),
        Some(&bytes),
        || 0.0,
        |_| {},
    ));
    assert!(m.contains("did not arrive whole"), "{m}");
    // A broken second file names it.
    let mut broken = bytes.clone();
    broken.truncate(ask.sizes[0] + 10);
    let cut = CrossAsk {
        sizes: vec![ask.sizes[0], 10],
        ..ask.clone()
    };
    let m = error(s.handle(
        &cross_req(4, cut, cluster, None),
        Some(&broken),
        || 0.0,
        |_| {},
    ));
    assert!(m.starts_with("b.json: "), "{m}");
    // Too many files.
    let many = CrossAsk {
        names: vec!["x".into(); MAX_CROSS_TRACES + 1],
        sizes: vec![0; MAX_CROSS_TRACES + 1],
    };
    let m = error(s.handle(
        &cross_req(5, many, cluster, None),
        Some(&[]),
        || 0.0,
        |_| {},
    ));
    assert!(m.contains("at most"), "{m}");
    // The traces first loaded are still the ones judged.
    let again = CrossAsk {
        names: vec![],
        sizes: vec![],
    };
    assert_eq!(
        table(s.handle(&cross_req(6, again, cluster, None), None, || 0.0, |_| {})),
        first
    );
}

#[test]
fn serving_replays_the_main_trace_and_leaves_the_plans_alone() {
    let mut s = WorkerState::default();
    let source = Source::Generate {
        preset: "olmoe".into(),
        batches: 12,
        seed: 1,
        routes: false,
    };
    s.handle(
        &req(1, Some(source), Some(CLUSTER), Some(2)),
        None,
        || 0.0,
        |_| {},
    );
    let before = summary(&mut s);
    let ask = ServingAsk {
        every: 2,
        window: 4,
        sweep: true,
        engine: None,
        tokens_per_pass: None,
    };
    let serving = |id, ask: ServingAsk, hardware: &str| Request {
        serving: Some(ask),
        hardware: hardware.into(),
        ..req(id, None, None, Some(2))
    };
    let view = |r| match r {
        Response::Serving { view, .. } => *view,
        other => panic!("expected a replay, got {other:?}"),
    };
    let v = view(s.handle(&serving(2, ask.clone(), ""), None, || 0.0, |_| {}));
    let ws = s.workspace.as_ref().unwrap();
    let bytes = model::preset("olmoe").unwrap().expert_bytes() as f64;
    // a pass a quarter of a batch, for the engine's knobs below
    let per_pass = moeplan::studies::tokens_per_batch(ws.trace(), 8) / 4.0;
    assert_eq!(
        v,
        ws.serving(ask.clone(), moeplan::judge::Rule::Even, None, bytes)
            .unwrap()
    );
    assert_eq!((v.first_served, v.replans.len()), (4, 3));
    assert!(v.sweep.is_some() && v.engine.is_none());
    // priced: time and pauses
    let p = view(s.handle(
        &serving(3, ask.clone(), "h100-ib-ndr"),
        None,
        || 0.0,
        |_| {},
    ));
    assert!(p.total_ms.is_some() && p.replans.iter().all(|m| m.pause_ms.is_some()));
    // a window leaving nothing to serve: one line, the plans kept
    let bad = ServingAsk {
        window: 12,
        ..ask.clone()
    };
    match s.handle(&serving(4, bad, ""), None, || 0.0, |_| {}) {
        Response::Error { message, .. } => {
            assert!(message.contains("leaves none"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // In SGLang's knobs: passes, its refusal in one line, its move, its
    // flags.
    let sglang = |every, window| ServingAsk {
        every,
        window,
        sweep: true,
        engine: Some("sglang".into()),
        tokens_per_pass: Some(per_pass.round() as usize),
    };
    match s.handle(&serving(5, sglang(4, 8), ""), None, || 0.0, |_| {}) {
        Response::Error { message, .. } => {
            assert!(message.contains("SGLang refuses"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let e = view(s.handle(&serving(6, sglang(8, 8), ""), None, || 0.0, |_| {}));
    let knobs = e.engine.as_ref().expect("the engine's knobs");
    assert_eq!((e.every, e.window), (8, 8));
    assert_eq!((knobs.every_batches, knobs.window_batches), (2, 2));
    assert!(
        knobs.flags.contains(
            "--eplb-rebalance-num-iterations 8 --expert-distribution-recorder-buffer-size 8"
        ),
        "{}",
        knobs.flags
    );
    // its move is a fresh plan, which moves at least what relabelling does
    let relabelled = view(s.handle(
        &serving(
            7,
            ServingAsk {
                every: 2,
                window: 2,
                ..ask.clone()
            },
            "",
        ),
        None,
        || 0.0,
        |_| {},
    ));
    assert!(e.copies_moved >= relabelled.copies_moved);
    // the sweep's intervals in passes, none the engine refuses (K ≥ W)
    let sweep = e.sweep.expect("a sweep");
    assert!(sweep.iter().any(|p| p.every == 8) && sweep.iter().all(|p| p.every >= 8));
    assert_eq!(summary(&mut s), before);
}

/// A hardware file sent with a request prices every plan as the preset
/// it copies does (its name aside); a changed figure moves the prices;
/// a file that is not hardware is refused in one line, the view kept.
#[test]
fn a_hardware_file_prices_like_the_preset_it_copies() {
    let mut s = loaded();
    let h100 = moeplan::data::hardware::preset("h100-ib-ndr").unwrap();
    let priced = |s: &mut WorkerState, id, hardware: &str, json: Option<String>| {
        let r = Request {
            hardware: hardware.into(),
            hardware_json: json,
            ..req(id, None, None, Some(2))
        };
        view_of(s.handle(&r, None, || 0.0, |_| {}))
            .plans
            .into_iter()
            .map(|f| (f.name, f.predicted.expect("priced")))
            .collect::<Vec<_>>()
    };
    let preset = priced(&mut s, 2, "h100-ib-ndr", None);
    let mut mine = h100.clone();
    mine.name = "my-h100".into();
    let json = serde_json::to_string(&mine).unwrap();
    let file = priced(&mut s, 3, "my-h100", Some(json));
    assert!(!preset.is_empty() && preset.len() == file.len());
    for ((n1, p1), (n2, p2)) in preset.iter().zip(&file) {
        assert_eq!((n1, p2.hardware.as_str()), (n2, "my-h100"));
        assert_eq!(
            Predicted {
                hardware: String::new(),
                ..p1.clone()
            },
            Predicted {
                hardware: String::new(),
                ..p2.clone()
            }
        );
    }
    mine.gpu.hbm_gb_per_s /= 4.0;
    let slower = priced(
        &mut s,
        4,
        "my-h100",
        Some(serde_json::to_string(&mine).unwrap()),
    );
    assert!(
        slower
            .iter()
            .zip(&file)
            .all(|((_, a), (_, b))| a.step_ms > b.step_ms)
    );
    let before = s.shown.clone();
    let bad = Request {
        hardware: "x".into(),
        hardware_json: Some(r#"{"name": "x"}"#.into()),
        ..req(5, None, None, Some(2))
    };
    match s.handle(&bad, None, || 0.0, |_| {}) {
        Response::Error { message, .. } => {
            assert!(message.contains("hardware JSON"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.shown, before);
}

/// A Libra option change shared with a helper (a generated trace with
/// token routes, then a file's counts): the helper loads the trace from
/// what [`WorkerState::helper_load`] sends, makes the second half, and the
/// answer is what a worker alone answers; a job the helper cannot take
/// (another trace) or the path table is not shared, and a request whose
/// options are kept shares nothing.
#[test]
fn a_libra_change_shared_with_the_helper_answers_what_one_worker_does() {
    // Every ask and answer goes through its message, as between workers.
    let sent = |a: &HelperAsk| -> HelperAsk {
        let (text, numbers) = a.to_message();
        HelperAsk::from_message(&text, numbers).unwrap()
    };
    let back = |a: HelperAnswer| -> HelperAnswer {
        let (text, numbers) = a.to_message();
        HelperAnswer::from_message(&text, numbers).unwrap()
    };
    let opts = |n: &str, p: &str| {
        Some(vec![
            ("extra_experts_per_gpu".to_string(), n.to_string()),
            ("predictor".to_string(), p.to_string()),
        ])
    };
    let v2lite_routes_4 = Source::Generate {
        preset: "deepseek-v2-lite".into(),
        batches: 4,
        seed: 3,
        routes: true,
    };
    let (file, bytes) = {
        let t = generate(&GenConfig::new(model::preset("olmoe").unwrap(), 3)).unwrap();
        let buf = formats::write_trace_json(&t).into_bytes();
        (
            Source::File {
                name: "three.json".into(),
            },
            buf,
        )
    };
    let mut shared_jobs = 0;
    for (source, bytes) in [(v2lite_routes_4, None), (file, Some(bytes))] {
        let open = req(1, Some(source.clone()), Some(CLUSTER), Some(2));
        let (mut main, mut alone) = (WorkerState::default(), WorkerState::default());
        for s in [&mut main, &mut alone] {
            view_of(s.handle(&open, bytes.as_deref(), || 0.0, |_| {}));
        }
        let mut helper = Helper::default();
        let load = main.helper_load().expect("a trace to send");
        let loaded = back(helper.handle(sent(&load)));
        assert_eq!(
            loaded,
            HelperAnswer::Loaded {
                trace: main.trace_number()
            }
        );
        for (id, n, p) in [
            (2, "3", "previous-batch"),
            (3, "1", "oracle"),
            (4, "3", "previous-batch"),
        ] {
            let mut r = req(id, None, None, Some(2));
            r.per_batch = opts(n, p);
            // N = 3 again is kept: nothing to share.
            let job = main.split_job(&r);
            assert_eq!(job.is_some(), id != 4, "request {id}");
            if let Some(job) = job {
                let shared = main.share(job.clone()).expect("Libra splits");
                let ask = HelperAsk::Part {
                    trace: main.trace_number(),
                    job: job.clone(),
                };
                let HelperAnswer::Part {
                    job: done, numbers, ..
                } = back(helper.handle(sent(&ask)))
                else {
                    panic!("the helper made no part");
                };
                assert_eq!(done, job);
                main.keep_shared(shared, &numbers).unwrap();
                shared_jobs += 1;
                // Another trace's job is refused.
                let stale = HelperAsk::Part {
                    trace: main.trace_number() + 1,
                    job: ws_job(&main, &r),
                };
                assert!(matches!(
                    back(helper.handle(sent(&stale))),
                    HelperAnswer::Refused { .. }
                ));
                // A message that is not one is refused, not trusted.
                assert!(HelperAsk::from_message("[\"part\", \"libra\"]", vec![1.0, 2.0]).is_err());
                assert!(
                    HelperAnswer::from_message("[\"part\", \"libra\", \"\", \"n\"]", vec![1.0; 6])
                        .is_err()
                );
            }
            let (a, b) = (
                view_of(main.handle(&r, None, || 0.0, |_| {})),
                view_of(alone.handle(&r, None, || 0.0, |_| {})),
            );
            assert_eq!(a, b, "request {id}");
            assert_eq!(main.shown, alone.shown);
        }
        let mut table = req(5, None, None, Some(2));
        table.per_batch = opts("2", "path-table");
        assert!(
            main.split_job(&table).is_none(),
            "the path table is made here"
        );
    }
    assert_eq!(shared_jobs, 4);
}

/// The job a workspace would split for `r`'s options, kept or not.
fn ws_job(s: &WorkerState, r: &Request) -> moeplan_view::SplitJob {
    let ws = s.workspace.as_ref().unwrap();
    moeplan_view::SplitJob {
        planner: "libra".parse().unwrap(),
        cluster: ws.cluster(),
        options: r.per_batch.clone().unwrap(),
        from: 1,
        batches: ws.trace().num_batches(),
        model: ws.asked_model().map(str::to_string),
    }
}
