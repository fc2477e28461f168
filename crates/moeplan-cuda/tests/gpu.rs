//! GPU kernels against the CPU references. On a machine without a CUDA
//! device (or without NVRTC / cuBLAS) each test prints why it is skipped and
//! returns.

use moeplan::judge::{Rule, SglangVersion};
use moeplan_cuda::bench::{self, BenchConfig, PlanAlgo};
use moeplan_cuda::expert::ExpertShape;
use moeplan_cuda::gpu::{Gpu, compile_kernels};
use moeplan_cuda::select;
use moeplan_cuda::{Error, check};

fn gpu_or_skip(test: &str) -> Option<Gpu> {
    match Gpu::open(0) {
        Ok(g) => {
            println!("{test}: on {}", g.info.describe());
            Some(g)
        }
        Err(Error::NoDevice(why)) => {
            println!("{test}: skipped: no CUDA device: {why}");
            None
        }
        Err(e) => panic!("{test}: opening the GPU failed: {e}"),
    }
}

fn all_pass(outcomes: &[check::Outcome]) {
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.pass)
        .map(|o| o.to_string())
        .collect();
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

#[test]
fn kernels_compile_with_nvrtc() {
    // Needs NVRTC only, not a device.
    match compile_kernels((9, 0)) {
        Ok(_) => println!("kernels compiled for compute_90"),
        Err(Error::NoDevice(why)) => println!("skipped: no CUDA device: {why}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn small_cases_match_the_cpu() -> Result<(), Error> {
    let Some(gpu) = gpu_or_skip("small_cases_match_the_cpu") else {
        return Ok(());
    };
    for case in check::cases()? {
        println!("case {}", case.name);
        let out = check::run_case(&gpu, &case, &mut |o| println!("{o}"))?;
        all_pass(&out);
    }
    Ok(())
}

#[test]
fn full_size_rows_match_the_cpu() -> Result<(), Error> {
    let Some(gpu) = gpu_or_skip("full_size_rows_match_the_cpu") else {
        return Ok(());
    };
    let preset = moeplan::data::model::preset("olmoe")?;
    let out = check::run_full_size(&gpu, preset, 300, 4, &mut |o| println!("{o}"))?;
    all_pass(&out);
    Ok(())
}

#[test]
fn bench_measures_every_rank() -> Result<(), Error> {
    let Some(gpu) = gpu_or_skip("bench_measures_every_rank") else {
        return Ok(());
    };
    let trace = moeplan::synth::generator::generate(&moeplan::synth::generator::GenConfig::new(
        moeplan::data::model::preset("olmoe")?,
        4,
    ))?;
    let topo = moeplan::Topology::new(1, 8)?;
    let algos: Vec<PlanAlgo> = ["contiguous", "eplb", "craft:2"]
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let plans = bench::make_plans(&trace, topo, &algos, 1)?;
    for rule in select::gpu_rules() {
        let cfg = BenchConfig {
            tokens: 512,
            top_k: 8,
            rule,
            shape: ExpertShape::new(256, 128)?,
            layers: vec![0, 3],
            repeats: 2,
            warmup: 1,
            source_batch: Some(1),
            seed: 1,
            pool: 8,
            launch_gaps: rule == Rule::SglangStatic(SglangVersion::Nearest),
        };
        let res = bench::run(&gpu, &trace, &plans, &cfg, &mut |r| {
            println!("{}", r.to_text())
        })?;
        assert_eq!(res.len(), 6);
        for r in &res {
            assert_eq!(r.rank_ms.len(), 8);
            assert_eq!(r.prediction.rows_per_rank.iter().sum::<u32>(), 512 * 8);
            assert!(r.layer_ms > 0.0 && r.measured > 0.0 && r.measured <= 1.0);
        }
    }
    Ok(())
}
