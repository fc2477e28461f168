//! The tables of docs/results-eplb-craft.md's "Plans across workloads":
//! plans made on one real DeepSeek-V3 dump and judged on every other one,
//! and plans made on five dumps (mean and robust CRAFT, EPLB on the summed
//! loads) judged on the sixth. Real data: the six SGLang expert-distribution
//! dumps of `../shared/data/sglang-deepseek-v3/` (one whole-run total each),
//! 1 node × 64 GPUs, 1 expert group, even split over copies.
//!
//! Gain kept (plans made on one dump) = (plan − BASE) / (plan on its own
//! trace − BASE), BASE being EPLB's placement without replicas made on the
//! same dump as the plan and judged on the same trace. For plans made on the
//! other five dumps, the share of the in-sample gain = (plan − BASE made on
//! the judged dump) / (the same planner made on the judged dump − that
//! BASE): how much of what planning on today's traffic would give is kept.
//!
//! `cargo run --release -p moeplan --example cross_table -- ../shared/data/sglang-deepseek-v3`

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use moeplan::formats::{ReadOptions, read_trace};
use moeplan::planners::{CraftOptions, EplbConfig, ReplicaBudget, base, eplb};
use moeplan::studies::{Mix, ROBUST_ROUNDS, craft_mean, craft_robust, cross_matrix, judge_each};
use moeplan::{LoadTrace, Plan, Topology};

const REDUNDANT: usize = 64;
const R: usize = 8;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("cross_table: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn read(path: &Path) -> Result<LoadTrace, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    read_trace(&bytes, &ReadOptions::default()).map_err(|e| format!("{}: {e}", path.display()))
}

