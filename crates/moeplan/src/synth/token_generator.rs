//! The seeded token-level generator: a [`TokenTrace`] (every token's top-k
//! experts per MoE layer, and its data-parallel rank) with planted
//! co-activation, for the planners that read token routes (GRACE's affinity
//! grouping, traffic under per-source dispatch) when no real trace is at hand.
//!
//! Each layer splits its experts into `topics` sets. A token draws a topic
//! from its rank's topic weights (kept into the next layer with probability
//! `layer_stickiness`), then `top_k` distinct experts by successive sampling
//! from a mixture: its topic's experts with weight `c` (the cohesion), all
//! experts with `1 − c`, each in proportion to its popularity (the count
//! generator's, [`crate::synth::generator`]; a fixed point keeps each
//! expert's expected share at it). A token's rank is where it sits in its
//! batch when the batch size is given ([`TokenGenConfig::batch_tokens`]):
//! each batch's tokens in equal contiguous shares, one per rank, as an
//! engine's scheduler balances tokens over data-parallel ranks
//! ([`TokenTrace::with_tokens_dealt_evenly`]); else sequence `s` runs on
//! rank `s mod ranks` ([`TokenTrace::with_sequences_on_ranks`]). Either way
//! a rank's topic preferences follow its own tokens.
//!
//! Deterministic for a configuration and seed (ChaCha8: one stream for the
//! ranks and topics, one per layer, so the `parallel` feature's per-layer
//! threads draw the same numbers). `O(L · (F · T · E + N · k))` for `L`
//! layers, `E` experts, `T` topics, `N` tokens, `F` fixed-point rounds;
//! sampling one expert is `O(1)` (an alias table per topic).
//!
//! How the constants were fitted: docs/calibration.md.

