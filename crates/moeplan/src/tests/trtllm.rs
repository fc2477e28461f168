//! TensorRT-LLM in and out: the expert statistics written by the
//! `safetensors` Python package (benchmarks/trtllm_stats.py) read to the
//! same counts as SGLang dumps of the same numbers; the co-occurrence files
//! to GRACE's affinity of the same routes; the placement YAML a plan writes
//! loads back to the same placement; hostile files give typed errors.

use std::path::{Path, PathBuf};

use crate::data::Workload;
use crate::formats::PlanFormat;
use crate::formats::plan_any::{PlanContext, detect_plan, read_any_plan};
use crate::formats::{ReadOptions, TraceFormat, detect, read_trace, sglang, trtllm};
use crate::planners::grace::affinity::affinity_all;
use crate::planners::grace::{Grace, GraceOptions};
use crate::{Error, LayerPlacement, LoadTrace, Meter, Plan, ReadLimits, TokenTrace, Topology};
use ndarray::{Array2, Array3, Axis};
use proptest::prelude::*;

fn fixtures(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Every file of a folder as `(name, bytes)`, sorted by name.
fn folder(rel: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures(rel))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn meter() -> Meter {
    Meter::new(ReadLimits::default())
}

/// The dump's counts, summed over ranks, per iteration, are SGLang's
/// `logical_count` of the same numbers: same batches, layers (1 and 3 of a
/// four-layer model) and counts; the top-k comes from `meta_info.json`.
#[test]
fn statistics_read_to_the_sglang_dumps_counts() {
    let dump = folder("trtllm/dump");
    let stats = trtllm::read_statistics(&dump, &mut meter()).unwrap();
    let json = std::fs::read(fixtures("trtllm/sglang/expert_distribution.json")).unwrap();
    let sg = read_trace(&json, &ReadOptions::default()).unwrap();
    assert_eq!(stats.trace.layer_ids(), sg.layer_ids());
    assert_eq!(stats.trace.layer_ids(), &[1, 3]);
    assert_eq!(stats.trace.counts(), sg.counts());
    assert_eq!(stats.iterations, [10, 11, 12]);
    assert_eq!(stats.trace.top_k(), Some(2));
    // top-2: every token counted twice per layer
    let tokens: f64 = stats.trace.counts().index_axis(Axis(1), 0).sum();
    assert_eq!(tokens % 2.0, 0.0);
    assert!(tokens > 0.0);
}

/// Each rank's counts are SGLang's per-rank CSVs of the same numbers (summed
/// over iterations, which a CSV holds one batch of).
#[test]
fn per_rank_counts_are_the_sglang_per_rank_csvs() {
    let stats = trtllm::read_statistics(&folder("trtllm/dump"), &mut meter()).unwrap();
    let csvs: Vec<(String, Vec<u8>)> = folder("trtllm/sglang")
        .into_iter()
        .filter(|(n, _)| n.ends_with(".csv"))
        .collect();
    let sg = sglang::read_rank_csvs_by_rank(&csvs, Some(8), &mut meter()).unwrap();
    let ours = stats.by_source.unwrap().sum_axis(Axis(0));
    assert_eq!(ours, sg.by_source.index_axis(Axis(0), 0));
    assert_eq!(stats.ranks, sg.ranks);
    assert!(!stats.sources_dropped);
    // one file alone through the trace door: that rank's counts
    let rank1 = std::fs::read(fixtures("trtllm/dump/rank1.safetensors")).unwrap();
    assert_eq!(detect(&rank1).unwrap(), TraceFormat::TrtllmStatistics);
    let t = read_trace(&rank1, &ReadOptions::default()).unwrap();
    assert_eq!(
        t.counts().sum_axis(Axis(0)),
        sg.by_source.index_axis(Axis(0), 0).index_axis(Axis(1), 1)
    );
}

/// The co-occurrence files, summed over iterations and ranks with the
/// diagonal cleared, are GRACE-MoE's affinity of the same tokens' routes.
#[test]
fn cooccurrence_is_graces_affinity_of_the_same_routes() {
    let a = trtllm::read_cooccurrence(&folder("trtllm/dump"), &mut meter()).unwrap();
    assert_eq!(a.layer_ids, [1, 3]);
    let tokens = fixture_routes();
    let want = affinity_all(&tokens).unwrap();
    assert_eq!(a.matrices, want);
    assert!(want[0].sum() > 0.0);
}

/// Every token's route of the dump (layers 1 and 3, 8 experts, top-2), as
/// the generator wrote them beside the files; ranks are not needed here.
fn fixture_routes() -> TokenTrace {
    let routes: std::collections::BTreeMap<String, Vec<Vec<u32>>> =
        serde_json::from_slice(&std::fs::read(fixtures("trtllm/routes.json")).unwrap()).unwrap();
    let arrays: Vec<Array2<u32>> = ["1", "3"]
        .iter()
        .map(|l| {
            let rows = &routes[*l];
            Array2::from_shape_fn((rows.len(), 2), |(i, k)| rows[i][k])
        })
        .collect();
    let n = arrays[0].nrows();
    TokenTrace::new(8, vec![1, 3], arrays, vec![0; n]).unwrap()
}

/// GRACE on the dump's counts with its co-occurrence matrices as the
/// workload's affinity groups as GRACE on the same tokens' routes: the
/// matrices are the affinity the routes count to, and the summed loads the
/// same, so every layer's groups, ratio and plan agree. Without the
/// matrices it falls back to load only and says so; with them its note
/// names the co-occurrence counts instead.
#[test]
fn grace_groups_by_the_cooccurrence_as_by_the_routes() {
    let dump = folder("trtllm/dump");
    let stats = trtllm::read_statistics(&dump, &mut meter()).unwrap();
    let cooc = trtllm::read_cooccurrence(&dump, &mut meter()).unwrap();
    assert_eq!(cooc.layer_ids, stats.trace.layer_ids());
    let counts = Workload::new(stats.trace.clone())
        .with_sources(stats.by_source.clone().unwrap())
        .unwrap();
    let recorded = counts.clone().with_affinity(cooc.matrices).unwrap();
    assert_eq!(recorded.num_sources(), Some(2), "the sources are kept");
    let tokens = fixture_routes();
    let n = tokens.num_tokens();
    let routed = Workload::from_tokens(tokens, n).unwrap();
    assert_eq!(routed.trace().summed(), stats.trace.summed());
    let o = GraceOptions::default();
    for (nodes, gpus) in [(1, 2), (1, 4), (2, 2)] {
        let t = Topology::new(nodes, gpus).unwrap();
        let by_cooc = Grace::prepare(&recorded, t, &o).unwrap();
        let by_routes = Grace::prepare(&routed, t, &o).unwrap();
        assert!(by_cooc.layers().iter().all(|l| l.ratio.is_some()), "{t}");
        assert_eq!(by_cooc.layers(), by_routes.layers(), "{t}");
        assert_eq!(
            by_cooc.plan().unwrap().layers(),
            by_routes.plan().unwrap().layers()
        );
        assert!(
            by_cooc
                .notes()
                .iter()
                .all(|n| !n.contains("no token routes")),
            "{:?}",
            by_cooc.notes()
        );
        assert!(by_cooc.notes().iter().any(|n| n.contains("co-occurrence")));
        assert!(
            by_routes
                .notes()
                .iter()
                .all(|n| !n.contains("co-occurrence"))
        );
        let load_only = Grace::prepare(&counts, t, &o).unwrap();
        assert!(load_only.notes()[0].contains("no token routes"));
        assert!(load_only.layers().iter().all(|l| l.ratio.is_none()));
    }
}

/// Token routes win over a recorded affinity: a workload with both groups
/// by the routes' affinity, not by the matrices it was handed.
#[test]
fn token_routes_take_precedence_over_a_recorded_affinity() {
    let tokens = fixture_routes();
    let n = tokens.num_tokens();
    let routed = Workload::from_tokens(tokens, n).unwrap();
    // the opposite of the routes: experts that never meet paired most
    let cooc = trtllm::read_cooccurrence(&folder("trtllm/dump"), &mut meter()).unwrap();
    let inverted: Vec<Array2<f64>> = cooc
        .matrices
        .iter()
        .map(|m| m.mapv(|v| 100.0 - v))
        .collect();
    let both = routed.clone().with_affinity(inverted.clone()).unwrap();
    let t = Topology::new(1, 4).unwrap();
    let o = GraceOptions::default();
    let want = Grace::prepare(&routed, t, &o).unwrap();
    assert_eq!(
        Grace::prepare(&both, t, &o).unwrap().layers(),
        want.layers()
    );
    let other = Workload::new(routed.trace().clone())
        .with_affinity(inverted)
        .unwrap();
    assert_ne!(
        Grace::prepare(&other, t, &o).unwrap().layers(),
        want.layers(),
        "the inverted matrices group differently, or this test shows nothing"
    );
}

/// Matrices that do not fit the trace, or are no pair counts, are refused
/// with typed errors.
#[test]
fn a_recorded_affinity_must_fit_the_trace() {
    let stats = trtllm::read_statistics(&folder("trtllm/dump"), &mut meter()).unwrap();
    let work = || Workload::new(stats.trace.clone());
    let zeros = || Array2::<f64>::zeros((8, 8));
    let e = work().with_affinity(vec![zeros()]).unwrap_err();
    assert!(matches!(e, Error::Mismatch(_)), "{e}");
    let e = work()
        .with_affinity(vec![zeros(), Array2::zeros((7, 7))])
        .unwrap_err();
    assert!(matches!(e, Error::Mismatch(_)), "{e}");
    let mut lopsided = zeros();
    lopsided[[0, 1]] = 1.0;
    let e = work().with_affinity(vec![zeros(), lopsided]).unwrap_err();
    assert!(matches!(e, Error::Trace(_)), "{e}");
    let mut negative = zeros();
    negative[[2, 2]] = -1.0;
    let e = work().with_affinity(vec![negative, zeros()]).unwrap_err();
    assert!(matches!(e, Error::Trace(_)), "{e}");
    let mut nan = zeros();
    nan[[3, 4]] = f64::NAN;
    nan[[4, 3]] = f64::NAN;
    let e = work().with_affinity(vec![zeros(), nan]).unwrap_err();
    assert!(matches!(e, Error::Trace(_)), "{e}");
    // no pair at all: load only, named per layer
    let none = work().with_affinity(vec![zeros(), zeros()]).unwrap();
    let g = Grace::prepare(
        &none,
        Topology::new(1, 4).unwrap(),
        &GraceOptions::default(),
    )
    .unwrap();
    assert!(g.layers().iter().all(|l| l.ratio.is_none()));
}

/// The iterations a plan is made on give their own affinity, and the
/// parts add up to the whole: held-out batches stay out of the grouping.
#[test]
fn cooccurrence_of_some_iterations_adds_up() {
    let dump = folder("trtllm/dump");
    let whole = trtllm::read_cooccurrence(&dump, &mut meter()).unwrap();
    let first = trtllm::read_cooccurrence_in(&dump, 10..=11, &mut meter()).unwrap();
    let last = trtllm::read_cooccurrence_in(&dump, 12..=12, &mut meter()).unwrap();
    for l in 0..2 {
        assert_eq!(&first.matrices[l] + &last.matrices[l], whole.matrices[l]);
        assert!(last.matrices[l].sum() > 0.0 && last.matrices[l] != whole.matrices[l]);
    }
    let e = trtllm::read_cooccurrence_in(&dump, 13..=20, &mut meter()).unwrap_err();
    assert!(matches!(e, Error::Parse { .. }), "{e}");
}

/// What the reader does not hold is no affinity: counts files alone.
#[test]
fn cooccurrence_needs_its_files() {
    let counts: Vec<(String, Vec<u8>)> = folder("trtllm/dump")
        .into_iter()
        .filter(|(n, _)| n.starts_with("rank"))
        .collect();
    let e = trtllm::read_cooccurrence(&counts, &mut meter()).unwrap_err();
    assert!(matches!(e, Error::Parse { .. }), "{e}");
}

/// Reading builds nothing past the budget: a tight one is a limit error.
#[test]
fn statistics_are_read_within_the_budget() {
    let dump = folder("trtllm/dump");
    let mut tight = Meter::new(ReadLimits {
        max_bytes: 256,
        ..ReadLimits::default()
    });
    let e = trtllm::read_statistics(&dump, &mut tight).unwrap_err();
    assert!(matches!(e, Error::Limit(_)), "{e}");
}

/// Two ranks holding the same key sum; two files claiming one rank do not.
#[test]
fn two_files_of_one_rank_are_refused() {
    let r0 = std::fs::read(fixtures("trtllm/dump/rank0.safetensors")).unwrap();
    let files = [("rank0.safetensors", &r0), ("old/rank0.safetensors", &r0)];
    let e = trtllm::read_statistics(&files, &mut meter()).unwrap_err();
    assert!(e.to_string().contains("both hold rank 0"), "{e}");
}

fn context(trace: &LoadTrace, t: Topology) -> PlanContext<'_> {
    PlanContext::for_trace(trace, Some(t))
}

