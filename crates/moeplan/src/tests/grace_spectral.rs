//! GRACE-MoE's affinity (§3) and spectral clustering (§4.1): totals and
//! symmetry against a pair-by-pair recount, planted clusters recovered
//! exactly, determinism, edge cases and refusals, and the real ESFT routes.

use super::common;

use crate::TokenTrace;
use crate::planners::grace::affinity::{affinity, affinity_all, summarize, total, utilisation};
use crate::planners::grace::spectral::{SpectralEmbedding, spectral_clusters};
use ndarray::{Array2, array};
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Labels renumbered in order of first appearance, so two partitions
/// compare equal exactly when they group the same rows.
fn canonical(labels: &[usize]) -> Vec<usize> {
    let mut seen: Vec<usize> = Vec::new();
    labels
        .iter()
        .map(|l| match seen.iter().position(|s| s == l) {
            Some(p) => p,
            None => {
                seen.push(*l);
                seen.len() - 1
            }
        })
        .collect()
}

/// Tokens that chose both `i` and `j`, counted one token at a time.
fn recount(routes: &Array2<u32>, i: u32, j: u32) -> f64 {
    routes
        .rows()
        .into_iter()
        .filter(|r| r.iter().any(|&x| x == i) && r.iter().any(|&x| x == j))
        .count() as f64
}

#[test]
fn hand_made_routes() {
    // Top-3 over 5 experts.
    let routes = array![[0, 1, 2], [1, 2, 3], [4, 0, 1], [2, 1, 0]];
    let t = TokenTrace::new(5, vec![3], vec![routes.clone()], vec![0; 4]).unwrap();
    let a = affinity(&t, 0).unwrap();
    // {0,1}: tokens 0, 2, 3. {1,2}: 0, 1, 3. {3,4}: none.
    assert_eq!(a[[0, 1]], 3.0);
    assert_eq!(a[[1, 2]], 3.0);
    assert_eq!(a[[3, 4]], 0.0);
    assert_eq!(a[[0, 4]], 1.0);
    for i in 0..5 {
        assert_eq!(a[[i, i]], 0.0);
        for j in 0..5 {
            assert_eq!(a[[i, j]], a[[j, i]]);
            if i != j {
                assert_eq!(a[[i, j]], recount(&routes, i as u32, j as u32));
            }
        }
    }
    // Four tokens of three distinct experts: 4 · C(3, 2) pairs.
    assert_eq!(total(&a).unwrap(), 12.0);
}

#[test]
fn random_routes_match_a_recount() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (e, k, tokens) = (24, 6, 500);
    let layers: Vec<Array2<u32>> = (0..2)
        .map(|_| {
            let mut r = Array2::zeros((tokens, k));
            for mut row in r.rows_mut() {
                for (slot, x) in sample(&mut rng, e, k).into_iter().enumerate() {
                    row[slot] = x as u32;
                }
            }
            r
        })
        .collect();
    let t = TokenTrace::new(e, vec![1, 2], layers.clone(), vec![0; tokens]).unwrap();
    let all = affinity_all(&t).unwrap();
    assert_eq!(all.len(), 2);
    for (a, routes) in all.iter().zip(&layers) {
        assert_eq!(total(a).unwrap(), (tokens * k * (k - 1) / 2) as f64);
        for i in 0..e {
            for j in 0..e {
                let want = if i == j {
                    0.0
                } else {
                    recount(routes, i as u32, j as u32)
                };
                assert_eq!(a[[i, j]], want, "A[{i}][{j}]");
            }
        }
    }
    assert!(affinity(&t, 2).is_err());
}

