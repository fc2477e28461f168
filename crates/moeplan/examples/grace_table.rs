//! GRACE-MoE beside contiguous, EPLB and CRAFT, on both of GRACE's costs:
//! cross-GPU / cross-node traffic and balancedness, under the same dispatch
//! rules, at equal replica memory (the figures in docs/grace.md).
//!
//! Data: the ESFT token folders `intent` and `summary`
//! (`DATA/esft-deepseek-v2-lite/`, DeepSeek-V2-Lite, 64 experts, top-6),
//! read as the CLI reads a folder — batches of 1024 tokens (`--tokens-per-batch`'
//! default), each batch's tokens dealt to the GPUs in equal shares
//! (`--deal`'s default; `--deal sequences` here deals whole sequences
//! round-robin, the old rule) — on 2 × 2 and 1 × 8; and a
//! generated DeepSeek-V3-shaped token trace (`token_generator`, 64 ranks,
//! dealt the same way) on 8 × 8. Every plan comes from the registry
//! (`planners::prepare`, which records the planning batches' loads in it:
//! GRACE's rules predict from them), every figure from `judge::simulate` —
//! token messages too (`Traffic::messages`); in-sample. Equal memory is
//! judged on the fullest GPU: EPLB and CRAFT get at most GRACE's
//! fullest GPU's replica slots.
//!
//! Run with `cargo run --release -p moeplan --features parallel --example
//! grace_table -- ../shared/data [--deal sequences] [--long]`; prints
//! Markdown.

#[path = "common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use moeplan::Workload;
use moeplan::data::model::{ModelPreset, preset};
use moeplan::judge::{CostModel, Replay, Rule, SglangVersion, Strategy, simulate};
use moeplan::planners::{self, Settings, Value};
use moeplan::planners::{Grace, GraceOptions};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan::{Deal, Plan, TokenTrace, Topology};

/// The CLI's `--tokens-per-batch` default for a token-level trace (`crates/moeplan-cli/src/args.rs`).
const BATCH_TOKENS: usize = 1024;
/// Tokens of the generated DeepSeek-V3 trace: 64 batches of 1024.
const GEN_TOKENS: usize = 65_536;
/// The generated trace's ranks: one per GPU of 8 × 8.
const GEN_RANKS: usize = 64;
/// `TokenGenConfig::new`'s seed, stated.
const GEN_SEED: u64 = 7;

const RULES: [Rule; 5] = [
    Rule::Even,
    Rule::LocalFirst,
    Rule::GraceWeighted,
    Rule::GraceTopology,
    Rule::SglangStatic(SglangVersion::Nearest),
];

struct Case {
    data: String,
    cluster: Topology,
    tokens: usize,
    rows: Vec<Row>,
    layers: Vec<LayerLine>,
    budgets: String,
}

struct Row {
    plan: String,
    replicas: usize,
    /// Replica slots on the fullest GPU, all layers.
    fullest: usize,
    rule: Rule,
    report: Replay,
}

