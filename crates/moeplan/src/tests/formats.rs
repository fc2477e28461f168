//! Readers on the real traces in ../shared/data, hand-made inputs, and the
//! writers round-tripping through the readers.

use super::common;

use crate::formats::{ReadOptions, TraceFormat, detect, plan_json, read_trace, sglang, trace_json};
use crate::planners::{EplbConfig, contiguous, eplb};
use crate::{LoadTrace, Topology};
use ndarray::Array3;

#[test]
fn every_real_sglang_dump_reads_as_58_moe_layers() {
    for name in [
        "decode_in1000out1000.json",
        "decode_in500out1500.json",
        "prefill_in1024.json",
        "prefill_in2000out100.json",
        "prefill_in4096.json",
        "prefill_in512.json",
    ] {
        let Some(t) = common::read_shared_trace(&format!("sglang-deepseek-v3/{name}")) else {
            return;
        };
        assert_eq!(
            (t.num_batches(), t.num_layers(), t.num_experts()),
            (1, 58, 256),
            "{name}"
        );
        assert_eq!(t.layer_ids().first(), Some(&3));
        assert_eq!(t.layer_ids().last(), Some(&60));
        assert_eq!(t.model_layers(), 61);
        // top-8 routing: every MoE layer carries the same number of
        // assignments (prefill_in2000out100 is off by up to 0.01 %, as recorded)
        let summed = t.summed();
        let first = summed.row(0).sum();
        assert!(
            summed
                .rows()
                .into_iter()
                .all(|r| (r.sum() - first).abs() <= 1e-4 * first),
            "{name}"
        );
    }
}

#[test]
fn harmoeny_csv_is_a_per_batch_trace() {
    let Some(path) = common::shared_data("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv")
    else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(detect(&bytes).unwrap(), TraceFormat::WideCsv);
    let all = read_trace(&bytes, &ReadOptions::default()).unwrap();
    assert_eq!(
        (all.num_batches(), all.num_layers(), all.num_experts()),
        (60, 12, 60)
    );
    for b in 0..60 {
        for l in 0..12 {
            let s: f64 = all.counts().slice(ndarray::s![b, l, ..]).sum();
            assert_eq!(s, 98_304.0);
        }
    }
    let wiki = read_trace(
        &bytes,
        &ReadOptions {
            dataset: Some("wikitext".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(wiki.num_batches(), 20);
    assert!(
        read_trace(
            &bytes,
            &ReadOptions {
                dataset: Some("nope".into()),
                ..Default::default()
            }
        )
        .is_err()
    );
}

#[test]
fn three_d_logical_count_is_batches() {
    let json = br#"{"logical_count": [[[0, 0], [1, 2]], [[0, 0], [3, 4]]]}"#;
    let t = read_trace(json, &ReadOptions::default()).unwrap();
    assert_eq!(
        (t.num_batches(), t.num_layers(), t.num_experts()),
        (2, 1, 2)
    );
    assert_eq!(t.layer_ids(), &[1]);
    assert_eq!(t.counts()[[1, 0, 1]], 4.0);
}

/// The broken-input folder: every file must fail with the words listed for
/// it in `EXPECTED`, and never panic.
#[test]
fn broken_inputs_give_their_error() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broken");
    let manifest = std::fs::read_to_string(dir.join("EXPECTED")).unwrap();
    let mut seen = 0;
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (file, needle) = line.split_once('\t').unwrap();
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let result = std::panic::catch_unwind(|| read_trace(&bytes, &ReadOptions::default()));
        let err = match result {
            Ok(Ok(_)) => panic!("{file}: read without error"),
            Ok(Err(e)) => e.to_string(),
            Err(_) => panic!("{file}: panicked"),
        };
        assert!(
            err.to_lowercase().contains(&needle.to_lowercase()),
            "{file}: {err:?} does not mention {needle:?}"
        );
        seen += 1;
    }
    assert!(seen >= 30, "only {seen} broken inputs");
    // every file in the folder is listed
    let files = std::fs::read_dir(&dir).unwrap().count() - 1;
    assert_eq!(
        files, seen,
        "a file in tests/fixtures/broken has no EXPECTED line"
    );
}

#[test]
fn numpy_arrays_written_by_numpy_read_back() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/numpy");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    // 2-D float32 [layers][experts]; layer 0 is all zero (dense)
    let t = read_trace(
        &std::fs::read(dir.join("counts_f32_2d.npy")).unwrap(),
        &ReadOptions::default(),
    )
    .unwrap();
    let a2 = &expected["counts_f32_2d"];
    assert_eq!(t.layer_ids(), &[1, 2, 3]);
    assert_eq!(t.model_layers(), 4);
    assert_eq!(t.counts()[[0, 0, 5]], a2[1][5].as_f64().unwrap());
    // 3-D int64 [batches][layers][experts], compressed .npz, key logical_count
    let t = read_trace(
        &std::fs::read(dir.join("counts_i64_3d.npz")).unwrap(),
        &ReadOptions::default(),
    )
    .unwrap();
    let a3 = &expected["counts_i64_3d"];
    assert_eq!(
        (t.num_batches(), t.num_layers(), t.num_experts()),
        (3, 2, 8)
    );
    assert_eq!(t.counts()[[2, 1, 7]], a3[2][1][7].as_f64().unwrap());
}

