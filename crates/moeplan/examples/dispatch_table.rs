//! BASE, EPLB and CRAFT plans replayed under the engines' dispatch rules on
//! the real SGLang DeepSeek-V3 dumps: balancedness and cross-node traffic,
//! printed as Markdown.
//!
//! ```text
//! cargo run --release -p moeplan --example dispatch_table -- ../shared/data/sglang-deepseek-v3
//! ```
//!
//! For every `*.json` dump in the folder, on 1 × 64 GPUs (1 expert group, as
//! the other 1 × 64 tables of docs/results-eplb-craft.md) and on 8 × 8 GPUs (8
//! expert groups, so EPLB uses its hierarchical policy, as the CLI does when
//! groups % nodes == 0), it makes three plans — BASE (EPLB's placement, no
//! replicas), EPLB with one redundant expert per GPU per layer (+64) and CRAFT
//! at R = 8 — and simulates each under `even`, `sglang-static` (SGLang's
//! current static dispatch, [`SglangVersion::Nearest`]), `vllm` and `optimal`.
//! It also prints, on 8 × 8, SGLang's older own-GPU-only static rule next to
//! the current one (what the node preference costs and saves), and each dump's
//! expert-group skew (the ceiling of EPLB's hierarchical plan on 8 × 8).
//!
//! Scope, said in the output too: each dump is one whole-run total, so the
//! plans are judged on the data they were made from (in-sample), and the
//! dumps carry no per-source counts, so every rank is assumed to send
//! `1 / 64` of each expert's tokens (even arrival). Cross-node bytes are the
//! simulator's: cross-node (token, expert) pairs × hidden (7168) × 2 bytes
//! (bf16), dispatch direction only, not deduplicated per destination node
//! (an upper bound on what DeepEP sends; the combine returns as much).
//!
//! `--skip-optimal-except a,b` runs `optimal` only for the named files
//! (stems), for when its max-flows are too slow.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use moeplan::Workload;
use moeplan::data::model::{ModelPreset, preset};
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::judge::{CostModel, Replay, Rule, SglangVersion, Strategy, simulate};
use moeplan::planners::{Craft, CraftOptions, ReplicaBudget};
use moeplan::planners::{EplbConfig, base, eplb};
use moeplan::{LoadTrace, Plan, Topology};

#[path = "common/text.rs"]
mod text;
use text::thousands;

/// A cluster the table covers: name, nodes, GPUs per node, expert groups.
const CLUSTERS: [(&str, usize, usize, usize); 2] = [("1 × 64", 1, 64, 1), ("8 × 8", 8, 8, 8)];

const RULES: [Rule; 4] = [
    Rule::Even,
    Rule::SglangStatic(SglangVersion::Nearest),
    Rule::Vllm,
    Rule::Optimal,
];

/// SGLang's static dispatch before `_find_nearest_expert` (own GPU, else a
/// fair draw over all copies: no node preference), simulated on 8 × 8 only
/// to isolate what the node preference costs and saves.
const SAME_GPU: Rule = Rule::SglangStatic(SglangVersion::SameGpu);

const PLANS: [&str; 3] = ["BASE", "EPLB +64", "CRAFT R = 8"];

