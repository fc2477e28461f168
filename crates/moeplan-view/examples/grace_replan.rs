//! Times what the page does on a cluster change with token routes: the
//! page's DeepSeek-V3 default (64 batches × 128 tokens, seed 7, 8 × 8 GPUs)
//! planned as a workspace, then a GPU change (8 × 4) and a node change
//! (4 × 8), each from scratch and reusing the previous workspace's GRACE
//! analysis; and GRACE's own share of each.
//!
//! `cargo run --release -p moeplan-view --example grace_replan [preset]`;
//! `KMEANS=1` times k-means alone on cached embeddings of several sizes
//! instead, `WARM_ONLY=1` only loops warm re-plans (for a profiler),
//! `NODE_SWEEP=1` times node changes to node counts not seen before,
//! `WS_LOOP=1` loops whole re-plans of clusters seen before.

use std::time::Instant;

use moeplan::data::Workload;
use moeplan::planners::SpectralEmbedding;
use moeplan::planners::affinity_all;
use moeplan::planners::{Grace, GraceAnalysis, GraceOptions};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan::{Topology, data::model};
use moeplan_view::{Cluster, Workspace};

fn main() -> Result<(), moeplan::Error> {
    let preset = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "deepseek-v3".into());
    let p = model::preset(&preset)?;
    let cfg = TokenGenConfig {
        seed: 7,
        batch_tokens: 128, // dealt as the page deals them
        ..TokenGenConfig::new(p, 64 * 128)
    };
    let t0 = Instant::now();
    let work = Workload::from_tokens(generate_tokens(&cfg)?, 128)?;
    eprintln!("{preset}: tokens generated in {:.0} ms", ms(t0.elapsed()));
    if let Some(tokens) = work
        .tokens()
        .filter(|_| std::env::var_os("KMEANS").is_some())
    {
        let mats = affinity_all(tokens)?;
        for (m, k) in [(32, 4), (32, 8), (64, 8), (256, 4), (256, 8), (256, 64)] {
            let embs = mats
                .iter()
                .map(|a| SpectralEmbedding::new(&a.slice(ndarray::s![..m, ..m]).to_owned()))
                .collect::<Result<Vec<_>, _>>()?;
            let t0 = Instant::now();
            let mut reps = 0;
            while t0.elapsed().as_secs_f64() < 1.0 {
                for e in &embs {
                    e.clusters(k, 0)?;
                }
                reps += 1;
            }
            eprintln!(
                "k-means {m} rows into {k}: {:.1} µs per clustering",
                ms(t0.elapsed()) * 1e3 / (reps * embs.len()) as f64
            );
        }
        return Ok(());
    }
    if let Some(tokens) = work.tokens() {
        let t0 = Instant::now();
        let mats = affinity_all(tokens)?;
        eprintln!("affinity, all layers: {:.0} ms", ms(t0.elapsed()));
        let t0 = Instant::now();
        let embs = mats
            .iter()
            .map(SpectralEmbedding::new)
            .collect::<Result<Vec<_>, _>>()?;
        eprintln!("embeddings, all layers: {:.0} ms", ms(t0.elapsed()));
        for k in [4, 8] {
            let t0 = Instant::now();
            for e in &embs {
                e.clusters(k, 0)?;
            }
            eprintln!("k-means into {k}, all layers: {:.0} ms", ms(t0.elapsed()));
        }
    }
    let t0 = Instant::now();
    let analysis = GraceAnalysis::new(&work)?;
    eprintln!("GraceAnalysis::new: {:.0} ms", ms(t0.elapsed()));
    for (nodes, g) in [(8, 8), (8, 4), (4, 4), (4, 8), (8, 4), (4, 8), (1, 64)] {
        let t0 = Instant::now();
        Grace::prepare_with(
            &work,
            &analysis,
            Topology::new(nodes, g)?,
            &GraceOptions::default(),
        )?;
        eprintln!("prepare_with {nodes} × {g}: {:.0} ms", ms(t0.elapsed()));
    }
    if std::env::var_os("NODE_SWEEP").is_some() {
        // Node counts never seen before, each a node change from the last.
        for nodes in [2, 3, 5, 6, 7, 9, 10, 12, 16] {
            let t0 = Instant::now();
            Grace::prepare_with(
                &work,
                &analysis,
                Topology::new(nodes, 8)?,
                &GraceOptions::default(),
            )?;
            eprintln!("node change to {nodes} × 8: {:.0} ms", ms(t0.elapsed()));
        }
        return Ok(());
    }
    if std::env::var_os("WARM_ONLY").is_some() {
        for _ in 0..10 {
            for (nodes, g) in [(8, 4), (4, 8)] {
                Grace::prepare_with(
                    &work,
                    &analysis,
                    Topology::new(nodes, g)?,
                    &GraceOptions::default(),
                )?;
            }
        }
        return Ok(());
    }
    let cluster = |nodes, gpus_per_node| Cluster {
        nodes,
        gpus_per_node,
        groups: 8,
    };
    let t0 = Instant::now();
    let first = Workspace::of_workload(work.clone(), cluster(8, 8), |_| {})?;
    eprintln!("workspace 8 × 8, cold: {:.0} ms", ms(t0.elapsed()));
    if std::env::var_os("WS_LOOP").is_some() {
        // Clusters seen before: what a re-plan costs besides GRACE's
        // clusterings (for a profiler).
        for _ in 0..10 {
            for (nodes, g) in [(8, 4), (8, 8)] {
                let t0 = Instant::now();
                let ws = Workspace::of_workload_reusing(
                    work.clone(),
                    cluster(nodes, g),
                    Some(&first),
                    |_| {},
                )?;
                let planned = t0.elapsed();
                let t0 = Instant::now();
                ws.view(None, 3)?;
                eprintln!(
                    "workspace {nodes} × {g}, seen before: {:.0} ms, its view {:.0} ms",
                    ms(planned),
                    ms(t0.elapsed())
                );
            }
        }
        return Ok(());
    }
    for (what, nodes, g) in [("GPU change", 8, 4), ("node change", 4, 8)] {
        let t0 = Instant::now();
        Workspace::of_workload(work.clone(), cluster(nodes, g), |_| {})?;
        let cold = t0.elapsed();
        let t0 = Instant::now();
        Workspace::of_workload_reusing(work.clone(), cluster(nodes, g), Some(&first), |_| {})?;
        let warm = t0.elapsed();
        let t0 = Instant::now();
        Grace::prepare(&work, Topology::new(nodes, g)?, &GraceOptions::default())?;
        let grace = t0.elapsed();
        eprintln!(
            "{what} to {nodes} × {g}: workspace {:.0} ms from scratch, {:.0} ms reusing; \
             GRACE alone from scratch {:.0} ms",
            ms(cold),
            ms(warm),
            ms(grace)
        );
    }
    Ok(())
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