#[test]
fn esft_token_routing_reads_and_batches() {
    let Some(dir) = common::shared_data("esft-deepseek-v2-lite/intent") else {
        return;
    };
    let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    let tokens =
        crate::formats::esft::read_esft(&files, 64, 6, &mut crate::Meter::new(Default::default()))
            .unwrap();
    assert_eq!(tokens.top_k(), 6);
    assert!(tokens.num_tokens() > 4000, "{}", tokens.num_tokens());
    let load = tokens.to_load_trace(1024).unwrap();
    assert_eq!(load.num_layers(), 26);
    assert_eq!(load.layer_ids()[0], 1);
    // every token contributes top-k assignments in every layer
    let per_layer = load.summed().row(0).sum();
    assert_eq!(per_layer, (tokens.num_tokens() * 6) as f64);
    // a layer file with different sequence lengths is refused
    let mut broken = files.clone();
    if let Some(f) = broken.iter_mut().find(|(n, _)| n == "expert_weights_2.txt") {
        f.1 = b"1\t2\t3\t4\t5\t6\t\t0.1\t0.1\t0.1\t0.1\t0.1\t0.1\n".to_vec();
    }
    assert!(
        crate::formats::esft::read_esft(&broken, 64, 6, &mut crate::Meter::new(Default::default()))
            .is_err()
    );
}

#[test]
fn trace_json_round_trips() {
    let t = crate::synth::generator::generate(&crate::synth::generator::GenConfig::new(
        crate::data::model::preset("olmoe").unwrap(),
        3,
    ))
    .unwrap();
    let back = trace_json::read(trace_json::write(&t).as_bytes()).unwrap();
    assert_eq!(back, t);
    let frac = LoadTrace::new(Array3::from_elem((1, 1, 2), 0.25), vec![0]).unwrap();
    assert_eq!(
        trace_json::read(trace_json::write(&frac).as_bytes()).unwrap(),
        frac
    );
}