/// A block-structured affinity: `within` (± `noise`) inside a block,
/// `across` (± `noise`) between blocks, symmetric, zero diagonal. Rows are
/// shuffled so the blocks are not contiguous. Returns it with the planted
/// block of each row.
fn planted(
    sizes: &[usize],
    within: f64,
    across: f64,
    noise: f64,
    seed: u64,
) -> (Array2<f64>, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut block: Vec<usize> = sizes
        .iter()
        .enumerate()
        .flat_map(|(b, &s)| vec![b; s])
        .collect();
    // Fisher–Yates with the test's own RNG.
    for i in (1..block.len()).rev() {
        let j = rng.random_range(0..=i);
        block.swap(i, j);
    }
    let n = block.len();
    let mut a = Array2::zeros((n, n));
    for i in 0..n {
        for j in i + 1..n {
            let base = if block[i] == block[j] { within } else { across };
            let v = (base + noise * (2.0 * rng.random::<f64>() - 1.0)).max(0.0);
            a[[i, j]] = v;
            a[[j, i]] = v;
        }
    }
    (a, block)
}

#[test]
fn planted_clusters_are_recovered_exactly() {
    // Each block is a cluster in the normalised-cut sense: an expert's
    // affinity inside its block outweighs its affinity to all the others (a
    // block of one, or of two among sixty, would not be, and spectral
    // clustering rightly need not find it).
    let cases: &[(&[usize], f64, f64, f64)] = &[
        (&[4, 4], 10.0, 1.0, 0.0),
        (&[8, 8, 8, 8, 8, 8, 8, 8], 20.0, 1.0, 0.5),
        (&[3, 10, 5, 14], 10.0, 1.0, 2.0),
        (&[3, 30, 7, 7, 4, 17], 40.0, 0.5, 1.0),
        (&[16; 16], 50.0, 2.0, 10.0),
        (&[4; 64], 200.0, 0.5, 0.5),
    ];
    for (c, &(sizes, within, across, noise)) in cases.iter().enumerate() {
        for seed in 0..3 {
            let (a, block) = planted(sizes, within, across, noise, 100 * c as u64 + seed);
            let labels = spectral_clusters(&a, sizes.len(), seed).unwrap();
            assert_eq!(
                canonical(&labels),
                canonical(&block),
                "case {c} seed {seed}"
            );
            assert_eq!(
                labels,
                canonical(&labels),
                "labels come numbered by first appearance"
            );
        }
    }
}

#[test]
fn planted_token_groups_are_recovered_from_routes() {
    // 32 experts in 4 topics of 8; each token draws its 4 experts from one
    // topic, except one token in ten that draws from all experts.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let topic_of = |e: usize| (e * 7) % 32 / 8;
    let members: Vec<Vec<usize>> = (0..4)
        .map(|t| (0..32).filter(|&e| topic_of(e) == t).collect())
        .collect();
    let tokens = 2000;
    let mut r = Array2::<u32>::zeros((tokens, 4));
    for mut row in r.rows_mut() {
        let picks: Vec<usize> = if rng.random::<f64>() < 0.1 {
            sample(&mut rng, 32, 4).into_vec()
        } else {
            let t = rng.random_range(0..4);
            sample(&mut rng, 8, 4)
                .into_iter()
                .map(|i| members[t][i])
                .collect()
        };
        for (slot, x) in picks.into_iter().enumerate() {
            row[slot] = x as u32;
        }
    }
    let t = TokenTrace::new(32, vec![0], vec![r], vec![0; tokens]).unwrap();
    let a = affinity(&t, 0).unwrap();
    let labels = spectral_clusters(&a, 4, 0).unwrap();
    let planted: Vec<usize> = (0..32).map(topic_of).collect();
    assert_eq!(canonical(&labels), canonical(&planted));
    let s = summarize(&a, 4).unwrap();
    let u = utilisation(&a, &labels).unwrap();
    assert!(
        u > s.random_utilisation && u <= s.equal_groups_bound + 1e-12,
        "{u} {s:?}"
    );
}

#[test]
fn deterministic_for_a_seed() {
    let (a, _) = planted(&[5, 9, 12, 6], 3.0, 1.0, 2.5, 9);
    for seed in [0, 1, u64::MAX] {
        let first = spectral_clusters(&a, 4, seed).unwrap();
        for _ in 0..3 {
            assert_eq!(spectral_clusters(&a, 4, seed).unwrap(), first);
        }
        let emb = SpectralEmbedding::new(&a).unwrap();
        assert_eq!(emb.clusters(4, seed).unwrap(), first);
    }
}

