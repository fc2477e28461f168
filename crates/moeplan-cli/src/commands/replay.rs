//! `moeplan replay`: serving a trace with re-planning every K batches on
//! the last W (`moeplan::studies::serving`), beside the first plan kept;
//! comma lists of K and W sweep them.

use moeplan::Topology;
use moeplan::planners::Goal;
use moeplan::studies::{self, Engine};
use moeplan::studies::{Migrate, Serving, ServingReport, Stair, Transfer, serve};
use serde_json::json;

use super::with_pricing;
use std::path::PathBuf;

use moeplan::formats::dataset;
use moeplan::{LoadTrace, Workload};

use crate::args::{CostArgs, ReplayArgs, TraceArgs};
use crate::error::CliError;
use crate::io::{emit, load, noted, spinner};
use crate::judge::Cost;

pub fn run(args: ReplayArgs) -> Result<(), CliError> {
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let (work, served) = traces(&args, topology)?;
    let trace = work.trace();
    // one cost per machine of `--hardware A,B` (none: balance only)
    let machines: Vec<Option<String>> = match &args.judge.cost.hardware {
        None => vec![None],
        Some(list) => list
            .split(',')
            .map(|h| Some(h.trim().to_string()))
            .collect(),
    };
    let mut costs = Vec::new();
    for h in &machines {
        if h.as_deref() == Some("") {
            return Err(moeplan::Error::Argument(format!(
                "--hardware {:?} names an empty machine: give NAME[,NAME…]",
                args.judge.cost.hardware.as_deref().unwrap_or_default()
            ))
            .into());
        }
        let flags = CostArgs {
            hardware: h.clone(),
            ..args.judge.cost.clone()
        };
        costs.push(Cost::choose(args.judge.model.as_deref(), trace)?.priced(&flags)?);
    }
    let planner = args.algo.planner()?;
    // clap took the name from the same list
    let engine = args
        .engine
        .as_deref()
        .and_then(|n| studies::ENGINES.iter().find(|e| e.name == n));
    // vLLM's use_async: the engine moving in the background
    let engine: Option<Engine> = match (engine, args.async_move) {
        (Some(e), true) => Some(e.asynchronous()?),
        (e, _) => e.copied(),
    };
    if let Some(e) = engine
        && planner.id().as_str() != "eplb"
    {
        return Err(moeplan::Error::Argument(format!(
            "{} re-plans with its EPLB: --engine takes --algo eplb",
            e.display
        ))
        .into());
    }
    let migrate = match args.migrate.as_deref() {
        Some("fresh") => Migrate::Fresh,
        Some("incremental") => Migrate::Incremental(Goal {
            max_moved_experts: args.max_moved_experts,
            min_balancedness: None,
        }),
        Some("stair") => {
            let d = Stair::default();
            Migrate::Stair(Stair {
                gate: args.layer_gate.unwrap_or(d.gate),
                per_pair: args.max_per_pair.unwrap_or(d.per_pair),
            })
        }
        Some(_) => Migrate::Relabel,
        None => engine.map_or(Migrate::Relabel, |e| e.migrate),
    };
    if args.max_moved_experts.is_some() && !matches!(migrate, Migrate::Incremental(_)) {
        return Err(moeplan::Error::Argument(
            "--max-moved-experts is the incremental re-plan's budget: add --migrate incremental"
                .into(),
        )
        .into());
    }
    if (args.layer_gate.is_some() || args.max_per_pair.is_some())
        && !matches!(migrate, Migrate::Stair(_))
    {
        return Err(moeplan::Error::Argument(
            "--layer-gate and --max-per-pair shape the STAIR-like re-plan: add --migrate stair"
                .into(),
        )
        .into());
    }
    if let Migrate::Stair(s) = migrate
        && (!(0.0..=1.0).contains(&s.gate) || s.per_pair == 0)
    {
        return Err(moeplan::Error::Argument(format!(
            "--layer-gate is a balancedness between 0 and 1 and --max-per-pair at least 1 (got {}, {})",
            s.gate, s.per_pair
        ))
        .into());
    }
    let units = Units::of(&args, engine, trace)?;
    let pairs = &units.batches;
    // Every run serves the same batches: those after the largest window.
    let start = pairs.iter().map(|&(_, w)| w).max().unwrap_or(0);
    let settings_of = |every: usize, window: usize| Serving {
        start,
        every,
        window,
        min_balancedness: args.replan_below,
        migrate,
        transfer: engine.map_or(Transfer::Pause, |e| e.transfer),
        rule: args.judge.dispatch,
        libra: false,
    };
    // every setting refused before any planning
    for &(k, w) in pairs {
        settings_of(k, w).check(trace.num_batches())?;
    }
    let mut settings = Vec::new();
    for cost in &costs {
        settings.push(with_pricing(&args.planner.settings, cost.pricing.as_ref())?);
    }
    let bar = spinner("serving");
    let mut machines_runs = Vec::new();
    for (cost, settings) in costs.iter().zip(&settings) {
        let mut runs = Vec::new();
        for &(k, w) in pairs {
            // Libra once per window: its copies do not depend on K
            let knobs = Serving {
                libra: args.with_libra && k == pairs[0].0,
                ..settings_of(k, w)
            };
            let r = serve(
                &work,
                topology,
                planner,
                settings,
                knobs,
                cost.pricing.as_ref(),
            )?;
            runs.push((k, w, r));
        }
        machines_runs.push((cost, runs));
    }
    bar.finish_and_clear();
    let name = |c: &Cost| c.pricing.as_ref().map(|p| p.hardware.name.to_string());
    if args.json {
        let mut list = Vec::new();
        let mut best = Vec::new();
        for (cost, runs) in &machines_runs {
            list.extend(runs.iter().map(
                |(k, w, r)| json!({"every": k, "window": w, "hardware": name(cost), "report": r}),
            ));
            if let Some(b) = Best::of(runs) {
                best.push(json!({
                    "hardware": name(cost),
                    "every": b.every,
                    "window": b.window,
                    "total_us": b.total_us,
                    "never_us": b.never_us,
                    "libra_us": b.libra_us,
                }));
            }
        }
        let v = json!({
            "algorithm": planner.id().as_str(),
            "topology": {"nodes": topology.nodes(), "gpus_per_node": topology.gpus_per_node()},
            "rule": args.judge.dispatch.name(),
            "migrate": migrate.name(),
            "replan_below": args.replan_below,
            "hardware": machines_runs.iter().filter_map(|(c, _)| name(c)).collect::<Vec<_>>(),
            "traces": served,
            "batches": trace.num_batches(),
            "first_served": start,
            "runs": list,
            "best": best,
            "engine": units.json(&machines_runs, &args, trace, topology),
        });
        crate::io::emit_json(v);
        return Ok(());
    }
    let mut o = format!(
        "{} on {topology}, batches {start}..{} served: planned on the W batches before, then re-planned every K batches on the last W ({} moves; under {} dispatch){}\n",
        planner.display(),
        trace.num_batches(),
        migrate.name(),
        args.judge.dispatch.name(),
        args.replan_below
            .map(|b| format!("; skipped while the window's balancedness ≥ {b}"))
            .unwrap_or_default()
    );
    if served.len() > 1 {
        o += &format!("served one after another: {}\n", served.join(", then "));
    }
    o += &units.text();
    let single = machines_runs.len() == 1;
    for (cost, runs) in &machines_runs {
        o += &table(cost, runs);
        if let ([(_, _, r)], true) = (runs.as_slice(), single) {
            o += &replans(r);
        }
    }
    if let Some(line) = units.flags_line(&machines_runs, &args, trace, topology) {
        o += &line;
    }
    emit(&o);
    Ok(())
}

