//! The cost model from the command line: `moeplan hardware`, `--hardware`
//! on eval / compare / sweep, the `predicted` JSON and its refusals.

mod common;

use common::{json_of, moeplan, refused, tmp};

/// `hardware --json` lists every preset, each one a valid `--hardware
/// FILE`: a preset written to a file prices exactly as its name does.
#[test]
fn presets_list_and_a_file_prices_as_its_name() {
    let list = json_of(&["hardware", "--json"]);
    let presets = list["hardware"].as_array().unwrap();
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
    use moeplan::judge::cost::Kernel;
    use moeplan::judge::{CommPhase, Measurement, predict_us, uniform_rank_bytes};
    let mut truth = preset("h100-ib-ndr").unwrap().clone();
    // Far enough from the shipped preset (itself fitted on an H100's
    // tables) that fitting is seen to move it.
    truth.efficiency.hbm = 0.55;
    truth.efficiency.roofline_p = 2.0;
    let comm = CommKernel {
        dispatch_fixed_us: 25.0,
        combine_fixed_us: 45.0,
        intra_gb_per_s: 200.0,
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
    common::assert_valid("moeplan.calibrate.schema.json", &residuals);
    let all = residuals["residuals"].as_array().unwrap().last().unwrap();
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
        v["residuals"].as_array().unwrap().last().unwrap()["worst_error_pct"]
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
    f.set_len(moeplan::formats::MEASUREMENTS_MAX_BYTES + 1)
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
    use moeplan::judge::{Measurement, predict_us};
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
    let all = v["residuals"].as_array().unwrap().last().unwrap();
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

/// One column of a Parquet table a test writes.
enum Values {
    Text(Vec<&'static str>),
    Long(Vec<i64>),
    Double(Vec<f64>),
}

/// Writes `columns` (equal lengths) to `path` as Parquet with ZSTD pages,
/// as AIConfigurator's tables are written.
fn write_parquet(path: &std::path::Path, columns: &[(&str, Values)]) {
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use std::sync::Arc;
    let fields: Vec<String> = columns
        .iter()
        .map(|(name, v)| match v {
            Values::Text(_) => format!("required binary {name} (UTF8);"),
            Values::Long(_) => format!("required int64 {name};"),
            Values::Double(_) => format!("required double {name};"),
        })
        .collect();
    let schema = parquet::schema::parser::parse_message_type(&format!(
        "message table {{ {} }}",
        fields.join(" ")
    ))
    .unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).unwrap();
    let mut group = w.next_row_group().unwrap();
    for (_, values) in columns {
        let mut col = group.next_column().unwrap().unwrap();
        match values {
            Values::Text(v) => {
                let v: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(*s)).collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&v, None, None)
                    .unwrap();
            }
            Values::Long(v) => {
                col.typed::<Int64Type>().write_batch(v, None, None).unwrap();
            }
            Values::Double(v) => {
                col.typed::<DoubleType>()
                    .write_batch(v, None, None)
                    .unwrap();
            }
        }
        col.close().unwrap();
    }
    group.close().unwrap();
    w.close().unwrap();
}

