//! The seeded trace generator: the project's embedded default, so every
//! command and the page work with no file at all.
//!
//! Each layer gets a target hottest-expert ratio (log-uniform from 2.5 to
//! 30 over the layers, in a seeded order) and log-normal mean loads whose
//! `σ` grows from the most balanced layer to the hottest (`load_spread`).
//! Each batch moves every expert's share by a mean-one log-normal drift with
//! squared CV `λ · h · (A / π + C)` (`π` the fraction of tokens picking the
//! expert, `λ` the layer's factor, `h` the expert's; [`DRIFT_A`],
//! [`DRIFT_C`], lag-1 autoregression `DRIFT_LAG1`), then draws its counts
//! as a multinomial of `tokens × top_k` assignments, no expert above one per
//! token. `crate::studies::variation` measures any trace the same way.
//!
//! Deterministic for a given configuration and seed (ChaCha8). O(B · L · E).
//!
//! How the constants were fitted: docs/calibration.md.

use ndarray::Array3;
use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Distribution, StandardNormal};

use crate::data::model::ModelPreset;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

/// Most batches the generator makes in one trace.
pub(crate) const MAX_BATCHES: usize = 100_000;

/// Drift term that falls with the fraction `π` of tokens picking the expert:
/// `A / π` in the squared CV of its share (module docs; fitted on HarMoEny).
pub const DRIFT_A: f64 = 0.00074;

/// Drift floor: `C` in the squared CV, what the hottest experts keep.
pub const DRIFT_C: f64 = 0.00966;

/// `Λ`: the drift of a layer is `exp(Λ · (2u − 1))` times the fitted one,
/// `u` its place from the most balanced (0) to the hottest (1) layer.
pub const DRIFT_LAYER_SPREAD: f64 = 0.63;

/// `η²`: each (layer, expert) drifts `h` times the fitted amount, `h`
/// log-normal with mean 1 and `Var(ln h) = η²`: experts of the same load
/// differ.
pub const DRIFT_SPREAD_VAR: f64 = 0.38;

/// Lag-1 autoregression of the drift from batch to batch.
pub(crate) const DRIFT_LAG1: f64 = -0.03;

/// Spread of the mean loads: `σ` of the log of the experts' mean loads in
/// the most balanced layer (first) and the hottest (second); layers between
/// are interpolated by their place in the skew order. Measured on SGLang's
/// DeepSeek-V3 runs and used for every preset without real data of its own
/// (module docs).
pub const LOAD_SPREAD: (f64, f64) = (0.58, 0.66);

/// [`LOAD_SPREAD`] of Qwen1.5-MoE-A2.7B, measured on HarMoEny's batches: a
/// much wider spread with a cold tail (module docs).
pub const LOAD_SPREAD_QWEN15: (f64, f64) = (0.92, 2.36);

/// The `(σ in the most balanced layer, σ in the hottest)` of the log of
/// the mean loads the generator gives `preset`: measured on the model's own
/// real data where there is some, the DeepSeek family's otherwise.
pub(crate) fn load_spread(preset: &ModelPreset) -> (f64, f64) {
    match preset.name {
        "qwen1.5-moe-a2.7b" => LOAD_SPREAD_QWEN15,
        _ => LOAD_SPREAD,
    }
}

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
/// use moeplan::{synth::generator::{generate, GenConfig}, data::model::preset};
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
    let (lo, hi) = targets
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &t| (a.min(t), b.max(t)));
    let mut counts = Array3::<f64>::zeros((cfg.batches, l, e));
    let tokens = cfg.tokens_per_batch as u64;
    let cap = 1.0 / k as f64;
    let (spread_lo, spread_hi) = load_spread(p);
    let mut mean = vec![0.0; e];
    let mut sigma = vec![0.0; e];
    let mut z = vec![0.0; e];
    let mut probs = vec![0.0; e];
    let mut row = vec![0u64; e];
    let keep = DRIFT_LAG1;
    let fresh = (1.0 - keep * keep).sqrt();
    for (li, &target) in targets.iter().enumerate() {
        let u = if hi > lo {
            (target / lo).ln() / (hi / lo).ln()
        } else {
            0.5
        };
        let spread = spread_lo + (spread_hi - spread_lo) * u;
        mean.copy_from_slice(&layer_distribution(e, target, spread, &mut rng));
        normalise_with_cap(&mut mean, cap);
        let level = (DRIFT_LAYER_SPREAD * (2.0 * u - 1.0)).exp();
        for (s, &m) in sigma.iter_mut().zip(&mean) {
            let pi = (k as f64 * m).max(1e-12);
            let g: f64 = StandardNormal.sample(&mut rng);
            let h = (DRIFT_SPREAD_VAR.sqrt() * g - 0.5 * DRIFT_SPREAD_VAR).exp();
            *s = (1.0 + level * h * (DRIFT_A / pi + DRIFT_C)).ln().sqrt();
        }
        for b in 0..cfg.batches {
            for ((pr, zi), (&m, &s)) in probs.iter_mut().zip(&mut z).zip(mean.iter().zip(&sigma)) {
                let eps: f64 = StandardNormal.sample(&mut rng);
                *zi = if b == 0 {
                    eps
                } else {
                    keep * *zi + fresh * eps
                };
                *pr = m * (s * *zi - 0.5 * s * s).exp();
            }
            normalise_with_cap(&mut probs, cap);
            multinomial_capped(&probs, tokens, k as u64, &mut rng, &mut row);
            let mut dst = counts.slice_mut(ndarray::s![b, li, ..]);
            for (d, &c) in dst.iter_mut().zip(&row) {
                *d = c as f64;
            }
        }
    }
    let ids = (p.first_moe_layer as u32..p.total_layers as u32).collect();
    Ok(LoadTrace::new(counts, ids)?
        .with_top_k(k)
        .with_model(p.name)
        .with_model_layers(p.total_layers))
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