use ndarray::Array2;
use rand::{Rng, RngCore, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::data::model::ModelPreset;
use crate::data::trace::TokenTrace;
use crate::error::{Error, Result};
use crate::planners::shared::layers::map_layers;
use crate::synth::generator::{GenConfig, generate};

/// Most tokens one trace holds.
pub(crate) const MAX_TOKENS: usize = 1 << 22;
/// Most expert ids (`tokens × layers × top_k`) one trace holds: 1 GiB.
pub(crate) const MAX_ROUTES: usize = 1 << 28;
/// Most data-parallel ranks.
pub(crate) const MAX_RANKS: usize = 1 << 16;

/// Mean cohesion: the weight of a token's own topic in its sampling mixture.
pub(crate) const COHESION: f64 = 0.8;
/// Cohesion of the layers spreads uniformly over `COHESION ± this`.
pub(crate) const COHESION_SPREAD: f64 = 0.1;
/// Log-spread of a rank's preference for a topic.
pub(crate) const RANK_SKEW: f64 = 0.3;
/// Chance that a token's topic carries over (under the maximal coupling) to
/// the next layer rather than being drawn afresh.
pub(crate) const LAYER_STICKINESS: f64 = 1.0;
/// Tokens per sequence (the unit dealt to ranks).
pub(crate) const SEQUENCE_TOKENS: usize = 256;

/// Tokens of the one batch the popularity is drawn from (large, so its
/// sampling noise is negligible).
const POPULARITY_TOKENS: usize = 1 << 20;
/// Rounds of the popularity fixed point.
const FIT_ROUNDS: usize = 10;
/// Highest inclusion probability aimed at: an expert every token picks would
/// need an infinite weight.
const MAX_INCLUSION: f64 = 0.97;
/// Consecutive rejected draws before a token's next expert is drawn exactly.
const MAX_REJECTIONS: usize = 16;

/// Topics per layer by default: `⌈E / (k − 1)⌉`, sets of about `k − 1`
/// experts, so a token's experts come mostly, not only, from its topic (13
/// for DeepSeek-V2-Lite, where the fit chose it; 37 for DeepSeek-V3).
pub(crate) fn default_topics(preset: &ModelPreset) -> usize {
    let per = preset.top_k.saturating_sub(1).max(1);
    preset.experts.div_ceil(per).clamp(1, preset.experts.max(1))
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenGenConfig {
    /// Model shape.
    pub preset: &'static ModelPreset,
    /// Tokens `N`.
    pub tokens: usize,
    /// Data-parallel ranks the tokens come from.
    pub ranks: usize,
    /// Seed; the same seed gives the same trace.
    pub seed: u64,
    /// Topics (expert sets) per layer.
    pub topics: usize,
    /// Mean weight of a token's topic in its sampling mixture, in `[0, 1)`.
    pub cohesion: f64,
    /// Layers' cohesion spreads uniformly over `cohesion ± this`.
    pub cohesion_spread: f64,
    /// Log-spread of the ranks' topic preferences (0: every rank alike).
    pub rank_skew: f64,
    /// Chance a token's topic latent carries to the next layer, in `[0, 1]`.
    pub layer_stickiness: f64,
    /// Tokens per sequence; sequence `s` runs on rank `s mod ranks` when
    /// `batch_tokens` is 0.
    pub sequence_tokens: usize,
    /// Tokens per batch the trace will be cut into; each batch's tokens are
    /// dealt to the ranks in equal contiguous shares (every rank within one
    /// token of the batch's mean). 0: whole sequences round-robin, the rule
    /// the constants were calibrated under (a rank holding a sequence
    /// holds many times the mean of a small batch).
    pub batch_tokens: usize,
}

impl TokenGenConfig {
    /// `tokens` tokens of `preset` from 8 ranks, seed 7, the calibrated
    /// structure: `default_topics` topics.
    ///
    /// ```
    /// use moeplan::{data::model::preset, synth::token_generator::TokenGenConfig};
    /// let cfg = TokenGenConfig::new(preset("deepseek-v2-lite")?, 1024);
    /// assert_eq!((cfg.topics, cfg.ranks), (13, 8));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(preset: &'static ModelPreset, tokens: usize) -> Self {
        TokenGenConfig {
            preset,
            tokens,
            ranks: 8,
            seed: 7,
            topics: default_topics(preset),
            cohesion: COHESION,
            cohesion_spread: COHESION_SPREAD,
            rank_skew: RANK_SKEW,
            layer_stickiness: LAYER_STICKINESS,
            sequence_tokens: SEQUENCE_TOKENS,
            batch_tokens: 0,
        }
    }

    /// The data-parallel rank of token `i` (see [`TokenGenConfig::batch_tokens`]).
    fn rank_of(&self, i: usize) -> usize {
        if self.batch_tokens == 0 {
            return (i / self.sequence_tokens) % self.ranks;
        }
        let start = i - i % self.batch_tokens;
        let len = self.batch_tokens.min(self.tokens - start);
        // floor(j · ranks / len): shares differ by at most one token, as
        // `TokenTrace::with_tokens_dealt_evenly` deals them.
        ((i - start) as u128 * self.ranks as u128 / len as u128) as usize
    }

    fn check(&self) -> Result<()> {
        let p = self.preset;
        let bad = |what: String| Err(Error::Argument(what));
        if self.tokens == 0 || self.tokens > MAX_TOKENS {
            return bad(format!(
                "tokens must be between 1 and {MAX_TOKENS}, got {}",
                self.tokens
            ));
        }
        let routes = self
            .tokens
            .saturating_mul(p.moe_layers())
            .saturating_mul(p.top_k);
        if routes > MAX_ROUTES {
            return bad(format!(
                "{} tokens × {} layers × top-{} is more than the {MAX_ROUTES} expert ids one trace holds",
                self.tokens,
                p.moe_layers(),
                p.top_k
            ));
        }
        if p.experts == 0
            || p.experts > crate::data::trace::MAX_EXPERTS
            || p.top_k == 0
            || p.top_k > p.experts
            || p.moe_layers() == 0
        {
            return bad(format!(
                "{}: {} experts, top-{}, {} MoE layers cannot be generated",
                p.name,
                p.experts,
                p.top_k,
                p.moe_layers()
            ));
        }
        if self.ranks == 0 || self.ranks > MAX_RANKS {
            return bad(format!(
                "ranks must be between 1 and {MAX_RANKS}, got {}",
                self.ranks
            ));
        }
        if self.topics == 0 || self.topics > p.experts {
            return bad(format!(
                "topics must be between 1 and the {} experts, got {}",
                p.experts, self.topics
            ));
        }
        if self.sequence_tokens == 0 {
            return bad("a sequence needs at least one token".into());
        }
        let unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        if !unit(self.cohesion) || self.cohesion >= 1.0 {
            return bad(format!("cohesion must be in [0, 1), got {}", self.cohesion));
        }
        if !unit(self.cohesion_spread) {
            return bad(format!(
                "cohesion spread must be in [0, 1], got {}",
                self.cohesion_spread
            ));
        }
        if !unit(self.layer_stickiness) {
            return bad(format!(
                "layer stickiness must be in [0, 1], got {}",
                self.layer_stickiness
            ));
        }
        if !(self.rank_skew.is_finite() && (0.0..=10.0).contains(&self.rank_skew)) {
            return bad(format!(
                "rank skew must be in [0, 10], got {}",
                self.rank_skew
            ));
        }
        Ok(())
    }
}

/// Generates a token trace (module docs: the model and its calibration).
///
/// ```
/// use moeplan::{data::model::preset, synth::token_generator::{TokenGenConfig, generate_tokens}};
/// let cfg = TokenGenConfig::new(preset("deepseek-v2-lite")?, 2000);
/// let t = generate_tokens(&cfg)?;
/// assert_eq!((t.num_tokens(), t.top_k(), t.num_experts()), (2000, 6, 64));
/// assert!(t.source_rank().iter().all(|&r| r < 8));
/// assert_eq!(t, generate_tokens(&cfg)?); // deterministic
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn generate_tokens(cfg: &TokenGenConfig) -> Result<TokenTrace> {
    cfg.check()?;
    let p = cfg.preset;
    let (layers, experts, k) = (p.moe_layers(), p.experts, p.top_k);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    rng.set_stream(1);
    // Drawn once per (rank, topic index) and shared by every layer, so a
    // rank's preference persists through the model.
    let rank_factor: Vec<f64> = (0..cfg.ranks * cfg.topics)
        .map(|_| {
            let z: f64 = StandardNormal.sample(&mut rng);
            (cfg.rank_skew * z - 0.5 * cfg.rank_skew * cfg.rank_skew).exp()
        })
        .collect();
    let structures = layer_structures(cfg)?;
    let topic_of = assign_topics(cfg, &structures, &rank_factor, &mut rng);
    let routes = map_layers(layers, |li| {
        let (layer, lrng) = structures
            .get(li)
            .ok_or_else(|| Error::Trace(format!("layer {li} has no structure")))?;
        let topics = topic_of
            .get(li)
            .ok_or_else(|| Error::Trace(format!("layer {li} has no topics")))?;
        layer.route(topics, k, &mut lrng.clone())
    })?;
    let source_rank = (0..cfg.tokens).map(|i| cfg.rank_of(i) as u32).collect();
    let ids = (p.first_moe_layer as u32..p.total_layers as u32).collect();
    TokenTrace::new(experts, ids, routes, source_rank)
}

/// The planted structure: for every MoE layer, the topic of each expert
/// (what a grouping of the generated trace should find).
#[cfg(test)]
pub(crate) fn planted_topics(cfg: &TokenGenConfig) -> Result<Vec<Vec<u32>>> {
    cfg.check()?;
    Ok(layer_structures(cfg)?
        .into_iter()
        .map(|(layer, _)| layer.topic)
        .collect())
}

/// Every layer's structure, and its random stream ready to draw its tokens.
fn layer_structures(cfg: &TokenGenConfig) -> Result<Vec<(Layer, ChaCha8Rng)>> {
    let p = cfg.preset;
    let (layers, experts, k) = (p.moe_layers(), p.experts, p.top_k);
    let counts = generate(&GenConfig {
        preset: p,
        batches: 1,
        tokens_per_batch: POPULARITY_TOKENS,
        seed: cfg.seed,
    })?;
    let counts = counts.counts();
    if counts.dim() != (1, layers, experts) {
        return Err(Error::Trace(format!(
            "the count generator made {:?} counts for {layers} layers × {experts} experts",
            counts.dim()
        )));
    }
    map_layers(layers, |li| {
        let mut lrng = ChaCha8Rng::seed_from_u64(cfg.seed);
        lrng.set_stream(2 + li as u64);
        let pop: Vec<f64> = counts
            .slice(ndarray::s![0, li, ..])
            .iter()
            .map(|&c| c.max(0.5))
            .collect();
        let layer = Layer::new(&pop, cfg, k, &mut lrng)?;
        Ok((layer, lrng))
    })
}

/// Each token's topic in every layer: `[layer][token]`.
///
/// From one layer to the next a token keeps its topic index under the
/// maximal coupling of its rank's two topic distributions `π` and `π′`
/// (stay with chance `min(1, π′/π)`, else move to a topic drawn from the
/// excess `(π′ − π)⁺`) with chance `layer_stickiness`, and draws afresh from
/// `π′` otherwise: every layer's topic mix is exactly `π′`, and tokens that
/// shared a topic tend to share the next one.
fn assign_topics(
    cfg: &TokenGenConfig,
    structures: &[(Layer, ChaCha8Rng)],
    rank_factor: &[f64],
    rng: &mut ChaCha8Rng,
) -> Vec<Vec<u32>> {
    let t = cfg.topics;
    // probs[layer][rank · T + topic]: the rank's topic distribution
    let probs: Vec<Vec<f64>> = structures
        .iter()
        .map(|(layer, _)| {
            let mut out = Vec::with_capacity(cfg.ranks * t);
            for factors in rank_factor.chunks(t) {
                let w: Vec<f64> = layer
                    .topic_share
                    .iter()
                    .zip(factors)
                    .map(|(s, f)| s * f)
                    .collect();
                let total: f64 = w.iter().sum();
                out.extend(w.iter().map(|x| x / total));
            }
            out
        })
        .collect();
    let cumulate = |p: &[f64]| -> Vec<f64> {
        let total: f64 = p.iter().sum();
        let mut acc = 0.0;
        p.iter()
            .map(|x| {
                acc += if total > 0.0 { x / total } else { 0.0 };
                acc
            })
            .collect()
    };
    let fresh: Vec<Vec<f64>> = probs
        .iter()
        .map(|p| p.chunks(t).flat_map(cumulate).collect())
        .collect();
    // per layer ≥ 1: chance to stay, and the cumulated excess to move to
    let mut stay = vec![Vec::new()];
    let mut excess = vec![Vec::new()];
    for w in probs.windows(2) {
        let (before, after) = (&w[0], &w[1]);
        stay.push(
            before
                .iter()
                .zip(after)
                .map(|(&b, &a)| if b > 0.0 { (a / b).min(1.0) } else { 0.0 })
                .collect::<Vec<f64>>(),
        );
        let gain: Vec<f64> = before
            .iter()
            .zip(after)
            .map(|(&b, &a)| (a - b).max(0.0))
            .collect();
        excess.push(gain.chunks(t).flat_map(cumulate).collect::<Vec<f64>>());
    }
    let pick = |cum: &[f64], u: f64| cum.partition_point(|&x| x <= u).min(t - 1);
    let mut topic_of = vec![vec![0u32; cfg.tokens]; structures.len()];
    for i in 0..cfg.tokens {
        let rank = cfg.rank_of(i);
        let span = rank * t..(rank + 1) * t;
        let mut topic = 0;
        for (li, row) in topic_of.iter_mut().enumerate() {
            let u: f64 = rng.random();
            topic = if li > 0 && u < cfg.layer_stickiness {
                let keep = stay
                    .get(li)
                    .and_then(|x| x.get(rank * t + topic))
                    .copied()
                    .unwrap_or(0.0);
                if rng.random::<f64>() < keep {
                    topic
                } else {
                    pick(row_of(&excess, li, &span), rng.random())
                }
            } else {
                pick(row_of(&fresh, li, &span), rng.random())
            };
            if let Some(slot) = row.get_mut(i) {
                *slot = topic as u32;
            }
        }
    }
    topic_of
}

/// `v[layer][span]`, empty where absent.
fn row_of<'a>(v: &'a [Vec<f64>], layer: usize, span: &std::ops::Range<usize>) -> &'a [f64] {
    v.get(layer)
        .and_then(|x| x.get(span.clone()))
        .unwrap_or(&[])
}