/// A few rows of AIConfigurator 0.12.0's H100 SXM tables (the
/// `aiconfigurator-core` wheel, `aiconfigurator_core/systems/data/h100_sxm/`),
/// kept as facts: DeepSeek-V3's shape, FP8 block weights. Each table has
/// rows `--aiconfigurator` must skip (another routing, EP 4, 4 SMs, a
/// token count outside the range). Written under `dir` in the wheel's
/// layout.
fn h100_tables(dir: &std::path::Path) {
    use Values::{Double, Long, Text};
    // moe/sglang/0.5.10/wideep_generation_moe_perf.parquet:
    // (moe_ep_size, num_tokens, distribution, latency ms).
    let gen_rows: [(i64, i64, &str, f64); 12] = [
        (8, 1024, "uniform", 0.5312543869018554),
        (16, 2048, "uniform", 0.27816319465637207),
        (32, 4096, "uniform", 0.161843204498291),
        (32, 512, "uniform", 0.15225919485092163),
        (64, 8192, "uniform", 0.10992000102996827),
        (64, 64, "uniform", 0.0851967990398407),
        (128, 16384, "uniform", 0.09437119960784912),
        (128, 512, "uniform", 0.053625601530075076),
        (256, 256, "uniform", 0.03555519878864288),
        (256, 16384, "uniform", 0.06104320287704468),
        (8, 1024, "power_law_1.2", 0.5744095993041992),
        (4, 64, "uniform", 1.049020767211914),
    ];
    let n = gen_rows.len();
    write_parquet(
        &dir.join("moe/sglang/0.5.10/wideep_generation_moe_perf.parquet"),
        &[
            ("moe_dtype", Text(vec!["fp8_block"; n])),
            ("num_tokens", Long(gen_rows.iter().map(|r| r.1).collect())),
            ("hidden_size", Long(vec![7168; n])),
            ("inter_size", Long(vec![2048; n])),
            ("topk", Long(vec![8; n])),
            ("num_experts", Long(vec![256; n])),
            ("moe_tp_size", Long(vec![1; n])),
            ("moe_ep_size", Long(gen_rows.iter().map(|r| r.0).collect())),
            ("distribution", Text(gen_rows.iter().map(|r| r.2).collect())),
            ("latency", Double(gen_rows.iter().map(|r| r.3).collect())),
        ],
    );
    // comm/sglang/0.5.12/wideep_deepep_normal_perf.parquet, node_num 1,
    // hidden 7168, top-8, 256 experts: (num_token, SMs, dispatch µs,
    // combine µs), notify 0 inside a node.
    let normal: [(i64, i64, f64, f64); 6] = [
        (512, 20, 100.17371451368136, 187.12816220157),
        (2048, 20, 270.4685719645753, 534.8754294064581),
        (8192, 20, 967.617301308379, 1845.1918436556448),
        (16384, 20, 1960.135182555841, 3565.430208128325),
        (4096, 4, 2068.486520222255, 3000.0),
        (131072, 20, 15837.432822402645, 26656.87572712801),
    ];
    let n = normal.len();
    write_parquet(
        &dir.join("comm/sglang/0.5.12/wideep_deepep_normal_perf.parquet"),
        &[
            ("node_num", Long(vec![1; n])),
            ("hidden_size", Long(vec![7168; n])),
            ("num_token", Long(normal.iter().map(|r| r.0).collect())),
            ("num_topk", Long(vec![8; n])),
            ("num_experts", Long(vec![256; n])),
            ("dispatch_sms", Long(normal.iter().map(|r| r.1).collect())),
            (
                "dispatch_transmit_us",
                Double(normal.iter().map(|r| r.2).collect()),
            ),
            ("dispatch_notify_us", Double(vec![0.0; n])),
            ("combine_sms", Long(normal.iter().map(|r| r.1).collect())),
            (
                "combine_transmit_us",
                Double(normal.iter().map(|r| r.3).collect()),
            ),
            ("combine_notify_us", Double(vec![0.0; n])),
        ],
    );
    // comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet, the same shape:
    // (num_token, dispatch µs, combine µs).
    let ll: [(i64, f64, f64); 5] = [
        (32, 17.999, 26.261),
        (128, 36.721, 66.981),
        (512, 115.522, 259.23),
        (1024, 224.057, 489.4340000000001),
        (8, 11.0, 12.0),
    ];
    let n = ll.len();
    write_parquet(
        &dir.join("comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet"),
        &[
            ("node_num", Long(vec![1; n])),
            ("hidden_size", Long(vec![7168; n])),
            ("num_token", Long(ll.iter().map(|r| r.0).collect())),
            ("num_topk", Long(vec![8; n])),
            ("num_experts", Long(vec![256; n])),
            (
                "dispatch_avg_t_us",
                Double(ll.iter().map(|r| r.1).collect()),
            ),
            ("combine_avg_t_us", Double(ll.iter().map(|r| r.2).collect())),
        ],
    );
}

