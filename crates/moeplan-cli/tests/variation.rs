//! `moeplan inspect --variation`: the figures it prints are the core's
//! `variation` statistics of the trace it read, in JSON and in text, and a
//! trace with too few batches is one clear error line with exit code 2.

use std::path::PathBuf;
use std::process::{Command, Output};

use moeplan::data::model::preset;
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::studies::VariationStats;
use moeplan::synth::generator::{GenConfig, generate};
use serde_json::Value;

fn moeplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_moeplan"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn write(name: &str, content: &str) -> String {
    let dir = std::env::temp_dir().join(format!("moeplan-variation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_string_lossy().into_owned()
}

fn json_of(args: &[&str]) -> Value {
    let o = moeplan(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("one JSON object")
}

fn close(got: &Value, want: f64) -> bool {
    got.as_f64()
        .is_some_and(|x| (x - want).abs() <= 1e-12 * want.abs().max(1.0))
}

/// Every figure of the JSON against `want`, computed by the core.
fn assert_matches(got: &Value, want: &VariationStats) {
    assert_eq!(got["batches"], want.batches);
    assert_eq!(got["pairs"], want.pairs);
    assert_eq!(got["autocorrelation_pairs"], want.autocorrelation_pairs);
    for (key, x) in [
        ("weighted_cv", want.weighted_cv),
        ("median_cv", want.median_cv),
        ("lag1_autocorrelation", want.lag1_autocorrelation),
    ] {
        assert!(close(&got[key], x), "{key}: {} against {x}", got[key]);
    }
    let bins = got["by_load"].as_array().expect("by_load is a list");
    assert_eq!(bins.len(), want.by_load.len());
    for (g, w) in bins.iter().zip(&want.by_load) {
        assert_eq!(g["pairs"], w.pairs);
        assert!(close(&g["median_cv"], w.median_cv) && close(&g["rms_cv"], w.rms_cv));
    }
}

/// A wide CSV of 6 batches × 2 layers × 3 experts: layer 0 alternates, layer
/// 1 drifts slowly up and back, so both lag-1 signs and unequal CVs appear;
/// the third expert of each layer keeps a constant share.
fn fixture() -> String {
    let mut s = String::from("iteration,layer_idx,0,1,2\n");
    for b in 0..6 {
        let alt = if b % 2 == 0 { 10 } else { 30 };
        s += &format!("{b},0,{alt},{},20\n", 60 - alt);
        let drift = [50, 52, 56, 58, 57, 53][b];
        s += &format!("{b},1,{drift},{},5\n", 95 - drift);
    }
    s
}

#[test]
fn generated_trace_figures_are_the_cores() {
    let args = [
        "inspect",
        "--variation",
        "--json",
        "--preset",
        "olmoe",
        "--batches",
        "12",
        "--tokens-per-batch",
        "2048",
        "--seed",
        "3",
    ];
    let got = json_of(&args);
    let t = generate(&GenConfig {
        tokens_per_batch: 2048,
        seed: 3,
        ..GenConfig::new(preset("olmoe").unwrap(), 12)
    })
    .unwrap();
    assert_matches(&got, &VariationStats::of(&t).unwrap());
    // a generated trace varies: the check above is not comparing zeros
    assert!(got["weighted_cv"].as_f64().unwrap() > 0.01);
}

#[test]
fn fixture_figures_are_the_cores_in_json_and_text() {
    let csv = fixture();
    let path = write("fixture.csv", &csv);
    let want =
        VariationStats::of(&read_trace(csv.as_bytes(), &ReadOptions::default()).unwrap()).unwrap();
    assert_matches(
        &json_of(&["inspect", "--trace", &path, "--variation", "--json"]),
        &want,
    );
    assert_eq!((want.pairs, want.autocorrelation_pairs), (6, 4));
    // six pairs, the two constant ones without a correlation; layer 0's
    // alternating experts (−1 each) outweigh layer 1's drift (below +1)
    assert!(want.lag1_autocorrelation < 0.0);

    // the text gives the same three figures (to its three decimals), each
    // with a line saying what it is
    let o = moeplan(&["inspect", "--trace", &path, "--variation"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let figure = |name: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} line in\n{text}"));
        line[name.len()..]
            .split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("no number on {line:?}"))
    };
    for (name, x) in [
        ("load-weighted CV", want.weighted_cv),
        ("median CV", want.median_cv),
        ("lag-1 autocorrelation", want.lag1_autocorrelation),
    ] {
        assert!((figure(name) - x).abs() <= 0.0005 + 1e-12, "{name}");
    }
}

#[test]
fn one_batch_is_one_error_line_and_exit_2() {
    // run totals (one batch) have no batch-to-batch variation: the user asked
    // for something the file cannot give, which the CLI reports like any bad
    // input
    let path = write("one.csv", "iteration,layer_idx,0,1\n0,0,3,5\n0,1,4,4\n");
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["inspect", "--trace", path.as_str(), "--variation"];
        args.extend_from_slice(extra);
        let o = moeplan(&args);
        assert_eq!(o.status.code(), Some(2));
        assert!(o.stdout.is_empty());
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("at least 3 batches") && err.contains("has 1"),
            "{err}"
        );
    }
    // without --variation the same file inspects fine
    assert!(moeplan(&["inspect", "--trace", &path]).status.success());
}
