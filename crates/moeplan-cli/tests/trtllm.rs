//! TensorRT-LLM through the command line: `inspect`, `plan` and `eval` read
//! its statistics (a folder of ranks or one file), `plan --format trtllm`
//! writes the load-balancer YAML, and `eval` reads it back to the figures
//! of the same plan in moeplan's JSON.

use std::path::PathBuf;

use moeplan::formats::{self, ReadOptions};
use moeplan::{Meter, ReadLimits, Topology};

mod common;
use common::{fixtures, json_of, moeplan};

fn tmp(name: &str) -> String {
    common::tmp("trtllm", name).to_str().unwrap().to_string()
}

fn dump() -> String {
    fixtures().join("trtllm/dump").to_str().unwrap().to_string()
}

fn sglang_json() -> String {
    let p: PathBuf = fixtures().join("trtllm/sglang/expert_distribution.json");
    p.to_str().unwrap().to_string()
}

/// `inspect` on the dump folder gives SGLang's figures for the same numbers
/// (the generator wrote both), plus the top-k that `meta_info.json` holds.
#[test]
fn inspect_reads_the_dump_as_sglang_reads_its_numbers() {
    let ours = json_of(&["inspect", "--trace", &dump(), "--json"]);
    let theirs = json_of(&["inspect", "--trace", &sglang_json(), "--json"]);
    for key in ["batches", "experts", "total_tokens", "layers"] {
        assert_eq!(ours[key], theirs[key], "{key}");
    }
    assert_eq!(ours["top_k"], 2);
    // one rank's file alone reads too
    let one = fixtures().join("trtllm/dump/rank0.safetensors");
    let single = json_of(&["inspect", "--trace", one.to_str().unwrap(), "--json"]);
    assert_eq!(single["batches"], 3);
    assert!(single["total_tokens"].as_f64().unwrap() < ours["total_tokens"].as_f64().unwrap());
}

