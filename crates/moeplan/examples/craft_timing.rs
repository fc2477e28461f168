//! Where CRAFT's preparation spends its time, phase by phase, on a generated
//! trace: `cargo run --release -p moeplan --features parallel --example
//! craft_timing -- [preset] [batches] [gpus]` (default deepseek-v3 256 64).

use std::time::Instant;

use moeplan::Topology;
use moeplan::data::model::preset;
use moeplan::judge::layer_bound_curve;
use moeplan::planners::{Craft, CraftOptions, ReplicaBudget, ReplicaCounts, estimate_benefit};
use moeplan::synth::generator::{GenConfig, generate};

fn ms(s: Instant) -> f64 {
    s.elapsed().as_secs_f64() * 1e3
}

fn main() -> Result<(), moeplan::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map_or("deepseek-v3", String::as_str);
    let batches = args.get(1).and_then(|x| x.parse().ok()).unwrap_or(256);
    let gpus = args.get(2).and_then(|x| x.parse().ok()).unwrap_or(64);
    let s = Instant::now();
    let t = generate(&GenConfig::new(preset(name)?, batches))?;
    println!("generate {name} {batches} batches: {:.1} ms", ms(s));
    let topo = Topology::new(1, gpus)?;
    let counts = ReplicaCounts::Geometric.resolve(gpus)?;
    for refine in [false, true] {
        let s = Instant::now();
        estimate_benefit(&t, topo, &counts, refine)?;
        println!("Algorithm 1 (refine={refine}): {:.1} ms", ms(s));
    }
    let s = Instant::now();
    for l in 0..t.num_layers() {
        layer_bound_curve(&t, l, gpus, gpus);
    }
    println!("bound curves: {:.1} ms", ms(s));
    let s = Instant::now();
    let c = Craft::prepare(&t, topo, &CraftOptions::default())?;
    println!("prepare (refined, everything): {:.1} ms", ms(s));
    let s = Instant::now();
    for r in [1, 2, 4, 8, 16] {
        c.plan(ReplicaBudget::ReplicasPerGpu(r))?;
    }
    println!("budget change (mean of 5): {:.2} ms", ms(s) / 5.0);
    Ok(())
}
