//! Plans across workloads: `moeplan cross`, `plan` with several `--trace`,
//! and the scope `eval` gives (in-sample, held-out, another trace).

mod common;

use common::{json_of, moeplan, shared, tmp};

/// Two generated traces of one model with different seeds (different
/// workloads, same layers × experts), written once per test.
fn two_traces(tag: &str) -> (String, String) {
    let mut out = Vec::new();
    for seed in ["1", "2"] {
        let p = tmp(tag, &format!("t{seed}.json"));
        let o = moeplan(&[
            "gen",
            "--preset",
            "olmoe",
            "--batches",
            "3",
            "--seed",
            seed,
            "--out",
            p.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out.push(p.to_str().unwrap().to_string());
    }
    (out[0].clone(), out[1].clone())
}

const CLUSTER: [&str; 4] = ["--nodes", "1", "--gpus-per-node", "8"];

/// `eval --json` of `plan` (a file) on `trace`.
fn eval(trace: &str, plan: &str) -> serde_json::Value {
    json_of(&["eval", "--trace", trace, "--plan", plan, "--json"])
}

/// The matrix's diagonal is what `plan` + `eval` give in-sample, and its
/// off-diagonal cells what `eval` gives on the other trace, which it calls
/// "another trace" (never in-sample).
#[test]
fn cross_matrix_matches_eval_and_names_scopes() {
    let (a, b) = two_traces("cross-diag");
    let budgets = ["--redundant-experts", "8", "--replicas-per-gpu", "2"];
    let mut args = vec!["cross", "--trace", &a, "--trace", &b, "--json"];
    args.extend(CLUSTER);
    args.extend(budgets);
    let v = json_of(&args);
    let plans = v["plans"].as_array().unwrap();
    // 3 planners × 2 traces, then EPLB, CRAFT mean and robust on both.
    assert_eq!(plans.len(), 9, "{v}");
    let traces = [&a, &b];
    for algo in ["base", "eplb", "craft"] {
        for (i, made_on) in traces.iter().enumerate() {
            let row = plans
                .iter()
                .find(|p| p["planner"] == algo && p["made_on"] == i)
                .unwrap();
            let file = tmp("cross-diag", &format!("{algo}-{i}.json"));
            let file = file.to_str().unwrap();
            let mut plan = vec!["plan", "--trace", made_on, "--algo", algo, "--out", file];
            plan.extend(CLUSTER);
            plan.extend(budgets);
            let o = moeplan(&plan);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            for (j, judged) in traces.iter().enumerate() {
                let e = eval(judged, file);
                let cell = &row["judged"][j];
                let (got, want) = (
                    cell["balancedness"].as_f64().unwrap(),
                    e["balancedness"].as_f64().unwrap(),
                );
                assert!(
                    (got - want).abs() < 1e-12,
                    "{algo} {i}→{j}: {got} vs {want}"
                );
                let scope = e["scope"].as_str().unwrap();
                if i == j {
                    assert_eq!(e["scope_kind"], "in-sample", "{scope}");
                    assert_eq!(cell["scope_kind"], "in-sample");
                } else {
                    assert_eq!(e["scope_kind"], "another-trace", "{scope}");
                    assert!(scope.starts_with("another trace"), "{scope}");
                    assert!(!scope.contains("in-sample"), "{scope}");
                    assert_eq!(cell["scope_kind"], "another-trace");
                }
            }
        }
    }
    // Plans made on both are in-sample on each.
    for row in plans.iter().filter(|p| p["made_on"] == "all") {
        for cell in row["judged"].as_array().unwrap() {
            assert_eq!(cell["scope_kind"], "in-sample", "{row}");
        }
    }
}

/// The robust plan's worst case over the traces is never below the mean
/// plan's at the same R: its first round *is* the mean plan and the plan
/// with the best worst case is kept, so this holds by construction — the
/// test guards that construction (same R, round 0 kept in the race). Where
/// the mean plan is lopsided it must gain: on the real prefill 1024 /
/// decode 1000/1000 pair (1 × 64, R = 8) the mean plan leaves the prefill
/// trace far behind.
#[test]
fn robust_worst_case_is_at_least_the_mean_plans() {
    let (a, b) = two_traces("cross-robust");
    let mut args = vec!["cross", "--trace", &a, "--trace", &b, "--json"];
    args.extend(CLUSTER);
    args.extend(["--replicas-per-gpu", "2"]);
    let v = json_of(&args);
    let row = |name: &str| {
        v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str().unwrap().ends_with(name))
            .unwrap()
            .clone()
    };
    let (mean, robust) = (row(" mean"), row(" robust"));
    assert_eq!(mean["replicas"], robust["replicas"], "same memory");
    assert!(robust["worst"].as_f64().unwrap() >= mean["worst"].as_f64().unwrap());

    let Some(dir) = shared("sglang-deepseek-v3") else {
        return;
    };
    let (p, d) = (
        dir.join("prefill_in1024.json"),
        dir.join("decode_in1000out1000.json"),
    );
    let v = json_of(&[
        "cross",
        "--trace",
        p.to_str().unwrap(),
        "--trace",
        d.to_str().unwrap(),
        "--nodes",
        "1",
        "--gpus-per-node",
        "64",
        "--groups",
        "1",
        "--replicas-per-gpu",
        "8",
        "--json",
    ]);
    let worst = |suffix: &str| {
        v["plans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str().unwrap().ends_with(suffix))
            .unwrap()["worst"]
            .as_f64()
            .unwrap()
    };
    // The mean plan's worst case (prefill) is near 0.67; the robust plan
    // must lift it by a clear margin, not by rounding.
    assert!(
        worst(" robust") > worst(" mean") + 0.02,
        "robust {} vs mean {}",
        worst(" robust"),
        worst(" mean")
    );
}

/// `plan` with several traces records all of them: `eval` calls each
/// in-sample (one of the traces planned on) and a third trace another one;
/// weights must match the traces; robust is CRAFT's.
#[test]
fn plan_on_several_traces_records_them() {
    let (a, b) = two_traces("cross-mix");
    let out = tmp("cross-mix", "mix.json");
    let out = out.to_str().unwrap();
    let mut args = vec![
        "plan",
        "--trace",
        &a,
        "--trace",
        &b,
        "--weights",
        "1,3",
        "--algo",
        "craft",
        "--objective",
        "robust",
        "--replicas-per-gpu",
        "2",
        "--out",
        out,
    ];
    args.extend(CLUSTER);
    let o = moeplan(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    let refs = file["provenance"]["traces"].as_array().unwrap();
    assert_eq!(refs.len(), 2);
    assert_eq!(refs[0]["weight"], 0.25);
    for t in [&a, &b] {
        let e = eval(t, out);
        assert_eq!(e["scope_kind"], "in-sample", "{}", e["scope"]);
        assert!(e["scope"].as_str().unwrap().contains("one of the 2 traces"));
    }
    let third = tmp("cross-mix", "t3.json");
    let o = moeplan(&[
        "gen",
        "--preset",
        "olmoe",
        "--batches",
        "3",
        "--seed",
        "3",
        "--out",
        third.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(
        eval(third.to_str().unwrap(), out)["scope_kind"],
        "another-trace"
    );

    // one weight for two traces; robust for EPLB
    let mut bad = vec![
        "plan",
        "--trace",
        &a,
        "--trace",
        &b,
        "--weights",
        "1",
        "--out",
        out,
    ];
    bad.extend(CLUSTER);
    let o = moeplan(&bad);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("weights"));
    let mut bad = vec![
        "plan",
        "--trace",
        &a,
        "--trace",
        &b,
        "--algo",
        "eplb",
        "--objective",
        "robust",
        "--out",
        out,
    ];
    bad.extend(CLUSTER);
    let o = moeplan(&bad);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("robust"));
}

/// Traces of different shapes cannot share a plan: one line, exit 2.
#[test]
fn traces_of_different_models_are_refused() {
    let (a, _) = two_traces("cross-shape");
    let other = tmp("cross-shape", "other.json");
    let o = moeplan(&[
        "gen",
        "--preset",
        "deepseek-v2-lite",
        "--batches",
        "2",
        "--out",
        other.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let mut args = vec!["cross", "--trace", &a, "--trace", other.to_str().unwrap()];
    args.extend(CLUSTER);
    let o = moeplan(&args);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("same model"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A plan made with a holdout, judged on its own trace, says held-out
/// batches; with --in-sample, in-sample; a plan file without provenance
/// (an older file) says unknown, never in-sample.
#[test]
fn eval_scope_from_provenance() {
    let p = tmp("cross-holdout", "t.json");
    let p = p.to_str().unwrap();
    let o = moeplan(&["gen", "--preset", "olmoe", "--batches", "8", "--out", p]);
    assert!(o.status.success());
    let plan = tmp("cross-holdout", "plan.json");
    let plan = plan.to_str().unwrap();
    let mut args = vec!["plan", "--trace", p, "--holdout", "0.25", "--out", plan];
    args.extend(CLUSTER);
    assert!(moeplan(&args).status.success());
    let e = eval(p, plan);
    assert_eq!(e["scope_kind"], "held-out");
    assert!(
        e["scope"]
            .as_str()
            .unwrap()
            .starts_with("held-out batches 6..8"),
        "{}",
        e["scope"]
    );
    let e = json_of(&[
        "eval",
        "--trace",
        p,
        "--plan",
        plan,
        "--in-sample",
        "--json",
    ]);
    assert_eq!(e["scope_kind"], "partly-in-sample", "{}", e["scope"]);

    let mut file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(plan).unwrap()).unwrap();
    file.as_object_mut().unwrap().remove("provenance");
    let old = tmp("cross-holdout", "old.json");
    std::fs::write(&old, file.to_string()).unwrap();
    let e = eval(p, old.to_str().unwrap());
    assert_eq!(e["scope_kind"], "unknown", "{}", e["scope"]);
}
