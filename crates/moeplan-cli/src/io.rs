//! Reading and writing: traces (files, folders, the generated default),
//! plan files, all within the reading budget; stdout that tolerates a closed
//! pipe; progress on stderr.

use std::ops::Range;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use moeplan::data::model;
use moeplan::data::topology::Topology;
use moeplan::formats::{self, ReadOptions};
use moeplan::judge::{Rule, Workload};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{LoadTrace, Meter, TokenTrace};
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
    pub sources: Sources,
}

/// Where a trace's tokens came from, as far as the input records it.
pub enum Sources {
    /// Not recorded: the simulator assumes even arrival and says so.
    Even,
    /// SGLang per-rank CSVs: the counts per source rank, `B × L × S × E`.
    Counts(Array4<f64>),
    /// An ESFT folder: every token's route, its source its sequence (the
    /// line it is on), cut into the trace's batches of `batch_tokens`
    /// consecutive tokens. `meter` is the folder's reading budget as left
    /// after reading: what a workload copies is charged to it.
    Tokens {
        tokens: TokenTrace,
        batch_tokens: usize,
        /// How tokens go to ranks (`--deal`).
        deal: moeplan::Deal,
        meter: Meter,
    },
    /// `base`, and a TensorRT-LLM dump's co-occurrence files (checked to
    /// read to the trace's layers and experts): each workload gets the
    /// affinity of its own batches' iterations (`iterations[b]` is batch
    /// `b`'s), read through a copy of `meter`, so GRACE groups by it.
    Cooccurrence {
        base: Box<Sources>,
        files: Vec<(String, Vec<u8>)>,
        iterations: Vec<u64>,
        meter: Meter,
    },
}

impl Sources {
    /// Source ranks recorded, when the input fixes them (ESFT sequences are
    /// dealt to whatever GPUs the cluster has, so they always fit).
    fn ranks(&self) -> Option<usize> {
        match self {
            Sources::Counts(a) => Some(a.dim().2),
            Sources::Cooccurrence { base, .. } => base.ranks(),
            Sources::Even | Sources::Tokens { .. } => None,
        }
    }
}

/// The trace alone (counts; sources, if read, dropped: even arrival).
pub fn load_trace(args: &TraceArgs) -> Result<LoadTrace, CliError> {
    load(args).map(|l| l.trace)
}

/// The trace and, where the input records them, its sources.
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
        sources: Sources::Even,
    })
}

/// What the simulator replays: `trace` (the one read, placed in a model —
/// layer ids renamed, counts as read — or its batches `batches`) with the
/// sources read for those batches. Every source rank is a GPU: per-rank
/// counts with ranks past `topology`'s GPUs are an error, named before
/// simulating; ESFT tokens are dealt to the GPUs by `--deal`
/// ([`TokenTrace::dealt`]: each batch in equal shares by default), in the
/// same batches as the trace's, so the counts (and every figure under
/// `even`) stay the trace's.
pub fn workload(
    trace: LoadTrace,
    sources: &Sources,
    batches: Range<usize>,
    topology: Topology,
) -> Result<Workload, CliError> {
    match sources {
        Sources::Cooccurrence { base, .. } => {
            let work = workload(trace, base, batches.clone(), topology)?;
            Ok(with_cooccurrence(work, sources, batches))
        }
        Sources::Even => Ok(Workload::new(trace)),
        Sources::Counts(by_source) => counts_workload(trace, by_source, batches, topology),
        Sources::Tokens {
            tokens,
            batch_tokens,
            deal,
            meter,
        } => token_workload(
            &trace,
            tokens,
            (*batch_tokens, *deal),
            batches,
            topology,
            &mut meter.clone(),
        ),
    }
}

/// [`workload`] for a command that plans on a cluster of its own choosing:
/// per-rank counts from more ranks than it has GPUs cannot be replayed on
/// it, so under `even` (which never reads sources; `None` where nothing is
/// replayed) they are dropped with a note, and under any other rule it is
/// [`workload`]'s error.
pub fn workload_on_cluster(
    trace: LoadTrace,
    sources: &Sources,
    batches: Range<usize>,
    topology: Topology,
    rule: Option<Rule>,
) -> Result<Workload, CliError> {
    if let Sources::Cooccurrence { base, .. } = sources {
        let work = workload_on_cluster(trace, base, batches.clone(), topology, rule)?;
        return Ok(with_cooccurrence(work, sources, batches));
    }
    let gpus = topology.num_gpus();
    match sources.ranks() {
        Some(ranks) if ranks > gpus && rule.is_none_or(|r| r == Rule::Even) => {
            eprintln!(
                "the trace's per-rank files come from {ranks} ranks, more than the {gpus} GPUs of \
                 {topology}: their sources are dropped and even arrival assumed"
            );
            Ok(Workload::new(trace))
        }
        _ => workload(trace, sources, batches, topology),
    }
}