/// One machine's runs: its cost and each `(K, W)` served, in batches.
type MachineRuns<'a> = (&'a Cost, Vec<(usize, usize, ServingReport)>);

/// K and W as asked (trace batches, or an engine's forward passes) and as
/// the replay serves them (trace batches), pair by pair.
struct Units {
    engine: Option<Engine>,
    /// `(K, W)` as asked.
    asked: Vec<(usize, usize)>,
    /// `(K, W)` in trace batches.
    batches: Vec<(usize, usize)>,
    tokens_per_pass: usize,
    tokens_per_batch: f64,
    moe_layers: usize,
}

impl Units {
    /// The pairs `--every` × `--window` name (the engine's defaults, or
    /// 16, where not given), each refused as its engine would refuse it.
    fn of(args: &ReplayArgs, engine: Option<Engine>, trace: &LoadTrace) -> Result<Units, CliError> {
        // The model's MoE layers (vllm-ascend moves one a pass).
        let model = moeplan::judge::ModelChoice::choose(args.judge.model.as_deref(), trace)?.preset;
        let moe_layers = model.moe_layers();
        let tokens_per_batch = studies::tokens_per_batch(trace, model.top_k);
        let tokens_per_pass = args
            .tokens_per_pass
            .unwrap_or_else(|| (tokens_per_batch.round() as usize).max(1));
        let (asked, batches) = match engine {
            Some(e) => {
                let settings = e.settings(
                    &args.every,
                    &args.window,
                    moe_layers,
                    tokens_per_pass,
                    tokens_per_batch,
                    args.replan_below,
                )?;
                (
                    settings
                        .iter()
                        .map(|s| (s.every_passes, s.window_passes))
                        .collect(),
                    settings.iter().map(|s| (s.every, s.window)).collect(),
                )
            }
            None => {
                let or_16 = |v: &[usize]| if v.is_empty() { vec![16] } else { v.to_vec() };
                let pairs: Vec<(usize, usize)> = or_16(&args.every)
                    .into_iter()
                    .flat_map(|k| or_16(&args.window).into_iter().map(move |w| (k, w)))
                    .collect();
                (pairs.clone(), pairs)
            }
        };
        Ok(Units {
            engine,
            asked,
            batches,
            tokens_per_pass,
            tokens_per_batch,
            moe_layers,
        })
    }

