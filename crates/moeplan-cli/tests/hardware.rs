//! The cost model from the command line: `moeplan hardware`, `--hardware`
//! on eval / compare / sweep, the `predicted` JSON and its refusals.

mod common;

use common::{json_of, moeplan, refused, tmp};

/// `hardware --json` lists every preset, each one a valid `--hardware
/// FILE`: a preset written to a file prices exactly as its name does.
#[test]
fn presets_list_and_a_file_prices_as_its_name() {
    let list = json_of(&["hardware", "--json"]);
    let presets = list.as_array().unwrap();
    assert!(presets.len() >= 8, "{list}");
    let h100 = presets.iter().find(|p| p["name"] == "h100-ib-ndr").unwrap();
    let file = tmp("hardware", "h100.json");
    std::fs::write(&file, serde_json::to_vec(h100).unwrap()).unwrap();
    let run = |hw: &str| {
        json_of(&[
            "compare",
            "--preset",
            "olmoe",
            "--batches",
            "4",
            "--nodes",
            "2",
            "--gpus-per-node",
            "4",
            "--hardware",
            hw,
            "--json",
        ])
    };
    let (by_name, by_file) = (run("h100-ib-ndr"), run(file.to_str().unwrap()));
    let tput = |v: &serde_json::Value| -> Vec<f64> {
        v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["report"]["predicted"]["tokens_per_s"].as_f64())
            .collect()
    };
    assert!(!tput(&by_name).is_empty());
    assert_eq!(tput(&by_name), tput(&by_file));
    // Ranked by predicted throughput; BASE is 1×.
    let t = tput(&by_name);
    assert!(t.windows(2).all(|w| w[0] >= w[1]), "{t:?}");
    let base = by_name["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with("base")))
        .unwrap();
    assert_eq!(base["report"]["predicted"]["speedup"], 1.0);
    let text = String::from_utf8(moeplan(&["hardware"]).stdout).unwrap();
    assert!(
        text.contains("3090-pcie1-25gbe") && text.contains("/node"),
        "{text}"
    );
}

/// A slower machine makes every plan's step slower; decode with a long
/// context caps the step where prefill does not.
#[test]
fn slower_hardware_and_decode_caps_show_in_the_prediction() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "compare",
            "--preset",
            "deepseek-v3",
            "--batches",
            "2",
            "--nodes",
            "4",
            "--gpus-per-node",
            "8",
            "--json",
        ];
        args.extend_from_slice(extra);
        json_of(&args)
    };
    let steps = |v: &serde_json::Value, key: &str| -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| {
                Some((
                    p["name"].as_str()?.to_string(),
                    p["report"]["predicted"][key].as_f64()?,
                ))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    let fast = run(&["--hardware", "b200-ib-ndr"]);
    let slow = run(&["--hardware", "a100-80g-efa"]);
    let (f, s) = (steps(&fast, "step_ms"), steps(&slow, "step_ms"));
    assert_eq!(f.len(), s.len());
    assert!(
        f.iter().zip(&s).all(|(a, b)| a.0 == b.0 && a.1 < b.1),
        "{f:?} {s:?}"
    );
    let decode = run(&[
        "--hardware",
        "h100-ib-ndr",
        "--phase",
        "decode",
        "--context",
        "200000",
    ]);
    for (name, served) in steps(&decode, "served_tokens_per_step") {
        let tokens = steps(&decode, "tokens_per_step")
            .into_iter()
            .find(|x| x.0 == name)
            .unwrap()
            .1;
        assert!(served < tokens, "{name}: {served} of {tokens}");
    }
}

/// Broken hardware files and impossible assumptions: one line, exit 2.
#[test]
fn bad_hardware_is_one_line_and_exit_2() {
    let bad = tmp("hardware", "bad.json");
    std::fs::write(&bad, br#"{"name": "x", "about": "y"}"#).unwrap();
    let huge = tmp("hardware", "huge.json");
    std::fs::write(&huge, vec![b' '; 70_000]).unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["--hardware", "tpu-v9"], "unknown hardware"),
        (&["--objective", "time"], "--hardware"),
        (&["--hardware", bad.to_str().unwrap()], "missing field"),
        (&["--hardware", huge.to_str().unwrap()], "limit"),
        (
            &["--hardware", "h100-ib-ndr", "--memory-fraction", "1.5"],
            "memory fraction",
        ),
        (&["--hardware", "h100-ib-ndr", "--context", "0"], "context"),
    ];
    for (extra, needle) in cases {
        let mut args = vec![
            "compare",
            "--preset",
            "olmoe",
            "--batches",
            "2",
            "--nodes",
            "1",
            "--gpus-per-node",
            "8",
        ];
        args.extend_from_slice(extra);
        refused(&args, needle);
    }
}

