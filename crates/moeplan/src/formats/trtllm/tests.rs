//! The TensorRT-LLM readers' unit tests.

use super::placement::read_placement_yaml;
use super::*;

fn file(tensors: &[(&str, &str, &[usize], Vec<u8>)]) -> Vec<u8> {
    let mut header = String::from("{");
    let mut data = Vec::new();
    for (i, (key, dtype, shape, bytes)) in tensors.iter().enumerate() {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.push_str(&format!(
            "{}\"{key}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{start},{}]}}",
            if i == 0 { "" } else { "," },
            data.len()
        ));
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&data);
    out
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn ranks_sum_and_stay_apart() {
    let r0 = file(&[
        ("4_1", "I64", &[3], i64s(&[1, 2, 3])),
        ("5_1", "I64", &[3], i64s(&[0, 0, 7])),
    ]);
    let r2 = file(&[("4_1", "I64", &[3], i64s(&[10, 0, 0]))]);
    let mut m = crate::Meter::new(crate::ReadLimits::default());
    let s = read_statistics(
        &[("rank0.safetensors", &r0), ("rank2.safetensors", &r2)],
        &mut m,
    )
    .unwrap();
    assert_eq!(s.iterations, [4, 5]);
    assert_eq!(s.trace.counts()[[0, 0, 0]], 11.0);
    assert_eq!(s.trace.counts()[[1, 0, 2]], 7.0);
    let src = s.by_source.unwrap();
    assert_eq!(src.dim(), (2, 1, 3, 3));
    assert_eq!((src[[0, 0, 2, 0]], src[[0, 0, 1, 0]]), (10.0, 0.0));
    assert_eq!(s.ranks, [0, 2]);
}

#[test]
fn a_missing_layer_and_a_bad_key_are_named() {
    let f = file(&[
        ("4_1", "I64", &[2], i64s(&[1, 2])),
        ("5_2", "I64", &[2], i64s(&[1, 2])),
    ]);
    let mut m = crate::Meter::new(crate::ReadLimits::default());
    let e = read_statistics(&[("rank0.safetensors", &f)], &mut m).unwrap_err();
    assert!(
        e.to_string()
            .contains("iteration 4 has no counts for layer 2"),
        "{e}"
    );
    let f = file(&[("layer1", "I64", &[2], i64s(&[1, 2]))]);
    let e = read_statistics(&[("rank0.safetensors", &f)], &mut m).unwrap_err();
    assert!(e.to_string().contains("<iteration>_<layer>"), "{e}");
}

#[test]
fn per_rank_counts_are_dropped_past_the_budget_not_the_trace() {
    let f = file(&[("0_0", "I64", &[4], i64s(&[1, 2, 3, 4]))]);
    // room for the header and the 4 summed counts, not 1000 ranks × 4
    let budget = crate::ReadLimits {
        max_bytes: 4096,
        ..crate::ReadLimits::default()
    };
    let mut m = crate::Meter::new(budget);
    let s = read_statistics(&[("rank999.safetensors", &f)], &mut m).unwrap();
    assert!(s.sources_dropped && s.by_source.is_none());
    assert_eq!(s.trace.counts()[[0, 0, 3]], 4.0);
}

#[test]
fn yaml_aliases_cannot_build_past_the_text() {
    let yaml =
        b"num_slots: 2\nx: &a [0, 1]\ninitial_global_assignments:\n  0: *a\n  1: *a\n  2: *a\n";
    let mut m = crate::Meter::new(crate::ReadLimits::default());
    let e = read_placement_yaml(yaml, &mut m).unwrap_err();
    assert!(e.to_string().contains("aliases"), "{e}");
}

/// Each file of a statistics folder is told apart by its name alone.
#[test]
fn file_kind_tells_statistics_files_apart_by_name() {
    assert_eq!(file_kind("dump/rank3.safetensors"), StatFile::Counts);
    assert_eq!(
        file_kind("cooccurrence_rank3.safetensors"),
        StatFile::Cooccurrence
    );
    assert_eq!(file_kind("rank3_raw.safetensors"), StatFile::Routes);
    assert_eq!(file_kind("meta_info.json"), StatFile::Meta);
    assert_eq!(file_kind("notes.txt"), StatFile::Other);
}

/// A header length then `{` is safetensors; JSON text is not.
#[test]
fn is_safetensors_needs_a_header_length_then_a_brace() {
    assert!(is_safetensors(b"\x02\x00\x00\x00\x00\x00\x00\x00{}"));
    assert!(!is_safetensors(br#"{"logical_count": [[1]]}"#));
}

/// A placement is told by its top-level keys; a plan CSV is not one.
#[test]
fn is_placement_looks_for_the_top_level_keys() {
    assert!(is_placement(
        b"num_slots: 8\ninitial_global_assignments:\n  3: [0, 1]\n"
    ));
    assert!(!is_placement(b"layer,gpu,slot,expert\n"));
}

/// A placement YAML reads its slots; a non-numeric `num_slots` is an error.
#[test]
fn read_placement_yaml_reads_slots_and_refuses_a_bad_count() {
    let yaml = b"initial_global_assignments:\n  3: [0, 1, 1, 2]\nlayer_updates_per_iter: 0\nnum_slots: 4\n";
    let mut meter = crate::Meter::new(crate::ReadLimits::default());
    let p = read_placement_yaml(yaml, &mut meter).unwrap();
    assert_eq!((p.num_slots, p.assignments[&3].len()), (4, 4));
    let bad = b"num_slots: four\ninitial_global_assignments: {}\n";
    assert!(read_placement_yaml(bad, &mut meter).is_err());
}