/// One layer's structure: topic shares, and each topic's sampling weights
/// split into its own experts' (the mixture's two parts summed) and the
/// others' (the `1 − c` part alone, the same for every topic).
struct Layer {
    /// Share of the tokens in each topic (before the ranks' skew).
    topic_share: Vec<f64>,
    /// Topic of each expert.
    topic: Vec<u32>,
    /// Experts of each topic.
    members: Vec<Vec<u32>>,
    /// An expert's weight within its own topic.
    own: Vec<f64>,
    /// An expert's weight in every other topic.
    other: Vec<f64>,
    /// Per topic: the sum of `own` over its experts, of `other` over the rest.
    own_total: Vec<f64>,
    other_total: Vec<f64>,
    /// Draws in proportion to `other` (rejecting the topic's own experts
    /// gives the other experts' part of any topic).
    background: Alias,
}

impl Layer {
    fn new(pop: &[f64], cfg: &TokenGenConfig, k: usize, rng: &mut ChaCha8Rng) -> Result<Self> {
        let e = pop.len();
        let total: f64 = pop.iter().sum();
        let target: Vec<f64> = pop
            .iter()
            .map(|x| (k as f64 * x / total).min(MAX_INCLUSION))
            .collect();
        let mut order: Vec<usize> = (0..e).collect();
        order.shuffle(rng);
        let t = cfg.topics;
        // topic of each expert: the seeded order cut into t nearly equal sets
        let mut topic = vec![0usize; e];
        for (pos, &x) in order.iter().enumerate() {
            if let Some(slot) = topic.get_mut(x) {
                *slot = pos * t / e;
            }
        }
        let u: f64 = rng.random();
        let c = (cfg.cohesion + cfg.cohesion_spread * (2.0 * u - 1.0)).clamp(0.0, 0.98);
        let mut topic_share = vec![0.0; t];
        for (&tp, &x) in topic.iter().zip(pop) {
            if let Some(s) = topic_share.get_mut(tp) {
                *s += x / total;
            }
        }
        let mut base: Vec<f64> = pop.iter().map(|x| x / total).collect();
        let mut weights = vec![vec![0.0; e]; t];
        let mut included = vec![0.0; e];
        let mut thetas = vec![0.0; t];
        for round in 0..=FIT_ROUNDS {
            mixture_weights(&base, &topic, c, &mut weights);
            if round == FIT_ROUNDS {
                break;
            }
            included.iter_mut().for_each(|x| *x = 0.0);
            for ((w, &share), th) in weights.iter().zip(&topic_share).zip(&mut thetas) {
                let theta = inclusion_scale(w, k, *th);
                *th = theta;
                for (m, &x) in included.iter_mut().zip(w) {
                    *m += share * (1.0 - (-theta * x).exp());
                }
            }
            for ((b, &q), &m) in base.iter_mut().zip(&target).zip(&included) {
                if m > 0.0 {
                    *b *= (q / m).clamp(0.5, 2.0);
                }
            }
        }
        let all: f64 = base.iter().sum();
        let mut own_base = vec![0.0; t];
        let mut members = vec![Vec::new(); t];
        for (x, (&tp, &b)) in topic.iter().zip(&base).enumerate() {
            if let (Some(o), Some(m)) = (own_base.get_mut(tp), members.get_mut(tp)) {
                *o += b;
                m.push(x as u32);
            }
        }
        let other: Vec<f64> = base.iter().map(|b| (1.0 - c) * b / all).collect();
        let own: Vec<f64> = base
            .iter()
            .zip(&topic)
            .zip(&other)
            .map(|((b, &tp), o)| {
                let set = own_base.get(tp).copied().unwrap_or(0.0);
                o + if set > 0.0 { c * b / set } else { 0.0 }
            })
            .collect();
        let other_all: f64 = other.iter().sum();
        let (own_total, other_total) = members
            .iter()
            .map(|m| {
                let (o, x) = m.iter().fold((0.0, 0.0), |(o, x), &i| {
                    let i = i as usize;
                    (
                        o + own.get(i).copied().unwrap_or(0.0),
                        x + other.get(i).copied().unwrap_or(0.0),
                    )
                });
                (o, (other_all - x).max(0.0))
            })
            .unzip();
        Ok(Layer {
            topic_share,
            topic: topic.iter().map(|&x| x as u32).collect(),
            members,
            background: Alias::new(&other),
            own,
            other,
            own_total,
            other_total,
        })
    }