#[test]
fn edge_cases_use_every_label() {
    let (a, block) = planted(&[6, 6, 6], 10.0, 1.0, 1.0, 3);
    assert_eq!(spectral_clusters(&a, 1, 0).unwrap(), vec![0; 18]);
    assert_eq!(
        spectral_clusters(&a, 18, 0).unwrap(),
        (0..18).collect::<Vec<_>>()
    );
    // Two experts nobody chose next to the planted blocks: the blocks come
    // out intact and every label is used (where the two go is free: they
    // add no affinity to any group).
    let n = 20;
    let mut b = Array2::zeros((n, n));
    b.slice_mut(ndarray::s![..18, ..18]).assign(&a);
    let labels = spectral_clusters(&b, 4, 0).unwrap();
    assert_eq!(canonical(&labels[..18]), canonical(&block));
    let mut used = labels.clone();
    used.sort_unstable();
    used.dedup();
    assert_eq!(used, vec![0, 1, 2, 3]);
    // Every k from 1 to n uses every label, even on a matrix of duplicates.
    for m in [
        Array2::zeros((7, 7)),
        Array2::from_elem((7, 7), 1.0),
        b.slice(ndarray::s![..7, ..7]).to_owned(),
    ] {
        for k in 1..=7 {
            let mut used = spectral_clusters(&m, k, 2).unwrap();
            used.sort_unstable();
            used.dedup();
            assert_eq!(used, (0..k).collect::<Vec<_>>(), "k = {k}");
        }
    }
}

#[test]
fn refuses_bad_input() {
    let ok = Array2::from_elem((3, 3), 1.0);
    let mut asym = ok.clone();
    asym[[0, 1]] = 2.0;
    let mut neg = ok.clone();
    neg[[1, 2]] = -1.0;
    neg[[2, 1]] = -1.0;
    let mut nan = ok.clone();
    nan[[0, 0]] = f64::NAN;
    let mut inf = ok.clone();
    inf[[0, 2]] = f64::INFINITY;
    inf[[2, 0]] = f64::INFINITY;
    for (what, m, k) in [
        ("not symmetric", asym, 2),
        ("negative", neg, 2),
        ("NaN", nan, 2),
        ("infinite", inf, 2),
        ("not square", Array2::zeros((2, 3)), 1),
        ("empty", Array2::zeros((0, 0)), 1),
        ("k = 0", ok.clone(), 0),
        ("k > n", ok.clone(), 4),
    ] {
        let err = spectral_clusters(&m, k, 0);
        assert!(
            matches!(err, Err(crate::Error::Argument(_))),
            "{what}: {err:?}"
        );
    }
}

#[test]
fn esft_affinity_and_clusters() {
    let Some(dir) = common::shared_data("esft-deepseek-v2-lite/intent") else {
        return;
    };
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    let mut meter = crate::Meter::new(Default::default());
    let t = crate::formats::esft::read_esft(&files, 64, 6, &mut meter).unwrap();
    assert_eq!(t.num_layers(), 26);
    let all = affinity_all(&t).unwrap();
    for (l, a) in all.iter().enumerate() {
        // Pairs a token contributes: C(distinct experts, 2), from the routes.
        let want: usize = t
            .routes(l)
            .rows()
            .into_iter()
            .map(|r| {
                let mut v = r.to_vec();
                v.sort_unstable();
                v.dedup();
                v.len() * (v.len() - 1) / 2
            })
            .sum();
        assert_eq!(total(a).unwrap(), want as f64, "layer {l}");
        assert_eq!(a, &a.t(), "layer {l} symmetric");
        let labels = spectral_clusters(a, 8, 0).unwrap();
        let s = summarize(a, 8).unwrap();
        let u = utilisation(a, &labels).unwrap();
        // Affinity-driven groups hold more than random ones, and no more
        // than the equal-size ceiling allows once sizes are free.
        assert!(
            u > s.random_utilisation,
            "layer {l}: U {u} vs random {}",
            s.random_utilisation
        );
        assert!(
            s.top_1pct_share > 0.01,
            "layer {l}: affinity is concentrated"
        );
    }
}
