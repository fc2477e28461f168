//! Every command replays a trace with the sources its input records: an
//! ESFT folder as token routes (each sequence — a line of the files — dealt
//! to GPU `line mod D`), SGLang per-rank CSVs as per-source counts. Under
//! `even` nothing but the words and the traffic may change: the batches are
//! the ones the folder was always cut into.

use std::path::{Path, PathBuf};

mod common;
fn tmp(name: &str) -> PathBuf {
    common::tmp("sources", name)
}
use common::{fixtures, json_of, moeplan, shared};

use moeplan::{Meter, ReadLimits, evaluate};

/// `moeplan plan --algo ALGO` on `trace` for `nodes × 4` GPUs, written to
/// `out` (moeplan JSON).
fn plan(trace: &Path, algo: &str, nodes: &str, out: &Path) {
    let o = moeplan(&[
        "plan",
        "--trace",
        trace.to_str().unwrap(),
        "--algo",
        algo,
        "--nodes",
        nodes,
        "--gpus-per-node",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn eval(trace: &Path, plan: &Path, rule: &str) -> serde_json::Value {
    eval_dealt(trace, plan, rule, "even")
}

fn eval_dealt(trace: &Path, plan: &Path, rule: &str, deal: &str) -> serde_json::Value {
    json_of(&[
        "eval",
        "--trace",
        trace.to_str().unwrap(),
        "--plan",
        plan.to_str().unwrap(),
        "--dispatch",
        rule,
        "--deal",
        deal,
        "--json",
    ])
}

/// The folder's layer files, `(name, bytes)`.
fn esft_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .filter(|(n, _)| n.starts_with("expert_weights_"))
        .collect()
}

/// Per layer id, the GPU of each expert, from a moeplan JSON plan with one
/// copy per expert.
fn hosts(plan: &Path) -> Vec<(u64, Vec<usize>)> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(plan).unwrap()).unwrap();
    let experts = v["num_experts"].as_u64().unwrap() as usize;
    v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let mut gpu_of = vec![usize::MAX; experts];
            for (g, hosted) in l["gpus"].as_array().unwrap().iter().enumerate() {
                for e in hosted.as_array().unwrap() {
                    let e = e.as_u64().unwrap() as usize;
                    assert_eq!(gpu_of[e], usize::MAX, "one copy per expert");
                    gpu_of[e] = g;
                }
            }
            (l["layer"].as_u64().unwrap(), gpu_of)
        })
        .collect()
}

/// On the ESFT intent folder, a plan with one copy per expert on 2 × 4
/// GPUs: the pairs served on their source GPU are counted here straight
/// from the files (the ids before a line's empty field are its tokens'
/// experts; dealt evenly, the default, token `i` of a batch of `n` is on
/// GPU `⌊i · 8 / n⌋`; dealt by sequences, the line is the sequence, on GPU
/// `line mod 8`), and `eval` must report exactly that under `local-first`
/// — not the `1/8` of all pairs that even arrival gives such a plan.
#[test]
fn esft_folder_is_replayed_as_token_routes() {
    let Some(dir) = shared("esft-deepseek-v2-lite/intent") else {
        return;
    };
    let plan_file = tmp("esft-contiguous.json");
    plan(&dir, "contiguous", "2", &plan_file);
    for deal in ["even", "sequences"] {
        check_esft_replay(&dir, &plan_file, deal);
    }
}