/// A layer's mean load share per expert (summing to 1): the two hot
/// experts at `target` and 70–90 % of it times the mean, the others
/// log-normal with `σ = spread`, none above 95 % of the second-hottest.
fn layer_distribution(e: usize, target: f64, spread: f64, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut w: Vec<f64> = (0..e)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            (spread * z).exp()
        })
        .collect();
    if e < 3 {
        let sum: f64 = w.iter().sum();
        w.iter_mut().for_each(|x| *x /= sum);
        return w;
    }
    let hot = rng.random_range(0..e);
    let warm = (hot + rng.random_range(1..e)) % e;
    let ef = e as f64;
    let m1 = target;
    let m2 = (target * rng.random_range(0.7..0.9)).max(1.0);
    // The others share what the hot pair leaves, each below the warm
    // expert so the pair stays the layer's top two even when the spread is
    // wide (a log-normal of σ = 2.6 over 60 experts reaches 20× its mean).
    let left = (1.0 - (m1 + m2) / ef).max(0.0);
    let mut rest: Vec<f64> = w
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != hot && *i != warm)
        .map(|(_, &x)| x)
        .collect();
    if left > 0.0 {
        normalise_with_cap(&mut rest, 0.95 * m2 / ef / left);
    }
    let mut others = rest.into_iter();
    for (i, x) in w.iter_mut().enumerate() {
        *x = if i == hot {
            m1 / ef
        } else if i == warm {
            m2 / ef
        } else {
            left * others.next().unwrap_or(0.0)
        };
    }
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

/// Counts of `tokens × top_k` assignments drawn as a multinomial over `p`
/// (which sums to 1), one conditional binomial per expert, with no expert
/// above `tokens` (a token picks distinct experts): a draw above it is cut
/// there and the surplus goes to the others in proportion to `p`.
fn multinomial_capped(p: &[f64], tokens: u64, top_k: u64, rng: &mut ChaCha8Rng, out: &mut [u64]) {
    let mut left = tokens * top_k;
    // the mass of p[i..]
    let mut tail: f64 = p.iter().sum();
    for (i, (&pi, c)) in p.iter().zip(out.iter_mut()).enumerate() {
        let q = if tail > 0.0 {
            (pi / tail).clamp(0.0, 1.0)
        } else {
            1.0
        };
        *c = if i + 1 == p.len() || q >= 1.0 {
            left
        } else if q <= 0.0 || left == 0 {
            0
        } else {
            Binomial::new(left, q).map_or(0, |d| d.sample(rng).min(left))
        };
        left -= *c;
        tail -= pi;
    }
    // a capped expert's surplus, spread by largest remainder over the rest
    for _ in 0..p.len() {
        let surplus: u64 = out.iter().map(|&c| c.saturating_sub(tokens)).sum();
        if surplus == 0 {
            break;
        }
        out.iter_mut().for_each(|c| *c = (*c).min(tokens));
        let room: f64 = p
            .iter()
            .zip(out.iter())
            .filter(|&(_, &c)| c < tokens)
            .map(|(&x, _)| x)
            .sum();
        let share: Vec<f64> = p
            .iter()
            .zip(out.iter())
            .map(|(&x, &c)| {
                if c < tokens && room > 0.0 {
                    x / room
                } else {
                    0.0
                }
            })
            .collect();
        for (c, add) in out.iter_mut().zip(round_to_total(&share, surplus as f64)) {
            *c += add as u64;
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
    crate::sort::sort_by(&mut order, |&a, &b| {
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
    fn wide_spread_keeps_the_hot_pair_on_top() {
        // σ = 2.6 over 60 experts: the log-normal alone would put a few
        // experts far above a target of 6× the mean
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..50 {
            let w = layer_distribution(60, 6.0, 2.6, &mut rng);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            let mut sorted = w.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            assert!(
                (sorted[0] * 60.0 - 6.0).abs() < 1e-9,
                "{}",
                sorted[0] * 60.0
            );
            assert!(sorted[2] < sorted[1]);
        }
    }

    #[test]
    fn cap_holds() {
        let mut p = vec![10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        normalise_with_cap(&mut p, 0.25);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p.iter().all(|&x| x <= 0.25 + 1e-12));
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn load_spread() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{
            data::model::preset,
            synth::generator::{LOAD_SPREAD, load_spread},
        };
        assert_eq!(load_spread(preset("deepseek-v3")?), LOAD_SPREAD);
        let (lo, hi) = load_spread(preset("qwen1.5-moe-a2.7b")?);
        assert!(lo < hi && hi > LOAD_SPREAD.1);
        Ok(())
    }
}