    /// Every token's `k` distinct experts, `tokens × k`: successive sampling
    /// from its topic's weights, exactly — first which part (own experts or
    /// the rest, by their remaining weight), then an own expert by a scan
    /// of the few, or another by the background table with rejection.
    fn route(&self, topics: &[u32], k: usize, rng: &mut ChaCha8Rng) -> Result<Array2<u32>> {
        let mut ids = Vec::with_capacity(topics.len() * k);
        // stamp[e] = 1 + the token that last chose e: "already chosen" in
        // one load, with no clearing between tokens
        let mut stamp = vec![0u32; self.topic.len()];
        let mut bits = Bits { rng, spare: None };
        for (token, &tp) in topics.iter().enumerate() {
            // tokens ≤ MAX_TOKENS < u32::MAX
            let mark = token as u32 + 1;
            let t = tp as usize;
            let (Some(members), Some(&own0), Some(&other0)) = (
                self.members.get(t),
                self.own_total.get(t),
                self.other_total.get(t),
            ) else {
                return Err(Error::Trace(format!("topic {tp} has no weights")));
            };
            let (mut own_left, mut other_left) = (own0, other0);
            for _ in 0..k {
                let u = f64::from(bits.next()) * (1.0 / 4_294_967_296.0);
                let x = if u * (own_left + other_left) < own_left {
                    self.own_draw(members, &stamp, mark, u * (own_left + other_left))
                } else {
                    self.other_draw(tp, &stamp, mark, &mut bits)
                };
                let x = x.unwrap_or_else(|| self.any_free(&stamp, mark));
                if let Some(s) = stamp.get_mut(x as usize) {
                    *s = mark;
                }
                if self.topic.get(x as usize) == Some(&tp) {
                    own_left -= self.own.get(x as usize).copied().unwrap_or(0.0);
                } else {
                    other_left -= self.other.get(x as usize).copied().unwrap_or(0.0);
                }
                own_left = own_left.max(0.0);
                other_left = other_left.max(0.0);
                ids.push(x);
            }
        }
        Array2::from_shape_vec((topics.len(), k), ids)
            .map_err(|e| Error::Trace(format!("token routes: {e}")))
    }

