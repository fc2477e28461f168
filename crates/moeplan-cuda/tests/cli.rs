//! The `moeplan-cuda` binary as a user meets it without a GPU: `bench
//! --predict-only` runs the planner's side end to end (plan files
//! included), bad input is one line and exit 2, and the GPU path says
//! plainly that there is no device.

use std::path::PathBuf;
use std::process::{Command, Output};

use moeplan::formats;
use moeplan::planners::{EplbConfig, eplb};
use moeplan::{Topology, data::model, synth::generator};

type R = Result<(), Box<dyn std::error::Error>>;

fn cuda(args: &[&str]) -> Result<Output, std::io::Error> {
    Command::new(env!("CARGO_BIN_EXE_moeplan-cuda"))
        .args(args)
        .output()
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("moeplan-cuda-cli-{}-{name}", std::process::id()))
}

/// A one-line error with exit code 2.
fn refused(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{needle:?} in {err}");
}

fn json_lines(out: &Output) -> Result<Vec<serde_json::Value>, serde_json::Error> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(serde_json::from_str)
        .collect()
}

#[test]
fn predict_only_runs_plan_files_like_plans_made_here() -> R {
    let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 3))?;
    let plan = eplb(
        &trace,
        Topology::new(2, 4)?,
        EplbConfig {
            redundant_experts: 8,
            groups: 1,
        },
    )?;
    let (tp, pp) = (scratch("trace.json"), scratch("eplb.json"));
    std::fs::write(&tp, formats::write_trace_json(&trace))?;
    std::fs::write(&pp, formats::write_plan_json(&plan, &Default::default()))?;
    let common = [
        "bench",
        "--predict-only",
        "--json",
        "--trace",
        tp.to_str().ok_or("path")?,
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--tokens",
        "700",
        "--layer",
        "0,5",
    ];
    for rule in ["grace-topology", "libra", "sglang-static", "vllm"] {
        let mut args = common.to_vec();
        args.extend([
            "--dispatch",
            rule,
            "--plan",
            pp.to_str().ok_or("path")?,
            "--plan-algos",
            "eplb:8,contiguous",
        ]);
        let out = cuda(&args)?;
        assert!(
            out.status.success(),
            "{rule}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines = json_lines(&out)?;
        // two layers × (file, eplb:8, contiguous)
        assert_eq!(lines.len(), 6, "{rule}");
        for l in &lines {
            let rows: u64 = l["rows_per_rank"]
                .as_array()
                .ok_or("rows")?
                .iter()
                .filter_map(|x| x.as_u64())
                .sum();
            assert_eq!(rows, 700 * 8, "{rule}: {l}");
            assert_eq!(
                l["select_on_host"],
                rule == "grace-topology" || rule == "libra"
            );
        }
        // the file's plan is the plan made here: the same predictions
        for layer in [0, 1] {
            let (file, made) = (&lines[layer * 3], &lines[layer * 3 + 1]);
            assert!(
                file["plan"].as_str().ok_or("label")?.contains("eplb"),
                "{file}"
            );
            for key in [
                "predicted_trace_even_split",
                "predicted_batch_even_split",
                "predicted_integer_dispatch",
                "rows_per_rank",
            ] {
                assert_eq!(file[key], made[key], "{rule}, {key}");
            }
        }
        // and replicas help on this skewed trace, whatever the rule
        let bal = |l: &serde_json::Value| l["predicted_integer_dispatch"].as_f64().unwrap_or(0.0);
        assert!(bal(&lines[1]) > bal(&lines[2]), "{rule}: {lines:?}");
        // the cost model's layer time: the slowest rank's, each rank's
        // copies' weight reads and GEMMs
        for l in &lines {
            let ranks: Vec<f64> = l["predicted_rank_ms"]
                .as_array()
                .ok_or("predicted_rank_ms")?
                .iter()
                .filter_map(|x| x.as_f64())
                .collect();
            let max = ranks.iter().copied().fold(0.0, f64::max);
            assert!(
                max > 0.0 && l["predicted_layer_ms"].as_f64() == Some(max),
                "{l}"
            );
        }
    }
    let _ = std::fs::remove_file(&pp);

    // a plan for other layers, garbage, a trace given as a plan
    let two = moeplan::LoadTrace::new(
        trace.counts().slice(ndarray::s![.., 0..2, ..]).to_owned(),
        trace.layer_ids()[..2].to_vec(),
    )?;
    let other = moeplan::planners::base(&two, Topology::new(2, 4)?, 1)?;
    let cases: [(&[u8], &str); 3] = [
        (
            formats::write_plan_json(&other, &Default::default())
                .as_bytes()
                .to_vec()
                .leak(),
            "exactly the trace's layers",
        ),
        (b"\x00\x01not a plan", "plan"),
        (
            formats::write_trace_json(&trace).into_bytes().leak(),
            "not a plan",
        ),
    ];
    for (i, (bytes, needle)) in cases.iter().enumerate() {
        let bad = scratch(&format!("bad{i}.json"));
        std::fs::write(&bad, bytes)?;
        let mut args = common.to_vec();
        args.extend(["--plan", bad.to_str().ok_or("path")?]);
        refused(&cuda(&args)?, needle);
        let _ = std::fs::remove_file(&bad);
    }
    let mut args = common.to_vec();
    args.extend(["--dispatch", "fastest"]);
    refused(&cuda(&args)?, "unknown dispatch rule");
    let mut args = common.to_vec();
    args.extend(["--plan", "/nonexistent/plan.json"]);
    refused(&cuda(&args)?, "cannot read plan");
    let _ = std::fs::remove_file(&tp);
    Ok(())
}

#[test]
fn bench_without_a_device_says_so_in_one_line() -> R {
    if moeplan_cuda::gpu::Gpu::open(0).is_ok() {
        println!("skipped: a CUDA device is present, so the no-device message cannot be seen");
        return Ok(());
    }
    let out = cuda(&[
        "bench",
        "--preset",
        "olmoe",
        "--batches",
        "2",
        "--tokens",
        "64",
    ])?;
    refused(&out, "no CUDA device");
    Ok(())
}