/// The hostile statistics files in `broken/` (also read by the formats, CLI
/// and wasm tests through `EXPECTED`) fail as parse errors naming the file's
/// problem.
#[test]
fn broken_statistics_are_parse_errors() {
    let dir = fixtures("broken");
    let manifest = std::fs::read_to_string(dir.join("EXPECTED")).unwrap();
    let mut seen = 0;
    for line in manifest.lines().filter(|l| l.starts_with("trtllm-")) {
        let (file, needle) = line.split_once('\t').unwrap();
        let bytes = std::fs::read(dir.join(file)).unwrap();
        assert_eq!(
            detect(&bytes).ok(),
            Some(TraceFormat::TrtllmStatistics),
            "{file}"
        );
        let e = read_trace(&bytes, &ReadOptions::default()).unwrap_err();
        assert!(matches!(e, Error::Parse { .. }), "{file}: {e}");
        assert!(
            e.to_string().contains(needle),
            "{file}: {e} lacks {needle:?}"
        );
        seen += 1;
    }
    assert!(seen >= 7, "only {seen} broken statistics files listed");
}

/// Every broken placement in `trtllm/broken-plans/` fails with the words
/// its `EXPECTED` line names, as a typed error, for a trace of MoE layers 1
/// and 3, 8 experts, on 4 GPUs.
#[test]
fn broken_placements_give_their_error() {
    let dir = fixtures("trtllm/broken-plans");
    let trace = LoadTrace::new(Array3::from_elem((1, 2, 8), 1.0), vec![1, 3]).unwrap();
    let t = Topology::new(1, 4).unwrap();
    let manifest = std::fs::read_to_string(dir.join("EXPECTED")).unwrap();
    let mut listed = std::collections::BTreeSet::new();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (file, needle) = line.split_once('\t').unwrap();
        listed.insert(file.to_string());
        let bytes = std::fs::read(dir.join(file)).unwrap();
        assert_eq!(detect_plan(&bytes).unwrap(), PlanFormat::Trtllm, "{file}");
        let result = std::panic::catch_unwind(|| read_any_plan(&bytes, &context(&trace, t)));
        let e = match result {
            Ok(Ok(_)) => panic!("{file}: read without error"),
            Ok(Err(e)) => e,
            Err(_) => panic!("{file}: panicked"),
        };
        assert!(
            matches!(
                e,
                Error::Parse { .. } | Error::Plan(_) | Error::Mismatch(_) | Error::Limit(_)
            ),
            "{file}: {e:?}"
        );
        assert!(
            e.to_string().contains(needle),
            "{file}: {e} lacks {needle:?}"
        );
        // and as a trace it is a plan, not a load trace
        let as_trace = read_trace(&bytes, &ReadOptions::default()).unwrap_err();
        assert!(as_trace.to_string().contains("plan"), "{file}: {as_trace}");
    }
    let present: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "EXPECTED")
        .collect();
    assert_eq!(present, listed, "fixtures and EXPECTED disagree");
}

