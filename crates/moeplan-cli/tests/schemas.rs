//! Every `--json` output carries `schema_version` and is valid under its
//! JSON Schema in `schemas/` (a test per command; `common::json_of` checks
//! every other test's `--json` output the same way), every command that
//! takes `--json` has a schema, and the validator refuses what breaks one.

mod common;
use common::{assert_valid, json_of, schema_for, tmp};

/// A small generated trace (OLMoE's shape) in this test's scratch folder.
fn trace(name: &str, batches: &str, seed: &str) -> String {
    let path = tmp("schemas", name);
    let p = path.to_str().unwrap().to_string();
    let o = common::moeplan(&[
        "gen",
        "--preset",
        "olmoe",
        "--batches",
        batches,
        "--seed",
        seed,
        "--out",
        &p,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    p
}

const CLUSTER: [&str; 4] = ["--nodes", "2", "--gpus-per-node", "4"];

/// `args` with the cluster and `--json`, run and checked against its schema.
fn checked(args: &[&str]) -> serde_json::Value {
    let mut all: Vec<&str> = args.to_vec();
    if !["inspect", "hardware", "planners", "calibrate"].contains(&args[0]) {
        all.extend(CLUSTER);
    }
    all.push("--json");
    let v = json_of(&all);
    assert_eq!(v["schema_version"], 1, "{all:?}");
    v
}

#[test]
fn inspect() {
    let t = trace("inspect.json", "3", "1");
    checked(&["inspect", "--trace", &t]);
    checked(&["inspect", "--trace", &t, "--variation"]);
    if let Some(dump) = common::shared("sglang-deepseek-v3/prefill_in4096.json") {
        let v = checked(&["inspect", "--trace", dump.to_str().unwrap()]);
        assert!(v["model"].is_null() && v["layers_total"] == 61, "{v}");
    }
}

#[test]
fn plan_and_eval() {
    let t = trace("plan.json", "4", "2");
    let out = tmp("schemas", "craft-plan.json");
    let out = out.to_str().unwrap();
    let v = checked(&["plan", "--trace", &t, "--algo", "craft", "--out", out]);
    assert_eq!(v["topology"]["nodes"], 2, "{v}");
    checked(&[
        "plan",
        "--trace",
        &t,
        "--algo",
        "eplb",
        "--out",
        out,
        "--holdout",
        "0.5",
        "--hardware",
        "h100-ib-ndr",
    ]);
    checked(&["eval", "--trace", &t, "--plan", out]);
    checked(&[
        "eval",
        "--trace",
        &t,
        "--plan",
        out,
        "--hardware",
        "h100-ib-ndr",
    ]);
}

#[test]
fn compare() {
    let t = trace("compare.json", "4", "3");
    let v = checked(&["compare", "--trace", &t, "--hardware", "h100-ib-ndr"]);
    assert!(v["plans"].as_array().is_some_and(|p| p.len() >= 5), "{v}");
    checked(&[
        "compare",
        "--trace",
        &t,
        "--holdout",
        "0.5",
        "--dispatch",
        "vllm",
    ]);
}

#[test]
fn sweep() {
    let t = trace("sweep.json", "3", "4");
    checked(&["sweep", "--trace", &t]);
}

#[test]
fn replay() {
    let t = trace("replay.json", "24", "5");
    checked(&[
        "replay",
        "--trace",
        &t,
        "--every",
        "4",
        "--window",
        "4",
        "--hardware",
        "h100-ib-ndr",
    ]);
}

#[test]
fn cross() {
    let (a, b) = (
        trace("cross-a.json", "3", "6"),
        trace("cross-b.json", "3", "7"),
    );
    checked(&["cross", "--trace", &a, "--trace", &b]);
}

#[test]
fn hardware_and_planners() {
    let h = checked(&["hardware"]);
    assert!(
        h["hardware"].as_array().is_some_and(|l| l.len() >= 8),
        "{h}"
    );
    let p = checked(&["planners"]);
    assert!(
        p["planners"].as_array().is_some_and(|l| l.len() >= 6),
        "{p}"
    );
}

#[test]
fn calibrate() {
    // One compute measurement, as `calibrate` reads them: `--check` fits
    // nothing and says how far the preset lies from it.
    use moeplan::judge::Measurement;
    let params = moeplan::data::model::preset("deepseek-v3")
        .unwrap()
        .expert_params() as f64;
    let m = [Measurement::Compute {
        expert_bytes: params,
        flops_per_row: 2.0 * params,
        peak_tflops: 1979.0,
        copies: 8.0,
        rows: 64.0,
        us: 120.0,
    }];
    let file = tmp("schemas", "measured.json");
    std::fs::write(&file, serde_json::to_vec(&m).unwrap()).unwrap();
    let f = file.to_str().unwrap();
    let v = checked(&[
        "calibrate",
        "--hardware",
        "h100-ib-ndr",
        "--measurements",
        f,
        "--check",
    ]);
    assert_eq!(v["fitted"], false, "{v}");
}

/// Every command that takes `--json` has its schema, every schema file is
/// one a command prints by or one they refer to, and each carries
/// `schema_version` (required, a constant).
#[test]
fn every_json_output_has_a_schema() {
    let help = String::from_utf8(common::moeplan(&["--help"]).stdout).unwrap();
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut printed = std::collections::BTreeSet::new();
    for c in commands {
        let h = String::from_utf8(common::moeplan(&[c, "--help"]).stdout).unwrap();
        if !h.contains("--json") {
            continue;
        }
        let schema =
            schema_for(&[c, "--json"]).unwrap_or_else(|| panic!("{c} --json has no schema"));
        printed.insert(schema);
        if c == "inspect" {
            printed.insert(schema_for(&[c, "--variation", "--json"]).unwrap());
        }
    }
    assert!(printed.len() >= 11, "{printed:?}");
    let referred = [
        "moeplan.report.schema.json",
        "moeplan.hardware.schema.json",
        "moeplan.plan.schema.json",
    ];
    for entry in std::fs::read_dir(common::schemas_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            printed.contains(name.as_str()) || referred.contains(&name.as_str()),
            "schemas/{name} describes nothing moeplan writes"
        );
        if printed.contains(name.as_str()) {
            let s: serde_json::Value =
                serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
            assert_eq!(s["properties"]["schema_version"]["const"], 1, "{name}");
            assert!(
                s["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k == "schema_version"),
                "{name}: schema_version is not required"
            );
        }
    }
}

/// The validator can fail: an output without its version, with a key no
/// schema names, or with a figure of the wrong type is refused.
#[test]
fn a_broken_output_is_refused() {
    let t = trace("broken.json", "2", "8");
    let good = checked(&["compare", "--trace", &t]);
    let refused = |v: serde_json::Value, what: &str| {
        let r = std::panic::catch_unwind(|| assert_valid("moeplan.compare.schema.json", &v));
        assert!(r.is_err(), "{what} was accepted");
    };
    let mut v = good.clone();
    v.as_object_mut().unwrap().remove("schema_version");
    refused(v, "no schema_version");
    let mut v = good.clone();
    v["schema_version"] = 2.into();
    refused(v, "a newer schema_version");
    let mut v = good.clone();
    v["plans"][0]["report"]["surprise"] = 1.into();
    refused(v, "an unknown key in a report");
    let mut v = good;
    v["plans"][0]["report"]["balancedness"] = "high".into();
    refused(v, "a word for a figure");
}
