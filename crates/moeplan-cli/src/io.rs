//! Reading and writing: traces (files, folders, the generated default),
//! plan files, all within the reading budget; stdout that tolerates a closed
//! pipe; progress on stderr.

use std::ops::Range;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use moeplan::LoadTrace;
use moeplan::formats::{self, ReadOptions};
use moeplan::generator::{GenConfig, generate};
use moeplan::model;
use moeplan::sim::Workload;
use moeplan::topology::Topology;
use ndarray::{Array4, s};

use crate::args::{GenArgs, SourceArgs, TraceArgs};
use crate::error::CliError;

pub fn generated(g: &GenArgs) -> Result<LoadTrace, moeplan::Error> {
    let preset = model::preset(&g.preset)?;
    let bar = spinner("generating");
    let trace = generate(&GenConfig {
        preset,
        batches: g.batches,
        tokens_per_batch: g.tokens_per_batch,
        seed: g.seed,
    });
    bar.finish_and_clear();
    trace
}

/// A trace as read, with where its tokens came from when the input says.
pub struct Loaded {
    pub trace: LoadTrace,
    /// SGLang per-rank CSVs: the counts per source rank, `B × L × S × E`.
    pub by_source: Option<Array4<f64>>,
}

/// The trace alone (counts; sources, if read, dropped: even arrival).
pub fn load_trace(args: &TraceArgs) -> Result<LoadTrace, CliError> {
    load(args).map(|l| l.trace)
}

/// The trace and, where the input records them, its per-source counts.
pub fn load(args: &TraceArgs) -> Result<Loaded, CliError> {
    let trace = match &args.trace {
        Some(path) if path.is_dir() => return read_token_folder(path, &args.source),
        Some(path) => {
            let bytes = read_limited(path, args.source.max_trace_mib)?;
            let options = ReadOptions {
                dataset: args.source.dataset.clone(),
                budget: budget(args.source.max_trace_mib),
            };
            let bar = spinner("reading trace");
            let trace = formats::read_trace(&bytes, &options);
            bar.finish_and_clear();
            trace.map_err(CliError::in_file(path))?
        }
        None => {
            let g = &args.source.generated;
            eprintln!(
                "no --trace given: using a generated {} trace ({} batches, seed {})",
                g.preset, g.batches, g.seed
            );
            generated(g)?
        }
    };
    Ok(Loaded {
        trace,
        by_source: None,
    })
}

/// What the simulator replays: `trace` (the one read, placed in a model —
/// layer ids renamed, counts as read — or its batches `batches`) with the
/// per-source counts read for those batches. Every source rank is a GPU, so
/// ranks past `topology`'s GPUs are an error, named before simulating.
pub fn workload(
    trace: LoadTrace,
    by_source: Option<&Array4<f64>>,
    batches: Range<usize>,
    topology: Topology,
) -> Result<Workload, CliError> {
    let Some(by_source) = by_source else {
        return Ok(Workload::new(trace));
    };
    let ranks = by_source.dim().2;
    let gpus = topology.num_gpus();
    if ranks > gpus {
        return Err(moeplan::Error::Mismatch(format!(
            "the trace's per-rank files go up to rank {}, but the plan's cluster ({topology}) \
             has {gpus} GPUs, ranks 0..{}: every data-parallel rank is a GPU, so judge the \
             plan on the cluster that recorded the trace",
            ranks - 1,
            gpus - 1
        ))
        .into());
    }
    if batches.end > by_source.dim().0 || batches.start >= batches.end {
        return Err(moeplan::Error::Argument(format!(
            "batches {}..{} of a trace of {}",
            batches.start,
            batches.end,
            by_source.dim().0
        ))
        .into());
    }
    let part = by_source.slice(s![batches, .., .., ..]).to_owned();
    Ok(Workload::new(trace).with_sources(part)?)
}

/// The reading limit: what a file may expand to, not only its size on disk.
pub fn budget(max_mib: u64) -> moeplan::Budget {
    moeplan::Budget::mib(max_mib).with_hint("raise it with --max-trace-mib")
}