    /// The own expert where `r` (below the unchosen own weight) falls.
    fn own_draw(&self, members: &[u32], stamp: &[u32], mark: u32, mut r: f64) -> Option<u32> {
        let mut last = None;
        for &x in members {
            if stamp.get(x as usize) == Some(&mark) {
                continue;
            }
            last = Some(x);
            let w = self.own.get(x as usize).copied().unwrap_or(0.0);
            if r < w {
                return Some(x);
            }
            r -= w;
        }
        last
    }

    /// An unchosen expert outside topic `tp`, in proportion to `other`: by
    /// rejection, then (rarely) by a scan.
    fn other_draw(&self, tp: u32, stamp: &[u32], mark: u32, bits: &mut Bits<'_>) -> Option<u32> {
        let free = |x: u32| {
            self.topic.get(x as usize).is_some_and(|&t| t != tp)
                && stamp.get(x as usize).is_some_and(|&s| s != mark)
        };
        for _ in 0..MAX_REJECTIONS {
            let x = self.background.sample(bits.next());
            if free(x) {
                return Some(x);
            }
        }
        let left: f64 = (0..self.other.len() as u32)
            .filter(|&x| free(x))
            .map(|x| self.other.get(x as usize).copied().unwrap_or(0.0))
            .sum();
        let mut r = f64::from(bits.next()) * (1.0 / 4_294_967_296.0) * left;
        let mut last = None;
        for x in (0..self.other.len() as u32).filter(|&x| free(x)) {
            last = Some(x);
            let w = self.other.get(x as usize).copied().unwrap_or(0.0);
            if r < w {
                return Some(x);
            }
            r -= w;
        }
        last
    }