/// The file TensorRT-LLM's generator writes (sorted keys, inline lists,
/// `ep_size` from the co-occurrence variant) reads without a topology: the
/// EP size is taken as one node.
#[test]
fn the_generators_own_layout_reads() {
    let yaml = b"ep_size: 2\ninitial_global_assignments:\n  1: [3, 0, 1, 2]\n  3: [0, 1, 2, 3]\nlayer_updates_per_iter: 0\nnum_slots: 4\n";
    let trace = LoadTrace::new(Array3::from_elem((1, 2, 4), 1.0), vec![1, 3]).unwrap();
    let file = read_any_plan(yaml, &PlanContext::for_trace(&trace, None)).unwrap();
    assert!(file.topology_assumed);
    assert_eq!(file.plan.topology(), Topology::new(1, 2).unwrap());
    assert_eq!(file.plan.layers()[0].gpus, vec![vec![3, 0], vec![1, 2]]);
    // JSON is YAML too, with its keys as strings
    let json = br#"{"num_slots": 4, "initial_global_assignments": {"1": [3, 0, 1, 2], "3": [0, 1, 2, 3]}}"#;
    assert_eq!(detect_plan(json).unwrap(), PlanFormat::Trtllm);
    let t = Topology::new(1, 2).unwrap();
    let from_json = read_any_plan(json, &context(&trace, t)).unwrap();
    assert_eq!(from_json.plan.layers(), file.plan.layers());
}

