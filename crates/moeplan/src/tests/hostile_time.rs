//! A hostile text file as large as the page accepts
//! (512 MiB) is refused quickly in every text format. A 200 KB YAML plan of
//! nested `[` took 19 s before it was refused (400 KB: 74 s) — libyaml's
//! time grows with tokens × depth — so nesting is charged before any parser
//! runs, and the pre-scans stop at the first level too deep.
//!
//! One test, formats in turn: each file is half a GiB. Each refusal's time
//! is printed, not asserted (a wall-clock limit fails on a busy machine):
//! what the test holds is that nesting is refused as nesting, at its first
//! levels, whatever the file's size.

use std::time::Instant;

use crate::formats::plan_any::{PlanContext, read_any_plan};
use crate::formats::{ReadOptions, read_trace};
use crate::{LoadTrace, ReadLimits, Topology};
use ndarray::Array3;

/// The page's (and the CLI's default) reading limit.
const LIMIT: usize = (ReadLimits::DEFAULT_MIB as usize) << 20;

/// `head`, then `fill` up to the limit, then `tail`.
fn file(head: &[u8], fill: u8, tail: &[u8]) -> Vec<u8> {
    // (`vec!` of a byte is one memset, even in a debug build)
    let mut v = vec![fill; LIMIT];
    v[..head.len()].copy_from_slice(head);
    v[LIMIT - tail.len()..].copy_from_slice(tail);
    v
}

/// Runs `read` on `bytes`, which must fail mentioning `needle`; prints the
/// time it took.
fn refused(name: &str, read: impl FnOnce() -> Result<(), crate::Error>, needle: &str) {
    let t = Instant::now();
    let e = read().expect_err(name).to_string();
    eprintln!("{name}: refused in {:?}: {e}", t.elapsed());
    assert!(e.contains(needle), "{name}: {e:?} does not say {needle:?}");
}

#[test]
fn hostile_text_files_of_the_page_limit_are_refused_quickly() {
    let trace = LoadTrace::new(Array3::from_elem((1, 1, 8), 1.0), vec![3]).unwrap();
    let ctx = PlanContext::for_trace(&trace, Some(Topology::new(1, 8).unwrap()));
    let plan = |bytes: &[u8]| read_any_plan(bytes, &ctx).map(|_| ());
    let trace_of = |bytes: &[u8]| read_trace(bytes, &ReadOptions::default()).map(|_| ());
    // Nesting is refused at its first levels: a few milliseconds of work
    // (debug build) for any file size.
    let yaml = file(
        b"num_slots: 8\ninitial_global_assignments:\n  3: ",
        b'[',
        b"\n",
    );
    refused("YAML plan, nested [", || plan(&yaml), "nests deeper");
    drop(yaml);
    // brackets hidden in quotes do not hide nesting outside them
    let mut yaml = b"num_slots: 8\ninitial_global_assignments:\n  3: ".to_vec();
    yaml.extend_from_slice(&b"[\"]\", ".repeat((LIMIT - yaml.len()) / 6));
    refused("YAML plan, [\"]\" nested", || plan(&yaml), "nests deeper");
    drop(yaml);
    let yaml = file(
        b"num_slots: 8\ninitial_global_assignments:\n  3: ",
        b'{',
        b"\n",
    );
    refused("YAML plan, nested {", || plan(&yaml), "nests deeper");
    drop(yaml);
    let json = file(br#"{"logical_count": "#, b'[', b"}");
    refused("SGLang JSON trace", || trace_of(&json), "");
    drop(json);
    let json = file(br#"{"format": "moeplan.plan", "layers": "#, b'[', b"}");
    refused("plan JSON", || plan(&json), "");
    drop(json);
    let json = file(
        br#"{"num_slots": 8, "initial_global_assignments": "#,
        b'{',
        b"}",
    );
    refused("TensorRT-LLM placement as JSON", || plan(&json), "");
    drop(json);
    // a safetensors header (JSON) nested to the limit
    let len = (LIMIT - 8) as u64;
    let mut head = len.to_le_bytes().to_vec();
    head.push(b'{');
    let st = file(&head, b'[', b"}");
    refused("safetensors header", || trace_of(&st), "nests deeper");
    drop(st);
    // CSV has no nesting; its fields are charged before parsing, counted
    // no further than the budget holds (here nothing is left once the file
    // itself is charged).
    let csv = file(b"layer_id,expert_id,count\n", b',', b"\n");
    refused(
        "SGLang rank CSV of commas",
        || trace_of(&csv),
        "reading limit",
    );
    drop(csv);
    let csv = file(b",dataset,iteration,layer_idx,0,1\n", b',', b"\n");
    refused("wide CSV of commas", || trace_of(&csv), "reading limit");
    drop(csv);
    let csv = file(b"layer,gpu,slot,expert\n", b',', b"\n");
    refused("plan CSV of commas", || plan(&csv), "reading limit");
}
