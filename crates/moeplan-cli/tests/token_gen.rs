//! `moeplan gen --tokens`: a generated token trace written as an ESFT
//! folder reads back through `--trace` as the same routes the core made.

use std::path::PathBuf;
use std::process::{Command, Output};

use moeplan::data::model::preset;
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};

fn moeplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_moeplan"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("moeplan-token-gen-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn generated_tokens_read_back_as_the_same_loads() {
    let dir = fresh_dir("roundtrip");
    let d = dir.to_str().unwrap();
    let made = moeplan(&[
        "gen",
        "--preset",
        "deepseek-v2-lite",
        "--tokens",
        "3000",
        "--ranks",
        "4",
        "--seed",
        "3",
        "--out",
        d,
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 26);

    let inspect = moeplan(&[
        "inspect",
        "--trace",
        d,
        "--token-model",
        "deepseek-v2-lite",
        "--tokens-per-batch",
        "1000",
        "--json",
    ]);
    assert!(
        inspect.status.success(),
        "{}",
        String::from_utf8_lossy(&inspect.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(v["batches"], 3);
    assert_eq!(v["experts"], 64);

    // the same configuration in memory: the file holds exactly its routes
    let cfg = TokenGenConfig {
        ranks: 4,
        seed: 3,
        ..TokenGenConfig::new(preset("deepseek-v2-lite").unwrap(), 3000)
    };
    let want = generate_tokens(&cfg)
        .unwrap()
        .to_load_trace(1000)
        .unwrap()
        .stats();
    let layers = v["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 26);
    for (got, want) in layers.iter().zip(&want.layers) {
        assert_eq!(got["layer"], want.layer);
        assert_eq!(got["total"].as_f64().unwrap(), 18_000.0);
        assert!((got["max_over_mean"].as_f64().unwrap() - want.max_over_mean).abs() < 1e-9);
    }

    // a second trace into the same folder would mix layers: refused
    let again = moeplan(&[
        "gen",
        "--preset",
        "deepseek-v2-lite",
        "--tokens",
        "10",
        "--out",
        d,
    ]);
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already holds"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ranks_need_tokens_and_tokens_exclude_batches() {
    let dir = fresh_dir("flags");
    let d = dir.to_str().unwrap();
    assert!(
        !moeplan(&["gen", "--ranks", "4", "--out", d])
            .status
            .success()
    );
    assert!(
        !moeplan(&["gen", "--tokens", "10", "--batches", "4", "--out", d])
            .status
            .success()
    );
    let zero = moeplan(&["gen", "--tokens", "0", "--out", d]);
    assert_eq!(zero.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
