//! The seeded trace generator: the project's embedded default, so every
//! command and the page work with no file at all.
//!
//! Calibrated on the real traces in `shared/data` (see the README there):
//! - layers range from balanced to very hot: each layer gets a target
//!   hottest-expert ratio (max / mean) spread log-uniformly from 2.5 to 30
//!   over the layers in a seeded order (DeepSeek-V3's real layers span
//!   4–13.7× summed over a run, HarMoEny's Qwen1.5-MoE batches 3.5–29×);
//! - the second-hottest expert carries 70–90 % of the hottest one's load, so
//!   the hottest layer's top two take ≈ 20 % (as HarMoEny's hot layers);
//! - the remaining experts follow a log-normal spread (σ = 0.35, which alone
//!   gives max / mean ≈ 2.5 over 256 experts);
//! - every batch perturbs each expert by log-normal noise whose σ is drawn
//!   per layer in 0.15–0.45 (HarMoEny's per-batch σ spans 0.12–0.56);
//! - no expert gets more than `1 / top_k` of a batch's assignments, since a
//!   token picks `top_k` distinct experts; counts are integers summing to
//!   `tokens_per_batch × top_k` in every batch and layer.
//!
//! Deterministic for a given configuration and seed (ChaCha8), on every
//! platform. O(B · L · E).

use ndarray::Array3;
use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

use crate::error::{Error, Result};
use crate::model::ModelPreset;
use crate::trace::LoadTrace;

/// Most batches the generator makes in one trace.
pub const MAX_BATCHES: usize = 100_000;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenConfig {
    /// Model shape.
    pub preset: &'static ModelPreset,
    /// Batches `B`.
    pub batches: usize,
    /// Tokens per batch (each contributes `top_k` assignments per layer).
    pub tokens_per_batch: usize,
    /// Seed; the same seed gives the same trace.
    pub seed: u64,
}

impl GenConfig {
    /// `batches` batches of 4096 tokens of `preset`, seed 7.
    pub fn new(preset: &'static ModelPreset, batches: usize) -> Self {
        GenConfig {
            preset,
            batches,
            tokens_per_batch: 4096,
            seed: 7,
        }
    }
}

/// Generates a trace.
///
/// ```
/// use moeplan::{generator::{generate, GenConfig}, model::preset};
/// let cfg = GenConfig::new(preset("deepseek-v3")?, 4);
/// let t = generate(&cfg)?;
/// assert_eq!((t.num_batches(), t.num_layers(), t.num_experts()), (4, 58, 256));
/// assert_eq!(t.layer_ids()[0], 3);
/// assert_eq!(t, generate(&cfg)?); // deterministic
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn generate(cfg: &GenConfig) -> Result<LoadTrace> {
    let p = cfg.preset;
    if cfg.batches == 0 || cfg.batches > MAX_BATCHES {
        return Err(Error::Argument(format!(
            "batches must be between 1 and {MAX_BATCHES}, got {}",
            cfg.batches
        )));
    }
    if cfg.tokens_per_batch == 0 || cfg.tokens_per_batch > 1 << 24 {
        return Err(Error::Argument(format!(
            "tokens per batch must be between 1 and {}, got {}",
            1 << 24,
            cfg.tokens_per_batch
        )));
    }
    let (l, e, k) = (p.moe_layers(), p.experts, p.top_k);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let targets = layer_targets(l, e, k, &mut rng);
    let mut counts = Array3::<f64>::zeros((cfg.batches, l, e));
    let assignments = (cfg.tokens_per_batch * k) as f64;
    let cap = 1.0 / k as f64;
    let mut probs = vec![0.0; e];
    let spread = lognormal(0.35)?;
    for (li, &target) in targets.iter().enumerate() {
        let base = layer_distribution(e, target, &spread, &mut rng);
        let sigma = rng.random_range(0.15..0.45);
        let noise = lognormal(sigma)?;
        for b in 0..cfg.batches {
            for (p, &w) in probs.iter_mut().zip(&base) {
                *p = w * noise.sample(&mut rng);
            }
            normalise_with_cap(&mut probs, cap);
            let mut row = counts.slice_mut(ndarray::s![b, li, ..]);
            for (dst, c) in row.iter_mut().zip(round_to_total(&probs, assignments)) {
                *dst = c;
            }
        }
    }
    let ids = (p.first_moe_layer as u32..p.total_layers as u32).collect();
    Ok(LoadTrace::new(counts, ids)?
        .with_top_k(k)
        .with_model(p.name)
        .with_model_layers(p.total_layers))
}

