//! Re-planning from the plan being served: `plan --from CURRENT_PLAN`
//! writes the new plan relabelled onto the current one's GPUs (the same
//! balance as the fresh plan, fewer copies), prints what it moves, and
//! refuses a current plan for another cluster or model in one line.

mod common;

use common::{json_of, moeplan, refused, tmp};

const CLUSTER: [&str; 4] = ["--nodes", "4", "--gpus-per-node", "8"];

fn run_ok(args: &[&str]) -> String {
    let o = moeplan(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{args:?}: {err}");
    err
}

/// The copies a `from …:` line reports as numbered and relabelled.
fn copies(err: &str) -> (usize, usize) {
    let line = err.lines().find(|l| l.starts_with("from ")).unwrap();
    let mut n = line
        .split(" moves ")
        .skip(1)
        .chain(line.split("its GPUs, ").skip(1))
        .map(|s| s.split(' ').next().unwrap().parse::<usize>().unwrap());
    (n.next().unwrap(), n.next().unwrap())
}

#[test]
fn plan_from_the_current_plan_moves_less_at_the_same_balance() {
    let trace = tmp("replan", "trace.json");
    run_ok(&[
        "gen",
        "--preset",
        "deepseek-v3",
        "--batches",
        "8",
        "--out",
        trace.to_str().unwrap(),
    ]);
    let t = trace.to_str().unwrap();
    let (current, fresh, moved) = (
        tmp("replan", "current.json"),
        tmp("replan", "fresh.json"),
        tmp("replan", "moved.json"),
    );
    let eplb = ["--redundant-experts", "32", "--groups", "8"];
    let mut a = vec![
        "plan",
        "--trace",
        t,
        "--holdout",
        "0.5",
        "--out",
        current.to_str().unwrap(),
    ];
    a.extend(CLUSTER);
    a.extend(eplb);
    run_ok(&a);
    let mut b = vec!["plan", "--trace", t, "--out", fresh.to_str().unwrap()];
    b.extend(CLUSTER);
    b.extend(eplb);
    run_ok(&b);
    let mut c = b.clone();
    c[4] = moved.to_str().unwrap();
    c.extend(["--from", current.to_str().unwrap()]);
    let err = run_ok(&c);
    let (numbered, relabelled) = copies(&err);
    assert!(relabelled < numbered, "{err}");
    // relabelling keeps the fresh plan's balance and traffic exactly
    let bal = |plan: &std::path::Path| {
        let mut e = vec![
            "eval",
            "--trace",
            t,
            "--plan",
            plan.to_str().unwrap(),
            "--json",
            "--in-sample",
        ];
        e.extend(CLUSTER);
        let v = json_of(&e);
        (v["balancedness"].as_f64().unwrap(), v["traffic"].clone())
    };
    assert_eq!(bal(&fresh), bal(&moved));
    // incremental: the current plan adjusted within 20 copies, more
    // balanced than it was on the new batches
    let adjusted = tmp("replan", "adjusted.json");
    let mut e = b.clone();
    e[4] = adjusted.to_str().unwrap();
    e.extend([
        "--from",
        current.to_str().unwrap(),
        "--max-moved-experts",
        "20",
    ]);
    let err = run_ok(&e);
    let line = err.lines().find(|l| l.starts_with("incremental")).unwrap();
    let made: usize = line
        .split("planning batches, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(made <= 20, "{line}");
    assert!(bal(&adjusted).0 > bal(&current).0, "{line}");
    for bad in [
        &["--min-balancedness", "1.5"][..],
        &["--max-moved-experts", "x"][..],
    ] {
        let mut f = b.clone();
        f.extend(["--from", current.to_str().unwrap()]);
        f.extend(bad);
        assert_eq!(moeplan(&f).status.code(), Some(2), "{bad:?}");
    }
    let mut f = b.clone();
    f.extend(["--max-moved-experts", "5"]); // needs --from
    assert_eq!(moeplan(&f).status.code(), Some(2));
    // from itself: nothing moves
    let same = tmp("replan", "same.json");
    let mut d = b.clone();
    d[4] = same.to_str().unwrap();
    d.extend(["--from", fresh.to_str().unwrap()]);
    assert_eq!(copies(&run_ok(&d)), (0, 0));
}

/// A small plan: OLMoE, 2 batches, 1 × 8.
const SMALL: [&str; 9] = [
    "plan",
    "--preset",
    "olmoe",
    "--batches",
    "2",
    "--nodes",
    "1",
    "--gpus-per-node",
    "8",
];

#[test]
fn a_current_plan_that_does_not_fit_is_one_line_and_exit_2() {
    let current = tmp("replan", "small.json");
    let mut args = SMALL.to_vec();
    args.extend(["--out", current.to_str().unwrap()]);
    run_ok(&args);
    let missing = tmp("replan", "missing.json");
    for (extra, needle) in [
        // another cluster
        (
            vec!["--preset", "olmoe", "--nodes", "2", "--gpus-per-node", "4"],
            "cluster",
        ),
        // another model: 64 experts against 128
        (
            vec![
                "--preset",
                "qwen3-30b-a3b",
                "--nodes",
                "1",
                "--gpus-per-node",
                "8",
            ],
            "expert",
        ),
    ] {
        let mut args = vec!["plan", "--batches", "2", "--out"];
        let out = tmp("replan", "x.json");
        args.push(out.to_str().unwrap());
        args.extend(extra);
        args.extend(["--from", current.to_str().unwrap()]);
        refused(&args, needle);
    }
    let y = tmp("replan", "y.json");
    let mut args = SMALL.to_vec();
    args.extend([
        "--out",
        y.to_str().unwrap(),
        "--from",
        missing.to_str().unwrap(),
    ]);
    refused(&args, "missing.json");
}

/// `replay`: a sweep over K and W in JSON, every run serving the same
/// batches; bad knobs one line and exit 2.
#[test]
fn replay_sweeps_and_refuses_bad_knobs() {
    let base = [
        "replay",
        "--preset",
        "olmoe",
        "--batches",
        "24",
        "--nodes",
        "1",
        "--gpus-per-node",
        "8",
    ];
    let mut a = base.to_vec();
    a.extend([
        "--every",
        "4,8",
        "--window",
        "2,4",
        "--hardware",
        "h100-ib-ndr",
        "--with-libra",
        "--json",
    ]);
    let v = json_of(&a);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    // Libra once per window, on the first K's runs
    let with_libra = runs
        .iter()
        .filter(|r| r["report"]["libra"]["total_us"].as_f64().is_some())
        .count();
    assert_eq!(with_libra, 2);
    for r in runs {
        assert_eq!(r["report"]["first_served"], 4, "{r}");
        assert_eq!(r["report"]["served_batches"], 20);
        assert!(r["report"]["total_us"][0].as_f64().unwrap() > 0.0);
    }
    let mut one = base.to_vec();
    one.extend(["--every", "4", "--window", "4"]);
    let text = String::from_utf8(moeplan(&one).stdout).unwrap();
    assert!(
        text.contains("re-plans") && text.contains("batch 20:"),
        "{text}"
    );
    for (extra, needle) in [
        (&["--every", "0"][..], "at least one batch"),
        (&["--window", "30"][..], "leaves none"),
        (&["--max-moved-experts", "4"][..], "--migrate incremental"),
        (&["--replan-below", "2"][..], "between 0 and 1"),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        refused(&args, needle);
    }
}

/// `replay` with several `--trace` serves them one after another (the
/// batches of the first, then the second's), and with `--hardware A,B`
/// names the best setting on each machine; traces of other shapes and an
/// empty machine name are refused in one line.
#[test]
fn replay_serves_traces_in_turn_and_finds_the_best_setting_per_machine() {
    let generated = |preset: &str, seed: &str, batches: &str, name: &str| {
        let out = tmp("replan", name);
        let o = moeplan(&[
            "gen",
            "--preset",
            preset,
            "--batches",
            batches,
            "--seed",
            seed,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let (a, b) = (
        generated("olmoe", "1", "10", "turn_a.json"),
        generated("olmoe", "2", "14", "turn_b.json"),
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let mut args = vec!["replay", "--trace", a, "--trace", b, "--nodes", "1"];
    args.extend([
        "--gpus-per-node",
        "8",
        "--every",
        "2,4",
        "--window",
        "4",
        "--hardware",
        "h100-ib-ndr,4090-pcie4-25gbe",
        "--json",
    ]);
    let v = json_of(&args);
    assert_eq!(v["batches"], 24, "10 then 14 batches");
    assert_eq!(v["traces"].as_array().unwrap().len(), 2);
    assert_eq!(v["hardware"][1], "4090-pcie4-25gbe");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "2 intervals × 2 machines");
    let best = v["best"].as_array().unwrap();
    assert_eq!(best.len(), 2);
    for (i, hw) in ["h100-ib-ndr", "4090-pcie4-25gbe"].iter().enumerate() {
        // the best is the fastest of that machine's runs
        let fastest = runs
            .iter()
            .filter(|r| r["hardware"] == *hw)
            .map(|r| r["report"]["total_us"][0].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert_eq!(best[i]["hardware"], *hw);
        assert_eq!(best[i]["total_us"].as_f64().unwrap(), fastest);
    }
    // the same machine is slower over PCIe and Ethernet
    assert!(best[1]["never_us"].as_f64().unwrap() > best[0]["never_us"].as_f64().unwrap());
    // the table names what is served, in turn
    let text = String::from_utf8(
        moeplan(&[
            "replay",
            "--trace",
            a,
            "--trace",
            b,
            "--nodes",
            "1",
            "--gpus-per-node",
            "8",
        ])
        .stdout,
    )
    .unwrap();
    assert!(text.contains(", then "), "{text}");
    let other = generated("deepseek-v2-lite", "1", "4", "turn_c.json");
    refused(
        &[
            "replay",
            "--trace",
            a,
            "--trace",
            other.to_str().unwrap(),
            "--every",
            "2",
            "--window",
            "2",
        ],
        "same MoE layers and experts",
    );
    refused(
        &[
            "replay",
            "--trace",
            a,
            "--every",
            "2",
            "--window",
            "2",
            "--hardware",
            "h100-ib-ndr,",
        ],
        "empty machine",
    );
}

/// A multi-dataset CSV given twice with `--dataset a,b` is dataset a, then
/// dataset b; a list of another length is refused in one line.
#[test]
fn replay_takes_one_dataset_per_trace() {
    let mut csv = String::from(",dataset,iteration,layer_idx,0,1,2,3\n");
    let mut row = 0;
    for (ds, hot) in [("a", 0), ("b", 3)] {
        for it in 0..6 {
            for layer in 0..2 {
                let mut c = [10; 4];
                c[hot] = 70;
                csv += &format!(
                    "{row},{ds},{it},{layer},{},{},{},{}\n",
                    c[0], c[1], c[2], c[3]
                );
                row += 1;
            }
        }
    }
    let file = tmp("replan", "two_datasets.csv");
    std::fs::write(&file, csv).unwrap();
    let f = file.to_str().unwrap();
    let base = [
        "replay",
        "--trace",
        f,
        "--trace",
        f,
        "--nodes",
        "1",
        "--gpus-per-node",
        "2",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--dataset",
        "a,b",
        "--every",
        "2",
        "--window",
        "2",
        "--json",
    ]);
    let v = json_of(&args);
    assert_eq!(v["batches"], 12, "a's 6 batches, then b's");
    let traces = v["traces"].as_array().unwrap();
    assert!(
        traces[0].as_str().unwrap().ends_with("(a)")
            && traces[1].as_str().unwrap().ends_with("(b)")
    );
    // the first plan (made on a) loses balance once b's batches arrive;
    // re-planning every 2 batches follows the shift
    let r = &v["runs"][0]["report"];
    assert!(r["balancedness"].as_f64().unwrap() > r["static_balancedness"].as_f64().unwrap());
    let mut bad = base.to_vec();
    bad.extend(["--dataset", "a,b,c", "--every", "2", "--window", "2"]);
    refused(&bad, "one per trace");
}

/// A generated OLMoE trace of 24 batches of 4,096 tokens (top-8), for the
/// engine tests.
fn engine_trace() -> String {
    let t = tmp("replan-engine", "olmoe24.json");
    let p = t.to_str().unwrap().to_string();
    run_ok(&[
        "gen",
        "--preset",
        "olmoe",
        "--batches",
        "24",
        "--seed",
        "3",
        "--out",
        &p,
    ]);
    p
}

/// `replay` of `trace` on 2 × 4 GPUs with `--engine engine`.
fn engine_args<'a>(trace: &'a str, engine: &'a str) -> Vec<&'a str> {
    let cluster = ["--nodes", "2", "--gpus-per-node", "4"];
    let mut args = vec!["replay", "--trace", trace];
    args.extend(cluster);
    args.extend(["--engine", engine]);
    args
}

/// `--engine sglang`: a setting SGLang refuses (interval below the window)
/// exits 2 with one line naming its rule; an accepted one reports K and W
/// in forward passes and tokens and prints SGLang's own flags.
#[test]
fn replay_in_sglangs_knobs() {
    let t = engine_trace();
    let base = engine_args(&t, "sglang");
    let mut bad = base.to_vec();
    bad.extend(["--every", "1", "--window", "16"]);
    refused(
        &bad,
        "--eplb-rebalance-num-iterations 1 below --expert-distribution-recorder-buffer-size 16",
    );
    // --tokens-per-pass 1024 on 4,096-token batches: 8 passes are 2 batches;
    // the window, not given, is SGLang's: the interval.
    let mut ok = base.to_vec();
    ok.extend([
        "--every",
        "8,16",
        "--tokens-per-pass",
        "1024",
        "--hardware",
        "h100-ib-ndr",
    ]);
    let o = moeplan(&ok);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "K = 8 passes (8192 tokens) = 2 batches, W = 8 passes (8192 tokens) = 2 batches"
        ),
        "{text}"
    );
    let flags = text
        .lines()
        .skip_while(|l| !l.starts_with("SGLang flags"))
        .nth(1)
        .unwrap_or_else(|| panic!("no SGLang flags line: {text}"));
    assert!(
        flags.trim().starts_with(
            "--enable-eplb --ep-num-redundant-experts 8 --eplb-rebalance-num-iterations "
        ),
        "{flags}"
    );
    ok.push("--json");
    let v = json_of(&ok);
    let e = &v["engine"];
    assert_eq!(e["name"], "sglang");
    assert_eq!(
        e["settings"][0],
        serde_json::json!({"every_passes": 8, "window_passes": 8, "every": 2, "window": 2})
    );
    assert_eq!(e["settings"][1]["every"], 4);
    // the move is SGLang's own: a fresh plan
    assert_eq!(v["migrate"], "fresh");
    let k = e["best"]["every_passes"].as_u64().unwrap();
    assert!(
        e["best"]["flags"]
            .as_str()
            .unwrap()
            .contains(&format!("--eplb-rebalance-num-iterations {k} "))
    );
}

/// `--engine vllm`: vLLM asserts no order between its interval and window,
/// so K below W is served; the answer is its `--eplb-config`.
#[test]
fn replay_in_vllms_knobs() {
    let t = engine_trace();
    let run = |extra: &[&str]| {
        let mut a = engine_args(&t, "vllm");
        a.extend(["--every", "4", "--window", "8", "--json"]);
        a.extend(extra);
        json_of(&a)
    };
    let v = run(&[]);
    let flags = v["engine"]["best"]["flags"].as_str().unwrap();
    assert_eq!(
        flags,
        r#"--enable-eplb --eplb-config '{"window_size":8,"step_interval":4,"num_redundant_experts":8}'"#
    );
    // use_async: the move on a side stream, paused for only where serving
    // does not cover it, never more than the move that stops serving
    // The replay's modelled MoE time (priced on h100-ib-ndr), not a
    // measured one: the same on every machine.
    let priced = |extra: &[&str]| {
        let mut a = vec!["--hardware", "h100-ib-ndr"];
        a.extend(extra);
        run(&a)
    };
    let (paused, hidden) = (priced(&[]), priced(&["--async-move"]));
    assert_eq!(paused["engine"]["transfer"], "pause");
    assert_eq!(hidden["engine"]["transfer"], "peer-in-background");
    assert!(
        hidden["engine"]["best"]["flags"]
            .as_str()
            .unwrap()
            .contains(r#""use_async":true"#)
    );
    let total = |v: &serde_json::Value| v["runs"][0]["report"]["total_us"][0].as_f64().unwrap();
    assert!(
        total(&hidden) <= total(&paused),
        "{} > {}",
        total(&hidden),
        total(&paused)
    );
    refused(
        &[
            "replay",
            "--trace",
            &t,
            "--engine",
            "sglang",
            "--async-move",
        ],
        "SGLang has no asynchronous move",
    );
    // --engine re-plans with the engines' EPLB only
    refused(
        &[
            "replay", "--trace", &t, "--engine", "vllm", "--algo", "craft",
        ],
        "vLLM re-plans with its EPLB",
    );
}

/// `--engine vllm-ascend`: the cycle is heat collection (W) + the
/// planner's wait + one pass per MoE layer (OLMoE: 16), so K below
/// W + 17 is refused; its defaults (600, 50) at 64 tokens a pass are 9 and
/// 10 batches of 4,096 tokens, and the answer is its eplb_config.
#[test]
fn replay_in_vllm_ascends_knobs() {
    let t = engine_trace();
    let base = engine_args(&t, "vllm-ascend");
    let mut bad = base.to_vec();
    bad.extend(["--every", "610", "--window", "600"]);
    refused(
        &bad,
        "vllm-ascend's cycle is its heat collection (600 passes)",
    );
    let mut ok = base.to_vec();
    ok.extend(["--tokens-per-pass", "64", "--json"]);
    let v = json_of(&ok);
    let e = &v["engine"];
    assert_eq!(
        e["settings"][0],
        serde_json::json!({"every_passes": 666, "window_passes": 600, "every": 10, "window": 9})
    );
    let flags = e["best"]["flags"].as_str().unwrap();
    assert!(
        flags
            .contains(r#""expert_heat_collection_interval":600,"algorithm_execution_interval":50"#),
        "{flags}"
    );
}

/// `--engine trtllm`: a layer re-plans every ⌈L / layer_updates_per_iter⌉
/// passes (OLMoE's 16 layers one a pass: 16 groups, equal, so 17 passes),
/// so an interval no setting gives is refused with the nearest; its
/// statistics decay (no window to set, modelled as 20 passes) and it has
/// no skip threshold; the answer is its load balancer's YAML, and its
/// move comes from host memory in the background.
#[test]
fn replay_in_tensorrt_llms_knobs() {
    let t = engine_trace();
    let base = engine_args(&t, "trtllm");
    let mut bad = base.to_vec();
    bad.extend(["--every", "10"]);
    refused(&bad, "no setting gives K = 10; the nearest are 9, 6, 5");
    let mut bad = base.to_vec();
    bad.extend(["--window", "30"]);
    refused(&bad, "TensorRT-LLM keeps no window to set");
    let mut bad = base.to_vec();
    bad.extend(["--replan-below", "0.9"]);
    refused(&bad, "TensorRT-LLM has no skip threshold");
    let mut ok = base.to_vec();
    ok.extend([
        "--every",
        "17,9",
        "--tokens-per-pass",
        "1024",
        "--hardware",
        "h100-ib-ndr",
        "--json",
    ]);
    let v = json_of(&ok);
    let e = &v["engine"];
    assert_eq!(e["transfer"], "host-in-background");
    // 17 passes of 1,024 tokens on 4,096-token batches: 4 batches; W 20: 5
    assert_eq!(
        e["settings"][0],
        serde_json::json!({"every_passes": 17, "window_passes": 20, "every": 4, "window": 5})
    );
    let flags = e["best"]["flags"].as_str().unwrap();
    let k = e["best"]["every_passes"].as_u64().unwrap();
    let u = if k == 17 { 1 } else { 2 };
    assert!(
        flags.contains(&format!(
            "load_balancer: {{num_slots: 72, layer_updates_per_iter: {u}}}"
        )),
        "{flags}"
    );
    assert_eq!(v["migrate"], "fresh");
}

/// `--migrate stair`: only layers below the gate move, toward the
/// relabelled plan under a per-GPU-pair cap, so it moves no more copies
/// than relabelling; with no layer below its gate it moves none; its
/// knobs without it, or out of range, are one line and exit 2.
#[test]
fn replay_with_the_stair_like_re_plan() {
    let t = engine_trace();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "replay",
            "--trace",
            &t,
            "--nodes",
            "2",
            "--gpus-per-node",
            "4",
            "--every",
            "4",
            "--window",
            "4",
            "--json",
        ];
        a.extend(extra);
        let v = json_of(&a);
        let r = &v["runs"][0]["report"];
        (
            r["copies_moved"].as_u64().unwrap(),
            r["balancedness"].as_f64().unwrap(),
            v["migrate"].as_str().unwrap().to_string(),
        )
    };
    let (relabelled, _, _) = run(&["--migrate", "relabel"]);
    let (stair, b, name) = run(&["--migrate", "stair", "--layer-gate", "0.99"]);
    assert_eq!(name, "stair");
    assert!(
        stair > 0 && stair <= relabelled,
        "{stair} against {relabelled}"
    );
    assert!(b > 0.0);
    let (capped, _, _) = run(&[
        "--migrate",
        "stair",
        "--layer-gate",
        "0.99",
        "--max-per-pair",
        "1",
    ]);
    assert!(capped <= stair, "{capped} against {stair}");
    let (none, _, _) = run(&["--migrate", "stair", "--layer-gate", "0"]);
    assert_eq!(none, 0);
    refused(
        &["replay", "--trace", &t, "--layer-gate", "0.9"],
        "add --migrate stair",
    );
    refused(
        &[
            "replay",
            "--trace",
            &t,
            "--migrate",
            "stair",
            "--max-per-pair",
            "0",
        ],
        "--max-per-pair at least 1",
    );
}