    /// The pair as asked that serves as `(k, w)` batches.
    fn asked_for(&self, k: usize, w: usize) -> (usize, usize) {
        self.batches
            .iter()
            .position(|&p| p == (k, w))
            .map_or((k, w), |i| self.asked[i])
    }

    /// What the engine's units are in batches and tokens.
    fn text(&self) -> String {
        let Some(e) = self.engine else {
            return String::new();
        };
        let mut o = format!(
            "{}: K and W in forward passes of {} tokens (a trace batch holds {:.0}; --tokens-per-pass sets it)\n",
            e.display, self.tokens_per_pass, self.tokens_per_batch
        );
        for (&(k, w), &(kb, wb)) in self.asked.iter().zip(&self.batches) {
            o += &format!(
                "  K = {k} passes ({} tokens) = {kb} batches, W = {w} passes ({} tokens) = {wb} batches\n",
                k * self.tokens_per_pass,
                w * self.tokens_per_pass
            );
        }
        o
    }

    /// The best run (least time when priced, else the best served
    /// balancedness) and its engine flags.
    fn best(
        &self,
        machines_runs: &[MachineRuns<'_>],
        args: &ReplayArgs,
        trace: &LoadTrace,
        topology: Topology,
    ) -> Option<(usize, usize, String)> {
        let e = self.engine?;
        let (_, runs) = machines_runs.first()?;
        let (k, w) = match Best::of(runs) {
            Some(b) => (b.every, b.window),
            None => runs
                .iter()
                .max_by(|a, b| a.2.balancedness.total_cmp(&b.2.balancedness))
                .map(|(k, w, _)| (*k, *w))?,
        };
        let (k, w) = self.asked_for(k, w);
        let redundant = args
            .planner
            .settings
            .budget(&moeplan::planners::REDUNDANT_EXPERTS)
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                moeplan::planners::default_redundant_experts(
                    trace.num_experts(),
                    topology.num_gpus(),
                )
            });
        Some((
            k,
            w,
            e.flags(
                k,
                w,
                self.moe_layers,
                trace.num_experts(),
                redundant,
                args.replan_below,
            ),
        ))
    }

    fn flags_line(
        &self,
        machines_runs: &[MachineRuns<'_>],
        args: &ReplayArgs,
        trace: &LoadTrace,
        topology: Topology,
    ) -> Option<String> {
        let e = self.engine?;
        let (k, w, flags) = self.best(machines_runs, args, trace, topology)?;
        Some(format!(
            "\n{} flags for the best setting (K = {k}, W = {w} passes{}):\n  {flags}\n",
            e.display,
            machines_runs
                .first()
                .and_then(|(c, _)| c.pricing.as_ref())
                .map_or(", by balancedness".to_string(), |p| format!(
                    ", fastest on {}",
                    p.hardware.name
                ))
        ))
    }

    fn json(
        &self,
        machines_runs: &[MachineRuns<'_>],
        args: &ReplayArgs,
        trace: &LoadTrace,
        topology: Topology,
    ) -> serde_json::Value {
        let Some(e) = self.engine else {
            return serde_json::Value::Null;
        };
        let best = self.best(machines_runs, args, trace, topology);
        json!({
            "name": e.name,
            "transfer": e.transfer,
            "tokens_per_pass": self.tokens_per_pass,
            "tokens_per_batch": self.tokens_per_batch,
            "settings": self.asked.iter().zip(&self.batches).map(|(&(k, w), &(kb, wb))| json!({
                "every_passes": k, "window_passes": w, "every": kb, "window": wb,
            })).collect::<Vec<_>>(),
            "best": best.map(|(k, w, flags)| json!({"every_passes": k, "window_passes": w, "flags": flags})),
        })
    }
}

/// The traces `--trace` names (the generated default when none), served
/// one after another, with their sources (per-rank counts, token routes
/// dealt to the GPUs of `topology`; even arrival where one has none), and
/// their names. `--dataset A,B,…` with several `--trace` gives the i-th
/// trace the i-th dataset (a multi-dataset CSV given twice is one dataset,
/// then another); one name applies to all.
fn traces(args: &ReplayArgs, topology: Topology) -> Result<(Workload, Vec<String>), CliError> {
    let datasets: Vec<Option<String>> = match &args.source.dataset {
        Some(list) if list.contains(',') => list
            .split(',')
            .map(|d| Some(d.trim().to_string()))
            .collect(),
        one => vec![one.clone(); args.traces.len().max(1)],
    };
    if datasets.len() != args.traces.len().max(1) {
        return Err(moeplan::Error::Argument(format!(
            "--dataset names {} datasets for {} --trace: give one, or one per trace",
            datasets.len(),
            args.traces.len()
        ))
        .into());
    }
    let rule = Some(args.judge.dispatch);
    let one = |trace: Option<PathBuf>, dataset: &Option<String>| -> Result<Workload, CliError> {
        let mut source = args.source.clone();
        source.dataset = dataset.clone();
        let d = load(&TraceArgs { trace, source })?;
        let all = 0..d.trace.num_batches();
        noted(|n| dataset::workload_on_cluster(d.trace, &d.sources, all, topology, rule, n))
    };
    let name = |p: &PathBuf, d: &Option<String>| match d {
        Some(d) => format!("{} ({d})", p.display()),
        None => p.display().to_string(),
    };
    let Some((first, rest)) = args.traces.split_first() else {
        return Ok((one(None, &datasets[0])?, vec!["generated".into()]));
    };
    let mut work = one(Some(first.clone()), &datasets[0])?;
    let mut names = vec![name(first, &datasets[0])];
    for (path, dataset) in rest.iter().zip(&datasets[1..]) {
        work = work
            .then(&one(Some(path.clone()), dataset)?)
            .map_err(CliError::in_file(path))?;
        names.push(name(path, dataset));
    }
    Ok((work, names))
}

/// The fastest setting of one machine's runs, beside never re-planning
/// (the best of the first plans, one per window) and Libra.
struct Best {
    every: usize,
    window: usize,
    total_us: f64,
    never_us: f64,
    libra_us: Option<f64>,
}

impl Best {
    fn of(runs: &[(usize, usize, ServingReport)]) -> Option<Best> {
        let (k, w, t) = runs
            .iter()
            .filter_map(|(k, w, r)| r.total_us.map(|(t, _)| (*k, *w, t)))
            .min_by(|a, b| a.2.total_cmp(&b.2))?;
        let never = runs
            .iter()
            .filter_map(|(_, _, r)| r.total_us.map(|(_, s)| s))
            .min_by(f64::total_cmp)?;
        let libra = runs
            .iter()
            .filter_map(|(_, _, r)| r.libra.as_ref().and_then(|l| l.total_us))
            .min_by(f64::total_cmp);
        Some(Best {
            every: k,
            window: w,
            total_us: t,
            never_us: never,
            libra_us: libra,
        })
    }
}

/// One machine's table: a row per (K, W), the fastest, Libra.
fn table(cost: &Cost, runs: &[(usize, usize, ServingReport)]) -> String {
    let priced = cost.pricing.as_ref();
    let mut o = String::new();
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
            " {:>12} {:>12} {:>9} {:>8}",
            "MoE+pause ms", "static ms", "× static", "payback"
        );
    }
    o.push('\n');
    for (k, w, r) in runs {
        o += &row(*k, *w, r);
    }
    if let Some(b) = Best::of(runs) {
        o += &if b.total_us < b.never_us {
            format!(
                "fastest: K = {}, W = {}, {:.1} ms against {:.1} ms never re-planning ({:.3}×)\n",
                b.every,
                b.window,
                b.total_us / 1e3,
                b.never_us / 1e3,
                b.total_us / b.never_us
            )
        } else {
            format!(
                "never re-planning is fastest ({:.1} ms; the best re-planning, K = {}, W = {}, {:.1} ms)\n",
                b.never_us / 1e3,
                b.every,
                b.window,
                b.total_us / 1e3
            )
        };
    }
    if priced.is_some() {
        o += "payback: batches a move's pause takes to pay back (mean pause / MoE time a batch saves); below K, re-planning at K pays\n";
    }
    for (_, w, r) in runs {
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
    o
}

/// Every re-plan point of a single run.
fn replans(r: &ServingReport) -> String {
    let mut o = String::new();
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
    o
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
            " {:>12.1} {:>12.1} {:>9.3} {:>8}",
            t / 1e3,
            st / 1e3,
            if st > 0.0 { t / st } else { 0.0 },
            r.payback_batches
                .map_or("—".to_string(), |p| format!("{p:.1}"))
        );
    }
    s.push('\n');
    s
}
