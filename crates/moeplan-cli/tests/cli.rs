//! The `moeplan` binary end to end: the happy path, and every kind of bad
//! input giving one clear line on stderr and exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn moeplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_moeplan"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("moeplan-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn write(name: &str, content: &str) -> String {
    let p = tmp(name);
    std::fs::write(&p, content).unwrap();
    p.to_string_lossy().into_owned()
}

fn shared(rel: &str) -> Option<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    if p.exists() {
        Some(p.to_string_lossy().into_owned())
    } else {
        // CI always has the data: there a missing folder is a failure.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but {rel} is not beside the repository"
        );
        eprintln!("SKIP: {rel} not found beside the repository");
        None
    }
}

/// `moeplan plan` on `trace` for 1 node × 64 GPUs with `extra` settings,
/// written to `out`; asserts it succeeded.
fn plan_on_64(trace: &str, extra: &[&str], out: &str) {
    let mut args = vec![
        "plan",
        "--trace",
        trace,
        "--nodes",
        "1",
        "--gpus-per-node",
        "64",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    let o = moeplan(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs `args`, expects exit code 2 and exactly one stderr line containing
/// `needle`, and no panic.
fn check_fails(args: &[&str], needle: &str) {
    check_failed(moeplan(args), args, needle);
}

/// Asserts `out` is one `moeplan: error:` line mentioning `needle`, exit 2.
fn check_failed(out: Output, args: &[&str], needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?} → {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("no --trace given"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?} should print one line, got: {stderr}"
    );
    assert!(
        lines[0].to_lowercase().contains(&needle.to_lowercase()),
        "{args:?}: {:?} does not mention {needle:?}",
        lines[0]
    );
}

#[test]
fn bad_inputs_exit_2_with_one_line() {
    let ragged = write("ragged.json", r#"{"logical_count": [[1, 2, 3], [4, 5]]}"#);
    let negative = write("negative.json", r#"{"logical_count": [[1, -2, 3, 4]]}"#);
    let nan_csv = write("nan.csv", "dataset,iteration,layer_idx,0,1\na,0,0,NaN,1\n");
    let truncated = write("truncated.json", r#"{"logical_count": [[1, 2], [3,"#);
    let zeros = write("zeros.json", r#"{"logical_count": [[0, 0], [0, 0]]}"#);
    let strings = write("strings.json", r#"{"logical_count": [[1, "x"]]}"#);
    let empty = write("empty.json", "");
    let not_a_trace = write("weird.json", r#"{"hello": 1}"#);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["inspect", "--trace", "/nonexistent/trace.json"],
            "cannot read",
        ),
        (vec!["inspect", "--trace", &ragged], "ragged"),
        (vec!["inspect", "--trace", &negative], "non-negative"),
        (vec!["inspect", "--trace", &nan_csv], "finite"),
        (vec!["inspect", "--trace", &truncated], "EOF"),
        (vec!["inspect", "--trace", &zeros], "zero"),
        (vec!["inspect", "--trace", &strings], "expected a number"),
        (vec!["inspect", "--trace", &empty], "empty"),
        (vec!["inspect", "--trace", &not_a_trace], "logical_count"),
        (vec!["inspect", "--preset", "gpt-5"], "unknown model preset"),
        (vec!["inspect", "--batches", "0"], "batches"),
        (
            vec!["inspect", "/some/trace.json"],
            "--trace /some/trace.json",
        ),
        (
            vec!["plan", "--gpus-per-node", "0", "--out", "/dev/null"],
            "GPU",
        ),
        (
            vec!["plan", "--redundant-experts", "3", "--out", "/dev/null"],
            "multiple of the GPU count",
        ),
        (
            vec!["plan", "--groups", "3", "--out", "/dev/null"],
            "groups",
        ),
        (
            vec!["plan", "--holdout", "1.5", "--out", "/dev/null"],
            "between 0 and 1",
        ),
        (
            vec![
                "plan",
                "--algo",
                "contiguous",
                "--gpus-per-node",
                "24",
                "--format",
                "sglang",
                "--no-pad",
                "--out",
                "/dev/null",
            ],
            "cannot express",
        ),
        (
            vec!["plan", "--out", "/nonexistent/dir/plan.json"],
            "cannot write",
        ),
        (
            vec!["eval", "--plan", "/nonexistent/plan.json"],
            "cannot read",
        ),
        (vec!["eval", "--plan", &ragged], "layers"),
        (
            vec![
                "plan",
                "--algo",
                "craft",
                "--replicas-per-gpu",
                "lots",
                "--out",
                "/dev/null",
            ],
            "auto",
        ),
        (
            vec!["plan", "--algo", "nonsense", "--out", "/dev/null"],
            "invalid value",
        ),
        (vec!["frobnicate"], "unrecognized subcommand"),
        (
            vec!["sweep", "--model", "gpt-5", "--batches", "2"],
            "unknown model preset",
        ),
        (
            vec!["sweep", "--holdout", "0.5", "--batches", "1"],
            "at least 2 batches",
        ),
    ];
    for (args, needle) in cases {
        check_fails(&args, needle);
    }
}

#[test]
fn plan_for_another_trace_is_refused() {
    let plan = tmp("v3-plan.json");
    let plan = plan.to_str().unwrap();
    let out = moeplan(&["plan", "--batches", "4", "--out", plan]);
    assert!(out.status.success());
    check_fails(
        &[
            "eval",
            "--preset",
            "olmoe",
            "--batches",
            "4",
            "--plan",
            plan,
        ],
        "does not match",
    );
}

#[test]
fn gen_plan_eval_round_trip() {
    let trace = tmp("trace.json");
    let plan = tmp("plan.json");
    let (trace, plan) = (trace.to_str().unwrap(), plan.to_str().unwrap());
    let out = moeplan(&[
        "gen",
        "--preset",
        "olmoe",
        "--batches",
        "8",
        "--seed",
        "3",
        "--out",
        trace,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = moeplan(&[
        "plan",
        "--trace",
        trace,
        "--algo",
        "eplb",
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--redundant-experts",
        "8",
        "--holdout",
        "0.25",
        "--out",
        plan,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = moeplan(&["eval", "--trace", trace, "--plan", plan, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bal = v["balancedness"].as_f64().unwrap();
    assert!(bal > 0.0 && bal <= 1.0);
    assert!(v["imbalance_ratio"].as_f64().unwrap() >= 1.0);
    assert_eq!(v["replicas"], 16 * 8);
    assert_eq!(v["slots_per_gpu_max"], 16 * 9);
    assert_eq!(v["per_layer"].as_array().unwrap().len(), 16);
    // both bounds, the packing-aware one never looser, neither below the plan
    let (bound, packing) = (
        v["bound"].as_f64().unwrap(),
        v["packing_bound"].as_f64().unwrap(),
    );
    assert!(
        packing <= bound + 1e-9 && bal <= packing + 1e-12,
        "{bal} {packing} {bound}"
    );
    assert_eq!(v["per_layer_packing_bound"].as_array().unwrap().len(), 16);
    // the plan recorded its holdout, so eval judged only the unseen batches
    assert_eq!(v["batches"], 2);
    assert!(v["scope"].as_str().unwrap().starts_with("held-out"));
    let out = moeplan(&[
        "eval",
        "--trace",
        trace,
        "--plan",
        plan,
        "--json",
        "--in-sample",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["batches"], 8);
}

#[test]
fn sglang_export_has_a_row_per_model_layer() {
    let Some(trace) = shared("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let out_path = tmp("sglang.json");
    let out_path = out_path.to_str().unwrap();
    plan_on_64(
        &trace,
        &["--redundant-experts", "64", "--format", "sglang"],
        out_path,
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_path).unwrap()).unwrap();
    let obj = v.as_object().unwrap();
    assert_eq!(
        obj.keys().collect::<Vec<_>>(),
        vec!["physical_to_logical_map"]
    );
    let rows = v["physical_to_logical_map"].as_array().unwrap();
    assert_eq!(rows.len(), 61);
    assert!(rows.iter().all(|r| r.as_array().unwrap().len() == 320));
}

#[test]
fn eval_on_real_trace_reports_reference_balancedness() {
    let Some(trace) = shared("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let plan = tmp("real-plan.json");
    let plan = plan.to_str().unwrap();
    plan_on_64(
        &trace,
        &[
            "--algo",
            "eplb",
            "--groups",
            "1",
            "--redundant-experts",
            "0",
        ],
        plan,
    );
    let out = moeplan(&["eval", "--trace", &trace, "--plan", plan, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bal = v["balancedness"].as_f64().unwrap();
    assert!((bal - 0.517).abs() < 0.0005, "{bal}");
}

#[test]
fn craft_plan_and_sweep() {
    let plan = tmp("craft-plan.json");
    let plan = plan.to_str().unwrap();
    let common = [
        "--preset",
        "olmoe",
        "--batches",
        "8",
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
    ];
    let mut args = vec![
        "plan",
        "--algo",
        "craft",
        "--replicas-per-gpu",
        "2",
        "--out",
        plan,
    ];
    args.extend(common);
    let out = moeplan(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = moeplan(&[
        "eval",
        "--preset",
        "olmoe",
        "--batches",
        "8",
        "--plan",
        plan,
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["replicas"].as_u64().unwrap() <= 16);
    assert_eq!(v["slots_per_gpu_max"], v["slots_per_gpu_min"]);
    assert_eq!(v["same_gpu_duplicates"], 0);
    assert!(v["bound"].as_f64().unwrap() >= v["balancedness"].as_f64().unwrap());

    let mut args = vec!["sweep", "--json", "--holdout", "0.25"];
    args.extend(common);
    let out = moeplan(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let methods: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert_eq!(methods.first(), Some(&"base"));
    assert!(methods.contains(&"craft") && methods.contains(&"eplb"));
    assert!(v["expert_bytes"].as_u64().unwrap() > 0);
    assert!(v["scope"].as_str().unwrap().starts_with("held-out"));
}

#[test]
fn help_is_not_an_error() {
    let out = moeplan(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sweep"));
}

/// `moeplan inspect` on every file of the core's broken-input folder, as an
/// attacker's file would arrive: under a 2 GiB address-space limit and a
/// 20 s deadline, exit 2 and one line naming the problem — never an abort,
/// a stack overflow or an out-of-memory kill.
#[test]
fn inspect_every_broken_input() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../moeplan/tests/fixtures/broken");
    let manifest = std::fs::read_to_string(dir.join("EXPECTED")).unwrap();
    let mut listed = std::collections::BTreeSet::new();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (file, needle) = line.split_once('\t').unwrap();
        listed.insert(file.to_string());
        let path = dir.join(file);
        let args = ["inspect", "--trace", path.to_str().unwrap()];
        let out = Command::new("sh")
            .args(["-c", "ulimit -v 2097152 && exec timeout 20 \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_moeplan"))
            .args(args)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(124), "{file}: over 20 s");
        check_failed(out, &args, needle);
    }
    // Every fixture has its expected error, and every expectation its file.
    let present: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "EXPECTED")
        .collect();
    assert_eq!(present, listed, "fixtures and EXPECTED disagree");
}

#[test]
fn oversized_trace_is_refused_before_reading() {
    let big = tmp("big.json");
    std::fs::write(&big, vec![b' '; 2 << 20]).unwrap();
    check_fails(
        &[
            "inspect",
            "--trace",
            big.to_str().unwrap(),
            "--max-trace-mib",
            "1",
        ],
        "limit",
    );
}

#[test]
fn engine_formats_need_equal_slots_or_pad() {
    let out = tmp("craft-vllm.json");
    let out = out.to_str().unwrap();
    let base = [
        "plan",
        "--algo",
        "craft",
        "--replicas-per-gpu",
        "2",
        "--preset",
        "olmoe",
        "--batches",
        "4",
        "--gpus-per-node",
        "8",
        "--out",
        out,
    ];
    let mut args = base.to_vec();
    args.extend(["--format", "vllm", "--no-pad"]);
    check_fails(&args, "--no-pad");
    args.pop();
    // Padded by default, and said so.
    let o = moeplan(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("padded to"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: Vec<Vec<u32>> = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(rows.len(), 16);
    assert!(
        rows.iter()
            .all(|r| r.len() == rows[0].len() && r.len() % 8 == 0)
    );
    for format in ["vllm-ascend", "csv"] {
        let mut args = base.to_vec();
        args.extend(["--format", format]);
        let o = moeplan(&args);
        assert!(
            o.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn folder_of_rank_csvs_is_summed() {
    let dir = tmp("ranks");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("rank0.csv"),
        "layer_id,expert_id,count\n3,0,5\n3,1,2\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("rank1.csv"),
        "layer_id,expert_id,count\n3,1,4\n4,1,1\n",
    )
    .unwrap();
    let out = moeplan(&["inspect", "--trace", dir.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total_tokens"], 12.0);
    assert_eq!(v["layers"].as_array().unwrap().len(), 2);
}

/// A `[58][256]` float64 `.npy` of DeepSeek-V3's MoE rows only (no dense
/// layers), as `np.save` writes it.
fn moe_only_npy(name: &str) -> String {
    let (l, e) = (58usize, 256usize);
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({l}, {e}), }}");
    header.push_str(&" ".repeat((64 - (10 + header.len() + 1) % 64) % 64));
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for i in 0..l * e {
        bytes.extend((1.0 + ((i * 7919) % 1000) as f64).to_le_bytes());
    }
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

/// `moeplan plan` of a MoE-rows-only trace on 1 × 8 GPUs, EPLB +8, to
/// `out`, with `extra` arguments.
fn moe_only_plan<'a>(npy: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "plan",
        "--trace",
        npy,
        "--gpus-per-node",
        "8",
        "--redundant-experts",
        "8",
        "--out",
        out,
    ];
    a.extend_from_slice(extra);
    a
}

#[test]
fn sglang_export_needs_the_models_layer_count() {
    let npy = moe_only_npy("moe-only.npy");
    let out = tmp("moe-only-sglang.json");
    let out = out.to_str().unwrap();
    let with = |extra: &[&'static str]| moe_only_plan(&npy, out, extra);
    // a short file would load silently in SGLang and misalign every layer
    check_fails(&with(&["--format", "sglang"]), "--model deepseek-v3");
    // (the ids 0..57 may be the model's own: then it has 58 layers; 61
    // would leave the dense layers' place unknown, refused below)
    check_fails(&with(&["--format", "sglang"]), "--model-layers 58");
    // a layer count alone cannot say which layers are dense
    check_fails(
        &with(&["--format", "sglang", "--model-layers", "61"]),
        "--model",
    );
    check_fails(
        &with(&["--format", "sglang", "--model", "qwen3-30b-a3b"]),
        "experts",
    );
    // the preset places MoE rows 0..57 at model layers 3..60
    let o = moeplan(&with(&["--format", "sglang", "--model", "deepseek-v3"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("model layers 3..60"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let rows = v["physical_to_logical_map"].as_array().unwrap();
    assert_eq!(rows.len(), 61);
    let plan_out = tmp("moe-only-plan.json");
    let plan_out = plan_out.to_str().unwrap();
    let mut a = with(&["--model", "deepseek-v3"]);
    let i = a.iter().position(|x| *x == out).unwrap();
    a[i] = plan_out;
    let o = moeplan(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plan_out).unwrap()).unwrap();
    assert_eq!(plan["model_layers"], 61);
    for layer in plan["layers"].as_array().unwrap() {
        let id = layer["layer"].as_u64().unwrap() as usize;
        let flat: Vec<serde_json::Value> = layer["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g.as_array().unwrap().clone())
            .collect();
        assert_eq!(rows[id].as_array().unwrap(), &flat, "layer {id}");
    }
    assert_eq!(plan["layers"][0]["layer"], 3);
}

#[test]
fn vllm_ascend_export_holds_each_expert_once_per_device() {
    let Some(trace) = shared("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let out = tmp("ascend.json");
    let out = out.to_str().unwrap();
    let o = moeplan(&[
        "plan",
        "--trace",
        &trace,
        "--gpus-per-node",
        "64",
        "--redundant-experts",
        "64",
        "--format",
        "vllm-ascend",
        "--out",
        out,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(v["moe_layer_count"], 58);
    for layer in v["layer_list"].as_array().unwrap() {
        for dev in layer["device_list"].as_array().unwrap() {
            let mut e: Vec<u64> = dev["device_expert"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(e.len(), 5);
            e.sort_unstable();
            e.dedup();
            assert_eq!(e.len(), 5, "a device holds an expert twice");
        }
    }
    // and the repair is reported
    assert!(String::from_utf8_lossy(&o.stderr).contains("moved 29 second copies"));
}

/// A plan made with `--model` from a trace that holds only its MoE layers
/// names model layers; `eval` on the same file places the trace the way the
/// plan records and judges it (it used to report a layer mismatch).
#[test]
fn eval_places_a_trace_like_the_plan_made_from_it() {
    // 26 MoE layers of DeepSeek-V2-Lite, numbered 0..25, no model layer count
    let rows: Vec<String> = (0..26)
        .map(|l| {
            let row: Vec<String> = (0..64)
                .map(|e| ((e * 7 + l) % 13 + 1).to_string())
                .collect();
            format!("[{}]", row.join(","))
        })
        .collect();
    let trace = write(
        "v2lite-moe-only.json",
        &format!(
            r#"{{"format": "moeplan.trace", "version": 1, "counts": [[{}]]}}"#,
            rows.join(",")
        ),
    );
    let plan = tmp("v2lite-plan.json");
    let plan = plan.to_str().unwrap();
    let out = moeplan(&[
        "plan",
        "--trace",
        &trace,
        "--model",
        "deepseek-v2-lite",
        "--algo",
        "eplb",
        "--gpus-per-node",
        "8",
        "--out",
        plan,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(plan).unwrap();
    assert!(
        text.contains(r#""layer":1,"#),
        "model layer ids: {text:.200}"
    );
    let out = moeplan(&["eval", "--trace", &trace, "--plan", plan, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["layer_ids"][0], 1);
}

/// Runs `args`, asserts success, and parses stdout as JSON.
fn json_of(args: &[&str]) -> serde_json::Value {
    let out = moeplan(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs `args`, asserts success, and returns stdout.
fn text_of(args: &[&str]) -> String {
    let out = moeplan(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A generated OLMoE trace of 4 batches written to `name`.
fn olmoe_trace(name: &str) -> String {
    let p = tmp(name);
    let p = p.to_str().unwrap().to_string();
    text_of(&["gen", "--preset", "olmoe", "--batches", "4", "--out", &p]);
    p
}

const RULES: [&str; 8] = [
    "even",
    "vllm",
    "sglang-static",
    "sglang-static-same-gpu",
    "sglang-dynamic",
    "sglang-dynamic-uniform",
    "local-first",
    "optimal",
];

#[test]
fn dispatch_rules_in_eval_json() {
    let trace = olmoe_trace("dispatch-trace.json");
    let plan = tmp("dispatch-plan.json");
    let plan = plan.to_str().unwrap();
    text_of(&[
        "plan",
        "--trace",
        &trace,
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--redundant-experts",
        "8",
        "--out",
        plan,
    ]);
    let eval = |extra: &[&str]| {
        let mut a = vec!["eval", "--trace", &trace, "--plan", plan, "--json"];
        a.extend_from_slice(extra);
        json_of(&a)
    };
    let old = eval(&[]);
    let even = eval(&["--dispatch", "even"]);
    // the default is `even`, and `even` is today's replay to the bit
    assert_eq!(old, even);
    assert_eq!(even["dispatch"], "even");
    assert_eq!(even["sources"], "even arrival (assumed)");
    let pairs = json_of(&["inspect", "--trace", &trace, "--json"])["total_tokens"]
        .as_f64()
        .unwrap();
    let mut bal = Vec::new();
    for rule in RULES {
        let v = eval(&["--dispatch", rule]);
        assert_eq!(v["dispatch"], rule);
        let t = v["traffic"].as_object().unwrap();
        let mut keys: Vec<&str> = t.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "cross_node",
                "cross_node_bytes",
                "intra_node",
                "local",
                "max_gpu_ingress",
                "messages"
            ]
        );
        // counts only: which pairs share a token is unknown
        assert!(t["messages"].is_null(), "{rule}");
        let sum = ["local", "intra_node", "cross_node"]
            .iter()
            .map(|k| t[*k].as_f64().unwrap())
            .sum::<f64>();
        assert!(
            (sum - pairs).abs() <= 1e-6 * pairs,
            "{rule}: {sum} vs {pairs}"
        );
        assert!(t["cross_node"].as_f64().unwrap() > 0.0, "{rule}");
        assert_eq!(v["per_batch_imbalance_ratio"].as_array().unwrap().len(), 4);
        // the bound is today's (even split, per replica count)
        assert_eq!(v["bound"], even["bound"]);
        bal.push((rule, v["balancedness"].as_f64().unwrap()));
    }
    let optimal = bal.last().unwrap().1;
    for (rule, b) in &bal {
        assert!(optimal >= b - 1e-12, "optimal {optimal} < {rule} {b}");
    }
    // the traffic in words, in the table
    let text = text_of(&[
        "eval",
        "--trace",
        &trace,
        "--plan",
        plan,
        "--dispatch",
        "local-first",
    ]);
    assert!(text.contains("local-first"), "{text}");
    assert!(text.contains("cross-node"), "{text}");
    assert!(text.contains("olmoe"), "the bytes' model is said: {text}");
}

#[test]
fn every_command_takes_dispatch() {
    let common = ["--preset", "olmoe", "--batches", "4", "--nodes", "2"];
    let common: Vec<&str> = common.into_iter().chain(["--gpus-per-node", "4"]).collect();
    for rule in ["sglang-static", "optimal"] {
        let mut a = vec!["compare", "--json", "--dispatch", rule];
        a.extend(&common);
        let v = json_of(&a);
        assert_eq!(v["dispatch"], rule);
        assert!(
            v["plans"][0]["report"]["traffic"]["local"]
                .as_f64()
                .is_some()
        );
        let mut a = vec!["compare", "--dispatch", rule];
        a.extend(&common);
        let text = text_of(&a);
        assert!(text.contains("cross-node"), "{text}");
        let mut a = vec!["sweep", "--json", "--dispatch", rule];
        a.extend(&common);
        assert_eq!(json_of(&a)["dispatch"], rule);
        let out = tmp(&format!("dispatch-plan-{rule}.json"));
        let mut a = vec!["plan", "--dispatch", rule, "--out", out.to_str().unwrap()];
        a.extend(&common);
        let o = moeplan(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains(rule));
    }
    // the sweep under `even` is today's sweep
    let mut a = vec!["sweep", "--json"];
    a.extend(&common);
    let old = json_of(&a);
    a.extend(["--dispatch", "even"]);
    let even = json_of(&a);
    assert_eq!(old["rows"], even["rows"]);
    check_fails(
        &["eval", "--plan", "p.json", "--dispatch", "random"],
        "invalid value",
    );
}

#[test]
fn eval_reads_every_plan_format() {
    let trace = olmoe_trace("formats-trace.json");
    let write_plan = |format: &str| {
        let out = tmp(&format!("formats-plan.{format}"));
        let out = out.to_str().unwrap().to_string();
        text_of(&[
            "plan",
            "--trace",
            &trace,
            "--algo",
            "eplb",
            "--gpus-per-node",
            "8",
            "--redundant-experts",
            "8",
            "--format",
            format,
            "--out",
            &out,
        ]);
        out
    };
    let own = write_plan("moeplan");
    // vllm-ascend's plan is repaired (no expert twice on a device): its own
    // moeplan JSON is made from the file
    let ascend = write_plan("vllm-ascend");
    let map: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ascend).unwrap()).unwrap();
    let layers: Vec<serde_json::Value> = map["layer_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let gpus: Vec<&serde_json::Value> = l["device_list"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| &d["device_expert"])
                .collect();
            serde_json::json!({"layer": l["layer_id"], "gpus": gpus})
        })
        .collect();
    let ascend_own = write(
        "formats-plan-ascend.json",
        &serde_json::json!({"layers": layers}).to_string(),
    );
    for rule in ["even", "sglang-static", "vllm", "optimal"] {
        let eval_json = |file: &str, extra: &[&str]| {
            let mut a = vec![
                "eval",
                "--trace",
                &trace,
                "--plan",
                file,
                "--json",
                "--dispatch",
                rule,
            ];
            a.extend_from_slice(extra);
            json_of(&a)
        };
        for format in ["sglang", "vllm", "vllm-ascend", "csv"] {
            let want = if format == "vllm-ascend" {
                eval_json(&ascend_own, &[])
            } else {
                eval_json(&own, &[])
            };
            let file = write_plan(format);
            let got = eval_json(&file, &["--gpus-per-node", "8"]);
            assert_eq!(got["balancedness"], want["balancedness"], "{format} {rule}");
            assert_eq!(got["traffic"], want["traffic"], "{format} {rule}");
            assert_eq!(got["layer_ids"], want["layer_ids"], "{format}");
        }
    }
}

#[test]
fn plan_files_without_topology_need_gpus_per_node() {
    let trace = olmoe_trace("no-topology-trace.json");
    for format in ["sglang", "vllm", "csv"] {
        let out = tmp(&format!("no-topology.{format}"));
        let out = out.to_str().unwrap();
        text_of(&[
            "plan",
            "--trace",
            &trace,
            "--gpus-per-node",
            "8",
            "--format",
            format,
            "--out",
            out,
        ]);
        check_fails(
            &["eval", "--trace", &trace, "--plan", out],
            "--gpus-per-node",
        );
    }
    // the moeplan JSON holds its topology, and another one is refused
    let out = tmp("with-topology.json");
    let out = out.to_str().unwrap();
    text_of(&[
        "plan",
        "--trace",
        &trace,
        "--gpus-per-node",
        "8",
        "--out",
        out,
    ]);
    check_fails(
        &[
            "eval",
            "--trace",
            &trace,
            "--plan",
            out,
            "--nodes",
            "2",
            "--gpus-per-node",
            "4",
        ],
        "1 node(s) × 8 GPU(s)",
    );
    // a trace is not a plan
    check_fails(&["eval", "--plan", &trace], "not a plan");
}

/// SGLang's file has a row per model layer, dense ones included: a trace of
/// MoE rows numbered 0..57 is placed with --model, never read off the dense
/// rows.
#[test]
fn eval_maps_sglang_rows_to_moe_layers() {
    let npy = moe_only_npy("sglang-eval.npy");
    let sglang = tmp("sglang-eval.json");
    let own = tmp("sglang-eval-plan.json");
    let (sglang, own) = (sglang.to_str().unwrap(), own.to_str().unwrap());
    for (format, out) in [("sglang", sglang), ("moeplan", own)] {
        text_of(&[
            "plan",
            "--trace",
            &npy,
            "--model",
            "deepseek-v3",
            "--gpus-per-node",
            "8",
            "--redundant-experts",
            "8",
            "--format",
            format,
            "--out",
            out,
        ]);
    }
    let base = ["eval", "--trace", &npy, "--gpus-per-node", "8", "--json"];
    let with = |extra: &[&'static str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a
    };
    let mut a = with(&["--plan"]);
    a.push(sglang);
    check_fails(&a, "--model deepseek-v3");
    a.extend(["--model", "deepseek-v3"]);
    let got = json_of(&a);
    let mut a = with(&["--plan"]);
    a.push(own);
    let want = json_of(&a);
    assert_eq!(got["layer_ids"][0], 3);
    assert_eq!(got["balancedness"], want["balancedness"]);
    assert_eq!(got["cost"]["model"], "deepseek-v3");
}

/// `--repair` brought EPLB to FlashLB's optimum (vllm-ascend's
/// published layer, 8 devices × 2 slots; peak 590 / 3) but left CRAFT at
/// 202, 2.7 % off, because the search only started from the plan it was
/// given. Both now end within 2 % of it (balancedness 181.25 / 196.67).
#[test]
fn repair_reaches_flashlbs_optimum_from_craft_and_eplb() {
    let trace = write(
        "flashlb.json",
        r#"{"logical_count": [[600, 560, 120, 120, 20, 10, 10, 10]]}"#,
    );
    let optimum = 181.25 / (590.0 / 3.0);
    for (name, budget) in [
        ("eplb", ["--redundant-experts", "8"]),
        ("craft", ["--replicas-per-gpu", "1"]),
    ] {
        let out = tmp(&format!("flashlb-{name}.json"));
        let out = out.to_str().unwrap();
        let o = moeplan(&[
            "plan", "--trace", &trace, "--algo", name, budget[0], budget[1], "--repair", "--out",
            out,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v = json_of(&["eval", "--trace", &trace, "--plan", out, "--json"]);
        let b = v["balancedness"].as_f64().unwrap();
        assert!(
            b >= 0.98 * optimum,
            "{name} --repair: {b} vs the optimum {optimum}"
        );
        assert!(
            b <= optimum + 1e-9,
            "{name}: {b} beats the optimum {optimum}"
        );
    }
}

/// A trace of DeepSeek-V3's 58 MoE rows only, written for
/// TensorRT-LLM, was keyed 0..57 with only a note: TensorRT-LLM looks each
/// layer up by its decoder index (3..60), so layers 3..57 got the slots
/// planned for 6..60 and start-up failed at layer 58. Every engine writer
/// now places such a trace or refuses it: SGLang's rows and TensorRT-LLM's
/// keys are model layers (refused without the model, 3..60 with it);
/// vLLM's rows and vllm-ascend's `layer_id`s are MoE positions (0..57
/// either way, as those engines read them).
#[test]
fn moe_only_traces_are_placed_or_refused_for_every_engine() {
    let npy = moe_only_npy("moe-only-engines.npy");
    let out = tmp("moe-only-engine-file");
    let out = out.to_str().unwrap();
    let run = |format: &'static str, extra: &[&'static str]| {
        let mut e = vec!["--format", format];
        e.extend_from_slice(extra);
        let a = moe_only_plan(&npy, out, &e);
        (moeplan(&a), a.join(" "))
    };
    for format in ["sglang", "trtllm"] {
        let mut e = vec!["--format", format];
        check_fails(&moe_only_plan(&npy, out, &e), "--model deepseek-v3");
        // a layer count alone cannot say which layers are dense
        e.extend(["--model-layers", "61"]);
        check_fails(&moe_only_plan(&npy, out, &e), "--model");
    }
    let (o, a) = run("trtllm", &["--model", "deepseek-v3"]);
    assert!(
        o.status.success(),
        "{a}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let yaml = std::fs::read_to_string(out).unwrap();
    let keys: Vec<u32> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_once(':')?.0.parse().ok())
        .collect();
    assert_eq!(keys, (3..=60).collect::<Vec<u32>>(), "{yaml}");
    // vLLM and vllm-ascend read their rows by MoE position
    let written = |format: &'static str, extra: &[&'static str]| -> serde_json::Value {
        let (o, a) = run(format, extra);
        assert!(
            o.status.success(),
            "{a}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
    };
    for extra in [&[][..], &["--model", "deepseek-v3"][..]] {
        let v = written("vllm", extra);
        assert_eq!(v.as_array().map(Vec::len), Some(58), "vllm {extra:?}");
        let v = written("vllm-ascend", extra);
        let ids: Vec<u64> = v["layer_list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["layer_id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, (0..58).collect::<Vec<u64>>(), "vllm-ascend {extra:?}");
    }
}

/// `completions SHELL` prints a script that knows every command and the
/// planners' generated flags; an unknown shell is one error line, exit 2.
#[test]
fn completions_know_every_command_and_planner_flag() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = moeplan(&["completions", shell]);
        assert!(
            o.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let script = String::from_utf8(o.stdout).unwrap();
        // (fish names a flag `-l replicas-per-gpu`, without its dashes)
        for word in [
            "compare",
            "replay",
            "replicas-per-gpu",
            "redundant-experts",
            "dispatch",
        ] {
            assert!(script.contains(word), "{shell}'s script lacks {word}");
        }
    }
    let o = moeplan(&["completions", "tcsh"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("moeplan: error:"))
            .count(),
        1,
        "{err}"
    );
}

/// `--out -` writes the plan (and a generated trace) to stdout, everything
/// else to stderr, so the plan pipes into a file an engine loads; a token
/// folder cannot go to stdout.
#[test]
fn out_dash_writes_to_stdout() {
    let o = moeplan(&[
        "plan",
        "--algo",
        "eplb",
        "--batches",
        "4",
        "--format",
        "sglang",
        "--out",
        "-",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("stdout is the plan alone");
    assert!(plan.is_object(), "{plan}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("wrote stdout"));
    let o = moeplan(&["gen", "--batches", "2", "--out", "-"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trace: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("stdout is the trace alone");
    assert!(trace.is_object());
    let o = moeplan(&["gen", "--tokens", "512", "--out", "-"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--out is a folder"), "{err}");
}

/// `plan --json` prints what plan reports as one object: the file written,
/// its shape, and each judged part as `eval --json` judges the written
/// plan (the same balancedness and traffic); with `--out -` it is refused.
#[test]
fn plan_json_is_what_eval_says_of_the_written_plan() {
    let out = tmp("plan-json.json");
    let out = out.to_str().unwrap();
    let common = ["--batches", "4", "--dispatch", "vllm"];
    let mut args = vec!["plan", "--algo", "eplb", "--out", out, "--json"];
    args.extend(common);
    let o = moeplan(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["schema_version"], 1);
    assert_eq!(plan["out"], out);
    assert_eq!(plan["algorithm"], "eplb");
    let mut args = vec!["eval", "--plan", out, "--json"];
    args.extend(common);
    let o = moeplan(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let eval: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let judged = &plan["judged"][0]["judged"];
    for key in ["balancedness", "imbalance_ratio", "dispatch", "replicas"] {
        assert!(!eval[key].is_null(), "eval --json has no {key}");
        assert_eq!(judged[key], eval[key], "{key}");
    }
    assert_eq!(plan["layers"], eval["layer_ids"].as_array().unwrap().len());
    let o = moeplan(&["plan", "--out", "-", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("both print to stdout"), "{err}");
}

/// `plan --algo eplb` on an SGLang DeepSeek-V3 dump, no `--groups`: layer
/// for layer the map SGLang's own EPLB computes from that dump on the same
/// cluster. SGLang (`eplb_algorithms/__init__.py`) calls DeepSeek's
/// `rebalance_experts(logical_count.sum(0), num_physical, num_groups =
/// config.n_group (8), num_nodes = --nnodes, num_gpus)`, hierarchical as
/// 8 % nodes == 0; the port's exactness against that function is tested in
/// the core. `--groups 1` (the old default) gives another plan.
#[test]
fn eplb_on_a_deepseek_v3_dump_is_sglangs_own_plan() {
    let Some(dump) = shared("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let text = std::fs::read_to_string(&dump).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = v["logical_count"].as_array().unwrap();
    let weight =
        ndarray::Array2::from_shape_fn((rows.len(), 256), |(l, e)| rows[l][e].as_f64().unwrap());
    let mut checked = 0;
    for (nodes, gpus_per_node) in [(4usize, 8usize), (2, 8)] {
        let gpus = nodes * gpus_per_node;
        let physical = 256 + gpus; // the CLI's default: one redundant slot per GPU
        let sglang =
            moeplan::planners::rebalance_experts(weight.view(), physical, 8, nodes, gpus).unwrap();
        let plan_with = |extra: &[&str]| -> Vec<Vec<u64>> {
            let out = tmp(&format!("eplb-sglang-{nodes}-{}.json", extra.len()));
            let (n, g) = (nodes.to_string(), gpus_per_node.to_string());
            let mut args = vec![
                "plan",
                "--trace",
                &dump,
                "--algo",
                "eplb",
                "--nodes",
                &n,
                "--gpus-per-node",
                &g,
                "--format",
                "sglang",
                "--out",
                out.to_str().unwrap(),
            ];
            args.extend(extra);
            let o = moeplan(&args);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let f: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
            f["physical_to_logical_map"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    r.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap())
                        .collect()
                })
                .collect()
        };
        let ours = plan_with(&[]);
        assert_eq!(ours.len(), 61, "a row per model layer");
        // The MoE layers (3..61); SGLang ignores the dense rows' maps.
        for (l, (row, reference)) in ours.iter().zip(&sglang.phy2log).enumerate().skip(3) {
            let want: Vec<u64> = reference.iter().map(|&e| e as u64).collect();
            assert_eq!(row, &want, "{nodes} × {gpus_per_node}: layer {l}");
            checked += 1;
        }
        let flat = plan_with(&["--groups", "1"]);
        assert!(
            (3..61).any(|l| flat[l] != ours[l]),
            "{nodes} × {gpus_per_node}: one group gives the same plan; the default is not shown to matter"
        );
    }
    assert_eq!(checked, 2 * 58);
}
