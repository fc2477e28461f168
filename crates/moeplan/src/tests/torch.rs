//! `torch.save` dumps: real files written by torch (zip and legacy layouts,
//! int64, float16 and bfloat16 storages, SGLang's stat and per-pass modes)
//! and hostile pickles, which must fail fast within a small budget.

use std::path::{Path, PathBuf};

use crate::formats::{ReadOptions, TraceFormat, detect, read_trace, torch};
use crate::planners::{EplbConfig, eplb};
use crate::{Error, LoadTrace, Meter, ReadLimits, Topology};

fn fixtures(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
}

fn read(dir: &str, file: &str) -> LoadTrace {
    let bytes = std::fs::read(fixtures(dir).join(file)).unwrap();
    read_trace(&bytes, &ReadOptions::default()).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn read_with(bytes: &[u8], mib: u64) -> Result<LoadTrace, Error> {
    let options = ReadOptions {
        budget: ReadLimits::mib(mib),
        ..Default::default()
    };
    read_trace(bytes, &options)
}

/// SGLang-style `torch.save` dumps made by torch 2.15 from synthetic numbers
/// (`tests/fixtures/torch`): stat mode, per-pass mode with its physical map,
/// and a float tensor that is a transposed (non-contiguous) view.
#[test]
fn torch_save_dumps_read_through_the_restricted_unpickler() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let read = |f: &str| {
        read_trace(
            &std::fs::read(dir.join(f)).unwrap(),
            &ReadOptions::default(),
        )
        .unwrap()
    };
    let stat = read("sglang_stat.pt");
    assert_eq!(
        (stat.num_batches(), stat.num_layers(), stat.num_experts()),
        (3, 3, 8)
    );
    assert_eq!(stat.layer_ids(), &[1, 2, 3]); // layer 0 all zero: dense
    assert_eq!(
        stat.counts()[[2, 2, 7]],
        expected["stat"][2][3][7].as_f64().unwrap()
    );
    let pp = read("sglang_per_pass.pt");
    assert_eq!(
        (pp.num_batches(), pp.num_layers(), pp.num_experts()),
        (2, 4, 8)
    );
    // physical slots 8 and 9 hold experts 0 and 1: their counts add up
    let phys = &expected["per_pass_counts"][1][3];
    let want = phys[0].as_f64().unwrap() + phys[8].as_f64().unwrap();
    assert_eq!(pp.counts()[[1, 3, 0]], want);
    let tr = read("float_transposed.pt");
    assert_eq!((tr.num_layers(), tr.num_experts()), (6, 4));
    assert_eq!(
        tr.counts()[[0, 5, 3]],
        expected["transposed"][5][3].as_f64().unwrap()
    );
}

/// The same `stat` counts as `sglang_stat.pt`, written by torch 2.11 with
/// the legacy (non-zip) serialisation and as float16 / bfloat16 tensors.
#[test]
fn legacy_half_and_bfloat16_dumps_read_to_the_zip_dumps_counts() {
    let zip = read("torch", "sglang_stat.pt");
    let legacy = std::fs::read(fixtures("torch").join("legacy_stat.pt")).unwrap();
    assert_eq!(detect(&legacy).unwrap(), TraceFormat::TorchPt);
    for file in ["legacy_stat.pt", "half_stat.pt", "bf16_stat.pt"] {
        let t = read("torch", file);
        assert_eq!(t.counts(), zip.counts(), "{file}");
        assert_eq!(t.layer_ids(), zip.layer_ids(), "{file}");
        assert_eq!(t.model_layers(), zip.model_layers(), "{file}");
    }
}

/// SGLang's `per_pass` mode records dense layers as all-zero rows: they are
/// dropped as `stat` mode and the JSON reader drop them, so the `.pt` and
/// the `logical_count` JSON of the same passes are the same trace, and plan
/// the same.
#[test]
fn per_pass_dump_with_dense_layers_reads_like_its_logical_count_json() {
    let pt = read("torch", "per_pass_dense.pt");
    let json = read("torch", "per_pass_dense.json");
    assert_eq!(
        (pt.num_batches(), pt.num_layers(), pt.num_experts()),
        (2, 58, 16)
    );
    assert_eq!(pt.layer_ids(), (3..61).collect::<Vec<u32>>().as_slice());
    assert_eq!(pt.model_layers(), 61);
    assert_eq!(pt.counts(), json.counts());
    assert_eq!(pt.layer_ids(), json.layer_ids());
    assert_eq!(pt.model_layers(), json.model_layers());
    let cfg = EplbConfig {
        redundant_experts: 4,
        groups: 1,
    };
    let topo = Topology::new(1, 4).unwrap();
    let from_pt = eplb(&pt, topo, cfg).unwrap();
    let from_json = eplb(&json, topo, cfg).unwrap();
    assert_eq!(from_pt.layers().len(), 58);
    assert_eq!(from_pt, from_json);
}

/// A list of two references to the previous list, `n` times: 2^n elements
/// to a copying unpickler.
fn memo_bomb(n: u8) -> Vec<u8> {
    let mut p = b"\x80\x02}X\x0d\x00\x00\x00logical_count]q\x00".to_vec();
    for i in 0..n {
        p.extend_from_slice(&[b'0', b'(', b'h', i, b'h', i, b'l', b'q', i + 1]);
    }
    p.extend_from_slice(b"s.");
    p
}

