//! TensorRT-LLM in and out (issue 16): the expert statistics written by the
//! `safetensors` Python package (benchmarks/trtllm_stats.py) read to the
//! same counts as SGLang dumps of the same numbers; the co-occurrence files
//! to GRACE's affinity of the same routes; the placement YAML a plan writes
//! loads back to the same placement; hostile files give typed errors.

use std::path::{Path, PathBuf};

use moeplan::formats::plan_any::{PlanContext, PlanFileFormat, detect_plan, read_any_plan};
use moeplan::formats::{ReadOptions, TraceFormat, detect, read_trace, sglang, trtllm};
use moeplan::planners::grace::affinity::affinity_all;
use moeplan::{Budget, Error, LayerPlacement, LoadTrace, Meter, Plan, TokenTrace, Topology};
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
    Meter::new(Budget::default())
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
    let tokens = TokenTrace::new(8, vec![1, 3], arrays, vec![0; n]).unwrap();
    let want = affinity_all(&tokens).unwrap();
    assert_eq!(a.matrices, want);
    assert!(want[0].sum() > 0.0);
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
    let mut tight = Meter::new(Budget {
        max_bytes: 256,
        ..Budget::default()
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
        assert_eq!(
            detect_plan(&bytes).unwrap(),
            PlanFileFormat::Trtllm,
            "{file}"
        );
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
    assert_eq!(detect_plan(json).unwrap(), PlanFileFormat::Trtllm);
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
    let e = trtllm::write_placement(&plan).unwrap_err();
    assert!(matches!(e, Error::Export { .. }), "{e}");
    let padded = plan
        .padded_to_uniform(ndarray::array![[4.0, 3.0, 2.0, 1.0]].view())
        .unwrap();
    let yaml = trtllm::write_placement(&padded).unwrap();
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
        let yaml = trtllm::write_placement(&plan).unwrap();
        prop_assert_eq!(detect_plan(yaml.as_bytes()).unwrap(), PlanFileFormat::Trtllm);
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