struct Row {
    file: String,
    cluster: &'static str,
    plan: &'static str,
    replicas: usize,
    rule: Rule,
    report: Replay,
    /// Tokens in the dump: pairs / (MoE layers × top-k).
    tokens: f64,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("dispatch_table: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn usage() -> String {
    "usage: dispatch_table DATA_FOLDER [--skip-optimal-except STEM,STEM] \
     (DATA_FOLDER: the SGLang DeepSeek-V3 dumps, e.g. ../shared/data/sglang-deepseek-v3)"
        .into()
}

fn run() -> Result<(), String> {
    let mut folder: Option<PathBuf> = None;
    let mut optimal_only: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--skip-optimal-except" => {
                let list = args
                    .next()
                    .ok_or_else(|| format!("--skip-optimal-except needs a list; {}", usage()))?;
                optimal_only = Some(list.split(',').map(str::to_string).collect());
            }
            "-h" | "--help" => {
                println!("{}", usage());
                return Ok(());
            }
            _ if folder.is_none() && !a.starts_with('-') => folder = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a:?}; {}", usage())),
        }
    }
    let folder = folder.ok_or_else(|| format!("no data folder given; {}", usage()))?;
    let files = dumps(&folder)?;
    let model = preset("deepseek-v3").map_err(|e| e.to_string())?;
    let cost = CostModel::for_model(model);
    let mut rows = Vec::new();
    let mut skews = Vec::new();
    let mut sources = String::new();
    let started = Instant::now();
    for path in &files {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let with_optimal = optimal_only
            .as_ref()
            .is_none_or(|only| only.contains(&stem));
        let t = Instant::now();
        let trace = read(path)?;
        skews.push((stem.clone(), group_skew(&trace, model.groups)));
        let file_rows = simulate_file(&stem, &trace, model, &cost, with_optimal)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(r) = file_rows.first() {
            sources = r.report.sources.clone();
        }
        rows.extend(file_rows);
        eprintln!(
            "{stem}: {:.1} s{}",
            t.elapsed().as_secs_f64(),
            if with_optimal {
                ""
            } else {
                " (optimal skipped)"
            }
        );
    }
    eprintln!("all files: {:.1} s", started.elapsed().as_secs_f64());
    print!("{}", markdown(&rows, &sources, &skews));
    Ok(())
}

/// The `*.json` files of `folder`, sorted; a clear error when there are none.
fn dumps(folder: &Path) -> Result<Vec<PathBuf>, String> {
    if !folder.is_dir() {
        return Err(format!(
            "{} is not a folder: pass the folder of SGLang DeepSeek-V3 dumps \
             (e.g. ../shared/data/sglang-deepseek-v3)",
            folder.display()
        ));
    }
    let entries =
        std::fs::read_dir(folder).map_err(|e| format!("cannot read {}: {e}", folder.display()))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("{} holds no *.json SGLang dumps", folder.display()));
    }
    Ok(files)
}

fn read(path: &Path) -> Result<LoadTrace, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    read_trace(&bytes, &ReadOptions::default()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Mean over batches and layers of mean / max load of the router's expert
/// groups (`groups` consecutive blocks of experts). With as many groups as
/// nodes, EPLB's hierarchical policy puts one whole group on each node, so
/// node loads are group loads and no GPU split can do better than this.
fn group_skew(trace: &LoadTrace, groups: usize) -> f64 {
    let c = trace.counts();
    let (b_n, l_n, e_n) = c.dim();
    if groups == 0 || e_n % groups != 0 || b_n * l_n == 0 {
        return f64::NAN;
    }
    let size = e_n / groups;
    let mut sum = 0.0;
    for b in 0..b_n {
        for l in 0..l_n {
            let g: Vec<f64> = (0..groups)
                .map(|k| (k * size..(k + 1) * size).map(|e| c[[b, l, e]]).sum())
                .collect();
            let max = g.iter().copied().fold(0.0, f64::max);
            sum += if max > 0.0 {
                g.iter().sum::<f64>() / groups as f64 / max
            } else {
                1.0
            };
        }
    }
    sum / (b_n * l_n) as f64
}

fn replicas(plan: &Plan) -> usize {
    let slots: usize = plan
        .layers()
        .iter()
        .map(|l| l.gpus.iter().map(Vec::len).sum::<usize>())
        .sum();
    slots.saturating_sub(plan.layers().len() * plan.num_experts())
}

fn simulate_file(
    stem: &str,
    trace: &LoadTrace,
    model: &ModelPreset,
    cost: &CostModel,
    with_optimal: bool,
) -> moeplan::Result<Vec<Row>> {
    let work = Workload::new(trace.clone());
    let layers = trace.num_layers() as f64;
    let mut rows = Vec::new();
    for (cluster, nodes, gpn, groups) in CLUSTERS {
        let topology = Topology::new(nodes, gpn)?;
        let plans = [
            base(trace, topology, groups)?,
            eplb(
                trace,
                topology,
                EplbConfig {
                    redundant_experts: topology.num_gpus(),
                    groups,
                },
            )?,
            Craft::prepare(trace, topology, &CraftOptions::default())?
                .plan(ReplicaBudget::ReplicasPerGpu(8))?
                .plan,
        ];
        for (name, plan) in PLANS.into_iter().zip(plans) {
            let replicas = replicas(&plan);
            let extra = (nodes > 1).then_some(SAME_GPU);
            for rule in RULES.into_iter().chain(extra) {
                if rule == Rule::Optimal && !with_optimal {
                    continue;
                }
                let report = simulate(&work, &Strategy::fixed(plan.clone(), rule), cost)?;
                let tokens = report.traffic.pairs / (layers * model.top_k as f64);
                rows.push(Row {
                    file: stem.to_string(),
                    cluster,
                    plan: name,
                    replicas,
                    rule,
                    report,
                    tokens,
                });
            }
        }
    }
    Ok(rows)
}

fn pct(x: f64, of: f64) -> String {
    if of > 0.0 {
        format!("{:.1} %", 100.0 * x / of)
    } else {
        "—".into()
    }
}

fn find<'a>(rows: &'a [Row], file: &str, cluster: &str, plan: &str, rule: Rule) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.file == file && r.cluster == cluster && r.plan == plan && r.rule == rule)
}

