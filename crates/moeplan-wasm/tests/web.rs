//! The JavaScript surface in a real browser (headless Chromium through
//! wasm-bindgen-test-runner): one-call planning, the stateful planner, and
//! broken inputs thrown as errors that leave the previous state in place.
#![cfg(target_arch = "wasm32")]

use moeplan_wasm::{Planner, hardware_names, plan, planners, presets};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn get(v: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(v, &JsValue::from_str(key)).expect("object")
}

fn config(json: &str) -> JsValue {
    js_sys::JSON::parse(json).expect("valid JSON")
}

/// Bytes as JavaScript passes them.
fn u8s(bytes: &[u8]) -> JsValue {
    js_sys::Uint8Array::from(bytes).into()
}

const TRACE: &[u8] = br#"{"logical_count": [[0, 0, 0, 0, 0, 0, 0, 0], [90, 10, 10, 10, 10, 10, 10, 10], [40, 40, 5, 5, 5, 5, 5, 5]]}"#;

#[wasm_bindgen_test]
fn one_call_plan_returns_plan_and_report() {
    for algo in ["craft", "eplb", "base", "contiguous"] {
        let out = plan(
            u8s(TRACE),
            config(&format!(
                r#"{{"nodes": 1, "gpusPerNode": 4, "algorithm": "{algo}", "replicasPerGpu": 2}}"#
            )),
        )
        .unwrap_or_else(|e| panic!("{algo}: {e:?}"));
        let report = get(&out, "report");
        let bal = get(&report, "balancedness").as_f64().unwrap();
        assert!(bal > 0.0 && bal <= 1.0, "{algo}: {bal}");
        let layers = get(&get(&out, "plan"), "layers");
        assert_eq!(
            js_sys::Array::from(&layers).length(),
            2,
            "{algo}: dense layer 0 dropped"
        );
    }
}

