//! `moeplan replay`: serving a trace with re-planning every K batches on
//! the last W (`moeplan::studies::serving`), beside the first plan kept;
//! comma lists of K and W sweep them.

use moeplan::Topology;
use moeplan::planners::shared::incremental::Goal;
use moeplan::studies::serving::{Migrate, Serving, ServingReport, serve};
use serde_json::json;

use super::with_pricing;
use crate::args::ReplayArgs;
use crate::error::CliError;
use crate::io::{emit, load, spinner};
use crate::judge::Cost;

pub fn run(args: ReplayArgs) -> Result<(), CliError> {
    let trace = load(&args.trace)?.trace;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let cost = Cost::choose(args.judge.model.as_deref(), &trace)?.priced(&args.judge.cost)?;
    let settings = with_pricing(&args.planner.settings, cost.pricing.as_ref())?;
    let planner = args.algo.planner()?;
    let migrate = match args.migrate.as_str() {
        "fresh" => Migrate::Fresh,
        "incremental" => Migrate::Incremental(Goal {
            max_moved_experts: args.max_moved_experts,
            min_balancedness: None,
        }),
        _ => Migrate::Relabel,
    };
    if args.max_moved_experts.is_some() && !matches!(migrate, Migrate::Incremental(_)) {
        return Err(moeplan::Error::Argument(
            "--max-moved-experts is the incremental re-plan's budget: add --migrate incremental"
                .into(),
        )
        .into());
    }
    // Every run serves the same batches: those after the largest window.
    let start = args.window.iter().copied().max().unwrap_or(0);
    // every setting refused before any planning
    let settings_of = |every: usize, window: usize| Serving {
        start,
        every,
        window,
        min_balancedness: args.min_balancedness,
        migrate,
        rule: args.judge.dispatch,
        libra: false,
    };
    for &k in &args.every {
        for &w in &args.window {
            settings_of(k, w).check(trace.num_batches())?;
        }
    }
    let bar = spinner("serving");
    let mut runs = Vec::new();
    for &k in &args.every {
        for &w in &args.window {
            // Libra once per window: its copies do not depend on K
            let knobs = Serving {
                libra: args.with_libra && k == args.every[0],
                ..settings_of(k, w)
            };
            let r = serve(
                &trace,
                topology,
                planner,
                &settings,
                knobs,
                cost.pricing.as_ref(),
            )?;
            runs.push((k, w, r));
        }
    }
    bar.finish_and_clear();
    if args.json {
        let list: Vec<_> = runs
            .iter()
            .map(|(k, w, r)| json!({"every": k, "window": w, "report": r}))
            .collect();
        let v = json!({
            "algorithm": planner.id().as_str(),
            "topology": {"nodes": topology.nodes(), "gpus_per_node": topology.gpus_per_node()},
            "rule": args.judge.dispatch.name(),
            "migrate": migrate.name(),
            "min_balancedness": args.min_balancedness,
            "hardware": cost.pricing.as_ref().map(|p| p.hardware.name.to_string()),
            "batches": trace.num_batches(),
            "first_served": start,
            "runs": list,
        });
        emit(&v.to_string());
        return Ok(());
    }
    let mut o = format!(
        "{} on {topology}, batches {start}..{} served: planned on the W batches before, then re-planned every K batches on the last W ({} moves; under {} dispatch){}\n",
        planner.display(),
        trace.num_batches(),
        migrate.name(),
        args.judge.dispatch.name(),
        args.min_balancedness
            .map(|b| format!("; skipped while the window's balancedness ≥ {b}"))
            .unwrap_or_default()
    );
    let priced = cost.pricing.as_ref();
    if let Some(p) = priced {
        o += &format!(
            "time on {} ({}): the served batches' MoE layers and every move's pause\n",
            p.hardware.name, p.model.name
        );
    }
    o += &format!(
        "{:>5} {:>5} {:>8} {:>8} {:>10} {:>13} {:>8}",
        "K", "W", "re-plans", "skipped", "copies", "balancedness", "static"
    );
    if priced.is_some() {
        o += &format!(
            " {:>12} {:>12} {:>9}",
            "MoE+pause ms", "static ms", "× static"
        );
    }
    o.push('\n');
    let best = runs
        .iter()
        .filter_map(|(k, w, r)| r.total_us.map(|(t, _)| (k, w, t)))
        .min_by(|a, b| a.2.total_cmp(&b.2));
    // never re-planning: the best of the first plans (one per window)
    let best_static = runs
        .iter()
        .filter_map(|(_, _, r)| r.total_us.map(|(_, s)| s))
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    for (k, w, r) in &runs {
        o += &row(*k, *w, r);
    }
    if let Some((k, w, t)) = best {
        let static_us = best_static;
        o += &if t < static_us {
            format!(
                "fastest: K = {k}, W = {w}, {:.1} ms against {:.1} ms never re-planning\n",
                t / 1e3,
                static_us / 1e3
            )
        } else {
            format!(
                "never re-planning is fastest ({:.1} ms; the best re-planning, K = {k}, W = {w}, {:.1} ms)\n",
                static_us / 1e3,
                t / 1e3
            )
        };
    }
    for (_, w, r) in &runs {
        if let Some(l) = &r.libra {
            o += &format!(
                "Libra per batch (prepared on the first W = {w}, its own rule): balancedness {:.4}, {:.0} copies per batch{}\n",
                l.balancedness,
                l.copies_per_batch,
                l.total_us
                    .map(|t| format!(", {:.1} ms with its copies that do not hide", t / 1e3))
                    .unwrap_or_default()
            );
        }
    }
    if let [(_, _, r)] = runs.as_slice() {
        for p in &r.replans {
            o += &format!(
                "  batch {}: window balancedness {:.4} → {:.4}{}\n",
                p.at_batch,
                p.window_balancedness_before,
                p.window_balancedness_after,
                if p.skipped {
                    " (skipped)".to_string()
                } else {
                    format!(
                        ", {} copies ({} across nodes){}",
                        p.migration.copies(),
                        p.migration.copies_inter_node,
                        p.pause_us
                            .map(|us| format!(", {:.2} ms pause", us / 1e3))
                            .unwrap_or_default()
                    )
                }
            );
        }
    }
    emit(&o);
    Ok(())
}

fn row(k: usize, w: usize, r: &ServingReport) -> String {
    let done = r.replans.iter().filter(|p| !p.skipped).count();
    let mut s = format!(
        "{k:>5} {w:>5} {done:>8} {:>8} {:>10} {:>13.4} {:>8.4}",
        r.replans.len() - done,
        r.copies_moved,
        r.balancedness,
        r.static_balancedness
    );
    if let Some((t, st)) = r.total_us {
        s += &format!(
            " {:>12.1} {:>12.1} {:>9.3}",
            t / 1e3,
            st / 1e3,
            if st > 0.0 { t / st } else { 0.0 }
        );
    }
    s.push('\n');
    s
}