#[test]
fn memo_references_are_shared_not_copied() {
    // 62 doublings stay under the depth limit: only sharing keeps this small.
    let e = torch::read_pickle(&memo_bomb(62), &mut Meter::new(ReadLimits::mib(1))).unwrap_err();
    assert!(
        e.to_string()
            .contains("logical_count is a list, not a tensor"),
        "{e}"
    );
}

#[test]
fn nesting_past_the_budget_depth_is_refused() {
    let tuple1 = [b"\x80\x02N".as_slice(), &[0x85; 200_000], b"."].concat();
    let e = torch::read_pickle(&tuple1, &mut Meter::new(ReadLimits::mib(64))).unwrap_err();
    assert!(matches!(e, Error::Limit(_)), "{e}");
    assert!(e.to_string().contains("nests deeper than 64 levels"), "{e}");
    // the limit is the budget's, not a constant
    let shallow = ReadLimits {
        max_depth: 8,
        ..ReadLimits::mib(1)
    };
    let nine = [b"\x80\x02N".as_slice(), &[0x85; 8], b"."].concat();
    let e = torch::read_pickle(&nine, &mut Meter::new(shallow)).unwrap_err();
    assert!(e.to_string().contains("nests deeper than 8 levels"), "{e}");
}

#[test]
fn cycles_end_in_an_error_not_a_loop() {
    // {"records": L} with L = [L]
    let p = b"\x80\x02}q\x00X\x07\x00\x00\x00records]q\x01h\x01as.";
    let e = torch::read_pickle(p, &mut Meter::new(ReadLimits::mib(1))).unwrap_err();
    assert!(
        e.to_string()
            .contains("record 0 has no global_physical_count"),
        "{e}"
    );
    // a dict that is its own record list's only record: {"records": [d]}
    let p = b"\x80\x02}q\x00X\x07\x00\x00\x00records(h\x00ls.";
    let e = torch::read_pickle(p, &mut Meter::new(ReadLimits::mib(1))).unwrap_err();
    assert!(
        e.to_string()
            .contains("record 0 has no global_physical_count"),
        "{e}"
    );
}

/// The fuzzer's entry point reaches tensor decoding: every storage reads as
/// the pickle itself, far shorter than the tensor it is asked to hold.
#[test]
fn read_pickle_decodes_tensors_from_the_input() {
    let bytes = std::fs::read(fixtures("torch").join("sglang_stat.pt")).unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let name = zip
        .file_names()
        .find(|n| n.ends_with("data.pkl"))
        .unwrap()
        .to_string();
    let mut pickle = Vec::new();
    std::io::Read::read_to_end(&mut zip.by_name(&name).unwrap(), &mut pickle).unwrap();
    let e = torch::read_pickle(&pickle, &mut Meter::new(ReadLimits::mib(1))).unwrap_err();
    assert!(e.to_string().contains("past its storage"), "{e}");
    // a legacy stream is read whole, storages included
    let legacy = std::fs::read(fixtures("torch").join("legacy_stat.pt")).unwrap();
    assert!(torch::read_pickle(&legacy, &mut Meter::new(ReadLimits::mib(1))).is_ok());
    // the fuzz target's legacy head (magic, protocol 1001, empty sys info)
    // before the fixture's main pickle, keys and storage reads the same
    let head =
        b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.\x80\x02}.";
    let rebuilt = [head.as_slice(), &legacy[137..]].concat();
    assert!(torch::read_pickle(&rebuilt, &mut Meter::new(ReadLimits::mib(1))).is_ok());
    assert_eq!(
        read_with(&rebuilt, 1).unwrap().counts(),
        read("torch", "sglang_stat.pt").counts()
    );
}

/// Every hostile torch file in `broken/` fails under a budget far below the
/// default, with the bombs stopped by the budget itself.
#[test]
fn hostile_torch_files_fail_within_a_small_budget() {
    for entry in std::fs::read_dir(fixtures("broken")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("pt-") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let e = read_with(&bytes, 16).expect_err(&name);
        if ["pt-zip-bomb.pt", "pt-stride-bomb.pt"].contains(&name.as_str()) {
            assert!(
                e.to_string().contains("16 MiB reading limit"),
                "{name}: {e}"
            );
        }
    }
}

/// A truncated legacy stream, or one whose storage count overflows, says so.
#[test]
fn legacy_storages_are_checked_against_the_bytes_there() {
    let legacy = std::fs::read(fixtures("torch").join("legacy_stat.pt")).unwrap();
    for cut in [20, 200, 364, 370, legacy.len() - 1] {
        let e = read_with(&legacy[..cut], 16).unwrap_err().to_string();
        assert!(
            e.contains("ends early") || e.contains("cut off"),
            "{cut}: {e}"
        );
    }
    // the protocol version pickle (`M 1001 .` at byte 17) says None instead
    let mut wrong = legacy.clone();
    wrong.splice(17..20, *b"NNN");
    let e = read_with(&wrong, 16).unwrap_err().to_string();
    assert!(e.contains("protocol version is not 1001"), "{e}");
}