/// A trace split for planning and judging: the planned-on workload, the
/// held-out one (`None` in-sample: judged on what was planned on), and a
/// phrase saying which.
pub struct Split {
    pub planning: Workload,
    pub held_out: Option<Workload>,
    pub scope: String,
}

impl Split {
    /// What plans are judged on.
    pub fn judged(&self) -> &Workload {
        self.held_out.as_ref().unwrap_or(&self.planning)
    }
}

/// `trace` (with its `sources`) split for planning and judging: with
/// `holdout`, the first batches to plan on and the rest held out, each
/// with the sources of its own batches.
pub fn split(
    trace: LoadTrace,
    sources: &Sources,
    holdout: Option<f64>,
    topology: Topology,
    rule: Option<Rule>,
) -> Result<Split, CliError> {
    let all = trace.num_batches();
    match holdout {
        Some(h) => {
            let s = trace.holdout_split(h)?;
            drop(trace);
            let (cut, eval) = (s.plan.num_batches(), s.eval.num_batches());
            Ok(Split {
                planning: workload_on_cluster(s.plan, sources, 0..cut, topology, rule)?,
                held_out: Some(workload_on_cluster(
                    s.eval,
                    sources,
                    cut..all,
                    topology,
                    rule,
                )?),
                scope: format!("held-out: planned on {cut} batches, evaluated on the next {eval}"),
            })
        }
        None => Ok(Split {
            planning: workload_on_cluster(trace, sources, 0..all, topology, rule)?,
            held_out: None,
            scope: format!("in-sample: {all} batch(es)"),
        }),
    }
}

/// `work` with the co-occurrence counts of `batches` as its affinity when
/// `sources` has them; without, and said on stderr, when those iterations'
/// files do not read (the dump recorded fewer of them): only GRACE reads
/// the affinity, so no other planner should fail for it.
fn with_cooccurrence(work: Workload, sources: &Sources, batches: Range<usize>) -> Workload {
    let Sources::Cooccurrence {
        files,
        iterations,
        meter,
        ..
    } = sources
    else {
        return work;
    };
    let first = iterations.get(batches.start).copied();
    let last = batches
        .end
        .checked_sub(1)
        .and_then(|b| iterations.get(b))
        .copied();
    let (Some(first), Some(last)) = (first, last) else {
        return work;
    };
    let read = formats::trtllm::read_cooccurrence_in(files, first..=last, &mut meter.clone());
    match read.and_then(|c| work.clone().with_affinity(c.matrices)) {
        Ok(with) => with,
        Err(e) => {
            eprintln!("the co-occurrence counts of iterations {first}..={last} are not used: {e}");
            work
        }
    }
}

fn counts_workload(
    trace: LoadTrace,
    by_source: &Array4<f64>,
    batches: Range<usize>,
    topology: Topology,
) -> Result<Workload, CliError> {
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
    check_batches(&batches, by_source.dim().0)?;
    let part = by_source.slice(s![batches, .., .., ..]).to_owned();
    Ok(Workload::new(trace).with_sources(part)?)
}

fn check_batches(batches: &Range<usize>, of: usize) -> Result<(), CliError> {
    if batches.end > of || batches.start >= batches.end {
        return Err(moeplan::Error::Argument(format!(
            "batches {}..{} of a trace of {of}",
            batches.start, batches.end,
        ))
        .into());
    }
    Ok(())
}

