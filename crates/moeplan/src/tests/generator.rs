//! The generator's traces look like the real data: a spread of layers from
//! balanced to very hot, per-batch variation that shrinks for hot experts
//! and grows for small batches, exact token totals. (Against the real
//! per-batch data itself: `src/tests/calibration.rs`.)

use crate::data::model::{PRESETS, preset};
use crate::studies::variation::{VariationStats, pair_variation};
use crate::synth::generator::{DRIFT_A, DRIFT_C, GenConfig, generate};
use ndarray::Axis;

#[test]
fn deepseek_v3_skew_spans_balanced_to_very_hot() {
    let cfg = GenConfig::new(preset("deepseek-v3").unwrap(), 32);
    let t = generate(&cfg).unwrap();
    let s = t.stats();
    let mm: Vec<f64> = s.layers.iter().map(|l| l.max_over_mean).collect();
    let lo = mm.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = mm.iter().cloned().fold(0.0, f64::max);
    assert!(lo < 3.5, "most balanced layer max/mean {lo}");
    assert!(hi > 27.0, "hottest layer max/mean {hi}");
    let hottest = s
        .layers
        .iter()
        .max_by(|a, b| a.max_over_mean.total_cmp(&b.max_over_mean))
        .unwrap();
    assert!(
        (0.17..0.24).contains(&hottest.top2_share),
        "top-2 share {}",
        hottest.top2_share
    );
    // median in the range of the real DeepSeek-V3 runs (5–8×)
    let mut sorted = mm.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    assert!((5.0..11.0).contains(&median), "median {median}");
}

#[test]
fn batches_vary_around_the_layer_distribution() {
    let t = generate(&GenConfig::new(preset("deepseek-v3").unwrap(), 16)).unwrap();
    let c = t.counts();
    // per (batch, layer): exact totals, no expert above one copy per token
    for b in 0..16 {
        for l in 0..t.num_layers() {
            let row = c.index_axis(Axis(0), b);
            let row = row.index_axis(Axis(0), l);
            assert_eq!(row.sum(), 4096.0 * 8.0);
            assert!(row.iter().all(|&x| x <= 4096.0 + 1.0));
        }
    }
    // batches differ from each other, but the hottest expert of a layer
    // stays among the hottest in most batches
    assert_ne!(c.index_axis(Axis(0), 0), c.index_axis(Axis(0), 1));
    let summed = t.summed();
    let mut agree = 0;
    for l in 0..t.num_layers() {
        let hot = argmax(summed.row(l).iter().copied());
        let b0 = c.index_axis(Axis(0), 0);
        let row = b0.index_axis(Axis(0), l);
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
        if order[..3].contains(&hot) {
            agree += 1;
        }
    }
    assert!(
        agree * 10 >= t.num_layers() * 8,
        "{agree} of {}",
        t.num_layers()
    );
}

fn argmax(it: impl Iterator<Item = f64>) -> usize {
    it.enumerate()
        .fold(
            (0, f64::MIN),
            |(bi, bv), (i, v)| if v > bv { (i, v) } else { (bi, bv) },
        )
        .0
}

