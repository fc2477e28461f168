//! Co-activation statistics of a token trace, shared by the token
//! generator's test and its calibration example (included there by path):
//! per layer, the affinity matrix `A[i][j]` (tokens choosing both `i` and
//! `j`), the share of its mass in the top 1 % and 10 % of pairs, the
//! intra-group share `U` of a greedy grouping into equal groups, the load CV
//! and max / mean, how far each source rank's expert mix is from the whole
//! (total variation) and how concentrated the layer-to-layer pairs are.
#![allow(dead_code)]

use std::path::Path;

use moeplan::TokenTrace;

/// One layer's statistics.
#[derive(Debug, Clone, Copy, Default)]
pub struct LayerCoact {
    pub top1: f64,
    pub top10: f64,
    pub grouped: f64,
    pub cv: f64,
    pub max_over_mean: f64,
    pub rank_tv: f64,
    /// `NaN` for the last layer.
    pub cross_top10: f64,
}

/// Mean, min and max over layers of each statistic.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub mean: LayerCoact,
    pub min: LayerCoact,
    pub max: LayerCoact,
}

/// `A` as a dense `E × E` row-major matrix: the GRACE module's when it is
/// implemented, else counted here.
pub fn affinity(t: &TokenTrace, layer: usize) -> Vec<f64> {
    if let Ok(a) = moeplan::planners::grace_affinity(t, layer) {
        return a.iter().copied().collect();
    }
    let e = t.num_experts();
    let mut a = vec![0.0; e * e];
    for row in t.routes(layer).outer_iter() {
        let ids = row.as_slice().unwrap();
        for (x, &i) in ids.iter().enumerate() {
            for &j in &ids[x + 1..] {
                a[i as usize * e + j as usize] += 1.0;
                a[j as usize * e + i as usize] += 1.0;
            }
        }
    }
    a
}

/// Share of the affinity mass in the heaviest `frac` of the `E(E−1)/2` pairs.
pub fn top_share(a: &[f64], e: usize, frac: f64) -> f64 {
    let mut pairs: Vec<f64> = (0..e)
        .flat_map(|i| (i + 1..e).map(move |j| (i, j)))
        .map(|(i, j)| a[i * e + j])
        .collect();
    pairs.sort_by(|x, y| y.total_cmp(x));
    let total: f64 = pairs.iter().sum();
    let n = ((pairs.len() as f64 * frac).round() as usize).max(1);
    pairs[..n].iter().sum::<f64>() / total
}

/// `groups` groups of `E / groups` experts grown greedily: each starts from
/// the heaviest pair left and takes the expert with the most affinity to it
/// until full (the last takes the rest).
pub fn greedy_groups(a: &[f64], e: usize, groups: usize) -> Vec<Vec<usize>> {
    let size = e / groups;
    let mut free = vec![true; e];
    let mut out = Vec::new();
    for g in 0..groups {
        let left: Vec<usize> = (0..e).filter(|&i| free[i]).collect();
        if g + 1 == groups || left.len() <= size {
            out.push(left.clone());
            left.iter().for_each(|&i| free[i] = false);
            continue;
        }
        let mut best = (f64::NEG_INFINITY, left[0], left[1]);
        for (x, &i) in left.iter().enumerate() {
            for &j in &left[x + 1..] {
                if a[i * e + j] > best.0 {
                    best = (a[i * e + j], i, j);
                }
            }
        }
        let mut group = vec![best.1, best.2];
        free[best.1] = false;
        free[best.2] = false;
        while group.len() < size {
            let next = (0..e)
                .filter(|&i| free[i])
                .max_by(|&x, &y| {
                    let sx: f64 = group.iter().map(|&m| a[x * e + m]).sum();
                    let sy: f64 = group.iter().map(|&m| a[y * e + m]).sum();
                    sx.total_cmp(&sy).then(y.cmp(&x))
                })
                .unwrap();
            free[next] = false;
            group.push(next);
        }
        out.push(group);
    }
    out
}

/// Share of the affinity mass inside groups.
pub fn intra_share(a: &[f64], e: usize, groups: &[Vec<usize>]) -> f64 {
    let total: f64 = a.iter().sum();
    let inside: f64 = groups
        .iter()
        .map(|g| {
            g.iter()
                .flat_map(|&i| g.iter().map(move |&j| a[i * e + j]))
                .sum::<f64>()
        })
        .sum();
    inside / total
}