fn check_esft_replay(dir: &Path, plan_file: &Path, deal: &str) {
    let gpus = 8;
    let batch = 1024;
    let tokens_in_all: usize = std::fs::read_to_string(dir.join("expert_weights_1.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').take_while(|f| !f.is_empty()).count() / 6)
        .sum();
    let source_of = |line: usize, token: usize| -> usize {
        if deal == "sequences" {
            return line % gpus;
        }
        let start = token / batch * batch;
        let len = batch.min(tokens_in_all - start);
        (token - start) * gpus / len
    };
    let mut local = 0u64;
    let mut intra = 0u64;
    let mut pairs = 0u64;
    // token messages: each token (6 consecutive ids, DeepSeek-V2-Lite's
    // top-6) once per other GPU / other node hosting one of its experts
    let (mut gpu_msgs, mut node_msgs) = (0u64, 0u64);
    for (layer, gpu_of) in hosts(plan_file) {
        let text =
            std::fs::read_to_string(dir.join(format!("expert_weights_{layer}.txt"))).unwrap();
        let mut next_token = 0;
        for (line, row) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let ids: Vec<usize> = row
                .split('\t')
                .take_while(|f| !f.is_empty())
                .map(|id| id.trim().parse::<usize>().unwrap())
                .collect();
            for token in ids.chunks(6) {
                let source = source_of(line, next_token);
                next_token += 1;
                for &id in token {
                    let gpu = gpu_of[id];
                    pairs += 1;
                    if gpu == source {
                        local += 1;
                    } else if gpu / 4 == source / 4 {
                        intra += 1;
                    }
                }
                let mut to: Vec<usize> = token.iter().map(|&e| gpu_of[e]).collect();
                to.sort_unstable();
                to.dedup();
                gpu_msgs += to.iter().filter(|&&g| g != source).count() as u64;
                let mut nodes: Vec<usize> = to.iter().map(|g| g / 4).collect();
                nodes.dedup();
                node_msgs += nodes.iter().filter(|&&n| n != source / 4).count() as u64;
            }
        }
    }
    let v = eval_dealt(dir, plan_file, "local-first", deal);
    assert_eq!(v["sources"], "token routes");
    assert_eq!(v["dispatch"], "local-first");
    let t = &v["traffic"];
    assert_eq!(t["local"].as_f64().unwrap(), local as f64);
    assert_eq!(t["intra_node"].as_f64().unwrap(), intra as f64);
    assert_eq!(
        t["cross_node"].as_f64().unwrap(),
        (pairs - local - intra) as f64
    );
    let m = &t["messages"];
    assert_eq!(m["cross_gpu"].as_f64().unwrap(), gpu_msgs as f64);
    assert_eq!(m["cross_node"].as_f64().unwrap(), node_msgs as f64);
    assert!(node_msgs < pairs - local - intra, "messages dedup pairs");
    // Even arrival: each GPU sends 1/8 of every expert's pairs, one of them
    // its own copy's.
    let even_local = pairs as f64 / gpus as f64;
    assert_ne!(t["local"].as_f64().unwrap(), even_local);
    if deal != "even" {
        return;
    }
    let text = String::from_utf8_lossy(
        &moeplan(&[
            "eval",
            "--trace",
            dir.to_str().unwrap(),
            "--plan",
            plan_file.to_str().unwrap(),
            "--dispatch",
            "local-first",
        ])
        .stdout,
    )
    .into_owned();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("sources: token routes"))
            .count(),
        1,
        "{text}"
    );
}

