//! The messages' unit tests: each round trip and the numbers' packing.

use super::*;
use moeplan::planners::CurvePoint;
use moeplan_view::PlannerNote;
use moeplan_view::page::{Figures, Frame, Grouping, Heat, PlacedLayer, Predicted, Slot};

fn full() -> Response {
    let figures = |name: &str, b: f64| Figures {
        name: name.into(),
        label: name.to_uppercase(),
        balancedness: b,
        imbalance_ratio: 1.0 / b,
        replicas: 3,
        replica_slots_per_gpu: 1,
        bound: 0.99,
        rule: "optimal".into(),
        traffic: [0.25, 0.5, 0.25],
        cross_node_gb: 1.5,
        per_layer: vec![b, b / 2.0, 1.0 / 3.0],
        replicas_per_layer: vec![0, 1, 2],
        per_batch_imbalance: vec![1.0 / b, 1.25, 1.5, 2.0],
        per_batch_bytes: if b > 0.6 {
            vec![3e9, 0.0, 1e9, 2e9]
        } else {
            vec![]
        },
        schedule: (b > 0.6).then(|| "per batch, libra-rebalance".into()),
        predicted: (b > 0.6).then(|| Predicted {
            hardware: "h100-ib-ndr".into(),
            step_ms: 12.5,
            tokens_per_s: 1e5,
            speedup: Some(1.25),
            moe_layers: 58,
            ..Predicted::default()
        }),
    };
    Response::View {
        id: 7,
        stats: None,
        update: Box::new(Update {
            frame: Some(Frame {
                topology: "1 node(s) × 2 GPU(s)".into(),
                layer_ids: vec![3, 4, 5],
                batches: 4,
                plans: vec!["base".into(), "craft".into()],
                notes: vec!["EPLB: no".into()],
                planner_notes: vec![PlannerNote {
                    name: "grace".into(),
                    text: "GRACE: by load".into(),
                }],
                focus: "craft".into(),
                auto_replicas_per_gpu: 2,
                model: "qwen3-30b-a3b".into(),
                curve: vec![CurvePoint {
                    replicas_per_gpu: 1,
                    replicas: 2,
                    predicted_balancedness: 0.9,
                    bound: 0.95,
                }],
            }),
            plans: vec![figures("base", 0.5), figures("craft", 0.875)],
            replicas_per_gpu: 2,
            rule: "optimal".into(),
            heat: Heat::from_rows(&[vec![1.0, 1.0], vec![0.5, 1.5], vec![1.25, 0.75]]),
            placement: Some(PlacedLayer {
                layer: 4,
                gpus: vec![
                    vec![Slot {
                        expert: 0,
                        copies: 2,
                        share: 0.125,
                    }],
                    vec![],
                ],
            }),
            grouping: Some(Grouping {
                layer: 4,
                ratio: Some(0.2),
                curve: vec![(0.0, 0.0, 0.5), (0.2, 1.5, 0.75)],
                order: vec![1, 0],
                sizes: vec![1, 1],
                affinity: vec![0.0, 1.0, 1.0, 0.0],
            }),
        }),
        worker_ms: 2.5,
        span: (1.0, 2.0),
        phase_ms: vec![("grouping experts by affinity (GRACE)".into(), 12.5)],
    }
}

#[test]
fn a_full_view_round_trips() {
    let r = full();
    let (json, numbers) = encode(&r).unwrap();
    assert!(!json.contains("per_layer"), "{json}");
    assert_eq!(decode(&json, numbers.as_deref()).unwrap(), r);
}

#[test]
fn other_messages_have_no_numbers() {
    let r = Response::Error {
        id: 1,
        message: "x".into(),
    };
    let (json, numbers) = encode(&r).unwrap();
    assert!(numbers.is_none());
    assert_eq!(decode(&json, None).unwrap(), r);
    // The panic hook's message, as the e2e test also posts it.
    assert!(matches!(
        decode(r#"{"kind":"crashed","message":"m"}"#, None),
        Ok(Response::Crashed { .. })
    ));
}

#[test]
fn broken_numbers_are_an_error_not_a_panic() {
    let (json, numbers) = encode(&full()).unwrap();
    let numbers = numbers.unwrap();
    assert!(decode(&json, None).is_err());
    for cut in 0..numbers.len() {
        assert!(decode(&json, Some(&numbers[..cut])).is_err(), "{cut}");
    }
    let mut extra = numbers.clone();
    extra.push(1.0);
    assert!(decode(&json, Some(&extra)).is_err());
    let mut bad = numbers;
    bad[0] = 1e300;
    assert!(decode(&json, Some(&bad)).is_err());
    bad[0] = -1.0;
    assert!(decode(&json, Some(&bad)).is_err());
}