/// `calibrate --aiconfigurator DIR`: the tables of a GPU's folder read
/// (only the rows of the model's shape in range), a hardware file out
/// that fits them far better than the shipped preset does.
#[test]
fn calibrate_reads_aiconfigurator_tables() {
    let dir = tmp("aiconfigurator", "h100_sxm");
    h100_tables(&dir);
    let out = tmp("aiconfigurator", "h100-fitted.json");
    let o = moeplan(&[
        "calibrate",
        "--hardware",
        "h100-ib-ndr",
        "--aiconfigurator",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let residuals: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    common::assert_valid("moeplan.calibrate.schema.json", &residuals);
    let group = |name: &str| {
        residuals["residuals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == name)
            .unwrap_or_else(|| panic!("no {name} in {residuals}"))
            .clone()
    };
    // 10 compute rows of 12, 4 normal of 6 and 4 low-latency of 5, each
    // comm row a dispatch and a combine.
    assert_eq!(group("expert compute")["rows"], 10);
    assert_eq!(group("normal dispatch")["rows"], 4);
    assert_eq!(group("low-latency combine")["rows"], 4);
    assert_eq!(group("all")["rows"], 26);
    let fitted: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(
        fitted["calibration"]["source"]
            .as_str()
            .is_some_and(|s| s.contains("wideep_generation_moe_perf.parquet (10 of 12 rows)")),
        "{}",
        fitted["calibration"]
    );
    // In-sample on real H100 rows: within 10 % median and 20 % worst (the
    // bound a file calibrated from these tables is held to, docs/cost.md).
    let all = group("all");
    assert!(all["median_error_pct"].as_f64().unwrap() < 10.0, "{all}");
    assert!(all["worst_error_pct"].as_f64().unwrap() < 20.0, "{all}");
    let check = |hw: &str| {
        let v = json_of(&[
            "calibrate",
            "--hardware",
            hw,
            "--aiconfigurator",
            dir.to_str().unwrap(),
            "--check",
            "--json",
        ]);
        v["residuals"].as_array().unwrap().last().unwrap().clone()
    };
    // The H100 from its datasheet alone (the preset before it was fitted
    // on these tables: no kernel times, the old sustained fractions) is
    // far off; the shipped preset, fitted on the whole tables, holds on
    // these rows within 15 % median and 30 % worst (docs/cost.md).
    let mut datasheet = moeplan::data::hardware::preset("h100-ib-ndr")
        .unwrap()
        .clone();
    datasheet.name = "h100-datasheet".into();
    datasheet.kernels = None;
    datasheet.calibration = None;
    datasheet.efficiency = moeplan::data::hardware::preset("a100-80g-efa")
        .unwrap()
        .efficiency;
    let datasheet_file = tmp("aiconfigurator", "h100-datasheet.json");
    std::fs::write(&datasheet_file, serde_json::to_vec(&datasheet).unwrap()).unwrap();
    let old = check(datasheet_file.to_str().unwrap());
    assert!(
        old["median_error_pct"].as_f64().unwrap() > 2.0 * all["median_error_pct"].as_f64().unwrap(),
        "datasheet {old}, fitted {all}"
    );
    let shipped = check("h100-ib-ndr");
    assert!(
        shipped["median_error_pct"].as_f64().unwrap() <= 15.0
            && shipped["worst_error_pct"].as_f64().unwrap() <= 30.0,
        "{shipped}"
    );
    // The fitted file is a hardware file the other commands read.
    json_of(&[
        "compare",
        "--preset",
        "deepseek-v3",
        "--batches",
        "2",
        "--hardware",
        out.to_str().unwrap(),
        "--json",
    ]);
}

/// Broken tables are refused with one line and exit 2: a truncated file,
/// a table with a column missing or of the wrong type, a file over the
/// size limit (checked before reading), a folder without tables, and a
/// model whose shape no row has.
#[test]
fn calibrate_refuses_broken_aiconfigurator_tables() {
    use Values::{Double, Long, Text};
    let table = "moe/sglang/0.5.10/wideep_generation_moe_perf.parquet";
    let run = |dir: &std::path::Path, needle: &str| {
        refused(
            &[
                "calibrate",
                "--hardware",
                "h100-ib-ndr",
                "--aiconfigurator",
                dir.to_str().unwrap(),
                "--check",
            ],
            needle,
        )
    };
    // Truncated: the good table cut in half.
    let good = tmp("aiconfigurator-broken", "good");
    h100_tables(&good);
    let cut = tmp("aiconfigurator-broken", "cut");
    h100_tables(&cut);
    let bytes = std::fs::read(good.join(table)).unwrap();
    std::fs::write(cut.join(table), &bytes[..bytes.len() / 2]).unwrap();
    run(&cut, "not a readable Parquet file");
    // Garbage where a table should be.
    std::fs::write(cut.join(table), b"PAR1 this is not parquet PAR1").unwrap();
    run(&cut, "not a readable Parquet file");
    // A column missing, and one of the wrong type.
    let schema = tmp("aiconfigurator-broken", "schema");
    write_parquet(
        &schema.join(table),
        &[
            ("num_tokens", Long(vec![64])),
            ("latency", Double(vec![0.1])),
        ],
    );
    run(&schema, "no column \"moe_dtype\"");
    write_parquet(
        &schema.join(table),
        &[
            ("moe_dtype", Text(vec!["fp8_block"])),
            ("distribution", Text(vec!["uniform"])),
            ("num_tokens", Long(vec![64])),
            ("hidden_size", Long(vec![7168])),
            ("inter_size", Long(vec![2048])),
            ("topk", Long(vec![8])),
            ("num_experts", Long(vec![256])),
            ("moe_tp_size", Long(vec![1])),
            ("moe_ep_size", Long(vec![8])),
            ("latency", Text(vec!["0.1"])),
        ],
    );
    run(
        &schema,
        "column \"latency\" is BYTE_ARRAY where DOUBLE was expected",
    );
    // Over the size limit: refused by its length, never read (a sparse file).
    let big = tmp("aiconfigurator-broken", "big");
    std::fs::create_dir_all(big.join("moe/sglang/0.5.10")).unwrap();
    std::fs::File::create(big.join(table))
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    run(&big, "more than the 16777216-byte limit");
    // No tables, and no rows of the model's shape.
    let empty = tmp("aiconfigurator-broken", "empty");
    std::fs::create_dir_all(&empty).unwrap();
    run(&empty, "no tables found");
    refused(
        &[
            "calibrate",
            "--hardware",
            "h100-ib-ndr",
            "--aiconfigurator",
            good.to_str().unwrap(),
            "--model",
            "olmoe",
            "--check",
        ],
        "no rows of olmoe's shape",
    );
}

/// The page and the CLI give the same `predicted` for the same trace, plan
/// and hardware file (issue 47): `moeplan compare --hardware FILE --json`
/// against the page's view model (`moeplan_view::Workspace::view_priced`)
/// on one generated batch (the page prices a static plan on the mean
/// batch, the CLI on every batch: the same batch here), for the plans both
/// make alike (BASE, EPLB at its default, Libra's schedule).
#[test]
fn the_page_and_the_cli_price_alike() {
    use moeplan::judge::Rule;
    use moeplan::judge::cost::Pricing;
    use moeplan::synth::generator::{GenConfig, generate};
    // A hardware file: the B200 preset under another name.
    let mut hw = moeplan::data::hardware::preset("b200-ib-ndr")
        .unwrap()
        .clone();
    hw.name = "b200-mine".into();
    let file = tmp("price-alike", "b200-mine.json");
    std::fs::write(&file, serde_json::to_vec(&hw).unwrap()).unwrap();
    let cli = json_of(&[
        "compare",
        "--preset",
        "deepseek-v3",
        "--batches",
        "1",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--hardware",
        file.to_str().unwrap(),
        "--json",
    ]);
    let model = moeplan::data::model::preset("deepseek-v3").unwrap();
    // The CLI's generated default: 1 batch of 4,096 tokens, seed 7.
    let trace = generate(&GenConfig {
        tokens_per_batch: 4096,
        seed: 7,
        ..GenConfig::new(model, 1)
    })
    .unwrap();
    let ws = moeplan_view::Workspace::new(
        trace,
        moeplan_view::Cluster {
            nodes: 2,
            gpus_per_node: 8,
            // The CLI's BASE and EPLB split by DeepSeek-V3's 8 groups.
            groups: model.groups,
        },
    )
    .unwrap();
    // With the series (`batches`): the answer that prices Libra's schedule.
    let view = ws
        .view_priced(None, 0, Rule::Even, true, Some(&Pricing::new(&hw, model)))
        .unwrap();
    let mut compared = 0;
    for name in ["base", "eplb", "libra"] {
        let page = view
            .plans
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.predicted.clone())
            .unwrap_or_else(|| panic!("the page priced no {name}"));
        let cli_plan = cli["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                p["name"]
                    .as_str()
                    .is_some_and(|n| n.split(' ').next() == Some(name))
            })
            .unwrap_or_else(|| panic!("the CLI made no {name}"));
        // The speed-up over BASE too: one definition of BASE (the core's).
        let cli_pred: moeplan::judge::cost::Prediction =
            serde_json::from_value(cli_plan["report"]["predicted"].clone()).unwrap();
        for (what, a, b) in [
            ("MoE layer", page.moe_layer_us, cli_pred.moe_layer_us),
            ("step", page.step_ms, cli_pred.step_ms),
            ("tokens/s", page.tokens_per_s, cli_pred.tokens_per_s),
        ] {
            assert!(
                (a / b - 1.0).abs() < 1e-9,
                "{name}: {what} on the page {a}, in the CLI {b}"
            );
        }
        // Every field equal, numbers to the last few bits (the CLI's
        // figures pass through its JSON).
        fn close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
            use serde_json::Value::{Array, Number, Object};
            match (a, b) {
                (Number(x), Number(y)) => {
                    let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                    (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
                }
                (Array(x), Array(y)) => {
                    x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y))
                }
                (Object(x), Object(y)) => {
                    x.len() == y.len()
                        && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
                }
                _ => a == b,
            }
        }
        let (p, c) = (
            serde_json::to_value(&page).unwrap(),
            serde_json::to_value(&cli_pred).unwrap(),
        );
        assert!(close(&p, &c), "{name}: page {p}\nCLI {c}");
        assert_eq!(page.hardware, "b200-mine");
        compared += 1;
    }
    assert_eq!(compared, 3);
}