/// The tokens of `batches` (whole batches of `batch_tokens`, so the same
/// cut as the trace's), named by `trace`'s layer ids (a trace placed in its
/// model renames them), their sequences dealt to the cluster's GPUs. The
/// workload's counts are checked against `trace`'s: the same batches, so
/// nothing but the sources changes.
fn token_workload(
    trace: &LoadTrace,
    tokens: &TokenTrace,
    (batch_tokens, deal): (usize, moeplan::Deal),
    batches: Range<usize>,
    topology: Topology,
    meter: &mut Meter,
) -> Result<Workload, CliError> {
    let n = tokens.num_tokens();
    check_batches(&batches, n.div_ceil(batch_tokens.max(1)))?;
    let (first, last) = (
        batches.start * batch_tokens,
        (batches.end * batch_tokens).min(n),
    );
    let layers = tokens.num_layers();
    if trace.num_layers() != layers {
        return Err(moeplan::Error::Mismatch(format!(
            "the trace has {} layers, its token routes {layers}",
            trace.num_layers()
        ))
        .into());
    }
    // The workload holds its own copy of the routes and of the counts.
    let copied = ((last - first) as u64).saturating_mul((layers * tokens.top_k()) as u64);
    meter.values(copied, 4, "the token workload's routes")?;
    meter.values(
        (trace.counts().len()) as u64,
        8,
        "the token workload's counts",
    )?;
    let routes = (0..layers)
        .map(|l| tokens.routes(l).slice(s![first..last, ..]).to_owned())
        .collect();
    let sequences = tokens.source_rank()[first..last].to_vec();
    let part = TokenTrace::new(
        tokens.num_experts(),
        trace.layer_ids().to_vec(),
        routes,
        sequences,
    )?
    .dealt(deal, topology.num_gpus(), batch_tokens)?;
    let work = Workload::from_tokens(part, batch_tokens)?;
    if work.trace().counts() != trace.counts() {
        return Err(moeplan::Error::Mismatch(
            "the token routes do not count to the trace's batches".into(),
        )
        .into());
    }
    Ok(work)
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
/// batched into `--batch-tokens` tokens, the routes kept as sources), or SGLang's per-rank
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
    let mut trtllm = Vec::new();
    let mut cooccurrence = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // TensorRT-LLM's dump: its counts and meta_info.json are read, the
        // co-occurrence files after them if the budget has room (they can
        // be far larger), the route files never.
        if formats::trtllm::file_kind(&name) == formats::trtllm::StatFile::Cooccurrence {
            cooccurrence.push((name, entry.path()));
            continue;
        }
        if matches!(
            formats::trtllm::file_kind(&name),
            formats::trtllm::StatFile::Counts | formats::trtllm::StatFile::Meta
        ) {
            let bytes = read_limited(&entry.path(), source.max_trace_mib)?;
            meter.bytes(bytes.len() as u64, &name).map_err(&in_dir)?;
            trtllm.push((name, bytes));
            continue;
        }
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
    if files.is_empty() && rank_csvs.is_empty() && !trtllm.is_empty() {
        let (loaded, iterations) = read_trtllm_folder(dir, &trtllm, &mut meter)?;
        return Ok(with_cooccurrence_files(
            dir,
            loaded,
            iterations,
            cooccurrence,
            source.max_trace_mib,
            meter,
        ));
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
                sources: Sources::Even,
            });
        }
        let ranks = formats::sglang::read_rank_csvs_by_rank(&rank_csvs, None, &mut meter)
            .map_err(in_dir)?;
        return Ok(Loaded {
            trace: ranks.trace,
            sources: Sources::Counts(ranks.by_source),
        });
    }
    let tokens = formats::esft::read_esft(&files, preset.experts, preset.top_k, &mut meter)
        .map_err(&in_dir)?;
    let trace = tokens
        .to_load_trace_within(source.batch_tokens, &mut meter)
        .map_err(&in_dir)?
        .with_model(preset.name)
        .with_model_layers(preset.total_layers);
    Ok(Loaded {
        trace,
        sources: Sources::Tokens {
            tokens,
            batch_tokens: source.batch_tokens,
            deal: moeplan::Deal::from_name(&source.deal)?,
            meter,
        },
    })
}

/// TensorRT-LLM's statistics folder: `rank<N>.safetensors` counts per
/// iteration (the trace's batches), each rank kept as a source when the
/// budget allows; and the iterations, ascending (batch `b` is the `b`-th).
fn read_trtllm_folder(
    dir: &Path,
    files: &[(String, Vec<u8>)],
    meter: &mut Meter,
) -> Result<(Loaded, Vec<u64>), CliError> {
    let stats = formats::trtllm::read_statistics(files, meter).map_err(CliError::in_file(dir))?;
    let sources = match stats.by_source {
        Some(by_source) => Sources::Counts(by_source),
        None => {
            eprintln!(
                "{}: {}: even arrival from every rank assumed",
                dir.display(),
                if stats.sources_dropped {
                    "the per-rank counts do not fit the reading limit"
                } else {
                    "a file does not name its rank (rank<N>.safetensors)"
                }
            );
            Sources::Even
        }
    };
    Ok((
        Loaded {
            trace: stats.trace,
            sources,
        },
        stats.iterations,
    ))
}