/// Under `even` the token workload judges plans on the batches the folder
/// was always cut into (1024 consecutive tokens): every figure of the
/// evaluator's report equals the core's `evaluate` on the folder read as a
/// load trace — in `eval`, in-sample and held out, and in `compare`.
#[test]
fn esft_figures_under_even_are_the_load_traces() {
    let Some(dir) = shared("esft-deepseek-v2-lite/intent") else {
        return;
    };
    let mut meter = Meter::new(ReadLimits::default());
    let tokens = moeplan::formats::read_esft(&esft_files(&dir), 64, 6, &mut meter).unwrap();
    let trace = tokens.to_load_trace(1024).unwrap();
    let expected = |plan_file: &Path, on: &moeplan::LoadTrace| {
        let (p, _) = moeplan::formats::read_plan_json(&std::fs::read(plan_file).unwrap()).unwrap();
        // Through text, as the CLI's figures come: serde_json's default
        // parser may round a float's last bit, the same way on both sides.
        let text = serde_json::to_string(&evaluate(on, &p).unwrap()).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let same = |got: &serde_json::Value, want: &serde_json::Value, what: &str| {
        for (k, w) in want.as_object().unwrap() {
            assert_eq!(&got[k], w, "{what}: {k}");
        }
    };
    let eplb = tmp("esft-eplb.json");
    plan(&dir, "eplb", "2", &eplb);
    let v = eval(&dir, &eplb, "even");
    assert_eq!(v["sources"], "token routes");
    same(&v, &expected(&eplb, &trace), "eval, in-sample");

    // held out: the last 30 % of batches, as `plan --holdout` cut them
    let held = tmp("esft-eplb-holdout.json");
    let o = moeplan(&[
        "plan",
        "--trace",
        dir.to_str().unwrap(),
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--holdout",
        "0.3",
        "--out",
        held.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = eval(&dir, &held, "even");
    let split = trace.holdout_split(0.3).unwrap();
    assert!(v["scope"].as_str().unwrap().starts_with("held-out"), "{v}");
    same(&v, &expected(&held, &split.eval), "eval, held out");

    let contiguous = tmp("esft-contiguous-even.json");
    plan(&dir, "contiguous", "2", &contiguous);
    let c = json_of(&[
        "compare",
        "--trace",
        dir.to_str().unwrap(),
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--json",
    ]);
    assert_eq!(c["sources"], "token routes");
    let row = c["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "contiguous")
        .unwrap();
    assert_eq!(row["report"]["sources"], "token routes");
    same(&row["report"], &expected(&contiguous, &trace), "compare");
}

/// `compare` on the SGLang per-rank fixture (its README works the figures
/// out) keeps each file's rank: the contiguous plan puts experts 0 and 1
/// on GPU 0 and expert 2 on GPU 1, so under `sglang-static` rank 0's 4
/// pairs for expert 0 stay home and its 8 for expert 2 and rank 1's 4 for
/// expert 1 cross to the other GPU: 4 local, 12 intra-node. Named without
/// ranks, the files are even arrival: each rank sends half of every expert,
/// 2 + 2 + 4 = 8 local pairs.
#[test]
fn compare_keeps_per_rank_sources() {
    let ranked = fixtures().join("sglang_ranks");
    let compare = |trace: &Path| {
        json_of(&[
            "compare",
            "--trace",
            trace.to_str().unwrap(),
            "--nodes",
            "1",
            "--gpus-per-node",
            "2",
            "--dispatch",
            "sglang-static",
            "--json",
        ])
    };
    let contiguous_row = |v: &serde_json::Value| {
        v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "contiguous")
            .unwrap()["report"]
            .clone()
    };
    let layout = tmp("ranks-contiguous.json");
    let o = moeplan(&[
        "plan",
        "--trace",
        ranked.to_str().unwrap(),
        "--algo",
        "contiguous",
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
        "--out",
        layout.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(hosts(&layout), vec![(3, vec![0, 0, 1])]);

    let v = compare(&ranked);
    assert_eq!(v["sources"], "per-source counts");
    for p in v["plans"].as_array().unwrap() {
        if let Some(r) = p.get("report") {
            assert_eq!(r["sources"], "per-source counts", "{p}");
        }
    }
    let r = contiguous_row(&v);
    assert_eq!(r["traffic"]["local"], 4.0);
    assert_eq!(r["traffic"]["intra_node"], 12.0);

    let anon = tmp("anon-ranks");
    let _ = std::fs::remove_dir_all(&anon);
    std::fs::create_dir_all(&anon).unwrap();
    let mut csvs: Vec<PathBuf> = std::fs::read_dir(&ranked)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    csvs.sort();
    for (p, to) in csvs.iter().zip(["counts_a.csv", "counts_b.csv"]) {
        std::fs::copy(p, anon.join(to)).unwrap();
    }
    let v = compare(&anon);
    assert_eq!(v["sources"], "even arrival (assumed)");
    let r = contiguous_row(&v);
    assert_eq!(r["traffic"]["local"], 8.0);
    assert_eq!(r["traffic"]["intra_node"], 8.0);
}

/// A cluster with fewer GPUs than the files have ranks: under `even`
/// (which never reads sources) `compare` drops them and says so; under a
/// rule that reads them it is one clear error.
#[test]
fn ranks_past_the_cluster_are_dropped_under_even_only() {
    let ranked = fixtures().join("sglang_ranks");
    let run = |rule: &str| {
        moeplan(&[
            "compare",
            "--trace",
            ranked.to_str().unwrap(),
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--dispatch",
            rule,
            "--json",
        ])
    };
    let o = run("even");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("even arrival assumed"));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sources"], "even arrival (assumed)");
    let o = run("sglang-static");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("rank 1") && err.contains("1 GPUs"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// GRACE's router through the CLI: a GRACE plan made on the first
/// batches of the ESFT intent folder records their loads (`profile`), and
/// `eval` on the held-out batches predicts GRACE's routing from them and
/// says so; the same plan without its profile falls back to the judged
/// batches' own loads, says that, and routes differently.
#[test]
fn grace_routing_on_held_out_batches_predicts_from_the_plan() {
    let Some(dir) = shared("esft-deepseek-v2-lite/intent") else {
        return;
    };
    let plan_file = tmp("grace-holdout.json");
    let o = moeplan(&[
        "plan",
        "--trace",
        dir.to_str().unwrap(),
        "--algo",
        "grace",
        "--nodes",
        "2",
        "--gpus-per-node",
        "2",
        "--holdout",
        "0.3",
        "--out",
        plan_file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan_file).unwrap()).unwrap();
    let rows = written["profile"]
        .as_array()
        .expect("the plan records its profile");
    assert_eq!(rows.len(), 26);
    assert!(rows.iter().all(|r| r.as_array().unwrap().len() == 64));
    let judged = eval(&dir, &plan_file, "grace-weighted");
    assert!(
        judged["scope"].as_str().unwrap().starts_with("held-out"),
        "{}",
        judged["scope"]
    );
    assert_eq!(
        judged["predictions"],
        moeplan::judge::PREDICTED_FROM_PROFILE
    );
    written.as_object_mut().unwrap().remove("profile");
    let bare = tmp("grace-holdout-bare.json");
    std::fs::write(&bare, written.to_string()).unwrap();
    let leaked = eval(&dir, &bare, "grace-weighted");
    assert_eq!(leaked["predictions"], moeplan::judge::PREDICTED_IN_SAMPLE);
    assert_ne!(judged["balancedness"], leaked["balancedness"]);
    // rules that predict nothing say nothing
    assert!(eval(&dir, &plan_file, "even").get("predictions").is_none());
}