#[test]
fn seeds_are_deterministic_and_distinct() {
    let p = preset("olmoe").unwrap();
    let a = generate(&GenConfig {
        seed: 1,
        ..GenConfig::new(p, 4)
    })
    .unwrap();
    let b = generate(&GenConfig {
        seed: 1,
        ..GenConfig::new(p, 4)
    })
    .unwrap();
    let c = generate(&GenConfig {
        seed: 2,
        ..GenConfig::new(p, 4)
    })
    .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn every_preset_has_its_model_shape() {
    for p in PRESETS {
        let t = generate(&GenConfig::new(p, 2)).unwrap();
        assert_eq!(t.num_layers(), p.moe_layers(), "{}", p.name);
        assert_eq!(t.num_experts(), p.experts, "{}", p.name);
        assert_eq!(t.top_k(), Some(p.top_k));
        assert_eq!(t.model_layers(), p.total_layers);
        assert_eq!(t.layer_ids()[0] as usize, p.first_moe_layer);
    }
    let named = |n: &str| {
        preset(n)
            .map(|p| (p.moe_layers(), p.experts, p.top_k))
            .unwrap()
    };
    assert_eq!(named("deepseek-v3"), (58, 256, 8));
    assert_eq!(named("kimi-k2"), (60, 384, 8));
    assert_eq!(named("qwen3-235b-a22b"), (94, 128, 8));
    assert_eq!(named("qwen3-30b-a3b"), (48, 128, 8));
    assert_eq!(named("olmoe"), (16, 64, 8));
    assert_eq!(named("deepseek-v2-lite"), (26, 64, 6));
}

#[test]
fn bad_settings_are_errors() {
    let p = preset("olmoe").unwrap();
    assert!(generate(&GenConfig::new(p, 0)).is_err());
    assert!(
        generate(&GenConfig {
            tokens_per_batch: 0,
            ..GenConfig::new(p, 1)
        })
        .is_err()
    );
}

#[test]
fn hot_experts_are_steadier_than_cold_ones() {
    // large batches: the drift, not the sampling, dominates
    let t = generate(&GenConfig {
        tokens_per_batch: 1 << 16,
        ..GenConfig::new(preset("deepseek-v3").unwrap(), 20)
    })
    .unwrap();
    let v = VariationStats::of(&t).unwrap();
    let filled: Vec<_> = v.by_load.iter().filter(|b| b.pairs >= 20).collect();
    assert!(filled.len() >= 3, "{filled:?}");
    // falling with load up to the mean; above it the drift levels off (the
    // hottest experts sit in the hottest layers, which drift more, so the
    // top bins need not fall further — as in HarMoEny's data)
    let (cold, hot) = (filled[0], filled[filled.len() - 1]);
    assert!(hot.median_cv < 0.6 * cold.median_cv, "{filled:?}");
    for w in filled.windows(2).filter(|w| w[1].hi <= 1.0) {
        assert!(w[1].rms_cv < w[0].rms_cv, "{w:?}");
    }
    // the hottest experts level off near the drift floor √C ≈ 0.1, not 0
    assert!(hot.median_cv > 0.6 * DRIFT_C.sqrt() && hot.median_cv < 2.0 * DRIFT_C.sqrt());
}

#[test]
fn small_batches_add_sampling_noise() {
    // OLMoE (64 experts, top-8): at 256 tokens per batch the multinomial
    // sampling term (1 − p) / (p · N · k) is about 2× the drift at the mean
    // share; at 65,536 tokens it is negligible. The same seed draws the same
    // mean shares and drift sizes, so the difference of the mean squared CVs
    // is the sampling term.
    let p = preset("olmoe").unwrap();
    let at = |tokens| {
        let t = generate(&GenConfig {
            tokens_per_batch: tokens,
            ..GenConfig::new(p, 200)
        })
        .unwrap();
        pair_variation(&t).unwrap()
    };
    let (small, large) = (at(256), at(1 << 16));
    assert_eq!(small.len(), large.len());
    let mean_cv2 = |v: &[crate::studies::variation::PairVariation]| {
        v.iter().map(|x| x.cv * x.cv).sum::<f64>() / v.len() as f64
    };
    let predicted = small
        .iter()
        .map(|x| (1.0 - x.mean_share) / (x.mean_share * 256.0 * 8.0))
        .sum::<f64>()
        / small.len() as f64;
    let measured = mean_cv2(&small) - mean_cv2(&large);
    assert!(
        (measured / predicted - 1.0).abs() < 0.15,
        "sampling term {measured}, predicted {predicted}"
    );
    // and the drift alone is what the constants say at the mean share
    let pi = 8.0 / 64.0;
    let drift = DRIFT_A / pi + DRIFT_C;
    let typical = mean_cv2(&large);
    assert!(
        typical > 0.5 * drift && typical < 2.5 * drift,
        "{typical} against {drift}"
    );
}

#[test]
fn counts_stay_exact_and_capped_at_one_token() {
    // one or a few tokens per batch: every count is 0 or 1 per token, the
    // hottest experts hit the cap in nearly every batch
    for (name, tokens) in [
        ("qwen1.5-moe-a2.7b", 1),
        ("qwen1.5-moe-a2.7b", 3),
        ("olmoe", 5),
    ] {
        let p = preset(name).unwrap();
        let t = generate(&GenConfig {
            tokens_per_batch: tokens,
            ..GenConfig::new(p, 50)
        })
        .unwrap();
        for b in 0..t.num_batches() {
            for row in t.batch(b).outer_iter() {
                assert_eq!(row.sum(), (tokens * p.top_k) as f64, "{name}");
                assert!(row.iter().all(|&x| x <= tokens as f64 && x.fract() == 0.0));
            }
        }
    }
}

#[test]
fn consecutive_batches_are_slightly_anticorrelated() {
    // 400 batches: the estimator's bias (≈ −1/B) is −0.0025, so the
    // measured lag-1 is the drift's own (−0.03), diluted a little by
    // sampling noise
    let t = generate(&GenConfig {
        tokens_per_batch: 1 << 16,
        ..GenConfig::new(preset("olmoe").unwrap(), 400)
    })
    .unwrap();
    let lag = VariationStats::of(&t).unwrap().lag1_autocorrelation;
    assert!((-0.05..-0.02).contains(&lag), "lag-1 {lag}");
}
