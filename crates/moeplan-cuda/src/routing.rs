//! Seeded token-level routing: what the router of one MoE layer decided for
//! a batch of tokens, drawn from a layer's expert-load distribution.
//!
//! Each token picks `top_k` distinct experts by sampling without
//! replacement with probability proportional to the experts' loads
//! (Plackett–Luce, drawn with the Gumbel top-k trick: the `top_k` largest
//! `ln w_e + G_e`, `G_e` standard Gumbel), in the order drawn. Its gate
//! weights are uniform draws in `[0.05, 1)`, normalised to sum to one.
//! Experts with no load are never picked, unless fewer than `top_k` have
//! any, in which case every expert gets a tiny floor.
//!
//! Token `t` of a batch of `n` on `R` ranks comes from rank `⌊t·R/n⌋`
//! ([`source_rank`]); tokens of one rank are consecutive.
//!
//! Deterministic for a given load, size and seed (ChaCha8) on every platform.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};

/// Most (token, k) rows one batch may have: indices stay in `u32`.
pub const MAX_ROWS: usize = (u32::MAX / 2) as usize;

/// One layer's routing of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    /// Tokens `n`.
    pub tokens: usize,
    /// Experts per token.
    pub top_k: usize,
    /// Logical experts, `n × top_k`, row-major: `ids[t·top_k + k]`.
    pub ids: Vec<u32>,
    /// Gate weights, `n × top_k`, each token's summing to one.
    pub weights: Vec<f32>,
}

impl Routing {
    /// Builds a routing from explicit ids and weights (hand-worked cases).
    pub fn new(tokens: usize, top_k: usize, ids: Vec<u32>, weights: Vec<f32>) -> Result<Self> {
        let rows = tokens
            .checked_mul(top_k)
            .filter(|&r| r <= MAX_ROWS)
            .ok_or_else(|| {
                Error::Argument(format!("{tokens} tokens × top-{top_k} is too many rows"))
            })?;
        if tokens == 0 || top_k == 0 {
            return Err(Error::Argument(
                "routing needs tokens and a top-k of at least one".into(),
            ));
        }
        if ids.len() != rows || weights.len() != rows {
            return Err(Error::Argument(format!(
                "routing of {tokens} tokens × top-{top_k} needs {rows} ids and weights, got {} and {}",
                ids.len(),
                weights.len()
            )));
        }
        Ok(Routing {
            tokens,
            top_k,
            ids,
            weights,
        })
    }

    /// Rows (`tokens × top_k`).
    pub fn rows(&self) -> usize {
        self.tokens * self.top_k
    }

    /// Assignments per logical expert.
    pub fn expert_counts(&self, num_experts: usize) -> Vec<u64> {
        let mut c = vec![0u64; num_experts];
        for &e in &self.ids {
            if let Some(x) = c.get_mut(e as usize) {
                *x += 1;
            }
        }
        c
    }
}

/// The rank token `t` of `tokens` comes from when spread over `ranks` ranks.
///
/// ```
/// use moeplan_cuda::routing::source_rank;
/// assert_eq!((0..6).map(|t| source_rank(t, 6, 4)).collect::<Vec<_>>(), [0, 0, 1, 2, 2, 3]);
/// ```
pub fn source_rank(t: usize, tokens: usize, ranks: usize) -> usize {
    (t as u128 * ranks as u128 / tokens.max(1) as u128) as usize
}

/// The first token of rank `r` (`⌈r·tokens/ranks⌉`); rank `r` holds tokens
/// `rank_first_token(r) .. rank_first_token(r + 1)`.
///
/// ```
/// use moeplan_cuda::routing::rank_first_token;
/// assert_eq!((0..=4).map(|r| rank_first_token(r, 6, 4)).collect::<Vec<_>>(), [0, 2, 3, 5, 6]);
/// ```
pub fn rank_first_token(r: usize, tokens: usize, ranks: usize) -> usize {
    (r as u128 * tokens as u128).div_ceil(ranks.max(1) as u128) as usize
}