/// A plan whose slot counts differ per GPU cannot be written; padded, it
/// is, and reads back padded.
#[test]
fn uneven_plans_are_refused_or_padded() {
    let t = Topology::new(1, 2).unwrap();
    let layers = vec![LayerPlacement {
        layer: 5,
        gpus: vec![vec![0, 1, 2], vec![3]],
    }];
    let plan = Plan::new(t, 4, layers, "by-hand").unwrap();
    let e = trtllm::write_placement(&plan, None).unwrap_err();
    assert!(matches!(e, Error::Export { .. }), "{e}");
    let padded = plan
        .padded_to_uniform(ndarray::array![[4.0, 3.0, 2.0, 1.0]].view())
        .unwrap();
    let yaml = trtllm::write_placement(&padded, None).unwrap();
    let trace = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![5]).unwrap();
    let back = read_any_plan(yaml.as_bytes(), &context(&trace, t)).unwrap();
    assert_eq!(back.plan.layers(), padded.layers());
}

/// A random servable plan with equal slots per GPU: every expert once, the
/// rest random copies, shuffled over the GPUs; strictly increasing layer ids.
fn uniform_plan() -> impl Strategy<Value = Plan> {
    (1usize..=2, 1usize..=4, 1usize..=12, 0usize..=3, 1usize..=4)
        .prop_flat_map(|(nodes, per_node, experts, extra, layers)| {
            let d = nodes * per_node;
            let per_gpu = experts.div_ceil(d) + extra;
            let slots = per_gpu * d;
            let layer = (
                proptest::collection::vec(0..experts as u32, slots - experts),
                1u32..20,
            )
                .prop_flat_map(move |(extra, step)| {
                    let mut row: Vec<u32> = (0..experts as u32).collect();
                    row.extend(extra);
                    (Just(row).prop_shuffle(), Just(step))
                });
            (
                Just((nodes, per_node, experts, per_gpu)),
                proptest::collection::vec(layer, layers),
            )
        })
        .prop_map(|((nodes, per_node, experts, per_gpu), rows)| {
            let mut id = 0;
            let layers = rows
                .into_iter()
                .map(|(row, step)| {
                    id += step;
                    LayerPlacement {
                        layer: id,
                        gpus: row.chunks(per_gpu).map(<[u32]>::to_vec).collect(),
                    }
                })
                .collect();
            Plan::new(
                Topology::new(nodes, per_node).unwrap(),
                experts,
                layers,
                "random",
            )
            .unwrap()
        })
}

proptest! {
    /// plan → YAML → plan gives the same placement, GPU by GPU, slot by slot.
    #[test]
    fn placement_yaml_round_trips(plan in uniform_plan()) {
        let yaml = trtllm::write_placement(&plan, None).unwrap();
        prop_assert_eq!(detect_plan(yaml.as_bytes()).unwrap(), PlanFormat::Trtllm);
        let ids: Vec<u32> = plan.layers().iter().map(|l| l.layer).collect();
        let trace = LoadTrace::new(
            Array3::from_elem((1, ids.len(), plan.num_experts()), 1.0),
            ids,
        ).unwrap();
        let back = read_any_plan(yaml.as_bytes(), &context(&trace, plan.topology())).unwrap();
        prop_assert_eq!(back.plan.layers(), plan.layers());
        prop_assert_eq!(back.plan.topology(), plan.topology());
        prop_assert!(!back.topology_assumed);
    }
}
