//! Planner notes reach the user: GRACE on a count-only trace has no expert
//! affinity and says so — on stderr in `plan`, under the table and in a
//! `notes` array of `compare --json` — and says nothing of the kind on an
//! ESFT folder, whose token routes give it the affinity.

use std::path::PathBuf;

mod common;
fn tmp(name: &str) -> PathBuf {
    common::tmp("notes", name)
}
use common::{json_of, moeplan, shared};

/// The notes of `compare --json`: the top-level array and each plan's,
/// by plan name.
fn notes(v: &serde_json::Value) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let strings = |a: &serde_json::Value| -> Vec<String> {
        a.as_array()
            .expect("notes is an array")
            .iter()
            .map(|s| s.as_str().expect("a note is a string").to_string())
            .collect()
    };
    let plans = v["plans"]
        .as_array()
        .expect("plans")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                strings(&p["notes"]),
            )
        })
        .collect();
    (strings(&v["notes"]), plans)
}

fn is_load_only_note(n: &str) -> bool {
    n.starts_with("GRACE") && n.contains("no token routes") && n.contains("load only")
}

#[test]
fn compare_on_counts_carries_graces_load_only_note() {
    let trace = tmp("counts.json");
    let o = moeplan(&[
        "gen",
        "--preset",
        "olmoe",
        "--batches",
        "2",
        "--out",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = trace.to_str().unwrap();
    let base = [
        "compare",
        "--trace",
        t,
        "--nodes",
        "1",
        "--gpus-per-node",
        "4",
    ];
    let v = json_of(&[&base[..], &["--json"]].concat());
    let (all, plans) = notes(&v);
    // Libra always says that engines load only its base (tests/libra.rs).
    let all: Vec<String> = all
        .into_iter()
        .filter(|n| !n.starts_with("Libra"))
        .collect();
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(is_load_only_note(&all[0]), "{all:?}");
    // The load-only note is GRACE's, and only GRACE's.
    for (name, n) in &plans {
        if name.starts_with("grace") {
            assert_eq!(n, &all, "{name}");
        } else if name.starts_with("libra") {
            assert!(n.iter().all(|x| x.starts_with("Libra")), "{n:?}");
        } else {
            assert!(n.is_empty(), "{name}: {n:?}");
        }
    }
    assert!(plans.iter().any(|(name, _)| name.starts_with("grace")));
    // The text table says it too.
    let o = moeplan(&base);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("note: ") && is_load_only_note(&l["note: ".len()..])),
        "{text}"
    );
    // `plan --algo grace` on stderr; another planner says nothing.
    let out = tmp("plan.json");
    let plan = |algo: &str| {
        let o = moeplan(&[
            "plan",
            "--trace",
            t,
            "--algo",
            algo,
            "--nodes",
            "1",
            "--gpus-per-node",
            "4",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let grace = plan("grace");
    assert!(
        grace
            .lines()
            .any(|l| l.starts_with("note: ") && is_load_only_note(&l["note: ".len()..])),
        "{grace}"
    );
    assert!(!plan("eplb").contains("note: "));
}

#[test]
fn compare_on_an_esft_folder_has_no_load_only_note() {
    let Some(dir) = shared("esft-deepseek-v2-lite/intent") else {
        return;
    };
    let v = json_of(&[
        "compare",
        "--trace",
        dir.to_str().unwrap(),
        "--nodes",
        "2",
        "--gpus-per-node",
        "2",
        "--json",
    ]);
    assert_eq!(v["sources"], "token routes");
    let (all, plans) = notes(&v);
    assert!(all.iter().all(|n| !n.contains("load only")), "{all:?}");
    let grace = plans
        .iter()
        .find(|(name, _)| name.starts_with("grace"))
        .expect("GRACE is compared");
    assert!(grace.1.is_empty(), "{:?}", grace.1);
    // GRACE planned on the routes: it is judged, not refused.
    let row = v["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == grace.0.as_str())
        .unwrap();
    assert!(
        row["report"]["balancedness"].as_f64().unwrap() > 0.0,
        "{row}"
    );
}
