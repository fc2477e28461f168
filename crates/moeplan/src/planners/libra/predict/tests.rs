//! The predictors' unit tests: each against a plain reference, and the
//! path table's predictions made a step at a time against all at once.

use super::path_table::top_k_by;
use super::{PathMemoBuild, PathTable, PredictedCounts, Predictor};
use crate::data::{Workload, model};
use crate::synth::token_generator::{TokenGenConfig, generate_tokens};

/// The path table's kept predictions are what the table grown online
/// predicts, batch by batch and layer by layer, for as many GPUs as
/// ranks, more, and fewer (ranks past the GPUs dropped alike); a second
/// call finds them kept.
#[test]
fn path_memo_is_the_online_table() {
    let t = generate_tokens(&TokenGenConfig::new(model::preset("olmoe").unwrap(), 640)).unwrap();
    let work = Workload::from_tokens(t.clone(), 128).unwrap();
    let (b_n, l_n) = (work.trace().num_batches(), work.trace().num_layers());
    let predictor = Predictor::PathTable(PathTable::empty(&t, 2).unwrap());
    let memo = predictor.path_memo(&work).unwrap().expect("token routes");
    let again = predictor.path_memo(&work).unwrap().expect("kept");
    assert!(std::sync::Arc::ptr_eq(&memo, &again));
    let mut checked = 0;
    for gpus in [8, 16, 4] {
        let mut online = predictor.clone();
        let (mut direct, mut kept) = (PredictedCounts::default(), PredictedCounts::default());
        for b in 0..b_n {
            for l in 0..l_n {
                online.predict_into(&work, b, l, gpus, &mut direct).unwrap();
                if b > 0 {
                    Predictor::fill_from_memo(&memo, &work, (b, l), gpus, &mut kept);
                    assert_eq!(kept, direct, "{gpus} GPUs, batch {b}, layer {l}");
                    checked += 1;
                }
            }
            online.learn_batch(&work, b).unwrap();
        }
    }
    assert_eq!(checked, 3 * (b_n - 1) * l_n);
    assert!(b_n >= 5);
    // Made a step at a time on a workload of its own (clones share
    // what is kept): the same table, after one step per batch and
    // layer past the first batch and one per 8 layers of a batch learnt
    // (`LEARN_LAYERS`: two parts here, so parts are joined too).
    let fresh = Workload::from_tokens(t.clone(), 128).unwrap();
    let mut build = PathMemoBuild::new(&fresh, 2)
        .unwrap()
        .expect("nothing kept yet");
    let mut steps = 1;
    while !build.step(&fresh).unwrap() {
        assert!(build.progress() < 1.0);
        steps += 1;
    }
    assert!(
        l_n > super::path_table::LEARN_LAYERS,
        "one part per batch: {l_n} layers"
    );
    let parts = l_n.div_ceil(super::path_table::LEARN_LAYERS);
    assert_eq!(
        (steps, build.progress()),
        ((b_n - 1) * l_n + b_n * parts, 1.0)
    );
    let stepped = predictor.path_memo(&fresh).unwrap().expect("kept");
    assert_eq!(stepped, memo);
    assert!(
        PathMemoBuild::new(&fresh, 2).unwrap().is_none(),
        "kept: nothing to make"
    );
    // A half-made build finished on a request's demand: the same table.
    let other = Workload::from_tokens(t.clone(), 128).unwrap();
    let mut half = PathMemoBuild::new(&other, 2).unwrap().unwrap();
    for _ in 0..steps / 2 {
        assert!(!half.step(&other).unwrap());
    }
    half.finish(&other).unwrap();
    assert_eq!(predictor.path_memo(&other).unwrap().expect("kept"), memo);
    // Another workload's steps are refused, not mixed in.
    let shorter = Workload::from_tokens(t.clone(), 256).unwrap();
    let mut wrong = PathMemoBuild::new(&work.clone(), 2).unwrap();
    assert!(wrong.is_none(), "kept with `work`");
    wrong = PathMemoBuild::new(&Workload::from_tokens(t.clone(), 128).unwrap(), 2).unwrap();
    assert!(wrong.unwrap().step(&shorter).is_err());
    // Other predictors, and counts without routes: none.
    assert!(Predictor::Oracle.path_memo(&work).unwrap().is_none());
    let counts = Workload::new(work.trace().clone());
    assert!(predictor.path_memo(&counts).unwrap().is_none());
}

/// The one-pass top k is the full sort's first k, ties (in the primary
/// and the secondary, drawn from few values) broken by the lower index:
/// every k from 0 past the length, on many seeded inputs.
#[test]
fn top_k_is_the_sorts_first_k() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m) as f64
    };
    let mut checked = 0;
    for n in [0usize, 1, 2, 7, 33, 256] {
        for _ in 0..20 {
            let primary: Vec<f64> = (0..n).map(|_| next(5)).collect();
            let secondary: Vec<f64> = (0..n).map(|_| next(3)).collect();
            let mut all: Vec<u32> = (0..n as u32).collect();
            all.sort_by(|&a, &b| {
                let (a, b) = (a as usize, b as usize);
                primary[b]
                    .total_cmp(&primary[a])
                    .then(secondary[b].total_cmp(&secondary[a]))
                    .then(a.cmp(&b))
            });
            for k in [0, 1, 2, 8, n, n + 1] {
                let mut out = vec![99];
                top_k_by(&primary, &secondary, k, &mut out);
                assert_eq!(out, all[..k.min(n)], "n {n}, k {k}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 6 * 20 * 6);
}