/// Draws a routing of `tokens` tokens, each picking `top_k` distinct experts
/// from the distribution `load` (one layer's counts), with `seed`.
///
/// ```
/// use moeplan_cuda::routing::generate;
/// let r = generate(&[10.0, 0.0, 5.0, 5.0], 100, 2, 1)?;
/// assert!(r.ids.iter().all(|&e| e != 1)); // no load, never picked
/// assert_eq!(r, generate(&[10.0, 0.0, 5.0, 5.0], 100, 2, 1)?);
/// # Ok::<(), moeplan_cuda::Error>(())
/// ```
pub fn generate(load: &[f64], tokens: usize, top_k: usize, seed: u64) -> Result<Routing> {
    let e = load.len();
    if top_k == 0 || top_k > e {
        return Err(Error::Argument(format!(
            "top-k must be between 1 and the {e} experts, got {top_k}"
        )));
    }
    if tokens == 0 {
        return Err(Error::Argument("at least one token is needed".into()));
    }
    if let Some(bad) = load.iter().find(|w| !w.is_finite() || **w < 0.0) {
        return Err(Error::Argument(format!(
            "expert load {bad} is not a finite non-negative number"
        )));
    }
    let total: f64 = load.iter().sum();
    let positive = load.iter().filter(|&&w| w > 0.0).count();
    let floor = if positive < top_k {
        1e-9 * (total / e as f64).max(1.0)
    } else {
        0.0
    };
    let log_w: Vec<f64> = load
        .iter()
        .map(|&w| {
            let w = w + floor;
            if w > 0.0 { w.ln() } else { f64::NEG_INFINITY }
        })
        .collect();
    let rows = tokens
        .checked_mul(top_k)
        .filter(|&r| r <= MAX_ROWS)
        .ok_or_else(|| {
            Error::Argument(format!("{tokens} tokens × top-{top_k} is too many rows"))
        })?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ids = Vec::with_capacity(rows);
    let mut weights = Vec::with_capacity(rows);
    let mut keys: Vec<(f64, u32)> = Vec::with_capacity(e);
    for _ in 0..tokens {
        keys.clear();
        for (x, &lw) in log_w.iter().enumerate() {
            // u in (0, 1): -ln(-ln u) is a standard Gumbel draw.
            let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            keys.push((lw - (-u.ln()).ln(), x as u32));
        }
        let by_key = |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if top_k < e {
            keys.select_nth_unstable_by(top_k - 1, by_key);
        }
        let top = &mut keys[..top_k];
        top.sort_unstable_by(by_key);
        let mut sum = 0.0f32;
        let start = weights.len();
        for &(_, x) in top.iter() {
            ids.push(x);
            let w: f32 = rng.random_range(0.05f32..1.0);
            sum += w;
            weights.push(w);
        }
        for w in &mut weights[start..] {
            *w /= sum;
        }
    }
    Routing::new(tokens, top_k, ids, weights)
}

/// The load distribution of layer index `layer` of `trace`: batch `batch`'s
/// counts, or the sum over all batches when `batch` is `None`.
pub fn layer_load(
    trace: &moeplan::LoadTrace,
    layer: usize,
    batch: Option<usize>,
) -> Result<Vec<f64>> {
    if layer >= trace.num_layers() {
        return Err(Error::Argument(format!(
            "layer index {layer} is outside the trace's {} layers",
            trace.num_layers()
        )));
    }
    let counts = trace.counts();
    match batch {
        Some(b) if b >= trace.num_batches() => Err(Error::Argument(format!(
            "batch {b} is outside the trace's {} batches",
            trace.num_batches()
        ))),
        Some(b) => Ok((0..trace.num_experts())
            .map(|e| counts[[b, layer, e]])
            .collect()),
        None => Ok((0..trace.num_experts())
            .map(|e| {
                (0..trace.num_batches())
                    .map(|b| counts[[b, layer, e]])
                    .sum()
            })
            .collect()),
    }
}
