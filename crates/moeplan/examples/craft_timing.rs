//! Where CRAFT's preparation spends its time, phase by phase, on a generated
//! DeepSeek-V3 trace (256 batches, 64 GPUs). `cargo run --release --example
//! craft_timing -p moeplan [--features parallel]`.

use std::time::Instant;

use moeplan::Topology;
use moeplan::bound::layer_bound_curve;
use moeplan::generator::{GenConfig, generate};
use moeplan::model::preset;
use moeplan::planners::craft::{Budget, Craft, CraftOptions, estimate_benefit};

fn main() -> Result<(), moeplan::Error> {
    let t = generate(&GenConfig::new(preset("deepseek-v3")?, 256))?;
    let topo = Topology::new(1, 64)?;
    let counts = [1, 2, 4, 8, 16, 32, 64];
    for refine in [false, true] {
        let s = Instant::now();
        estimate_benefit(&t, topo, &counts, refine)?;
        println!(
            "estimate_benefit (refine={refine}): {:.1} ms",
            s.elapsed().as_secs_f64() * 1e3
        );
    }
    let s = Instant::now();
    for l in 0..t.num_layers() {
        layer_bound_curve(&t, l, 64, 64);
    }
    println!("bound curves: {:.1} ms", s.elapsed().as_secs_f64() * 1e3);
    let s = Instant::now();
    let c = Craft::prepare(&t, topo, &CraftOptions::default())?;
    println!(
        "prepare (refined): {:.1} ms",
        s.elapsed().as_secs_f64() * 1e3
    );
    let s = Instant::now();
    for r in [1, 2, 4, 8, 16] {
        c.plan(Budget::ReplicasPerGpu(r))?;
    }
    println!(
        "5 budget changes (refined): {:.1} ms",
        s.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
