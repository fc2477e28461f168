//! GRACE-MoE's affinity grouping (spectral clustering of every layer's
//! affinity): DeepSeek-V2-Lite's shape, 26 layers × 64 experts → 8 groups,
//! on ESFT's recorded routes (`../shared/data/esft-deepseek-v2-lite/intent`)
//! or, without them, generated ones; and 58 layers × 256 experts → 64 groups
//! (DeepSeek-V3's shape, generated). Target: ≥ 10× faster than scikit-learn's
//! `SpectralClustering` with at least its affinity utilisation U
//! (`benchmarks/grace_sklearn.py`; this bench writes the matrices and its
//! labels to `/tmp/moeplan-grace/` for it).

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, criterion_group, criterion_main};
use moeplan::TokenTrace;
use moeplan::planners::{SpectralEmbedding, spectral_clusters};
use moeplan::planners::{affinity_all, affinity_utilisation as utilisation};
use ndarray::Array2;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Token routes with planted co-activation: experts fall into topics of 8;
/// a token takes most of its `top_k` from one topic (topics drawn with a
/// skew) and the rest anywhere. Distinct experts per token.
fn generated(layers: usize, experts: usize, top_k: usize, tokens: usize, seed: u64) -> TokenTrace {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let topics = experts / 8;
    let routes = (0..layers)
        .map(|_| {
            // A different topic layout per layer.
            let perm = sample(&mut rng, experts, experts).into_vec();
            let mut r = Array2::<u32>::zeros((tokens, top_k));
            for mut row in r.rows_mut() {
                let t = ((rng.random::<f64>().powi(2)) * topics as f64) as usize % topics;
                let inside = top_k * 2 / 3;
                let mut picks: Vec<usize> = sample(&mut rng, 8, inside)
                    .into_iter()
                    .map(|i| perm[t * 8 + i])
                    .collect();
                while picks.len() < top_k {
                    let e = rng.random_range(0..experts);
                    if !picks.contains(&e) {
                        picks.push(e);
                    }
                }
                for (slot, e) in picks.into_iter().enumerate() {
                    row[slot] = e as u32;
                }
            }
            r
        })
        .collect();
    TokenTrace::new(
        experts,
        (1..=layers as u32).collect(),
        routes,
        vec![0; tokens],
    )
    .unwrap()
}

fn esft_intent() -> Option<TokenTrace> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/esft-deepseek-v2-lite/intent");
    let entries = std::fs::read_dir(&dir).ok()?;
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            Some((
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).ok()?,
            ))
        })
        .collect();
    files.sort();
    let mut meter = moeplan::Meter::new(Default::default());
    moeplan::formats::read_esft(&files, 64, 6, &mut meter).ok()
}

/// A little-endian float64 or int64 `.npy` file of `shape`.
fn write_npy(path: &Path, descr: &str, shape: &[usize], data: impl Iterator<Item = [u8; 8]>) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    data.for_each(|b| out.extend(b));
    std::fs::write(path, out).unwrap();
}

/// Writes `<name>_affinity.npy` (L × E × E) and `<name>_labels.npy` (L × E,
/// this crate's labels at seed 0) for the scikit-learn script.
fn export(name: &str, mats: &[Array2<f64>], k: usize) {
    let dir = PathBuf::from("/tmp/moeplan-grace");
    std::fs::create_dir_all(&dir).unwrap();
    let e = mats[0].nrows();
    write_npy(
        &dir.join(format!("{name}_affinity.npy")),
        "<f8",
        &[mats.len(), e, e],
        mats.iter()
            .flat_map(|m| m.iter().map(|v| v.to_le_bytes()).collect::<Vec<_>>()),
    );
    let labels: Vec<Vec<usize>> = mats
        .iter()
        .map(|m| spectral_clusters(m, k, 0).unwrap())
        .collect();
    let u: f64 = mats
        .iter()
        .zip(&labels)
        .map(|(m, l)| utilisation(m, l).unwrap())
        .sum::<f64>()
        / mats.len() as f64;
    eprintln!(
        "{name}: {} layers × {e} experts → {k} groups, mean U {u:.4}",
        mats.len()
    );
    write_npy(
        &dir.join(format!("{name}_labels.npy")),
        "<i8",
        &[mats.len(), e],
        labels.iter().flatten().map(|&l| (l as i64).to_le_bytes()),
    );
}

fn bench(c: &mut Criterion) {
    let (v2_source, v2) = match esft_intent() {
        Some(t) => ("esft-intent", t),
        None => {
            eprintln!("SKIP real data: ESFT not found, DeepSeek-V2-Lite case generated");
            ("generated", generated(26, 64, 6, 8192, 1))
        }
    };
    let v3 = generated(58, 256, 8, 8192, 2);
    for (name, tokens, k) in [("v2lite", &v2, 8), ("v3", &v3, 64)] {
        let layers = tokens.num_layers();
        let e = tokens.num_experts();
        let mats = affinity_all(tokens).unwrap();
        export(name, &mats, k);
        let source = if name == "v2lite" {
            v2_source
        } else {
            "generated"
        };
        let mut group = c.benchmark_group(format!("grace/{source} {layers}x{e} to {k} groups"));
        group.sample_size(10);
        group.bench_function("affinity", |b| {
            b.iter(|| affinity_all(black_box(tokens)).unwrap())
        });
        group.bench_function("spectral_clusters", |b| {
            b.iter(|| {
                mats.iter()
                    .map(|m| spectral_clusters(black_box(m), k, 0).unwrap())
                    .collect::<Vec<_>>()
            })
        });
        // The split a re-plan can exploit: the eigendecomposition depends on
        // the affinity alone, k-means on the group count.
        group.bench_function("embedding only", |b| {
            b.iter(|| {
                mats.iter()
                    .map(|m| SpectralEmbedding::new(black_box(m)).unwrap())
                    .collect::<Vec<_>>()
            })
        });
        let embs: Vec<SpectralEmbedding> = mats
            .iter()
            .map(|m| SpectralEmbedding::new(m).unwrap())
            .collect();
        group.bench_function("k-means on cached embedding", |b| {
            b.iter(|| {
                embs.iter()
                    .map(|m| m.clusters(k, 0).unwrap())
                    .collect::<Vec<_>>()
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