    /// Any unchosen expert: what a part with no weight left falls back to
    /// (rounding; `top_k ≤ experts` guarantees one).
    fn any_free(&self, stamp: &[u32], mark: u32) -> u32 {
        stamp.iter().position(|&s| s != mark).unwrap_or(0) as u32
    }
}

/// Topic `t`'s weights: `c` on its own experts, `1 − c` on all, each in
/// proportion to `base`.
fn mixture_weights(base: &[f64], topic: &[usize], c: f64, out: &mut [Vec<f64>]) {
    let all: f64 = base.iter().sum();
    let mut own = vec![0.0; out.len()];
    for (&tp, &b) in topic.iter().zip(base) {
        if let Some(s) = own.get_mut(tp) {
            *s += b;
        }
    }
    for (t, (w, &o)) in out.iter_mut().zip(&own).enumerate() {
        for ((x, &b), &tp) in w.iter_mut().zip(base).zip(topic) {
            let inside = if tp == t && o > 0.0 { c * b / o } else { 0.0 };
            *x = inside + (1.0 - c) * b / all;
        }
    }
}

/// `θ` with `Σ (1 − exp(−θ·w)) = k` (Rosén's approximation of successive
/// sampling's inclusion probabilities), by Newton's method from `start`
/// (the previous round's root) or `k / Σ w`: the left side is concave and
/// increasing, so after at most one step past it the steps approach the
/// root from below.
fn inclusion_scale(w: &[f64], k: usize, start: f64) -> f64 {
    let sum: f64 = w.iter().sum();
    if sum <= 0.0 {
        return 0.0;
    }
    let mut theta = if start > 0.0 { start } else { k as f64 / sum };
    for _ in 0..50 {
        let (mut f, mut df) = (-(k as f64), 0.0);
        for &x in w {
            let ex = (-theta * x).exp();
            f += 1.0 - ex;
            df += x * ex;
        }
        if f.abs() <= 1e-9 || df <= 0.0 {
            break;
        }
        let step = -f / df;
        theta = (theta + step).max(0.5 * theta);
        if step.abs() <= 1e-12 * theta {
            break;
        }
    }
    theta
}

