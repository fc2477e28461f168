//! `moeplan eval` on a folder of SGLang per-rank CSVs: each file's rank
//! (from its name) is kept as a source, so SGLang's static dispatch is
//! replayed rank by rank, and `--json` says so. The fixture and its
//! hand-worked figures: `crates/moeplan/tests/fixtures/sglang_ranks/`.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{fixtures, moeplan};

/// A fresh folder under the temp dir holding the fixture's CSVs plus `extra`.
fn folder(tag: &str, extra: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("moeplan-ranks-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(fixtures().join("sglang_ranks"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    for (name, text) in extra {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn eval(trace: &Path, rule: &str) -> Output {
    let plan = fixtures().join("sglang_ranks.plan.csv");
    moeplan(&[
        "eval",
        "--trace",
        trace.to_str().unwrap(),
        "--plan",
        plan.to_str().unwrap(),
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
        "--dispatch",
        rule,
        "--json",
    ])
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn eval_replays_per_rank_sources_under_sglang_static() {
    let trace = fixtures().join("sglang_ranks");
    let v = json(&eval(&trace, "sglang-static"));
    assert_eq!(v["sources"], "per-source counts");
    assert_eq!(v["dispatch"], "sglang-static");
    // Rank 0 keeps its 12 pairs on GPU 0, rank 1 its 4 on GPU 1 (README
    // of the fixture): loads 12 / 4.
    assert_eq!(v["balancedness"], 8.0 / 12.0);
    assert_eq!(v["imbalance_ratio"], 1.5);
    assert_eq!(v["traffic"]["local"], 16.0);
    assert_eq!(v["traffic"]["intra_node"], 0.0);
    // The same files with the ranks unknown: even arrival, expert 2 split
    // 4 / 4, loads 8 / 8.
    let anon = folder("anon", &[]);
    let csvs: Vec<PathBuf> = std::fs::read_dir(&anon)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    assert_eq!(csvs.len(), 2);
    for (p, to) in csvs.iter().zip(["counts_a.csv", "counts_b.csv"]) {
        std::fs::rename(p, anon.join(to)).unwrap();
    }
    let o = eval(&anon, "sglang-static");
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not name its rank"));
    let v = json(&o);
    assert_eq!(v["sources"], "even arrival (assumed)");
    assert_eq!(v["balancedness"], 1.0);
    assert_eq!(v["traffic"]["local"], 12.0);
}

#[test]
fn a_rank_past_the_cluster_or_a_repeated_rank_is_one_clear_error() {
    let past = folder(
        "past",
        &[("rank5.csv", "layer_id,expert_id,count\n3,0,1\n")],
    );
    let o = eval(&past, "sglang-static");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("rank 5") && err.contains("2 GPUs"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let twice = folder(
        "twice",
        &[("rank1.csv", "layer_id,expert_id,count\n3,0,1\n")],
    );
    let o = eval(&twice, "even");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("both hold rank 1"), "{err}");
}