#[test]
fn plan_json_round_trips_and_is_readable_from_layers_alone() {
    let t = LoadTrace::new(
        Array3::from_shape_fn((1, 2, 8), |(_, l, e)| (l * 8 + e) as f64 + 1.0),
        vec![4, 9],
    )
    .unwrap();
    let plan = eplb(
        &t,
        Topology::new(2, 2).unwrap(),
        EplbConfig {
            redundant_experts: 4,
            groups: 2,
        },
    )
    .unwrap();
    let meta = plan_json::PlanMeta {
        model_layers: Some(10),
        model: Some("x".into()),
        holdout: Some(0.5),
        options: Some(
            crate::planners::Settings::new()
                .resolved_for(crate::planners::find("eplb").unwrap().spec()),
        ),
    };
    let (back, back_meta) = plan_json::read(plan_json::write(&plan, &meta).as_bytes()).unwrap();
    assert_eq!(back, plan);
    assert_eq!(back_meta, meta);
    // what other tools write: only "layers"
    let minimal = br#"{"layers": [{"layer": 0, "gpus": [[0, 1], [2, 1]]}]}"#;
    let (p, _) = plan_json::read(minimal).unwrap();
    assert_eq!((p.topology().num_gpus(), p.num_experts()), (2, 3));
    // and broken plans are refused
    for bad in [
        &br#"{"layers": []}"#[..],
        br#"{"layers": [{"layer": 0, "gpus": [[0], [2]]}], "num_experts": 3}"#,
        br#"{"layers": [{"layer": 0, "gpus": [[0, 9]]}], "num_experts": 3}"#,
        br#"{"layers": [{"layer": 0, "gpus": [[0]]}, {"layer": 0, "gpus": [[0]]}]}"#,
        br#"{"topology": {"nodes": 0, "gpus_per_node": 1}, "layers": [{"layer": 0, "gpus": [[0]]}]}"#,
        br#"{"topology": {"nodes": 1, "gpus_per_node": 4}, "layers": [{"layer": 0, "gpus": [[0]]}]}"#,
        br#"{"format": "something-else", "layers": [{"layer": 0, "gpus": [[0]]}]}"#,
    ] {
        assert!(plan_json::read(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn sglang_export_needs_uniform_slots() {
    let t = LoadTrace::new(Array3::from_elem((1, 1, 6), 1.0), vec![0]).unwrap();
    // 6 experts on 4 GPUs: 1 or 2 slots per GPU
    let plan = contiguous(&t, Topology::new(1, 4).unwrap()).unwrap();
    assert!(sglang::write_init_expert_location(&plan, Some(1)).is_err());
    let plan = contiguous(&t, Topology::new(1, 3).unwrap()).unwrap();
    let json = sglang::write_init_expert_location(&plan, Some(3)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["physical_to_logical_map"].as_array().unwrap().len(), 3);
    assert_eq!(
        v["physical_to_logical_map"][0],
        serde_json::json!([0, 1, 2, 3, 4, 5])
    );
    // a model with fewer layers than the plan's ids is an error, not a panic
    assert!(sglang::write_init_expert_location(&plan, Some(0)).is_err());
}

fn random_trace(layers: usize, experts: usize, weights: &[u32]) -> LoadTrace {
    let counts = Array3::from_shape_fn((1, layers, experts), |(_, l, e)| {
        weights[(l * experts + e) % weights.len()] as f64
    });
    LoadTrace::new(counts, (0..layers as u32).map(|l| 2 * l + 1).collect()).unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(60))]
    /// Every plan writer, read back by its reader, gives the same plan.
    #[test]
    fn every_writer_round_trips(
        layers in 1usize..4,
        nodes in 1usize..3,
        gpn in 1usize..4,
        per_gpu in 1usize..4,
        extra in 0usize..3,
        weights in proptest::collection::vec(0u32..1000, 4..40),
    ) {
        use crate::formats::{csv as pcsv, vllm};
        let topo = Topology::new(nodes, gpn).unwrap();
        let e = topo.num_gpus() * per_gpu;
        let trace = random_trace(layers, e, &weights);
        let ids = trace.layer_ids().to_vec();
        // uniform plans (EPLB) for the engine formats
        let plan = eplb(&trace, topo, EplbConfig { redundant_experts: extra * topo.num_gpus(), groups: 1 }).unwrap();
        let strip = |p: crate::Plan| crate::Plan::new(p.topology(), p.num_experts(), p.layers().to_vec(), plan.algorithm()).unwrap();
        // the test's model has exactly its highest layer id + 1 layers
        let text = sglang::write_init_expert_location(&plan, Some(trace.model_layers())).unwrap();
        proptest::prop_assert_eq!(strip(sglang::read_init_expert_location(text.as_bytes(), topo, &ids, e).unwrap()), plan.clone());
        let text = vllm::write_physical_to_logical(&plan).unwrap();
        proptest::prop_assert_eq!(strip(vllm::read_physical_to_logical(text.as_bytes(), topo, &ids, e).unwrap()), plan.clone());
        // vllm-ascend takes no second copy of an expert on one device:
        // repaired first, where that is possible
        if let Ok(fixed) = plan.without_same_gpu_duplicates(trace.summed().view()) {
            let text = vllm::write_ascend_expert_map(&fixed).unwrap();
            proptest::prop_assert_eq!(strip(vllm::read_ascend_expert_map(text.as_bytes(), Some(topo), &ids, e).unwrap()), fixed);
        }
        let (back, _) = plan_json::read(plan_json::write(&plan, &Default::default()).as_bytes()).unwrap();
        proptest::prop_assert_eq!(back, plan.clone());
        // any plan, uneven slots included (CRAFT), for CSV and moeplan JSON
        let craft = crate::planners::craft(&trace, topo, crate::planners::ReplicaBudget::ReplicasPerGpu(extra)).unwrap();
        let strip_c = |p: crate::Plan| crate::Plan::new(p.topology(), p.num_experts(), p.layers().to_vec(), craft.algorithm()).unwrap();
        proptest::prop_assert_eq!(strip_c(pcsv::read_plan_csv(pcsv::write_plan_csv(&craft).as_bytes(), topo, e).unwrap()), craft.clone());
        let (back, _) = plan_json::read(plan_json::write(&craft, &Default::default()).as_bytes()).unwrap();
        proptest::prop_assert_eq!(back, craft.clone());
        // and padding makes any plan fit the engine formats
        let padded = craft.padded_to_uniform(trace.summed().view()).unwrap();
        proptest::prop_assert!(padded.uniform_slots_per_gpu().is_some());
        proptest::prop_assert!(vllm::write_physical_to_logical(&padded).is_ok());
    }
}

/// The published JSON Schema and the writer agree on the keys.
#[test]
fn plan_schema_matches_the_writer() {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../../schemas/moeplan.plan.schema.json")).unwrap();
    let t = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![2]).unwrap();
    let plan = contiguous(&t, Topology::new(1, 2).unwrap()).unwrap();
    let meta = plan_json::PlanMeta {
        model_layers: Some(3),
        model: Some("m".into()),
        holdout: Some(0.5),
        options: Some(
            crate::planners::Settings::new()
                .resolved_for(crate::planners::find("libra").unwrap().spec()),
        ),
    };
    let written: serde_json::Value = serde_json::from_str(&plan_json::write(&plan, &meta)).unwrap();
    let props = schema["properties"].as_object().unwrap();
    for key in written.as_object().unwrap().keys() {
        assert!(
            props.contains_key(key),
            "the writer's {key:?} is not in the schema"
        );
    }
    for key in schema["required"].as_array().unwrap() {
        assert!(
            written.get(key.as_str().unwrap()).is_some(),
            "required {key} not written"
        );
    }
    assert_eq!(written["version"], plan_json::PLAN_VERSION);
    let layer_props = props["layers"]["items"]["properties"].as_object().unwrap();
    for key in written["layers"][0].as_object().unwrap().keys() {
        assert!(
            layer_props.contains_key(key),
            "layer key {key:?} not in the schema"
        );
    }
}
