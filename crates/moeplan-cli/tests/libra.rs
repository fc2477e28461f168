//! Libra through the command line: its registry options are flags and are
//! validated, `plan --algo libra` writes the static base and says that the
//! copies are made per batch, `eval --json` carries per-batch series for
//! every plan (Libra's replayed through its schedule on the evaluated
//! batches), and `compare` has a Libra row judged under libra-rebalance.
//! The figures are checked against the core library called directly.

use std::path::PathBuf;

use moeplan::Workload;
use moeplan::judge::{CostModel, Rule, Strategy, simulate};
use moeplan::planners::{LibraOptions, Predictor, libra_schedule};
use moeplan::{LoadTrace, Topology, data::model, formats, planners};

mod common;
use common::{json_of, moeplan};

fn tmp(name: &str) -> PathBuf {
    common::tmp("libra", name)
}

/// A generated OLMoE trace of `batches` batches, written by `moeplan gen`
/// and read back by the core.
fn trace(name: &str, batches: usize) -> (String, LoadTrace) {
    let p = tmp(name);
    let s = p.to_str().unwrap().to_string();
    let n = batches.to_string();
    let o = moeplan(&["gen", "--preset", "olmoe", "--batches", &n, "--out", &s]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = formats::read_trace_json(&std::fs::read(&p).unwrap()).unwrap();
    (s, t)
}

/// Libra's schedule on `t` as the core computes it, with `n` copies per
/// GPU and the default predictor (previous batch), replayed.
fn core_libra(t: &LoadTrace, topology: Topology, n: usize) -> moeplan::judge::Replay {
    core_libra_by(t, topology, n, &Predictor::PreviousBatch)
}

/// [`core_libra`] with another predictor.
fn core_libra_by(
    t: &LoadTrace,
    topology: Topology,
    n: usize,
    predictor: &Predictor,
) -> moeplan::judge::Replay {
    let base = planners::contiguous(t, topology).unwrap();
    let work = Workload::new(t.clone());
    let options = LibraOptions {
        extra_per_gpu: n,
        ..LibraOptions::default()
    };
    let s = libra_schedule(&work, &base, predictor, &options).unwrap();
    let cost = CostModel::for_model(model::preset("olmoe").unwrap());
    simulate(&work, &s.strategy(), &cost).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The one `moeplan: error:` line and exit code 2.
fn fails_with(args: &[&str], words: &str) {
    let o = moeplan(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(words), "{args:?}: {err}");
}

#[test]
fn flags_exist_and_are_validated() {
    let list = json_of(&["planners", "--json"]);
    let libra = list["planners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "libra")
        .expect("libra is listed");
    let names: Vec<&str> = libra["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "extra_experts_per_gpu",
            "local_percent",
            "tolerance_percent",
            "predictor",
            "remote_start"
        ]
    );
    let help = String::from_utf8_lossy(&moeplan(&["plan", "--help"]).stdout).into_owned();
    for flag in [
        "--extra-experts-per-gpu",
        "--local-percent",
        "--tolerance-percent",
        "--predictor",
        "--remote-start",
    ] {
        assert!(help.contains(flag), "{flag} in plan --help");
    }
    let (t, _) = trace("flags.json", 2);
    let out = tmp("flags-plan.json");
    let out = out.to_str().unwrap();
    let base = ["plan", "--algo", "libra", "--trace", &t, "--out", out];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    fails_with(&with(&["--predictor", "crystal-ball"]), "crystal-ball");
    fails_with(&with(&["--extra-experts-per-gpu", "-1"]), "-1");
    fails_with(&with(&["--local-percent", "150"]), "outside 0..=1");
    fails_with(&with(&["--remote-start", "home"]), "home");
    // A count-only trace has no token paths: refused, said plainly.
    fails_with(&with(&["--predictor", "path-table"]), "token routes");
}

#[test]
fn plan_writes_the_base_and_eval_replays_per_batch() {
    let batches = 6;
    let (t, core_trace) = trace("eval.json", batches);
    let out = tmp("eval-plan.json");
    let out = out.to_str().unwrap();
    let topo = ["--nodes", "1", "--gpus-per-node", "8"];
    let mut args = vec!["plan", "--algo", "libra", "--trace", &t, "--out", out];
    args.extend(topo);
    args.extend(["--extra-experts-per-gpu", "2"]);
    let o = moeplan(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("note: Libra copies up to N = 2") && err.contains("base only"),
        "the note says engines load the base: {err}"
    );
    // The file is the static base: one copy of every expert.
    let (plan, _) = formats::read_plan_json(&std::fs::read(out).unwrap()).unwrap();
    assert_eq!(plan.algorithm(), "libra");
    assert_eq!(plan.summary().replicas, 0);

    let mut args = vec!["eval", "--json", "--trace", &t, "--plan", out];
    args.extend(topo);
    args.extend(["--extra-experts-per-gpu", "2"]);
    let v = json_of(&args);
    let topology = Topology::new(1, 8).unwrap();
    let want = core_libra(&core_trace, topology, 2);
    assert_eq!(v["dispatch"], "libra-rebalance");
    let ir = floats(&v["per_batch_imbalance_ratio"]);
    let bal = floats(&v["per_batch_balancedness"]);
    let moved = floats(&v["per_batch_bytes_moved"]);
    let copies = floats(&v["schedule"]["per_batch_copies"]);
    for (name, len) in [
        ("imbalance", ir.len()),
        ("balancedness", bal.len()),
        ("bytes moved", moved.len()),
        ("copies", copies.len()),
    ] {
        assert_eq!(len, batches, "{name}: one value per batch");
    }
    for b in 0..batches {
        assert!(close(ir[b], want.per_batch_imbalance_ratio[b]), "batch {b}");
        assert!(close(bal[b], want.per_batch[b]), "batch {b}");
    }
    // Every batch weighs alike: the per-batch means are the headline.
    let mean = ir.iter().sum::<f64>() / batches as f64;
    assert!(close(mean, v["imbalance_ratio"].as_f64().unwrap()));
    // Copies are bounded by N per GPU in every layer.
    let layers = core_trace.num_layers() as f64;
    assert!(copies.iter().all(|&c| c <= 2.0 * 8.0 * layers));
    assert!(copies.iter().any(|&c| c > 0.0), "Libra copies something");
    let total_moved: f64 = moved.iter().sum();
    assert!(close(total_moved, want.bytes_moved as f64));

    // A static plan's series: the same keys, no schedule, nothing moved.
    let eplb = tmp("eval-eplb.json");
    let eplb = eplb.to_str().unwrap();
    let mut args = vec!["plan", "--algo", "eplb", "--trace", &t, "--out", eplb];
    args.extend(topo);
    assert!(moeplan(&args).status.success());
    let mut args = vec!["eval", "--json", "--trace", &t, "--plan", eplb];
    args.extend(topo);
    let v = json_of(&args);
    let (plan, _) = formats::read_plan_json(&std::fs::read(eplb).unwrap()).unwrap();
    let work = Workload::new(core_trace.clone());
    let cost = CostModel::for_model(model::preset("olmoe").unwrap());
    let want = simulate(&work, &Strategy::fixed(plan, Rule::Even), &cost).unwrap();
    let ir = floats(&v["per_batch_imbalance_ratio"]);
    assert_eq!(ir.len(), batches);
    for (b, (&x, &y)) in ir.iter().zip(&want.per_batch_imbalance_ratio).enumerate() {
        assert!(close(x, y), "batch {b}");
    }
    assert!(v["schedule"].is_null());
    assert!(
        floats(&v["per_batch_bytes_moved"])
            .iter()
            .all(|&x| x == 0.0)
    );
}

#[test]
fn compare_has_a_libra_row_judged_by_its_schedule() {
    let (t, core_trace) = trace("compare.json", 5);
    let v = json_of(&[
        "compare",
        "--json",
        "--trace",
        &t,
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--extra-experts-per-gpu",
        "4",
    ]);
    let plans = v["plans"].as_array().unwrap();
    let row = |name: &str| {
        plans
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no {name} row: {v}"))
    };
    let libra = &row("libra")["report"];
    assert_eq!(libra["dispatch"], "libra-rebalance");
    assert!(
        libra["schedule"]["about"]
            .as_str()
            .unwrap()
            .starts_with("per batch, libra-rebalance")
    );
    let want = core_libra(&core_trace, Topology::new(2, 4).unwrap(), 4);
    assert!(close(
        libra["imbalance_ratio"].as_f64().unwrap(),
        want.imbalance_ratio
    ));
    // The other rows stay under the asked rule (`even`).
    assert_eq!(row("eplb (+8)")["report"]["dispatch"], "even");
    // Copies on top of the same contiguous base balance better than it.
    let floor = row("contiguous")["report"]["imbalance_ratio"]
        .as_f64()
        .unwrap();
    assert!(
        want.imbalance_ratio < floor,
        "{} vs {floor}",
        want.imbalance_ratio
    );
}

/// A Libra plan file did not record Libra's options, so `eval`
/// re-planned it with the defaults (previous batch, N = 8) unless every
/// flag was repeated. The file now records them; `eval` re-makes the plan
/// with them, and a flag given to `eval` overrides one and says so.
#[test]
fn eval_remakes_libra_with_the_options_its_file_records() {
    let (t, core_trace) = trace("options.json", 6);
    let out = tmp("options-plan.json");
    let out = out.to_str().unwrap();
    let topo = ["--nodes", "1", "--gpus-per-node", "8"];
    let mut args = vec!["plan", "--algo", "libra", "--trace", &t, "--out", out];
    args.extend(topo);
    args.extend(["--predictor", "oracle", "--extra-experts-per-gpu", "2"]);
    let o = moeplan(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    assert_eq!(file["options"]["predictor"], "oracle");
    assert_eq!(file["options"]["extra_experts_per_gpu"], 2);
    assert_eq!(file["options"]["local_percent"], 50);
    let eval = |extra: &[&str]| {
        let mut args = vec!["eval", "--json", "--trace", &t, "--plan", out];
        args.extend(topo);
        args.extend(extra);
        let o = moeplan(&args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (v["imbalance_ratio"].as_f64().unwrap(), err)
    };
    // no flags: the recorded options (the core's Libra with the oracle, N = 2)
    let (ir, err) = eval(&[]);
    let one_node = Topology::new(1, 8).unwrap();
    let want = core_libra_by(&core_trace, one_node, 2, &Predictor::Oracle).imbalance_ratio;
    assert!(close(ir, want), "{ir} vs {want}");
    assert!(!err.contains("overrides"), "{err}");
    // the same flags repeated: the same figures, nothing overridden
    let (same, err) = eval(&["--predictor", "oracle", "--extra-experts-per-gpu", "2"]);
    assert!(close(same, ir) && !err.contains("overrides"), "{err}");
    // a flag given to eval wins, and says so
    let (other, err) = eval(&["--extra-experts-per-gpu", "6"]);
    assert!(
        err.contains("note: --extra-experts-per-gpu 6 overrides the plan file's 2"),
        "{err}"
    );
    let want6 = core_libra_by(&core_trace, one_node, 6, &Predictor::Oracle).imbalance_ratio;
    assert!(close(other, want6), "{other} vs {want6}");
    // an older file without options: the flags and defaults, said so
    let mut older = file.clone();
    older.as_object_mut().unwrap().remove("options");
    let older_path = tmp("options-older.json");
    std::fs::write(&older_path, older.to_string()).unwrap();
    let mut args = vec![
        "eval",
        "--json",
        "--trace",
        &t,
        "--plan",
        older_path.to_str().unwrap(),
    ];
    args.extend(topo);
    let o = moeplan(&args);
    assert!(String::from_utf8_lossy(&o.stderr).contains("records no planner options"));
}

/// `eval` of a Libra plan printed the bound of static plans with
/// the base's replica counts (none) — on HarMoEny's wikitext batches at
/// 1 × 16 GPUs 0.433, under Libra's own 0.777 — as "no plan with these
/// replica counts does better". A schedule's bound now counts its copies
/// batch by batch, and says so, in `eval` and in `compare`'s Libra row.
#[test]
fn a_schedules_bound_counts_its_copies_per_batch() {
    let Some(csv) = common::shared("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv") else {
        return;
    };
    let csv = csv.to_str().unwrap();
    let data = [
        "--trace",
        csv,
        "--dataset",
        "wikitext",
        "--gpus-per-node",
        "16",
    ];
    let out = tmp("bound-libra.json");
    let out = out.to_str().unwrap();
    let mut args = vec![
        "plan",
        "--algo",
        "libra",
        "--out",
        out,
        "--extra-experts-per-gpu",
        "2",
    ];
    args.extend(data);
    assert!(moeplan(&args).status.success());
    let mut args = vec!["eval", "--json", "--plan", out];
    args.extend(data);
    let libra = json_of(&args);
    let contiguous = tmp("bound-contiguous.json");
    let contiguous = contiguous.to_str().unwrap();
    let mut args = vec!["plan", "--algo", "contiguous", "--out", contiguous];
    args.extend(data);
    assert!(moeplan(&args).status.success());
    let mut args = vec!["eval", "--json", "--plan", contiguous];
    args.extend(data);
    let base = json_of(&args);
    let (bal, bound) = (
        libra["balancedness"].as_f64().unwrap(),
        libra["bound"].as_f64().unwrap(),
    );
    // what the line used to print: the static bound, under Libra's balance
    let static_bound = base["bound"].as_f64().unwrap();
    assert!(static_bound < bal, "{static_bound} vs {bal}");
    assert!(
        bound >= bal - 1e-12,
        "the schedule's bound {bound} under its {bal}"
    );
    assert_eq!(libra["bound_counts"], "copies_per_batch");
    assert!(libra["packing_bound"].is_null());
    assert_eq!(base["bound_counts"], "replicas_per_layer");
    let mut args = vec!["eval", "--plan", out];
    args.extend(data);
    let o = moeplan(&args);
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().find(|l| l.starts_with("bound")).unwrap();
    assert!(line.contains("copies counted per batch"), "{line}");
    // compare's Libra row: the same bound
    let mut args = vec!["compare", "--json", "--extra-experts-per-gpu", "2"];
    args.extend(data);
    let v = json_of(&args);
    let row = v["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "libra")
        .unwrap();
    let r = &row["report"];
    assert_eq!(r["bound_counts"], "copies_per_batch");
    assert!(r["bound"].as_f64().unwrap() >= r["balancedness"].as_f64().unwrap() - 1e-12);
}