fn run() -> Result<(), String> {
    let folder = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .ok_or("usage: cross_table DATA_FOLDER (the SGLang DeepSeek-V3 dumps)")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .map_err(|e| format!("{}: {e}", folder.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .map(|p| {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let traces = files
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let e = |x: moeplan::Error| x.to_string();
    let topo = Topology::new(1, 64).map_err(e)?;
    let options = CraftOptions::default();
    let cfg = |k| EplbConfig {
        redundant_experts: k,
        groups: 1,
    };
    let started = Instant::now();
    let mut plans: Vec<(&str, Vec<Plan>)> = vec![
        ("BASE", Vec::new()),
        ("EPLB +64", Vec::new()),
        ("CRAFT R = 8", Vec::new()),
    ];
    for t in &traces {
        plans[0].1.push(base(t, topo, 1).map_err(e)?);
        plans[1].1.push(eplb(t, topo, cfg(REDUNDANT)).map_err(e)?);
        let mix = Mix::new(vec![t.clone()], None).map_err(e)?;
        plans[2]
            .1
            .push(craft_mean(&mix, topo, &options, ReplicaBudget::ReplicasPerGpu(R)).map_err(e)?);
    }
    let matrices: Vec<(&str, usize, Vec<Vec<f64>>)> = plans
        .iter()
        .map(|(name, ps)| {
            let replicas = ps.iter().map(|p| p.summary().replicas).max().unwrap_or(0);
            Ok((*name, replicas, cross_matrix(ps, &traces).map_err(e)?))
        })
        .collect::<Result<_, String>>()?;
    let base_m = &matrices[0].2;
    let n = traces.len();

    println!(
        "Real data: {} ({} dumps), 1 × 64 GPUs, 1 group, even split.\n",
        folder.display(),
        n
    );
    for (name, replicas, m) in &matrices {
        println!("**{name}** ({replicas} replicas): rows made on, columns judged on\n");
        print!("| made on \\ judged on |");
        for c in &names {
            print!(" {c} |");
        }
        println!();
        println!("| --- |{}", " ---: |".repeat(n));
        for (i, row) in m.iter().enumerate() {
            print!("| {} |", names[i]);
            for (j, v) in row.iter().enumerate() {
                if i == j {
                    print!(" **{v:.4}** |");
                } else {
                    print!(" {v:.4} |");
                }
            }
            println!();
        }
        println!();
    }

    // Gain kept, per (made on i, judged on j ≠ i).
    println!(
        "| plan | replicas | in-sample (mean of diagonal) | on another trace: mean | worst | gain kept: mean | worst |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, replicas, m) in matrices.iter().skip(1) {
        let diag: f64 = (0..n).map(|i| m[i][i]).sum::<f64>() / n as f64;
        let mut off = Vec::new();
        let mut kept = Vec::new();
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    off.push(m[i][j]);
                    kept.push((m[i][j] - base_m[i][j]) / (m[i][i] - base_m[i][i]));
                }
            }
        }
        println!(
            "| {name} | {replicas} | {diag:.4} | {:.4} | {:.4} | {:.0} % | {:.0} % |",
            mean(&off),
            min(&off),
            100.0 * mean(&kept),
            100.0 * min(&kept)
        );
    }
    println!();

    // Made on the other five, judged on the sixth.
    let k = n - 1;
    println!(
        "| judged on | in-sample BASE | in-sample EPLB +64 | in-sample CRAFT R = 8 | made on the other {k}: BASE | EPLB +64 | CRAFT mean | CRAFT robust | share of the in-sample gain: EPLB | CRAFT mean | CRAFT robust | worst of the {k} planned on: CRAFT mean / robust (round) |"
    );
    println!("| --- |{}", " ---: |".repeat(11));
    let mut share_all: [Vec<f64>; 3] = Default::default();
    let mut held: [Vec<f64>; 4] = Default::default();
    let mut worst_all: [Vec<f64>; 2] = Default::default();
    for j in 0..n {
        let others: Vec<LoadTrace> = (0..n)
            .filter(|&i| i != j)
            .map(|i| traces[i].clone())
            .collect();
        let mix = Mix::new(others, None).map_err(e)?;
        let sum = mix.weighted_sum().map_err(e)?;
        let b = base(&sum, topo, 1).map_err(e)?;
        let ep = eplb(&sum, topo, cfg(REDUNDANT)).map_err(e)?;
        let mean_plan =
            craft_mean(&mix, topo, &options, ReplicaBudget::ReplicasPerGpu(R)).map_err(e)?;
        let robust = craft_robust(
            &mix,
            topo,
            &options,
            ReplicaBudget::ReplicasPerGpu(R),
            ROBUST_ROUNDS,
        )
        .map_err(e)?;
        let on_j = |p: &Plan| moeplan::evaluate(&traces[j], p).map(|r| r.balancedness);
        let v = [
            on_j(&b).map_err(e)?,
            on_j(&ep).map_err(e)?,
            on_j(&mean_plan).map_err(e)?,
            on_j(&robust.plan).map_err(e)?,
        ];
        for (x, h) in v.iter().zip(held.iter_mut()) {
            h.push(*x);
        }
        let (bjj, ejj, cjj) = (base_m[j][j], matrices[1].2[j][j], matrices[2].2[j][j]);
        let share = [
            (v[1] - bjj) / (ejj - bjj),
            (v[2] - bjj) / (cjj - bjj),
            (v[3] - bjj) / (cjj - bjj),
        ];
        for (x, h) in share.iter().zip(share_all.iter_mut()) {
            h.push(*x);
        }
        let worst_mean = min(&judge_each(&mix, &mean_plan).map_err(e)?);
        let worst_robust = min(&judge_each(&mix, &robust.plan).map_err(e)?);
        worst_all[0].push(worst_mean);
        worst_all[1].push(worst_robust);
        println!(
            "| {} | {bjj:.4} | {ejj:.4} | {cjj:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.0} % | {:.0} % | {:.0} % | {worst_mean:.4} / {worst_robust:.4} ({}) |",
            names[j],
            v[0],
            v[1],
            v[2],
            v[3],
            100.0 * share[0],
            100.0 * share[1],
            100.0 * share[2],
            robust.best,
        );
        eprintln!(
            "{}: robust rounds (worst over the {k}): {}",
            names[j],
            robust
                .rounds
                .iter()
                .map(|r| format!("{:.4}", r.worst()))
                .collect::<Vec<_>>()
                .join(" → ")
        );
    }
    println!(
        "| mean | | | | {:.4} | {:.4} | {:.4} | {:.4} | {:.0} % | {:.0} % | {:.0} % | {:.4} / {:.4} |",
        mean(&held[0]),
        mean(&held[1]),
        mean(&held[2]),
        mean(&held[3]),
        100.0 * mean(&share_all[0]),
        100.0 * mean(&share_all[1]),
        100.0 * mean(&share_all[2]),
        mean(&worst_all[0]),
        mean(&worst_all[1]),
    );
    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}