/// `plan --hardware` prices the plan it writes on the batches it was
/// planned on and on the held-out ones.
#[test]
fn plan_prints_its_prediction() {
    let out = tmp("hardware", "plan.json");
    let o = moeplan(&[
        "plan",
        "--preset",
        "olmoe",
        "--batches",
        "8",
        "--nodes",
        "1",
        "--gpus-per-node",
        "8",
        "--algo",
        "craft",
        "--replicas-per-gpu",
        "2",
        "--holdout",
        "0.25",
        "--hardware",
        "h100-ib-ndr",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let priced: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("predicted on h100-ib-ndr (olmoe): step"))
        .collect();
    assert_eq!(priced.len(), 2, "{err}");
    assert!(
        err.contains("6 planned batch(es)") && err.contains("2 held-out batch(es)"),
        "{err}"
    );
}

/// `--objective time`: CRAFT's knapsack spends replicas on predicted time
/// saved — at the same R its in-sample compute is no slower than the
/// balancedness objective's, and `auto` picks a budget (the fastest
/// CRAFT tries), named in the row and recorded in the plan file.
#[test]
fn objective_time_plans_for_the_hardware() {
    let compute = |objective: &str, r: &str| -> (f64, String) {
        let v = json_of(&[
            "compare",
            "--preset",
            "qwen3-30b-a3b",
            "--batches",
            "4",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--hardware",
            "4090-pcie4-25gbe",
            "--objective",
            objective,
            "--replicas-per-gpu",
            r,
            "--json",
        ]);
        let craft = v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with("craft")))
            .unwrap()
            .clone();
        (
            craft["report"]["predicted"]["compute_us"].as_f64().unwrap(),
            craft["name"].as_str().unwrap().to_string(),
        )
    };
    for r in ["2", "8"] {
        let (time, _) = compute("time", r);
        let (mean, _) = compute("mean", r);
        assert!(
            time <= mean * (1.0 + 1e-6),
            "R = {r}: time {time} µs > mean {mean} µs"
        );
    }
    let (_, name) = compute("time", "auto");
    assert!(name.starts_with("craft (R = "), "{name}");
    let out = tmp("hardware", "time.json");
    let o = moeplan(&[
        "plan",
        "--preset",
        "olmoe",
        "--batches",
        "4",
        "--nodes",
        "1",
        "--gpus-per-node",
        "8",
        "--algo",
        "craft",
        "--objective",
        "time",
        "--hardware",
        "h100-ib-ndr",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(file["options"]["objective"], "time", "{}", file["options"]);
}

/// Measurements made by a known machine (the H100 preset with a kernel fit
/// and other efficiencies), as `moeplan calibrate` reads them.
fn made_measurements() -> (moeplan::data::hardware::Hardware, String) {
    use moeplan::data::hardware::{CommKernel, Kernels, preset};
    use moeplan::judge::calibrate::{CommPhase, Measurement, predict_us, uniform_rank_bytes};
    use moeplan::judge::cost::Kernel;
    let mut truth = preset("h100-ib-ndr").unwrap().clone();
    truth.efficiency.hbm = 0.64;
    truth.efficiency.roofline_p = 2.0;
    let comm = CommKernel {
        dispatch_fixed_us: 25.0,
        combine_fixed_us: 45.0,
        intra_gb_per_s: 300.0,
        inter_gb_per_s: 0.0,
    };
    truth.kernels = Some(Kernels {
        moe_fixed_us: 30.0,
        normal: comm,
        low_latency: comm,
    });
    let m = moeplan::data::model::preset("deepseek-v3").unwrap();
    let params = m.expert_params() as f64;
    let mut rows = Vec::new();
    for ep in [8usize, 32, 128] {
        for b in [1.0f64, 16.0, 256.0] {
            let x = Measurement::Compute {
                expert_bytes: params,
                flops_per_row: 2.0 * params,
                peak_tflops: 1979.0,
                copies: ((256 / ep) as f64).min(8.0 * b),
                rows: 8.0 * b,
                us: 1.0,
            };
            rows.push((x, predict_us(&truth, &x)));
        }
    }
    for kernel in [Kernel::Normal, Kernel::LowLatency] {
        for t in [16.0f64, 512.0, 4096.0] {
            for (phase, bytes) in [(CommPhase::Dispatch, 7392.0), (CommPhase::Combine, 14336.0)] {
                let (intra_bytes, inter_bytes) = uniform_rank_bytes(kernel, t, 8, 8, 8, bytes);
                let x = Measurement::Comm {
                    kernel,
                    phase,
                    intra_bytes,
                    inter_bytes,
                    us: 1.0,
                };
                rows.push((x, predict_us(&truth, &x)));
            }
        }
    }
    let rows: Vec<Measurement> = rows
        .into_iter()
        .map(|(mut x, us)| {
            match &mut x {
                Measurement::Compute { us: u, .. } | Measurement::Comm { us: u, .. } => *u = us,
            }
            x
        })
        .collect();
    (truth, serde_json::to_string(&rows).unwrap())
}

/// `calibrate`: measurements in, a hardware file out that `--hardware`
/// reads back, fitted to the machine that made them (residuals near 0),
/// and which prices a plan as that machine does.
#[test]
fn calibrate_writes_a_hardware_file_the_cost_model_reads() {
    let (truth, text) = made_measurements();
    let input = tmp("calibrate", "measured.json");
    std::fs::write(&input, &text).unwrap();
    let out = tmp("calibrate", "fitted.json");
    let o = moeplan(&[
        "calibrate",
        "--hardware",
        "h100-ib-ndr",
        "--measurements",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let residuals: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let all = residuals.as_array().unwrap().last().unwrap();
    assert_eq!(all["group"], "all");
    assert_eq!(all["rows"], 21);
    assert!(
        all["worst_error_pct"].as_f64().unwrap() < 2.0,
        "{residuals}"
    );
    let fitted: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(fitted["name"], "h100-ib-ndr-calibrated");
    assert_eq!(fitted["calibration"]["rows"], 21);
    let fixed = fitted["kernels"]["moe_fixed_us"].as_f64().unwrap();
    assert!((fixed / 30.0 - 1.0).abs() < 0.05, "{fitted}");
    // The fitted file prices a plan within 2 % of the machine that made
    // the measurements, where the shipped preset is further off.
    let truth_file = tmp("calibrate", "truth.json");
    std::fs::write(&truth_file, serde_json::to_vec(&truth).unwrap()).unwrap();
    let layer_us = |hw: &str| {
        let v = json_of(&[
            "compare",
            "--preset",
            "deepseek-v3",
            "--batches",
            "2",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--hardware",
            hw,
            "--json",
        ]);
        let base = v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with("base")))
            .unwrap()
            .clone();
        base["report"]["predicted"]["moe_layer_us"]
            .as_f64()
            .unwrap()
    };
    let (t, f, p) = (
        layer_us(truth_file.to_str().unwrap()),
        layer_us(out.to_str().unwrap()),
        layer_us("h100-ib-ndr"),
    );
    assert!((f / t - 1.0).abs() < 0.02, "fitted {f} µs, truth {t} µs");
    assert!(
        (p / t - 1.0).abs() > 0.05,
        "the preset {p} µs already near the truth {t} µs"
    );
    // `--check` fits nothing: the machine itself is exact on its own
    // measurements, the shipped preset is not.
    let worst = |hw: &str| {
        let v = json_of(&[
            "calibrate",
            "--hardware",
            hw,
            "--measurements",
            input.to_str().unwrap(),
            "--check",
            "--json",
        ]);
        v.as_array().unwrap().last().unwrap()["worst_error_pct"]
            .as_f64()
            .unwrap()
    };
    assert!(worst(truth_file.to_str().unwrap()) < 0.1);
    assert!(worst("h100-ib-ndr") > 10.0);
    // The text table names every kernel fitted.
    let o = moeplan(&[
        "calibrate",
        "--hardware",
        "h100-ib-ndr",
        "--measurements",
        input.to_str().unwrap(),
        "--out",
        "-",
    ]);
    assert!(o.status.success());
    let table = String::from_utf8_lossy(&o.stderr);
    for g in [
        "expert compute",
        "normal dispatch",
        "low-latency combine",
        "| all |",
    ] {
        assert!(table.contains(g), "{table}");
    }
    let file: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(file["calibration"]["rows"], 21);
}

/// A truncated file, a wrong shape, an unknown field and an oversized file
/// are each one line, exit 2.
#[test]
fn calibrate_refuses_bad_measurements() {
    let (_, text) = made_measurements();
    let out = tmp("calibrate-bad", "out.json");
    let try_file = |name: &str, bytes: &[u8], needle: &str| {
        let p = tmp("calibrate-bad", name);
        std::fs::write(&p, bytes).unwrap();
        refused(
            &[
                "calibrate",
                "--hardware",
                "h100-ib-ndr",
                "--measurements",
                p.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            needle,
        );
    };
    try_file(
        "truncated.json",
        &text.as_bytes()[..text.len() / 2],
        "measurements JSON",
    );
    try_file("shape.json", br#"{"rows": []}"#, "measurements JSON");
    try_file(
        "unknown.json",
        br#"[{"kind": "comm", "kernel": "normal", "phase": "dispatch", "intra_bytes": 1, "inter_bytes": 0, "us": 1, "sms": 20}]"#,
        "unknown field",
    );
    try_file("empty.json", b"[]", "no measurements");
    let big = tmp("calibrate-bad", "big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(moeplan::formats::measurements::MAX_BYTES + 1)
        .unwrap();
    refused(
        &[
            "calibrate",
            "--hardware",
            "h100-ib-ndr",
            "--measurements",
            big.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "limit",
    );
    assert!(
        !out.exists(),
        "a refused calibration wrote {}",
        out.display()
    );
}

/// `calibrate --bench`: `moeplan-cuda bench --json` lines (each rank's
/// rows, slots and time; BF16 experts) fit the expert compute; a
/// `--predict-only` line, which measured nothing, is refused.
#[test]
fn calibrate_from_moeplan_cuda_bench_lines() {
    use moeplan::data::hardware::{CommKernel, Kernels, preset};
    use moeplan::judge::calibrate::{Measurement, predict_us};
    let mut truth = preset("h100-ib-ndr").unwrap().clone();
    truth.efficiency.hbm = 0.7;
    truth.efficiency.roofline_p = 1.8;
    let none = CommKernel {
        dispatch_fixed_us: 0.0,
        combine_fixed_us: 0.0,
        intra_gb_per_s: 0.0,
        inter_gb_per_s: 0.0,
    };
    truth.kernels = Some(Kernels {
        moe_fixed_us: 12.0,
        normal: none,
        low_latency: none,
    });
    let expert = 3.0 * 7168.0 * 2048.0;
    let mut lines = String::new();
    for slots in [2.0f64, 4.0, 8.0] {
        let ranks: Vec<(f64, f64)> = [64.0f64, 256.0, 1024.0, 4096.0]
            .iter()
            .map(|&rows| {
                let m = Measurement::Compute {
                    expert_bytes: 2.0 * expert,
                    flops_per_row: 2.0 * expert,
                    peak_tflops: 989.5,
                    copies: slots,
                    rows,
                    us: 1.0,
                };
                (rows, predict_us(&truth, &m) / 1e3)
            })
            .collect();
        let line = serde_json::json!({
            "layer": 3, "plan": "craft R=8",
            "rows_per_rank": ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
            "slots_per_rank": vec![slots; ranks.len()],
            "rank_ms": ranks.iter().map(|r| r.1).collect::<Vec<_>>(),
            "hidden": 7168, "inter": 2048, "bytes_per_weight": 2,
        });
        lines.push_str(&format!("{line}\n"));
    }
    let bench = tmp("calibrate-bench", "bench.jsonl");
    std::fs::write(&bench, &lines).unwrap();
    let out = tmp("calibrate-bench", "fitted.json");
    let v = json_of(&[
        "calibrate",
        "--hardware",
        "h100-ib-ndr",
        "--bench",
        bench.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let all = v.as_array().unwrap().last().unwrap();
    assert_eq!(all["rows"], 12);
    assert!(all["worst_error_pct"].as_f64().unwrap() < 2.0, "{v}");
    let fitted: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let fixed = fitted["kernels"]["moe_fixed_us"].as_f64().unwrap();
    assert!((fixed / 12.0 - 1.0).abs() < 0.1, "{fitted}");
    let predict_only = tmp("calibrate-bench", "predict-only.jsonl");
    std::fs::write(
        &predict_only,
        r#"{"layer": 3, "plan": "craft", "rows_per_rank": [1, 2], "slots_per_rank": [1, 1]}"#,
    )
    .unwrap();
    refused(
        &[
            "calibrate",
            "--hardware",
            "h100-ib-ndr",
            "--bench",
            predict_only.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "rank_ms",
    );
    refused(
        &["calibrate", "--hardware", "h100-ib-ndr", "--out", "x.json"],
        "--measurements",
    );
}