fn markdown(rows: &[Row], sources: &str, skews: &[(String, f64)]) -> String {
    let mut out = String::new();
    let mut files: Vec<&str> = rows.iter().map(|r| r.file.as_str()).collect();
    files.dedup();
    out.push_str("# Plans under the engines' dispatch rules (SGLang DeepSeek-V3 dumps)\n\n");
    out.push_str(&format!(
        "In-sample: each dump is one whole-run total, and the plans are made from it. \
         Sources: {sources} — no per-source counts in these dumps, so every GPU is \
         assumed to send 1/D of each expert's tokens. Clusters: 1 × 64 (1 expert group) \
         and 8 × 8 (8 groups, EPLB hierarchical). Cross-node GB = cross-node (token, expert) \
         pairs × 7168 × 2 bytes (bf16), 10^9 bytes, dispatch only, not deduplicated per node, \
         over the whole dump; KB / token = the same per token (pairs / (58 × top-8)), over all \
         58 MoE layers.\n\n"
    ));
    for file in &files {
        out.push_str(&format!("## {file}\n\n"));
        out.push_str(
            "| cluster | plan | replicas | rule | balancedness | imbalance ratio | local | cross-node | cross-node GB | cross-node KB / token |\n\
             | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for r in rows
            .iter()
            .filter(|r| r.file == *file && r.rule != SAME_GPU)
        {
            let t = &r.report.traffic;
            let cross = r.cluster != "1 × 64";
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.4} | {:.4} | {} | {} | {} | {} |\n",
                r.cluster,
                r.plan,
                thousands(r.replicas),
                r.rule,
                r.report.balancedness,
                r.report.imbalance_ratio,
                pct(t.local, t.pairs),
                if cross {
                    pct(t.cross_node, t.pairs)
                } else {
                    "0".into()
                },
                if cross {
                    thousands((t.cross_node_bytes / 1e9).round() as usize)
                } else {
                    "0".into()
                },
                if cross && r.tokens > 0.0 {
                    thousands((t.cross_node_bytes / r.tokens / 1e3).round() as usize)
                } else {
                    "0".into()
                },
            ));
        }
        out.push('\n');
    }

    let cell = |file: &str, cluster: &str, plan: &str, rule: Rule, f: &dyn Fn(&Row) -> String| {
        find(rows, file, cluster, plan, rule).map_or_else(|| "—".to_string(), f)
    };
    // BASE has one copy of every expert: every rule sends it the same way.
    let base_cell =
        |file: &str, cluster: &str, f: &dyn Fn(&Row) -> f64, fmt: &dyn Fn(f64) -> String| {
            let v: Vec<f64> = RULES
                .iter()
                .filter_map(|&rule| find(rows, file, cluster, "BASE", rule).map(f))
                .collect();
            match v.first() {
                Some(&x) if v.iter().all(|y| (y - x).abs() < 1e-9) => fmt(x),
                Some(_) => v.iter().map(|&y| fmt(y)).collect::<Vec<_>>().join(" / "),
                None => "—".into(),
            }
        };
    let bal = |r: &Row| r.report.balancedness;
    let four = |x: f64| format!("{x:.4}");
    let cross_share = |r: &Row| {
        if r.report.traffic.pairs > 0.0 {
            r.report.traffic.cross_node / r.report.traffic.pairs
        } else {
            0.0
        }
    };
    let share = |x: f64| format!("{:.1} %", 100.0 * x);
    let static_rule = Rule::SglangStatic(SglangVersion::Nearest);

    out.push_str("## Balancedness, every dump\n\n");
    out.push_str(
        "BASE has one copy per expert, so every rule gives it the same figure. \
         `even` equals `vllm` here (even arrival).\n\n\
         | file | cluster | BASE (any rule) | EPLB sglang-static | EPLB vllm | EPLB optimal | CRAFT sglang-static | CRAFT vllm | CRAFT optimal |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for file in &files {
        for (cluster, ..) in CLUSTERS {
            let mut line = format!(
                "| {file} | {cluster} | {}",
                base_cell(file, cluster, &bal, &four)
            );
            for plan in ["EPLB +64", "CRAFT R = 8"] {
                for rule in [static_rule, Rule::Vllm, Rule::Optimal] {
                    line.push_str(" | ");
                    line.push_str(&cell(file, cluster, plan, rule, &|r| four(bal(r))));
                }
            }
            out.push_str(&line);
            out.push_str(" |\n");
        }
    }
    out.push('\n');

    out.push_str("## Cross-node share of (token, expert) pairs on 8 × 8, every dump\n\n");
    out.push_str(
        "| file | BASE (any rule) | EPLB sglang-static | EPLB vllm | EPLB optimal | CRAFT sglang-static | CRAFT vllm | CRAFT optimal |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for file in &files {
        let mut line = format!(
            "| {file} | {}",
            base_cell(file, "8 × 8", &cross_share, &share)
        );
        for plan in ["EPLB +64", "CRAFT R = 8"] {
            for rule in [static_rule, Rule::Vllm, Rule::Optimal] {
                line.push_str(" | ");
                line.push_str(&cell(file, "8 × 8", plan, rule, &|r| {
                    share(cross_share(r))
                }));
            }
        }
        out.push_str(&line);
        out.push_str(" |\n");
    }
    out.push('\n');

    out.push_str("## SGLang's node preference isolated (8 × 8)\n\n");
    out.push_str(
        "`sglang-static-same-gpu`: SGLang's static dispatch before `_find_nearest_expert` \
         (own GPU, else a fair draw over all copies), next to the current `sglang-static` \
         (own GPU, else the first copy on the rank's node, else the fair draw). \
         Balancedness / cross-node share.\n\n\
         | file | EPLB same-gpu | EPLB sglang-static | CRAFT same-gpu | CRAFT sglang-static |\n\
         | --- | ---: | ---: | ---: | ---: |\n",
    );
    for file in &files {
        let mut line = format!("| {file}");
        for plan in ["EPLB +64", "CRAFT R = 8"] {
            for rule in [SAME_GPU, static_rule] {
                line.push_str(" | ");
                line.push_str(&cell(file, "8 × 8", plan, rule, &|r| {
                    format!("{} / {}", four(bal(r)), share(cross_share(r)))
                }));
            }
        }
        out.push_str(&line);
        out.push_str(" |\n");
    }
    out.push('\n');

    out.push_str("## Expert-group skew (the ceiling of EPLB's hierarchical plan on 8 × 8)\n\n");
    out.push_str(
        "Mean over layers of mean / max load of DeepSeek-V3's 8 router groups (32 \
         consecutive experts each). With 8 groups on 8 nodes the hierarchical policy puts \
         one whole group on each node, so no dispatch rule can lift that plan above this.\n\n\
         | file | group balancedness |\n\
         | --- | ---: |\n",
    );
    for (file, skew) in skews {
        out.push_str(&format!("| {file} | {skew:.4} |\n"));
    }
    out
}