fn lognormal(sigma: f64) -> Result<LogNormal<f64>> {
    LogNormal::new(0.0, sigma).map_err(|x| Error::Argument(format!("log-normal σ = {sigma}: {x}")))
}

/// Hottest-expert ratio of each layer: log-uniform from 2.5 to 30, capped
/// by what top-k routing allows, in a seeded order over the layers.
fn layer_targets(l: usize, e: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let hi = 30.0f64.min(0.95 * e as f64 / k as f64).min(0.45 * e as f64);
    let lo = 2.5f64.min(hi);
    let mut t: Vec<f64> = (0..l)
        .map(|i| {
            let u = if l == 1 {
                1.0
            } else {
                i as f64 / (l - 1) as f64
            };
            (lo.ln() + u * (hi.ln() - lo.ln())).exp()
        })
        .collect();
    t.shuffle(rng);
    t
}

/// A layer's mean load share per expert, with the two hot experts at
/// `target` and 70–90 % of it times the mean.
fn layer_distribution(
    e: usize,
    target: f64,
    spread: &LogNormal<f64>,
    rng: &mut ChaCha8Rng,
) -> Vec<f64> {
    let mut w: Vec<f64> = (0..e).map(|_| spread.sample(rng)).collect();
    if e < 3 {
        return w;
    }
    let hot = rng.random_range(0..e);
    let warm = (hot + rng.random_range(1..e)) % e;
    let m1 = target;
    let m2 = (target * rng.random_range(0.7..0.9)).max(1.0);
    let rest: f64 = w
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != hot && *i != warm)
        .map(|(_, x)| x)
        .sum();
    // With total T = rest / (1 − (m1 + m2) / E), the hot pair sits at
    // m1 · T / E and m2 · T / E: exactly the target ratios over the mean.
    let total = rest / (1.0 - (m1 + m2) / e as f64);
    w[hot] = m1 * total / e as f64;
    w[warm] = m2 * total / e as f64;
    w
}

/// Scales `p` to sum to 1 with no entry above `cap`, moving any excess to
/// the uncapped entries in proportion (water-filling).
fn normalise_with_cap(p: &mut [f64], cap: f64) {
    let sum: f64 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= sum);
    if cap * p.len() as f64 <= 1.0 {
        return;
    }
    for _ in 0..p.len() {
        let excess: f64 = p.iter().map(|&x| (x - cap).max(0.0)).sum();
        if excess <= 1e-15 {
            break;
        }
        let free: f64 = p.iter().filter(|&&x| x < cap).sum();
        if free <= 0.0 {
            break;
        }
        let scale = 1.0 + excess / free;
        for x in p.iter_mut() {
            *x = if *x >= cap { cap } else { *x * scale };
        }
    }
}

/// Integer counts proportional to `p` summing exactly to `total`
/// (largest remainder).
fn round_to_total(p: &[f64], total: f64) -> Vec<f64> {
    let exact: Vec<f64> = p.iter().map(|x| x * total).collect();
    let mut out: Vec<f64> = exact.iter().map(|x| x.floor()).collect();
    let missing = (total - out.iter().sum::<f64>()).round().max(0.0) as usize;
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = exact[a] - out[a];
        let rb = exact[b] - out[b];
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().take(missing) {
        out[i] += 1.0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_keeps_total() {
        let p = [0.1, 0.2, 0.3, 0.4];
        let c = round_to_total(&p, 7.0);
        assert_eq!(c.iter().sum::<f64>(), 7.0);
    }

    #[test]
    fn cap_holds() {
        let mut p = vec![10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        normalise_with_cap(&mut p, 0.25);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p.iter().all(|&x| x <= 0.25 + 1e-12));
    }
}