/// Walker's alias table over at most 2¹⁶ entries, one `u32` per entry
/// (keep threshold in the high half, alias in the low half): a layer's
/// tables stay in the first-level cache, and one 32-bit random number picks
/// an entry and a coin, so one `u64` makes two draws.
struct Alias {
    table: Vec<u32>,
}

impl Alias {
    /// Vose's construction; `w` non-negative with a positive sum, at most
    /// [`MAX_EXPERTS`](crate::data::MAX_EXPERTS) entries.
    fn new(w: &[f64]) -> Self {
        let n = w.len();
        let total: f64 = w.iter().sum();
        let mut scaled: Vec<f64> = w.iter().map(|x| x * n as f64 / total).collect();
        // keep = 2¹⁶ − 1 reads as "always keep" (the coin is below it
        // except one time in 2¹⁶, and then the alias is the entry itself)
        let mut table: Vec<u32> = (0..n as u32).map(|i| 0xFFFF_0000 | (i & 0xFFFF)).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled.get(i).is_some_and(|&x| x < 1.0));
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            let ps = scaled.get(s).copied().unwrap_or(1.0);
            if let Some(entry) = table.get_mut(s) {
                let keep = (ps * 65_536.0).clamp(0.0, 65_535.0) as u32;
                *entry = (keep << 16) | (l as u32 & 0xFFFF);
            }
            if let Some(pl) = scaled.get_mut(l) {
                *pl -= 1.0 - ps;
                if *pl < 1.0 {
                    large.pop();
                    small.push(l);
                }
            }
        }
        Alias { table }
    }

    /// One draw from 32 random bits: the high 16 pick the entry, the low 16
    /// are the coin.
    fn sample(&self, bits: u32) -> u32 {
        let i = ((bits >> 16) as usize * self.table.len()) >> 16;
        let entry = self.table.get(i).copied().unwrap_or(0);
        // a select rather than a branch: the coin is unpredictable
        if (bits & 0xFFFF) < entry >> 16 {
            i as u32
        } else {
            entry & 0xFFFF
        }
    }
}