/// `plan --format trtllm` writes the YAML of the plan `--format moeplan`
/// writes for the same trace and cluster; `eval` of either file gives the
/// same balancedness, under the per-rank dispatch the dump's ranks allow.
#[test]
fn the_yaml_is_the_plan_and_evaluates_as_it() {
    let (yaml, json) = (tmp("eplb.yaml"), tmp("eplb.json"));
    for (out, format) in [(&yaml, "trtllm"), (&json, "moeplan")] {
        let o = moeplan(&[
            "plan",
            "--trace",
            &dump(),
            "--gpus-per-node",
            "4",
            "--format",
            format,
            "--out",
            out,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (plan, _) = formats::read_plan_json(&std::fs::read(&json).unwrap()).unwrap();
    let ids: Vec<u32> = plan.layers().iter().map(|l| l.layer).collect();
    assert_eq!(ids, [1, 3]);
    let mut meter = Meter::new(ReadLimits::default());
    let (read, _) = formats::read_placement(
        &std::fs::read(&yaml).unwrap(),
        Some(Topology::new(1, 4).unwrap()),
        &ids,
        8,
        &mut meter,
    )
    .unwrap();
    assert_eq!(read.layers(), plan.layers());
    let eval = |plan_file: &str| {
        json_of(&[
            "eval",
            "--trace",
            &dump(),
            "--plan",
            plan_file,
            "--gpus-per-node",
            "4",
            "--dispatch",
            "sglang-static",
            "--json",
        ])
    };
    let (a, b) = (eval(&yaml), eval(&json));
    assert_eq!(a["plan_format"], formats::PLACEMENT);
    assert_eq!(a["balancedness"], b["balancedness"]);
    assert!(a["balancedness"].as_f64().unwrap() > 0.0);
}

/// A plan with uneven slot counts is refused with how to pad it; padded,
/// every rank holds the same number of slots.
#[test]
fn uneven_plans_need_pad() {
    let out = tmp("craft.yaml");
    let args = [
        "plan",
        "--trace",
        &dump(),
        "--gpus-per-node",
        "4",
        "--algo",
        "contiguous",
        "--format",
        "trtllm",
        "--out",
        &out,
    ];
    // contiguous placement of 8 experts on 3 GPUs: 3, 3, 2 slots
    let mut three = args.to_vec();
    three[4] = "3";
    three.push("--no-pad");
    let o = moeplan(&three);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--no-pad"));
    three.pop();
    let o = moeplan(&three);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("num_slots: 9\n"), "{text}");
    // the trace read by the core is the one the CLI planned on
    let t = formats::read_trace(
        &std::fs::read(fixtures().join("trtllm/dump/rank0.safetensors")).unwrap(),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(t.layer_ids(), &[1, 3]);
}

/// `plan --algo grace` on a dump with co-occurrence files groups by them:
/// no load-only note, stderr names the co-occurrence counts as the
/// affinity's source, and the plan is not the load-only one the counts
/// alone give (the rank files copied to a folder of their own).
#[test]
fn grace_groups_by_the_dumps_cooccurrence() {
    let plan = |trace: &str, out: &str| {
        let o = moeplan(&[
            "plan",
            "--trace",
            trace,
            "--gpus-per-node",
            "4",
            "--algo",
            "grace",
            "--out",
            out,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (
            String::from_utf8_lossy(&o.stderr).into_owned(),
            formats::read_plan_json(&std::fs::read(out).unwrap())
                .unwrap()
                .0,
        )
    };
    let (stderr, by_cooc) = plan(&dump(), &tmp("grace-cooc.json"));
    assert!(!stderr.contains("no token routes"), "{stderr}");
    assert!(
        stderr.contains("affinity from co-occurrence counts"),
        "{stderr}"
    );
    // the same dump without its co-occurrence files: load only, and said
    let counts_only = common::tmp("trtllm", "counts-only");
    std::fs::create_dir_all(&counts_only).unwrap();
    for name in ["rank0.safetensors", "rank1.safetensors", "meta_info.json"] {
        std::fs::copy(
            fixtures().join("trtllm/dump").join(name),
            counts_only.join(name),
        )
        .unwrap();
    }
    let (stderr, by_load) = plan(counts_only.to_str().unwrap(), &tmp("grace-load.json"));
    assert!(stderr.contains("no token routes"), "{stderr}");
    assert_ne!(by_cooc.layers(), by_load.layers());
    // compare plans GRACE on the same affinity (its notes follow the table)
    let o = moeplan(&["compare", "--trace", &dump(), "--gpus-per-node", "4"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("affinity from co-occurrence counts"),
        "{said}"
    );
    assert!(!said.contains("no token routes"), "{said}");
}

/// A `rank<r>.safetensors` of int64 counts, one tensor per key.
fn counts_file(tensors: &[(&str, &[i64])]) -> Vec<u8> {
    let mut header = String::from("{");
    let mut offset = 0;
    for (i, (key, v)) in tensors.iter().enumerate() {
        let end = offset + 8 * v.len();
        header.push_str(&format!(
            "{}\"{key}\":{{\"dtype\":\"I64\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            if i == 0 { "" } else { "," },
            v.len()
        ));
        offset = end;
    }
    header.push('}');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    for (_, v) in tensors {
        v.iter()
            .for_each(|x| bytes.extend_from_slice(&x.to_le_bytes()));
    }
    bytes
}

/// With TensorRT-LLM's load balancer on, `ExpertStatistic`
/// counts slots (`maybe_add_info(self.num_slots, token_selected_slots)`),
/// not experts. Where the tensors' length differs from `meta_info.json`'s
/// `num_experts`, the dump is refused with one line that says so and how
/// to take one without the balancer (it was refused before as a bare
/// mismatch); where they coincide nothing can tell (docs/formats.md says so).
#[test]
fn statistics_taken_with_the_balancer_on_are_refused_with_the_reason() {
    let dir = PathBuf::from(tmp("balancer-on"));
    std::fs::create_dir_all(&dir).unwrap();
    // 4 experts, 6 slots: the balancer's two redundant slots
    std::fs::write(
        dir.join("rank0.safetensors"),
        counts_file(&[("0_3", &[5, 1, 0, 2, 3, 1]), ("0_4", &[1, 1, 1, 1, 4, 4])]),
    )
    .unwrap();
    std::fs::write(
        dir.join("meta_info.json"),
        r#"{"num_experts": 4, "num_experts_per_token": 2}"#,
    )
    .unwrap();
    let o = moeplan(&["inspect", "--trace", dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needle in [
        "load balancer",
        "6 slots",
        "4 experts",
        "moe_config.load_balancer",
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
    // the same counts, slots = experts: read as experts
    std::fs::write(
        dir.join("meta_info.json"),
        r#"{"num_experts": 6, "num_experts_per_token": 2}"#,
    )
    .unwrap();
    let v = json_of(&["inspect", "--trace", dir.to_str().unwrap(), "--json"]);
    assert_eq!(v["experts"], 6);
}

/// A 400 KB TensorRT-LLM YAML of nested `[` took 74 s before it
/// was refused (libyaml's time grows with tokens × depth); the nesting is
/// now charged before the parser runs, and the file refused in one line.
#[test]
fn a_bracket_nested_yaml_plan_is_refused_at_once() {
    let trace = tmp("nested-trace.json");
    std::fs::write(&trace, r#"{"logical_count": [[0, 0, 0, 0], [5, 3, 1, 1]]}"#).unwrap();
    let n = 200_000;
    let yaml = tmp("nested.yaml");
    let text = format!(
        "num_slots: 8\ninitial_global_assignments:\n  1: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    std::fs::write(&yaml, text).unwrap();
    let t = std::time::Instant::now();
    let o = moeplan(&[
        "eval",
        "--trace",
        &trace,
        "--plan",
        &yaml,
        "--gpus-per-node",
        "2",
    ]);
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("nests deeper than 64"), "{stderr}");
    // Refused as nesting before libyaml parses it (unguarded, this much
    // nesting took over a minute); the time is printed, not asserted.
    eprintln!("refused in {took:?}");
}