#[wasm_bindgen_test]
fn broken_inputs_throw_one_clear_message() {
    let cases: [(&[u8], &str); 5] = [
        (b"", "empty"),
        (b"{\"logical_count\": [[1, 2], [3]]}", "ragged"),
        (b"{\"logical_count\": [[1, -5]]}", "non-negative"),
        (b"{\"logical_count\": [[1, 2], [3, ", "EOF"),
        (b"\x00\x01binary", "binary"),
    ];
    for (bytes, needle) in cases {
        let err = plan(u8s(bytes), config(r#"{"nodes": 1, "gpusPerNode": 2}"#)).unwrap_err();
        let msg: String = js_sys::Error::from(JsValue::from(err)).message().into();
        assert!(msg.contains(needle), "{msg:?} should mention {needle:?}");
    }
    // a bad setting, too
    let err = plan(u8s(TRACE), config(r#"{"nodes": 0, "gpusPerNode": 2}"#)).unwrap_err();
    let msg: String = js_sys::Error::from(JsValue::from(err)).message().into();
    assert!(msg.contains("node"), "{msg}");
    let err = plan(
        u8s(TRACE),
        config(r#"{"nodes": 1, "gpusPerNode": 2, "typo": 1}"#),
    )
    .unwrap_err();
    let msg: String = js_sys::Error::from(JsValue::from(err)).message().into();
    assert!(msg.contains("typo"), "{msg}");
}

mod fixtures {
    include!(concat!(env!("OUT_DIR"), "/broken_fixtures.rs"));
}

/// Every file of the core's broken-input folder (hostile ones included),
/// through the wasm surface: each throws its expected message, and the
/// planner keeps the trace it had.
#[wasm_bindgen_test]
fn broken_fixture_files_throw() {
    assert!(
        fixtures::BROKEN.len() >= 50,
        "the fixture list was not embedded"
    );
    let mut p = Planner::new();
    p.generate("olmoe".into(), 4.into(), 3.into()).unwrap();
    let before = p
        .configure(
            config(r#"{"nodes": 1, "gpusPerNode": 8, "groups": 1}"#),
            2.into(),
        )
        .unwrap();
    let before = js_sys::JSON::stringify(&get(&before, "plans")).unwrap();
    for (file, bytes, needle) in fixtures::BROKEN {
        let err = p.load_trace(u8s(bytes)).unwrap_err();
        let msg: String = js_sys::Error::from(JsValue::from(err)).message().into();
        assert!(
            msg.to_lowercase().contains(&needle.to_lowercase()),
            "{file}: {msg:?} should mention {needle:?}"
        );
    }
    let after = p.view(2.into(), 0.into()).unwrap();
    assert_eq!(
        js_sys::JSON::stringify(&get(&after, "plans")).unwrap(),
        before
    );
}

#[wasm_bindgen_test]
fn planner_keeps_its_trace_after_a_bad_file() {
    let mut p = Planner::new();
    p.generate("olmoe".into(), 4.into(), 3.into()).unwrap();
    let view = p
        .configure(
            config(r#"{"nodes": 1, "gpusPerNode": 8, "groups": 1}"#),
            2.into(),
        )
        .unwrap();
    let before = js_sys::JSON::stringify(&get(&view, "plans")).unwrap();
    assert!(
        p.load_trace(u8s(b"{\"logical_count\": [[1, 2], [3]]}"))
            .is_err()
    );
    let again = p.view(2.into(), 0.into()).unwrap();
    assert_eq!(
        js_sys::JSON::stringify(&get(&again, "plans")).unwrap(),
        before
    );
    // and a budget change is answered from the prepared state
    let more = p.view(4.into(), 3.into()).unwrap();
    assert_eq!(get(&more, "replicas_per_gpu").as_f64(), Some(4.0));
    let sglang = p.export(2.into(), "sglang".into()).unwrap();
    assert!(sglang.starts_with("{\"physical_to_logical_map\""));
    assert!(p.export(2.into(), "pdf".into()).is_err());
}

#[wasm_bindgen_test]
fn presets_are_listed() {
    let list = js_sys::Array::from(&presets().unwrap());
    assert!(list.length() >= 6);
    assert_eq!(
        get(&list.get(0), "name").as_string().as_deref(),
        Some("deepseek-v3")
    );
}

#[wasm_bindgen_test]
fn planners_are_listed_and_defaults_are_the_registrys() {
    let list = js_sys::Array::from(&planners().unwrap());
    assert_eq!(list.length() as usize, moeplan::planners::registry().len());
    let eplb = list.get(2);
    assert_eq!(get(&eplb, "id").as_string().as_deref(), Some("eplb"));
    let option = js_sys::Array::from(&get(&eplb, "options")).get(0);
    assert_eq!(
        get(&option, "name").as_string().as_deref(),
        Some("redundantExperts")
    );
    // 8 experts on 3 GPUs: the default is the registry's, 3 + 1 = 4 (12 slots)
    let out = plan(
        u8s(TRACE),
        config(r#"{"nodes": 1, "gpusPerNode": 3, "algorithm": "eplb"}"#),
    )
    .unwrap();
    assert_eq!(
        get(&out, "budget").as_f64(),
        Some(moeplan::planners::default_redundant_experts(8, 3) as f64)
    );
}

/// A planner priced on a hardware preset: every plan carries its predicted
/// step, BASE is 1×, and an unknown preset is one clear error.
#[wasm_bindgen_test]
fn priced_view_carries_predictions() {
    let names: Vec<String> = serde_wasm_bindgen::from_value(hardware_names().unwrap()).unwrap();
    assert!(names.iter().any(|n| n == "h100-ib-ndr"), "{names:?}");
    let mut p = Planner::new();
    p.generate("olmoe".into(), 4.into(), 1.into()).unwrap();
    p.configure(
        config(r#"{"nodes": 1, "gpusPerNode": 8, "groups": 1}"#),
        2.into(),
    )
    .unwrap();
    let v = p
        .view_priced(2.into(), 0.into(), "h100-ib-ndr".into(), JsValue::UNDEFINED)
        .unwrap();
    let plans = js_sys::Array::from(&get(&v, "plans"));
    assert!(plans.length() >= 3);
    for plan in plans.iter() {
        let pred = get(&plan, "predicted");
        assert!(get(&pred, "step_ms").as_f64().unwrap() > 0.0);
    }
    let base = get(&plans.get(0), "predicted");
    assert_eq!(get(&base, "speedup").as_f64(), Some(1.0));
    let err = p
        .view_priced(2.into(), 0.into(), "tpu-v9".into(), JsValue::UNDEFINED)
        .unwrap_err();
    let msg: String = js_sys::Error::from(JsValue::from(err)).message().into();
    assert!(msg.contains("unknown hardware"), "{msg}");
    // One model for bytes and time: the one asked for, else the trace's
    // (on two nodes, so that some bytes cross them).
    p.configure(
        config(r#"{"nodes": 2, "gpusPerNode": 4, "groups": 1}"#),
        2.into(),
    )
    .unwrap();
    let model_of = |v: &JsValue| -> (String, f64, f64) {
        let craft = js_sys::Array::from(&get(v, "plans"))
            .iter()
            .find(|p| get(p, "name").as_string().as_deref() == Some("craft"))
            .unwrap();
        let pred = get(&craft, "predicted");
        let traffic = get(&craft, "traffic");
        (
            get(&pred, "model").as_string().unwrap(),
            get(&pred, "step_ms").as_f64().unwrap(),
            get(&traffic, "cross_node_bytes").as_f64().unwrap(),
        )
    };
    let asked = p
        .view_priced(
            2.into(),
            0.into(),
            "h100-ib-ndr".into(),
            "deepseek-v3".into(),
        )
        .unwrap();
    let (model, _, bytes) = model_of(&asked);
    assert_eq!(model, "deepseek-v3");
    let again = p
        .view_priced(2.into(), 0.into(), "h100-ib-ndr".into(), JsValue::UNDEFINED)
        .unwrap();
    let (model, _, trace_bytes) = model_of(&again);
    assert_eq!(model, "olmoe", "back to the trace's model");
    // The traffic's bytes are the priced model's: DeepSeek-V3's hidden
    // size (7168) against OLMoE's (2048).
    assert!(trace_bytes > 0.0 && (bytes / trace_bytes - 7168.0 / 2048.0).abs() < 1e-12);
}

/// A thrown call's message.
fn thrown(r: Result<impl std::fmt::Debug, js_sys::Error>) -> String {
    let err = r.expect_err("the call should throw");
    js_sys::Error::from(JsValue::from(err)).message().into()
}

/// No message from the JS API speaks Rust: no `unwrap`, no `snake_case`
/// form of a camelCase key, no Rust path or type.
fn in_callers_words(msg: &str) {
    for rust in [
        "unwrap",
        "replicas_per_gpu",
        "redundant_experts",
        "gpus_per_node",
        "per_g_p_u",
        "::",
        "usize",
        "Option",
        "at line",
    ] {
        assert!(!msg.contains(rust), "{msg:?} contains {rust:?}");
    }
}

/// The three calls a new user tried (issue 51): a misspelt option, an
/// object where the bytes go, the arguments swapped; each message names
/// the argument or key as the caller wrote it, with the closest known one.
#[wasm_bindgen_test]
fn errors_name_things_as_the_caller_wrote_them() {
    let misspelt = thrown(plan(
        u8s(TRACE),
        config(r#"{"nodes": 1, "gpusPerNode": 4, "replicasPerGPU": 2}"#),
    ));
    assert!(misspelt.contains("`replicasPerGPU`"), "{misspelt}");
    assert!(
        misspelt.contains("did you mean `replicasPerGpu`?"),
        "{misspelt}"
    );
    assert!(misspelt.contains("redundantExperts"), "{misspelt}");
    in_callers_words(&misspelt);
    let snake = thrown(plan(
        u8s(TRACE),
        config(r#"{"nodes": 1, "gpusPerNode": 4, "replicas_per_gpu": 2}"#),
    ));
    assert!(
        snake.contains("unknown option `replicas_per_gpu`; did you mean `replicasPerGpu`?"),
        "{snake}"
    );
    let object = thrown(plan(
        config("{}"),
        config(r#"{"nodes": 1, "gpusPerNode": 4}"#),
    ));
    assert!(
        object.contains("plan: `trace` must be a Uint8Array, ArrayBuffer or number[]")
            && object.contains("got an object"),
        "{object}"
    );
    in_callers_words(&object);
    let swapped = thrown(plan(
        config(r#"{"nodes": 1, "gpusPerNode": 4}"#),
        JsValue::UNDEFINED,
    ));
    assert!(
        swapped.contains("they go second, plan(trace, settings)"),
        "{swapped}"
    );
    in_callers_words(&swapped);
    // the settings themselves not an object
    let settings = thrown(plan(u8s(TRACE), JsValue::from(4)));
    assert!(
        settings.contains("plan: `settings` must be an object"),
        "{settings}"
    );
    // a bad value of a known option, in camelCase
    let value = thrown(plan(
        u8s(TRACE),
        config(r#"{"nodes": 1, "gpusPerNode": 4, "replicasPerGpu": "lots"}"#),
    ));
    assert!(value.contains("replicasPerGpu"), "{value}");
    in_callers_words(&value);
    // bytes as a number[] are read like a Uint8Array
    let list = js_sys::Array::new();
    for b in TRACE {
        list.push(&JsValue::from(*b));
    }
    assert!(plan(list.into(), config(r#"{"nodes": 1, "gpusPerNode": 4}"#)).is_ok());
}

/// One wrong type per public function: each says which argument of which
/// call, and what it expected.
#[wasm_bindgen_test]
fn a_wrong_type_names_the_argument_and_what_it_expects() {
    let mut p = Planner::new();
    let cases: Vec<(String, &str)> = vec![
        (
            thrown(p.load_trace(JsValue::from("trace.json"))),
            "Planner.loadTrace: `bytes` must be a Uint8Array",
        ),
        (
            thrown(p.generate(JsValue::from(3), 4.into(), 1.into())),
            "Planner.generate: `preset` must be a string",
        ),
        (
            thrown(p.generate("olmoe".into(), "four".into(), 1.into())),
            "Planner.generate: `batches` must be a whole number",
        ),
        (
            thrown(p.generate("olmoe".into(), 4.into(), JsValue::from(-1))),
            "Planner.generate: `seed` must be a whole number",
        ),
        (
            thrown(p.generate("olmo".into(), 4.into(), 1.into())),
            "did you mean `olmoe`?",
        ),
    ];
    p.generate("olmoe".into(), 4.into(), 1.into()).unwrap();
    let mut more: Vec<(String, &str)> = vec![
        (
            thrown(p.configure(JsValue::from("2x8"), JsValue::UNDEFINED)),
            "Planner.configure: `cluster` must be an object",
        ),
        (
            thrown(p.configure(
                config(r#"{"nodes": 1, "gpusPerNodes": 8}"#),
                JsValue::UNDEFINED,
            )),
            "unknown cluster setting `gpusPerNodes`; did you mean `gpusPerNode`?",
        ),
        (
            thrown(p.configure(
                config(r#"{"nodes": "1", "gpusPerNode": 8}"#),
                JsValue::UNDEFINED,
            )),
            "`cluster.nodes` must be a whole number",
        ),
        (
            thrown(p.configure(
                config(r#"{"nodes": 1, "gpusPerNode": 8}"#),
                JsValue::from("auto"),
            )),
            "`replicasPerGpu` must be a whole number from 0 to 65536 or undefined",
        ),
    ];
    p.configure(
        config(r#"{"nodes": 1, "gpusPerNode": 8, "groups": 1}"#),
        JsValue::UNDEFINED,
    )
    .unwrap();
    more.extend([
        (
            thrown(p.view(JsValue::from("2"), 0.into())),
            "Planner.view: `replicasPerGpu` must be a whole number",
        ),
        (
            thrown(p.view(2.into(), JsValue::from(1.5))),
            "Planner.view: `layer` must be a whole number",
        ),
        (
            thrown(p.view_priced(2.into(), 0.into(), JsValue::from(100), JsValue::UNDEFINED)),
            "Planner.viewPriced: `hardware` must be a string",
        ),
        (
            thrown(p.view_priced(2.into(), 0.into(), "h100-ib".into(), JsValue::UNDEFINED)),
            "did you mean `h100-ib-ndr`?",
        ),
        (
            thrown(p.view_priced(2.into(), 0.into(), "h100-ib-ndr".into(), JsValue::from(7))),
            "Planner.viewPriced: `model` must be a string",
        ),
        (
            thrown(p.export(2.into(), JsValue::NULL)),
            "Planner.export: `format` must be a string",
        ),
    ]);
    for (msg, needle) in cases.iter().chain(&more) {
        assert!(msg.contains(needle), "{msg:?} should say {needle:?}");
        in_callers_words(msg);
    }
}
