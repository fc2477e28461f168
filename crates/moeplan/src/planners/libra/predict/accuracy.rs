//! A predictor's accuracy by Libra's Table 1 metric: the fraction of a
//! token's true top-k experts found in its predicted top-k set.

use super::*;

/// A predictor's accuracy by the Libra paper's Table 1 metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Accuracy {
    /// Mean over (token, layer) of `|predicted ∩ true| / k`.
    pub accuracy: f64,
    /// (Token, layer) predictions averaged.
    pub predictions: usize,
    /// What a uniform random set of `k` scores: `k / E`.
    pub chance: f64,
}

/// Measures `predictor` on the token routes of `work`'s batches `batches`,
/// layers 1 onwards (layer 0 has no previous layer to predict from, for
/// any predictor), by Table 1's metric. Batch 0 is skipped for the
/// previous-batch predictor, and so is every batch a path table predicts
/// before it has learnt anything. A path table is measured as Libra's
/// schedule uses it: each batch must lie outside what it has learnt, and
/// it learns the batch once measured (it grows online).
///
/// ```
/// use moeplan::planners::{accuracy, Predictor};
/// use moeplan::{data::Workload, TokenTrace};
/// use ndarray::array;
/// let t = TokenTrace::new(4, vec![0, 1], vec![array![[0, 1], [2, 3]], array![[1, 2], [0, 3]]], vec![0, 1])?;
/// let w = Workload::from_tokens(t, 1)?;
/// assert_eq!(accuracy(&Predictor::Oracle, &w, 0..2)?.accuracy, 1.0);
/// // batch 1 (token 1) predicted by batch 0's top-2 at layer 1 {1, 2}: none of {0, 3}
/// assert_eq!(accuracy(&Predictor::PreviousBatch, &w, 0..2)?.accuracy, 0.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn accuracy(predictor: &Predictor, work: &Workload, batches: Range<usize>) -> Result<Accuracy> {
    let (tokens, batch_tokens) = need_tokens(work)?;
    let mut predictor = predictor.clone();
    if let Predictor::PathTable(table) = &predictor {
        table.check(tokens)?;
    }
    let k = tokens.top_k();
    let e_n = tokens.num_experts();
    let b_n = work.trace().num_batches();
    let (mut sum, mut n) = (0.0, 0usize);
    let (mut scratch, mut set) = (Vec::new(), Vec::new());
    for b in batches.start..batches.end.min(b_n) {
        if let Predictor::PathTable(table) = &predictor {
            table.check_outside(&work.batch_range(b, batch_tokens))?;
        }
        for t in work.batch_range(b, batch_tokens) {
            for l in 1..tokens.num_layers() {
                if !predictor.token_set(work, tokens, b, (t, l), (&mut scratch, &mut set)) {
                    continue;
                }
                let truth = tokens.routes(l);
                let truth = truth.row(t);
                let hit = truth.iter().filter(|e| set.contains(e)).count();
                sum += hit as f64 / k as f64;
                n += 1;
            }
        }
        predictor.learn_batch(work, b)?;
    }
    if n == 0 {
        return Err(Error::planner(
            NAME,
            "no (token, layer) to measure accuracy on: need batches past the first and two layers",
        ));
    }
    Ok(Accuracy {
        accuracy: sum / n as f64,
        predictions: n,
        chance: k as f64 / e_n as f64,
    })
}