/// A TensorRT-LLM dump's co-occurrence files kept with `loaded` as GRACE's
/// affinity, when they fit the reading budget left and read to the trace's
/// layers and experts; otherwise `loaded` as it is, with a line on stderr
/// (only GRACE reads them).
fn with_cooccurrence_files(
    dir: &Path,
    loaded: Loaded,
    iterations: Vec<u64>,
    paths: Vec<(String, std::path::PathBuf)>,
    max_mib: u64,
    mut meter: Meter,
) -> Loaded {
    if paths.is_empty() {
        return loaded;
    }
    let skip = |why: String| {
        eprintln!("{}: co-occurrence counts not used: {why}", dir.display());
    };
    let mut files = Vec::with_capacity(paths.len());
    for (name, path) in paths {
        let read = read_limited(&path, max_mib)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                meter
                    .bytes(b.len() as u64, &name)
                    .map(|()| b)
                    .map_err(|e| e.to_string())
            });
        match read {
            Ok(bytes) => files.push((name, bytes)),
            Err(e) => {
                skip(e);
                return loaded;
            }
        }
    }
    let trace = &loaded.trace;
    match formats::trtllm::read_cooccurrence(&files, &mut meter.clone()) {
        Err(e) => {
            skip(e.to_string());
            return loaded;
        }
        Ok(c) if c.layer_ids != trace.layer_ids() => {
            skip(format!(
                "they are of layers {:?}, the counts of {:?}",
                c.layer_ids,
                trace.layer_ids()
            ));
            return loaded;
        }
        Ok(c) if c.matrices.first().map(|m| m.nrows()) != Some(trace.num_experts()) => {
            skip(format!(
                "they are not of the counts' {} experts",
                trace.num_experts()
            ));
            return loaded;
        }
        Ok(_) => {}
    }
    Loaded {
        trace: loaded.trace,
        sources: Sources::Cooccurrence {
            base: Box::new(loaded.sources),
            files,
            iterations,
            meter,
        },
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use moeplan::Budget;
    use ndarray::array;

    /// Five tokens of three sequences (0, 0, 1, 2, 2), cut into batches of
    /// two like a folder read with `--batch-tokens 2`.
    fn tokens() -> (LoadTrace, TokenTrace) {
        let t = TokenTrace::new(
            4,
            vec![1, 2],
            vec![
                array![[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]],
                array![[1, 3], [0, 3], [2, 1], [3, 2], [1, 0]],
            ],
            vec![0, 0, 1, 2, 2],
        )
        .unwrap();
        (t.to_load_trace(2).unwrap(), t)
    }

    fn sources(tokens: TokenTrace, budget: Budget) -> Sources {
        Sources::Tokens {
            tokens,
            batch_tokens: 2,
            deal: moeplan::Deal::Sequences,
            meter: Meter::new(budget),
        }
    }

    /// Sequences dealt round-robin to the GPUs (2 here: sequence 2 back on
    /// GPU 0), whole batches, the trace's counts; held-out batches carry
    /// their own tokens' sources.
    #[test]
    fn token_workload_keeps_the_traces_batches() {
        let (trace, t) = tokens();
        let src = sources(t, Budget::default());
        let two = Topology::new(1, 2).unwrap();
        let w = workload(trace.clone(), &src, 0..3, two).unwrap();
        assert_eq!(w.sources(), "token routes");
        assert_eq!(w.num_sources(), Some(2));
        assert_eq!(w.trace().counts(), trace.counts());
        assert_eq!(w.tokens().unwrap().source_rank(), &[0, 0, 1, 0, 0]);

        let tail = trace.slice_batches(1..3).unwrap();
        let w = workload(tail.clone(), &src, 1..3, two).unwrap();
        assert_eq!(w.trace().counts(), tail.counts());
        assert_eq!(w.tokens().unwrap().source_rank(), &[1, 0, 0]);

        // a trace placed in its model names the layers; the routes follow
        let placed = LoadTrace::new(trace.counts().clone(), vec![5, 7]).unwrap();
        let w = workload(placed, &src, 0..3, two).unwrap();
        assert_eq!(w.trace().layer_ids(), &[5, 7]);

        // batches that are not the trace's are refused, not misread
        assert!(workload(trace.clone(), &src, 0..4, two).is_err());
        assert!(workload(tail, &src, 0..2, two).is_err());
    }

    /// What the workload copies (its routes and counts) is charged to what
    /// the reading left of the budget.
    #[test]
    fn token_workload_is_charged_to_the_reading_budget() {
        let (trace, t) = tokens();
        // 5 tokens × 2 layers × top-2 routes (4 bytes each) fit; the
        // 3 × 2 × 4 counts (8 bytes each) after them do not
        let tight = Budget {
            max_bytes: 5 * 2 * 2 * 4 + 8,
            ..Budget::default()
        };
        let e = match workload(
            trace.clone(),
            &sources(t.clone(), tight),
            0..3,
            Topology::new(1, 2).unwrap(),
        ) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("over the budget"),
        };
        assert!(e.contains("the token workload's counts"), "{e}");
        let enough = Budget {
            max_bytes: 5 * 2 * 2 * 4 + 3 * 2 * 4 * 8,
            ..Budget::default()
        };
        assert!(
            workload(
                trace,
                &sources(t, enough),
                0..3,
                Topology::new(1, 2).unwrap()
            )
            .is_ok()
        );
    }
}