/// GRACE's grouping of one layer next to contiguous's.
struct LayerLine {
    ratio: Option<f64>,
    u_grace: f64,
    u_contiguous: f64,
    u_load: f64,
    copies: usize,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("grace_table: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let usage = "usage: grace_table DATA_FOLDER [--deal even|sequences] [--long] (DATA_FOLDER: \
                 the shared data folder holding esft-deepseek-v2-lite/; --deal: how tokens go \
                 to ranks; --long: one row per plan and rule)";
    let mut data = None;
    let mut long = false;
    let mut deal = Deal::Even;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--long" => long = true,
            "--deal" => {
                deal = Deal::from_name(&args.next().ok_or(usage)?).map_err(|e| e.to_string())?
            }
            _ if data.is_none() && !a.starts_with('-') => data = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a:?}; {usage}")),
        }
    }
    let data = data.ok_or(usage)?;
    let v2 = preset("deepseek-v2-lite").map_err(|e| e.to_string())?;
    let v3 = preset("deepseek-v3").map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for task in ["intent", "summary"] {
        let t = Instant::now();
        let tokens = common::read_esft_folder(&data.join("esft-deepseek-v2-lite").join(task), v2)?;
        for (nodes, gpn) in [(2, 2), (1, 8)] {
            let topology = Topology::new(nodes, gpn).map_err(|e| e.to_string())?;
            let work = Workload::from_tokens(
                tokens
                    .clone()
                    .dealt(deal, topology.num_gpus(), BATCH_TOKENS)
                    .map_err(|e| e.to_string())?,
                BATCH_TOKENS,
            )
            .map_err(|e| e.to_string())?;
            let name = format!("ESFT {task}");
            cases.push(case(&name, &work, topology, v2).map_err(|e| format!("{name}: {e}"))?);
        }
        eprintln!("{task}: {:.1} s", t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let mut cfg = TokenGenConfig::new(v3, GEN_TOKENS);
    cfg.ranks = GEN_RANKS;
    cfg.seed = GEN_SEED;
    let tokens = generate_tokens(&cfg)
        .and_then(|t| t.dealt(deal, GEN_RANKS, BATCH_TOKENS))
        .map_err(|e| e.to_string())?;
    let work = Workload::from_tokens(tokens, BATCH_TOKENS).map_err(|e| e.to_string())?;
    let topology = Topology::new(8, 8).map_err(|e| e.to_string())?;
    let name = "generated DeepSeek-V3";
    cases.push(case(name, &work, topology, v3).map_err(|e| format!("{name}: {e}"))?);
    eprintln!("generated: {:.1} s", t.elapsed().as_secs_f64());
    print!("{}", markdown(&cases, &cfg, deal, long));
    Ok(())
}

fn replicas(plan: &Plan) -> usize {
    plan.summary().replicas
}

fn fullest(plan: &Plan) -> usize {
    plan.summary().replica_slots_fullest_gpu
}

/// EPLB's redundant experts per layer whose fullest GPU holds at most
/// `slots` expert slots over `layers` layers: the largest count that keeps
/// every GPU's slot count equal and fits (EPLB's GPUs are all equally full).
fn eplb_budget(slots: usize, layers: usize, experts: usize, gpus: usize) -> usize {
    let fits = |k: usize| layers * (experts + k) / gpus.max(1) <= slots;
    planners::redundant_steps(experts, gpus)
        .take_while(|&k| fits(k))
        .last()
        .unwrap_or(0)
}

fn case(
    data: &str,
    work: &Workload,
    topology: Topology,
    model: &ModelPreset,
) -> moeplan::Result<Case> {
    let cost = CostModel::for_model(model);
    let trace = work.trace();
    let (layers, experts, gpus) = (trace.num_layers(), trace.num_experts(), topology.num_gpus());
    let grace = planners::find(planners::GRACE_ID.as_str())?;
    let grace_on = planners::prepare(grace, work, topology, &Settings::new())?.plan(None)?;
    let off = Settings::new().with(planners::REPLICATION.name, Value::Flag(false))?;
    let grace_off = planners::prepare(grace, work, topology, &off)?.plan(None)?;
    let g = replicas(&grace_on.plan);
    let summary = grace_on.plan.summary();
    let (g_max, g_plus) = (summary.slots_per_gpu_max, summary.replica_slots_fullest_gpu);
    let k = eplb_budget(g_max, layers, experts, gpus);
    let r = g_plus;
    let eplb_s = Settings::new().with(planners::REDUNDANT_EXPERTS.name, Value::Count(k))?;
    let craft_s = Settings::new().with("replicas_per_gpu", Value::Count(r))?;
    let contiguous = planners::plan(
        planners::find("contiguous")?,
        work,
        topology,
        &Settings::new(),
    )?;
    let eplb_p = planners::plan(planners::find("eplb")?, work, topology, &eplb_s)?;
    let craft_p = planners::plan(planners::find("craft")?, work, topology, &craft_s)?;
    // GRACE as a count-only trace gets it: load-only grouping, Eq. 2.
    let counts_only = Workload::new(trace.clone());
    let grace_load =
        planners::prepare(grace, &counts_only, topology, &Settings::new())?.plan(None)?;
    let plans = [
        ("contiguous".to_string(), contiguous.plan),
        (format!("EPLB +{k}/layer"), eplb_p.plan),
        (format!("CRAFT R = {r}"), craft_p.plan),
        ("GRACE".to_string(), grace_on.plan),
        ("GRACE, no replication".to_string(), grace_off.plan),
        ("GRACE load-only (counts)".to_string(), grace_load.plan),
    ];
    let mut rows = Vec::new();
    for (name, plan) in &plans {
        for rule in RULES {
            let report = simulate(work, &Strategy::fixed(plan.clone(), rule), &cost)?;
            rows.push(Row {
                plan: name.clone(),
                replicas: replicas(plan),
                fullest: fullest(plan),
                rule,
                report,
            });
        }
    }
    let layers_out = grace_layers(work, topology, &plans[0].1)?;
    Ok(Case {
        data: data.to_string(),
        cluster: topology,
        tokens: work.tokens().map_or(0, TokenTrace::num_tokens),
        rows,
        layers: layers_out,
        budgets: format!(
            "GRACE's replicas: {g} in all, its fullest GPU {g_max} slots, {g_plus} of them \
             replica memory (beyond the even share of {} without replicas); at that memory on \
             the fullest GPU: EPLB +{k} per layer ({} in all, the largest equal-slot count \
             whose GPUs hold at most {g_max}), CRAFT R = {r} replicas per GPU (at most {} in all)",
            g_max - g_plus,
            k * layers,
            r * gpus
        ),
    })
}

/// Per layer: GRACE's chosen `r`, its `U`, contiguous's `U` and load-only
/// grouping's `U` on the same affinity, and Eq. 2's copies.
fn grace_layers(
    work: &Workload,
    topology: Topology,
    contiguous: &Plan,
) -> moeplan::Result<Vec<LayerLine>> {
    let g = Grace::prepare(work, topology, &GraceOptions::default())?;
    let Some(tokens) = work.tokens() else {
        return Ok(Vec::new());
    };
    let summed = work.trace().summed();
    let mut out = Vec::new();
    for (l, lg) in g.layers().iter().enumerate() {
        let a = planners::grace_affinity(tokens, l)?;
        let groups_of = |gpus: &[Vec<u32>]| -> Vec<Vec<usize>> {
            gpus.iter()
                .map(|g| g.iter().map(|&e| e as usize).collect())
                .collect()
        };
        let u_contiguous = contiguous.layers().get(l).map_or(0.0, |p| {
            planners::grouping_utilisation(&a, &groups_of(&p.gpus))
        });
        let loads: Vec<f64> = summed.row(l).to_vec();
        let by_load = planners::load_grouping(&loads, topology.num_gpus());
        out.push(LayerLine {
            ratio: lg.ratio,
            u_grace: lg.utilisation,
            u_contiguous,
            u_load: planners::grouping_utilisation(&a, &by_load),
            copies: lg.replication.added(),
        });
    }
    Ok(out)
}

fn pct(x: f64, of: f64) -> String {
    if of > 0.0 {
        format!("{:.1} %", 100.0 * x / of)
    } else {
        "—".into()
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n > 0 { s / n as f64 } else { f64::NAN }
}

/// One row per (plan, rule): every figure.
fn long_table(out: &mut String, c: &Case) {
    out.push_str(
        "| plan | replicas · fullest GPU | dispatch | balancedness | cross-GPU | cross-node | cross-node MB |\n\
             | --- | ---: | --- | ---: | ---: | ---: | ---: |\n",
    );
    for r in &c.rows {
        let t = &r.report.traffic;
        let multi = c.cluster.nodes() > 1;
        out.push_str(&format!(
            "| {} | {} · +{} | `{}` | {:.4} | {} | {} | {} |\n",
            r.plan,
            r.replicas,
            r.fullest,
            r.rule,
            r.report.balancedness,
            pct(t.pairs - t.local, t.pairs),
            if multi {
                pct(t.cross_node, t.pairs)
            } else {
                "0".into()
            },
            if multi {
                format!("{:.0}", t.cross_node_bytes / 1e6)
            } else {
                "0".into()
            },
        ));
    }
}

/// One row per plan, one column per rule: `balancedness · cross-GPU ·
/// cross-node` (cross-node bytes are the cross-node share of the bytes of
/// all pairs, printed once).
fn compact_table(out: &mut String, c: &Case) {
    let multi = c.cluster.nodes() > 1;
    let all_bytes = c.rows.first().map_or(0.0, |r| {
        let t = &r.report.traffic;
        if t.cross_node > 0.0 {
            t.cross_node_bytes / t.cross_node * t.pairs
        } else {
            f64::NAN
        }
    });
    out.push_str(&format!(
        "Each cell: balancedness · cross-GPU share · cross-node share{}.\n\n",
        if multi && all_bytes.is_finite() {
            format!(
                " (cross-node bytes = that share × {:.0} MB, every pair's activation)",
                all_bytes / 1e6
            )
        } else {
            String::new()
        }
    ));
    out.push_str("| plan | replicas · fullest GPU |");
    for rule in RULES {
        out.push_str(&format!(" `{rule}` |"));
    }
    out.push_str("\n| --- | ---: |");
    for _ in RULES {
        out.push_str(" ---: |");
    }
    out.push('\n');
    let mut plans: Vec<&str> = c.rows.iter().map(|r| r.plan.as_str()).collect();
    plans.dedup();
    for plan in plans {
        let rows: Vec<&Row> = c.rows.iter().filter(|r| r.plan == plan).collect();
        out.push_str(&format!(
            "| {plan} | {} · +{} |",
            rows.first().map_or(0, |r| r.replicas),
            rows.first().map_or(0, |r| r.fullest)
        ));
        for rule in RULES {
            match rows.iter().find(|r| r.rule == rule) {
                Some(r) => {
                    let t = &r.report.traffic;
                    out.push_str(&format!(
                        " {:.3} · {} · {} |",
                        r.report.balancedness,
                        pct(t.pairs - t.local, t.pairs),
                        if multi {
                            pct(t.cross_node, t.pairs)
                        } else {
                            "0".into()
                        }
                    ));
                }
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
}

/// One row per plan, one column per rule: the simulator's token messages
/// (`Traffic::messages`: a token sent once per destination GPU / node) per
/// (token, layer), `cross-GPU · cross-node`, beside the pairs under `even`.
fn messages_table(out: &mut String, c: &Case) {
    let multi = c.cluster.nodes() > 1;
    let cell = |x: f64, y: f64| {
        if multi {
            format!("{x:.2} · {y:.2}")
        } else {
            format!("{x:.2}")
        }
    };
    out.push_str(&format!(
        "Token messages per (token, layer), {}: a token sent once per destination GPU{} \
         (exact where each pair has one destination; the expected count where a rule \
         splits an expert over copies). First column: (token, expert) pairs per token \
         under `even`, for comparison.\n\n| plan | pairs (`even`) |",
        if multi {
            "cross-GPU · cross-node"
        } else {
            "cross-GPU"
        },
        if multi { " / node" } else { "" },
    ));
    for rule in RULES {
        out.push_str(&format!(" `{rule}` |"));
    }
    out.push_str("\n| --- | ---: |");
    for _ in RULES {
        out.push_str(" ---: |");
    }
    out.push('\n');
    let mut plans: Vec<&str> = c.rows.iter().map(|r| r.plan.as_str()).collect();
    plans.dedup();
    for plan in plans {
        let rows: Vec<&Row> = c.rows.iter().filter(|r| r.plan == plan).collect();
        let pairs = rows
            .iter()
            .find(|r| r.rule == Rule::Even)
            .map_or("—".into(), |r| {
                let t = &r.report.traffic;
                let n = t.messages.map_or(0.0, |m| m.token_layers);
                if n > 0.0 {
                    cell((t.pairs - t.local) / n, t.cross_node / n)
                } else {
                    "—".into()
                }
            });
        out.push_str(&format!("| {plan} | {pairs} |"));
        for rule in RULES {
            match rows
                .iter()
                .find(|r| r.rule == rule)
                .and_then(|r| r.report.traffic.messages)
            {
                Some(m) => out.push_str(&format!(
                    " {} |",
                    cell(m.per_token_cross_gpu, m.per_token_cross_node)
                )),
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
}

fn markdown(cases: &[Case], cfg: &TokenGenConfig, deal: Deal, long: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "In-sample (planned and judged on the same tokens; GRACE's rules predict from the \
         plan's recorded profile, here those same batches). ESFT: \
         `esft-deepseek-v2-lite/{{intent,summary}}/expert_weights_*.txt` (DeepSeek-V2-Lite, \
         26 MoE layers, 64 experts, top-6), batches of {BATCH_TOKENS} tokens, {} (`--deal {}`) \
         — what the CLI does with a folder. Generated: `token_generator` preset \
         deepseek-v3 (58 MoE layers, 256 experts, top-8), {} tokens, {} ranks (sequences of {} \
         tokens, rank = GPU, dealt the same way), seed {}, the calibrated defaults ({} topics \
         per layer). Memory: replicas in all · replica slots on the fullest GPU (all layers, \
         beyond an even share without replicas). \
         Cross-GPU = share of (token, expert) pairs not served on their source GPU; \
         cross-node = share served on another node, and its bytes (pairs × hidden × 2, \
         10^6 bytes, dispatch only, not deduplicated per node). EPLB: global policy \
         (groups = 1). GRACE: auto r, replication on (Eq. 2) unless said; \
         \"GRACE load-only (counts)\" is GRACE planned on the same batches' counts alone \
         (no token routes: load-only grouping), judged on the tokens.\n\n",
        deal.describe(),
        deal.name(),
        cfg.tokens,
        cfg.ranks,
        cfg.sequence_tokens,
        cfg.seed,
        cfg.topics
    ));
    for c in cases {
        out.push_str(&format!(
            "### {} on {} ({} tokens)\n\n{}.\n\n",
            c.data, c.cluster, c.tokens, c.budgets
        ));
        if long {
            long_table(&mut out, c);
        } else {
            compact_table(&mut out, c);
        }
        out.push('\n');
        messages_table(&mut out, c);
        out.push('\n');
    }
    out.push_str(
        "### GRACE's grouping per layer\n\n\
         U = share of the layer's affinity (pairs of experts chosen by one token) inside a \
         GPU's group; mean over layers. `r`: the chosen non-uniformity ratio (knee of the \
         (S(r), U(r)) curve).\n\n\
         | data | cluster | mean U GRACE | mean U contiguous | mean U load-only | r chosen (min / mean / max) | layers by load only | replicas (Eq. 2) |\n\
         | --- | --- | ---: | ---: | ---: | --- | ---: | ---: |\n",
    );
    for c in cases {
        let ratios: Vec<f64> = c.layers.iter().filter_map(|l| l.ratio).collect();
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} |\n",
            c.data,
            c.cluster,
            mean(c.layers.iter().map(|l| l.u_grace)),
            mean(c.layers.iter().map(|l| l.u_contiguous)),
            mean(c.layers.iter().map(|l| l.u_load)),
            if ratios.is_empty() {
                "—".into()
            } else {
                format!("{min} / {:.2} / {max}", mean(ratios.iter().copied()))
            },
            c.layers.len() - ratios.len(),
            c.layers.iter().map(|l| l.copies).sum::<usize>(),
        ));
    }
    out
}