fn loads(t: &TokenTrace, layer: usize, rank: Option<u32>) -> Vec<f64> {
    let mut l = vec![0.0; t.num_experts()];
    for (row, &r) in t.routes(layer).outer_iter().zip(t.source_rank()) {
        if rank.is_none_or(|x| x == r) {
            row.iter().for_each(|&x| l[x as usize] += 1.0);
        }
    }
    l
}

/// Mean over source ranks of the total variation distance between the
/// rank's expert mix and the whole trace's.
pub fn rank_tv(t: &TokenTrace, layer: usize) -> f64 {
    let all = loads(t, layer, None);
    let total: f64 = all.iter().sum();
    let ranks = t.source_rank().iter().max().map_or(0, |&r| r + 1);
    let mut sum = 0.0;
    let mut n = 0;
    for r in 0..ranks {
        let mine = loads(t, layer, Some(r));
        let m: f64 = mine.iter().sum();
        if m > 0.0 {
            sum += 0.5
                * all
                    .iter()
                    .zip(&mine)
                    .map(|(a, b)| (a / total - b / m).abs())
                    .sum::<f64>();
            n += 1;
        }
    }
    sum / n as f64
}

/// Share of layer→next-layer pair mass (token chose `a` here and `b` next)
/// in the heaviest 10 % of the `E²` pairs.
pub fn cross_top10(t: &TokenTrace, layer: usize) -> f64 {
    let e = t.num_experts();
    let mut c = vec![0.0; e * e];
    for (r1, r2) in t
        .routes(layer)
        .outer_iter()
        .zip(t.routes(layer + 1).outer_iter())
    {
        for &a in r1 {
            for &b in r2 {
                c[a as usize * e + b as usize] += 1.0;
            }
        }
    }
    let total: f64 = c.iter().sum();
    c.sort_by(|x, y| y.total_cmp(x));
    c[..e * e / 10].iter().sum::<f64>() / total
}

/// All statistics of one layer, with `groups` equal groups for `U`.
pub fn layer_coact(t: &TokenTrace, layer: usize, groups: usize) -> LayerCoact {
    let e = t.num_experts();
    let a = affinity(t, layer);
    let l = loads(t, layer, None);
    let mean = l.iter().sum::<f64>() / e as f64;
    let var = l.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / e as f64;
    LayerCoact {
        top1: top_share(&a, e, 0.01),
        top10: top_share(&a, e, 0.10),
        grouped: intra_share(&a, e, &greedy_groups(&a, e, groups)),
        cv: var.sqrt() / mean,
        max_over_mean: l.iter().cloned().fold(0.0, f64::max) / mean,
        rank_tv: rank_tv(t, layer),
        cross_top10: f64::NAN,
    }
}

/// Every layer's statistics, summarised (cross-layer over the `L − 1`
/// consecutive pairs).
pub fn summarise(t: &TokenTrace, layers: usize, groups: usize) -> Summary {
    let rows: Vec<LayerCoact> = (0..layers)
        .map(|l| {
            let mut s = layer_coact(t, l, groups);
            if l + 1 < layers {
                s.cross_top10 = cross_top10(t, l);
            }
            s
        })
        .collect();
    let fields: [fn(&mut LayerCoact) -> &mut f64; 7] = [
        |s| &mut s.top1,
        |s| &mut s.top10,
        |s| &mut s.grouped,
        |s| &mut s.cv,
        |s| &mut s.max_over_mean,
        |s| &mut s.rank_tv,
        |s| &mut s.cross_top10,
    ];
    let mut out = Summary::default();
    for f in fields {
        let mut v: Vec<f64> = rows
            .iter()
            .map(|r| *f(&mut r.clone()))
            .filter(|x| x.is_finite())
            .collect();
        v.sort_by(f64::total_cmp);
        *f(&mut out.mean) = v.iter().sum::<f64>() / v.len().max(1) as f64;
        *f(&mut out.min) = v.first().copied().unwrap_or(f64::NAN);
        *f(&mut out.max) = v.last().copied().unwrap_or(f64::NAN);
    }
    out
}

/// An ESFT task folder as a token trace, its sequences dealt to `ranks`
/// ranks round-robin.
pub fn read_esft_folder(dir: &Path, ranks: usize) -> TokenTrace {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("expert_weights_") {
            files.push((name, std::fs::read(entry.path()).unwrap()));
        }
    }
    let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
    moeplan::formats::read_esft(&files, 64, 6, &mut meter)
        .unwrap()
        .with_sequences_on_ranks(ranks)
        .unwrap()
}