/// 32-bit random numbers, two from each `u64` of the generator.
struct Bits<'a> {
    rng: &'a mut ChaCha8Rng,
    spare: Option<u32>,
}

impl Bits<'_> {
    fn next(&mut self) -> u32 {
        match self.spare.take() {
            Some(x) => x,
            None => {
                let r = self.rng.next_u64();
                self.spare = Some(r as u32);
                (r >> 32) as u32
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_follows_weights() {
        let w = [1.0, 2.0, 3.0, 4.0];
        let a = Alias::new(&w);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut c = [0usize; 4];
        for _ in 0..100_000 {
            c[a.sample(rng.next_u32()) as usize] += 1;
        }
        for (i, &x) in c.iter().enumerate() {
            let want = w[i] / 10.0;
            assert!((x as f64 / 1e5 - want).abs() < 0.01, "{i}: {x}");
        }
    }

    /// Dealt by batch, every rank holds its share of each batch (the last,
    /// shorter one included) and its tokens carry its own topic skew: the
    /// routes are those of the sequence rule with the ranks moved, not the
    /// sequence rule's ranks relabelled afterwards.
    #[test]
    fn dealt_by_batch_every_rank_holds_its_share() -> Result<()> {
        let p = crate::data::model::preset("deepseek-v2-lite")?;
        let (b, ranks) = (512, 8);
        let cfg = TokenGenConfig {
            batch_tokens: b,
            ..TokenGenConfig::new(p, 5 * b + 100)
        };
        let t = generate_tokens(&cfg)?;
        let mut checked = 0;
        for batch in t.source_rank().chunks(b) {
            let mut held = vec![0usize; ranks];
            for &r in batch {
                held[r as usize] += 1;
            }
            let mean = batch.len() as f64 / ranks as f64;
            assert!(
                held.iter().all(|&h| (h as f64 - mean).abs() <= 1.0),
                "{held:?}"
            );
            checked += 1;
        }
        assert_eq!(checked, 6);
        let sequences = generate_tokens(&TokenGenConfig {
            batch_tokens: 0,
            ..cfg
        })?;
        // Same draws, other ranks: some token's topic (so its route) moved.
        assert!((0..t.num_layers()).any(|l| t.routes(l) != sequences.routes(l)));
        assert_ne!(t.source_rank(), sequences.source_rank());
        // Sequences round-robin: a 512-token batch sits on 2 of 8 ranks.
        let first: std::collections::BTreeSet<u32> =
            sequences.source_rank()[..b].iter().copied().collect();
        assert_eq!(first.len(), 2);
        Ok(())
    }

    #[test]
    fn inclusion_scale_solves() {
        let w = [0.5, 0.2, 0.1, 0.1, 0.05, 0.05];
        let th = inclusion_scale(&w, 3, 0.0);
        assert!((inclusion_scale(&w, 3, 100.0) - th).abs() < 1e-6);
        let s: f64 = w.iter().map(|x| 1.0 - (-th * x).exp()).sum();
        assert!((s - 3.0).abs() < 1e-6, "{s}");
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn default_topics() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{data::model::preset, synth::token_generator::default_topics};
        assert_eq!(default_topics(preset("deepseek-v3")?), 37);
        Ok(())
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn token_generator_planted_topics_example() {
        let run = || {
            use moeplan::{
                data::model::preset,
                synth::token_generator::{TokenGenConfig, planted_topics},
            };
            let cfg = TokenGenConfig::new(preset("deepseek-v2-lite")?, 100);
            let topics = planted_topics(&cfg)?;
            assert_eq!((topics.len(), topics[0].len()), (26, 64));
            assert!(topics[0].iter().all(|&t| (t as usize) < cfg.topics));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