/// A file's bytes, refused before reading when it is over the limit.
pub fn read_limited(path: &Path, max_mib: u64) -> Result<Vec<u8>, CliError> {
    check_size(path, max_mib)?;
    read_file(path)
}

/// Refuses a file over the limit before reading it.
fn check_size(path: &Path, max_mib: u64) -> Result<(), CliError> {
    let len = std::fs::metadata(path)
        .map_err(|source| CliError::Read {
            path: path.display().to_string(),
            source,
        })?
        .len();
    if len > max_mib << 20 {
        return Err(CliError::InFile {
            path: path.display().to_string(),
            source: moeplan::Error::Argument(format!(
                "{} MiB is more than the {max_mib} MiB limit (raise it with --max-trace-mib)",
                len >> 20
            )),
        });
    }
    Ok(())
}

/// A folder: ESFT `expert_weights_<layer>.txt` files (token-level routing,
/// batched into `--batch-tokens` tokens), or SGLang's per-rank
/// `layer_id,expert_id,count` CSVs: each file's rank from its name
/// (`rank<N>` anywhere in it, else the number it ends with:
/// [`formats::sglang::rank_from_file_name`]), kept as per-source counts;
/// when a name gives no rank, summed over files (even arrival assumed).
fn read_token_folder(dir: &Path, source: &SourceArgs) -> Result<Loaded, CliError> {
    let in_dir = CliError::in_file(dir);
    let preset = model::preset(&source.token_model)?;
    let entries = std::fs::read_dir(dir).map_err(|e| CliError::Read {
        path: dir.display().to_string(),
        source: e,
    })?;
    // One budget for the whole folder: many files each under the limit
    // must not add up past it.
    let mut meter = moeplan::Meter::new(budget(source.max_trace_mib));
    let mut files = Vec::new();
    let mut rank_csvs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let esft = name.starts_with("expert_weights_") && name.ends_with(".txt");
        if !esft && !name.ends_with(".csv") {
            continue;
        }
        let bytes = read_limited(&entry.path(), source.max_trace_mib)?;
        meter.bytes(bytes.len() as u64, &name).map_err(&in_dir)?;
        if esft {
            files.push((name, bytes));
        } else {
            rank_csvs.push((name, bytes));
        }
    }
    if files.is_empty() && !rank_csvs.is_empty() {
        rank_csvs.sort();
        if let Some((unnamed, _)) = rank_csvs
            .iter()
            .find(|(n, _)| formats::sglang::rank_from_file_name(n).is_none())
        {
            eprintln!(
                "{}: {unnamed} does not name its rank (rank<N>.csv): the files are summed and \
                 every rank is assumed to send an even share",
                dir.display()
            );
            let trace =
                formats::sglang::read_rank_csvs(&rank_csvs, None, &mut meter).map_err(in_dir)?;
            return Ok(Loaded {
                trace,
                by_source: None,
            });
        }
        let ranks = formats::sglang::read_rank_csvs_by_rank(&rank_csvs, None, &mut meter)
            .map_err(in_dir)?;
        return Ok(Loaded {
            trace: ranks.trace,
            by_source: Some(ranks.by_source),
        });
    }
    let tokens = formats::esft::read_esft(&files, preset.experts, preset.top_k, &mut meter)
        .map_err(&in_dir)?;
    let trace = tokens
        .to_load_trace_within(source.batch_tokens, &mut meter)
        .map_err(in_dir)?
        .with_model(preset.name)
        .with_model_layers(preset.total_layers);
    Ok(Loaded {
        trace,
        by_source: None,
    })
}

pub fn read_file(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|source| CliError::Read {
        path: path.display().to_string(),
        source,
    })
}

pub fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text).map_err(|source| CliError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// Writes to stdout; a reader that went away (`| head`) ends output quietly.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

pub fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

pub fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

pub fn progress_bar(len: usize, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} layers") {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}

/// Turns a progress bar into a spinner for a step of unknown length.
pub fn spin(bar: &ProgressBar, what: &str) {
    bar.set_style(ProgressStyle::default_spinner());
    bar.set_message(format!("dispatching ({what})"));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
}