/// One judge for every front end: the same trace, plan, rule and hardware
/// give the same figures and the same prediction — the speed-up over BASE
/// included — through `moeplan eval --json`, the page's worker (a file
/// request, answered as the page gets it) and the JavaScript API's view
/// (`Planner.viewPriced` is `Workspace::view_priced`, priced by the
/// workspace's judge), on a trace that names its model and on one that
/// names none (DeepSeek-V3, the one fallback). One batch: the page prices a
/// static plan on the mean batch, the CLI on every batch.
#[test]
fn one_judge_for_every_front_end() {
    use moeplan::synth::generator::{GenConfig, generate};
    use moeplan_app::protocol::{Request, Response, Source};
    use moeplan_app::worker::WorkerState;
    let hardware = "h100-ib-ndr";
    let mut compared = 0;
    for (preset, names_it, want) in [
        ("qwen3-30b-a3b", true, "qwen3-30b-a3b"),
        ("deepseek-v3", false, "deepseek-v3"),
    ] {
        let m = moeplan::data::model::preset(preset).unwrap();
        let trace = generate(&GenConfig::new(m, 1)).unwrap();
        let mut json: serde_json::Value =
            serde_json::from_str(&moeplan::formats::write_trace_json(&trace)).unwrap();
        if !names_it {
            json.as_object_mut().unwrap().remove("model");
        }
        let text = json.to_string();
        let file = tmp("one-judge", &format!("{preset}.json"));
        std::fs::write(&file, &text).unwrap();
        let f = file.to_str().unwrap();
        // The CLI: EPLB's default plan, then its eval.
        let plan = tmp("one-judge", &format!("{preset}-eplb.json"));
        let p = plan.to_str().unwrap();
        // DeepSeek-V3's weights fit in 16 H100s' memory, not in 8.
        let cluster = ["--nodes", "2", "--gpus-per-node", "8"];
        let mut args = vec!["plan", "--trace", f, "--algo", "eplb", "--out", p];
        args.extend(cluster);
        let o = moeplan(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut args = vec![
            "eval",
            "--trace",
            f,
            "--plan",
            p,
            "--hardware",
            hardware,
            "--json",
        ];
        args.extend(cluster);
        let cli = json_of(&args);
        assert_eq!(cli["cost"]["model"], want, "the CLI's model");
        // The page's worker, the file sent as the page sends it.
        let mut state = WorkerState::default();
        // The CLI's EPLB splits by the model's expert groups, as the
        // engines do (DeepSeek-V3: 8); the page is given them.
        let c = moeplan_view::Cluster {
            nodes: 2,
            gpus_per_node: 8,
            groups: m.groups,
        };
        let req = Request {
            hardware: hardware.into(),
            ..Request::from_settings(
                1,
                &moeplan_app::settings::Settings::default(),
                Some(Source::File {
                    name: format!("{preset}.json"),
                }),
                Some(c),
                None,
                false,
            )
        };
        // The page's own model control is the caller's ask; left empty, the
        // one fallback decides, as in the CLI without --model.
        let req = Request {
            model: String::new(),
            per_batch: None,
            static_options: None,
            ..req
        };
        let update = match state.handle(&req, Some(text.as_bytes()), || 0.0, |_| {}) {
            Response::View { update, .. } => *update,
            other => panic!("{preset}: the worker answered {other:?}"),
        };
        let page = update.plans.iter().find(|f| f.name == "eplb").unwrap();
        // The JavaScript API's view of the same workspace.
        let ws = moeplan_view::Workspace::new(
            moeplan::formats::read_trace(text.as_bytes(), &Default::default()).unwrap(),
            c,
        )
        .unwrap();
        assert_eq!(ws.judge().model().preset.name, want, "the view's model");
        let pricing = ws
            .judge()
            .priced_on(moeplan::data::hardware::preset(hardware).unwrap());
        let view = ws
            .view_priced(None, 0, moeplan::judge::Rule::Even, false, Some(&pricing))
            .unwrap();
        let js = view.plans.iter().find(|f| f.name == "eplb").unwrap();
        let js_p = js.predicted.as_ref().unwrap();
        let page_p = page.predicted.as_ref().unwrap();
        let cli_p = &cli["predicted"];
        // To the last few bits (the CLI's figures pass through its JSON);
        // traffic to rounding (the page sums even arrival in closed form).
        let within = |what: &str, a: f64, b: f64, c: f64, rel: f64| {
            let close = |x: f64, y: f64| (x - y).abs() <= rel * x.abs().max(y.abs());
            assert!(
                close(a, b) && close(b, c),
                "{preset}: {what}: CLI {a}, page {b}, JS API {c}"
            );
        };
        let same = |what: &str, a: f64, b: f64, c: f64| within(what, a, b, c, 1e-12);
        let num = |v: &serde_json::Value| {
            v.as_f64()
                .unwrap_or_else(|| panic!("{preset}: the CLI's JSON lacks a number: {cli}"))
        };
        same(
            "balancedness",
            num(&cli["balancedness"]),
            page.balancedness,
            js.balancedness,
        );
        within(
            "cross-node GB",
            num(&cli["traffic"]["cross_node_bytes"]) / 1e9,
            page.cross_node_gb,
            js.traffic.cross_node_bytes / 1e9,
            1e-9,
        );
        for (what, key, page, js) in [
            ("step ms", "step_ms", page_p.step_ms, js_p.step_ms),
            (
                "tokens/s",
                "tokens_per_s",
                page_p.tokens_per_s,
                js_p.tokens_per_s,
            ),
            (
                "MoE layer µs",
                "moe_layer_us",
                page_p.moe_layer_us,
                js_p.moe_layer_us,
            ),
            (
                "speed-up over BASE",
                "speedup",
                page_p.speedup.unwrap(),
                js_p.speedup.unwrap(),
            ),
        ] {
            same(what, num(&cli_p[key]), page, js);
        }
        assert_eq!(
            cli_p["model"], want,
            "{preset}: the CLI priced another model"
        );
        assert_eq!(js_p.model, want, "{preset}: the view priced another model");
        assert_eq!(
            num(&cli_p["moe_layers"]) as usize,
            page_p.moe_layers,
            "{preset}: MoE layers"
        );
        compared += 1;
    }
    assert_eq!(compared, 2);
}
