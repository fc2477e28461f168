//! A dataset: what a folder of an engine's files says, turned into a trace
//! with where its tokens came from ([`Sources`]), and the workloads a
//! front end plans on and judges, held-out split included. The caller
//! lists the folder and reads a file by name; this module decides which
//! files to read, in which order, within one reading budget, and what they
//! mean. What it chose to leave out it says in `notes` (one line each).
//!
//! A folder is one of: ESFT `expert_weights_<layer>.txt` files (token
//! routes, cut into batches of `batch_tokens` tokens and dealt to ranks),
//! SGLang's per-rank `layer_id,expert_id,count` CSVs (each file's rank from
//! its name, kept as per-source counts; summed when a name gives none), or
//! TensorRT-LLM's statistics dump (`rank<N>.safetensors`, `meta_info.json`,
//! and its co-occurrence files when the budget has room for them).
//! Reading is linear in the bytes read; a workload copies its batches.

use std::ops::Range;

use ndarray::{Array4, s};

use crate::data::limits::{Meter, ReadLimits};
use crate::data::model::ModelPreset;
use crate::data::topology::Topology;
use crate::data::trace::{Deal, LoadTrace, TokenTrace};
use crate::data::workload::Workload;
use crate::error::{Error, Result};
use crate::formats::{esft, sglang, trtllm};
use crate::judge::Rule;

/// A trace as read, with where its tokens came from when the input says.
#[derive(Debug)]
pub struct Dataset {
    /// The counts.
    pub trace: LoadTrace,
    /// Where they came from.
    pub sources: Sources,
}

/// Where a trace's tokens came from, as far as the input records it.
#[derive(Debug)]
pub enum Sources {
    /// Not recorded: the simulator assumes even arrival and says so.
    Even,
    /// SGLang per-rank CSVs or TensorRT-LLM's per-rank statistics: the
    /// counts per source rank, `B × L × S × E`.
    Counts(Array4<f64>),
    /// An ESFT folder: every token's route, its source its sequence (the
    /// line it is on), cut into the trace's batches of `batch_tokens`
    /// consecutive tokens. `meter` is the folder's reading budget as left
    /// after reading: what a workload copies is charged to it.
    Tokens {
        /// The routes.
        tokens: TokenTrace,
        /// Tokens per batch.
        batch_tokens: usize,
        /// How tokens go to ranks.
        deal: Deal,
        /// The budget left.
        meter: Meter,
    },
    /// `base`, and a TensorRT-LLM dump's co-occurrence files (checked to
    /// read to the trace's layers and experts): each workload gets the
    /// affinity of its own batches' iterations (`iterations[b]` is batch
    /// `b`'s), read through a copy of `meter`, so GRACE groups by it.
    Cooccurrence {
        /// The sources of the counts.
        base: Box<Sources>,
        /// The co-occurrence files, by name.
        files: Vec<(String, Vec<u8>)>,
        /// Each batch's iteration.
        iterations: Vec<u64>,
        /// The budget left.
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

/// How a folder is read.
#[derive(Debug, Clone)]
pub struct FolderOptions {
    /// The model an ESFT folder's routes are of (its experts and top-k).
    pub token_model: &'static ModelPreset,
    /// Tokens per batch when routes are cut into batches.
    pub batch_tokens: usize,
    /// How tokens without ranks (ESFT) go to ranks.
    pub deal: Deal,
    /// One budget for the whole folder: many files each under the limit
    /// must not add up past it.
    pub budget: ReadLimits,
}

/// Why a folder did not read: a file the caller could not read, or what
/// the files say.
#[derive(Debug)]
pub enum FolderError<E> {
    /// The caller's reader failed on a file it was asked for.
    Read(E),
    /// The files do not make a trace.
    Data(Error),
}

impl<E> From<Error> for FolderError<E> {
    fn from(e: Error) -> Self {
        FolderError::Data(e)
    }
}

/// The folder whose files are `names`, each read by `read(name)` when this
/// module needs it (see the module documentation for what is read).
/// Co-occurrence files are read last and only when they fit: one that does
/// not is left out with a note, as is anything else the data cannot use.
///
/// ```
/// use moeplan::formats::dataset::{read_folder, FolderError, FolderOptions, Sources};
/// use moeplan::{data::model, ReadLimits, Deal};
/// let files = [("rank0.csv", "layer_id,expert_id,count\n0,0,5\n0,1,1\n"),
///              ("rank1.csv", "layer_id,expert_id,count\n0,0,1\n0,1,3\n")];
/// let names: Vec<String> = files.iter().map(|(n, _)| n.to_string()).collect();
/// let options = FolderOptions {
///     token_model: model::preset("olmoe")?, batch_tokens: 1024, deal: Deal::Even, budget: ReadLimits::mib(64),
/// };
/// let mut notes = Vec::new();
/// let read = |name: &str| -> Result<Vec<u8>, String> {
///     Ok(files.iter().find(|(n, _)| *n == name).unwrap().1.as_bytes().to_vec())
/// };
/// let Ok(d) = read_folder(&names, read, &options, &mut notes) else { panic!() };
/// assert!(matches!(d.sources, Sources::Counts(_))); // per rank, as the names say
/// assert_eq!(d.trace.counts()[[0, 0, 0]], 6.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_folder<E: std::fmt::Display>(
    names: &[String],
    mut read: impl FnMut(&str) -> std::result::Result<Vec<u8>, E>,
    options: &FolderOptions,
    notes: &mut Vec<String>,
) -> std::result::Result<Dataset, FolderError<E>> {
    let mut meter = Meter::new(options.budget);
    let mut esft_files = Vec::new();
    let mut rank_csvs = Vec::new();
    let mut trtllm_files = Vec::new();
    let mut cooccurrence = Vec::new();
    for name in names {
        // TensorRT-LLM's dump: its counts and meta_info.json are read, the
        // co-occurrence files after them if the budget has room (they can
        // be far larger), the route files never.
        let kind = trtllm::file_kind(name);
        if kind == trtllm::StatFile::Cooccurrence {
            cooccurrence.push(name.clone());
            continue;
        }
        let stat = matches!(kind, trtllm::StatFile::Counts | trtllm::StatFile::Meta);
        let esft = name.starts_with("expert_weights_") && name.ends_with(".txt");
        if !stat && !esft && !name.ends_with(".csv") {
            continue;
        }
        let bytes = read(name).map_err(FolderError::Read)?;
        meter.bytes(bytes.len() as u64, name)?;
        let into = if stat {
            &mut trtllm_files
        } else if esft {
            &mut esft_files
        } else {
            &mut rank_csvs
        };
        into.push((name.clone(), bytes));
    }
    if esft_files.is_empty() && rank_csvs.is_empty() && !trtllm_files.is_empty() {
        let stats = trtllm::read_statistics(&trtllm_files, &mut meter)?;
        let sources = match stats.by_source {
            Some(by_source) => Sources::Counts(by_source),
            None => {
                notes.push(format!(
                    "{}: even arrival from every rank assumed",
                    if stats.sources_dropped {
                        "the per-rank counts do not fit the reading limit"
                    } else {
                        "a file does not name its rank (rank<N>.safetensors)"
                    }
                ));
                Sources::Even
            }
        };
        let counted = Dataset {
            trace: stats.trace,
            sources,
        };
        return Ok(with_cooccurrence_files(
            counted,
            stats.iterations,
            &cooccurrence,
            &mut read,
            meter,
            notes,
        ));
    }
    if esft_files.is_empty() && !rank_csvs.is_empty() {
        rank_csvs.sort();
        if let Some((unnamed, _)) = rank_csvs
            .iter()
            .find(|(n, _)| sglang::rank_from_file_name(n).is_none())
        {
            notes.push(format!(
                "{unnamed} does not name its rank (rank<N>.csv): the files are summed and \
                 every rank is assumed to send an even share"
            ));
            let trace = sglang::read_rank_csvs(&rank_csvs, None, &mut meter)?;
            return Ok(Dataset {
                trace,
                sources: Sources::Even,
            });
        }
        let ranks = sglang::read_rank_csvs_by_rank(&rank_csvs, None, &mut meter)?;
        return Ok(Dataset {
            trace: ranks.trace,
            sources: Sources::Counts(ranks.by_source),
        });
    }
    let preset = options.token_model;
    let tokens = esft::read_esft(&esft_files, preset.experts, preset.top_k, &mut meter)?;
    let trace = tokens
        .to_load_trace_within(options.batch_tokens, &mut meter)?
        .with_model(preset.name)
        .with_model_layers(preset.total_layers);
    Ok(Dataset {
        trace,
        sources: Sources::Tokens {
            tokens,
            batch_tokens: options.batch_tokens,
            deal: options.deal,
            meter,
        },
    })
}

/// A TensorRT-LLM dump's co-occurrence files kept with `counted` as GRACE's
/// affinity, when they fit the reading budget left and read to the trace's
/// layers and experts; otherwise `counted` as it is, with a note (only
/// GRACE reads them).
fn with_cooccurrence_files<E: std::fmt::Display>(
    counted: Dataset,
    iterations: Vec<u64>,
    names: &[String],
    read: &mut impl FnMut(&str) -> std::result::Result<Vec<u8>, E>,
    mut meter: Meter,
    notes: &mut Vec<String>,
) -> Dataset {
    if names.is_empty() {
        return counted;
    }
    let mut skip = |why: String| notes.push(format!("co-occurrence counts not used: {why}"));
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let bytes = read(name).map_err(|e| e.to_string()).and_then(|b| {
            meter
                .bytes(b.len() as u64, name)
                .map(|()| b)
                .map_err(|e| e.to_string())
        });
        match bytes {
            Ok(bytes) => files.push((name.clone(), bytes)),
            Err(e) => {
                skip(e);
                return counted;
            }
        }
    }
    let trace = &counted.trace;
    match trtllm::read_cooccurrence(&files, &mut meter.clone()) {
        Err(e) => {
            skip(e.to_string());
            return counted;
        }
        Ok(c) if c.layer_ids != trace.layer_ids() => {
            skip(format!(
                "they are of layers {:?}, the counts of {:?}",
                c.layer_ids,
                trace.layer_ids()
            ));
            return counted;
        }
        Ok(c) if c.matrices.first().map(|m| m.nrows()) != Some(trace.num_experts()) => {
            skip(format!(
                "they are not of the counts' {} experts",
                trace.num_experts()
            ));
            return counted;
        }
        Ok(_) => {}
    }
    Dataset {
        trace: counted.trace,
        sources: Sources::Cooccurrence {
            base: Box::new(counted.sources),
            files,
            iterations,
            meter,
        },
    }
}

/// What the simulator replays: `trace` (the one read, placed in a model —
/// layer ids renamed, counts as read — or its batches `batches`) with the
/// sources read for those batches. Every source rank is a GPU: per-rank
/// counts with ranks past `topology`'s GPUs are an error, named before
/// simulating; ESFT tokens are dealt to the GPUs ([`TokenTrace::dealt`]),
/// in the same batches as the trace's, so the counts (and every figure
/// under `even`) stay the trace's.
pub fn workload(
    trace: LoadTrace,
    sources: &Sources,
    batches: Range<usize>,
    topology: Topology,
    notes: &mut Vec<String>,
) -> Result<Workload> {
    match sources {
        Sources::Cooccurrence { base, .. } => {
            let work = workload(trace, base, batches.clone(), topology, notes)?;
            Ok(with_cooccurrence(work, sources, batches, notes))
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
    notes: &mut Vec<String>,
) -> Result<Workload> {
    if let Sources::Cooccurrence { base, .. } = sources {
        let work = workload_on_cluster(trace, base, batches.clone(), topology, rule, notes)?;
        return Ok(with_cooccurrence(work, sources, batches, notes));
    }
    let gpus = topology.num_gpus();
    match sources.ranks() {
        Some(ranks) if ranks > gpus && rule.is_none_or(|r| r == Rule::Even) => {
            notes.push(format!(
                "the trace's per-rank files come from {ranks} ranks, more than the {gpus} GPUs of \
                 {topology}: their sources are dropped and even arrival assumed"
            ));
            Ok(Workload::new(trace))
        }
        _ => workload(trace, sources, batches, topology, notes),
    }
}

/// A trace split for planning and judging: the planned-on workload, the
/// held-out one (`None` in-sample: judged on what was planned on), and a
/// phrase saying which.
#[derive(Debug)]
pub struct Split {
    /// What planners plan on.
    pub planning: Workload,
    /// What plans are judged on, when it is not `planning`.
    pub held_out: Option<Workload>,
    /// `held-out: planned on …` or `in-sample: …`.
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
    notes: &mut Vec<String>,
) -> Result<Split> {
    let all = trace.num_batches();
    match holdout {
        Some(h) => {
            let s = trace.holdout_split(h)?;
            drop(trace);
            let (cut, eval) = (s.plan.num_batches(), s.eval.num_batches());
            let planning = workload_on_cluster(s.plan, sources, 0..cut, topology, rule, notes)?;
            let held_out = workload_on_cluster(s.eval, sources, cut..all, topology, rule, notes)?;
            Ok(Split {
                planning,
                held_out: Some(held_out),
                scope: format!("held-out: planned on {cut} batches, evaluated on the next {eval}"),
            })
        }
        None => Ok(Split {
            planning: workload_on_cluster(trace, sources, 0..all, topology, rule, notes)?,
            held_out: None,
            scope: format!("in-sample: {all} batch(es)"),
        }),
    }
}

/// `work` with the co-occurrence counts of `batches` as its affinity when
/// `sources` has them; without, and noted, when those iterations' files do
/// not read (the dump recorded fewer of them): only GRACE reads the
/// affinity, so no other planner should fail for it.
fn with_cooccurrence(
    work: Workload,
    sources: &Sources,
    batches: Range<usize>,
    notes: &mut Vec<String>,
) -> Workload {
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
    let read = trtllm::read_cooccurrence_in(files, first..=last, &mut meter.clone());
    match read.and_then(|c| work.clone().with_affinity(c.matrices)) {
        Ok(with) => with,
        Err(e) => {
            notes.push(format!(
                "the co-occurrence counts of iterations {first}..={last} are not used: {e}"
            ));
            work
        }
    }
}

fn counts_workload(
    trace: LoadTrace,
    by_source: &Array4<f64>,
    batches: Range<usize>,
    topology: Topology,
) -> Result<Workload> {
    let ranks = by_source.dim().2;
    let gpus = topology.num_gpus();
    if ranks > gpus {
        return Err(Error::Mismatch(format!(
            "the trace's per-rank files go up to rank {}, but the plan's cluster ({topology}) \
             has {gpus} GPUs, ranks 0..{}: every data-parallel rank is a GPU, so judge the \
             plan on the cluster that recorded the trace",
            ranks - 1,
            gpus - 1
        )));
    }
    check_batches(&batches, by_source.dim().0)?;
    let part = by_source.slice(s![batches, .., .., ..]).to_owned();
    Workload::new(trace).with_sources(part)
}

fn check_batches(batches: &Range<usize>, of: usize) -> Result<()> {
    if batches.end > of || batches.start >= batches.end {
        return Err(Error::Argument(format!(
            "batches {}..{} of a trace of {of}",
            batches.start, batches.end,
        )));
    }
    Ok(())
}

/// The tokens of `batches` (whole batches of `batch_tokens`, so the same
/// cut as the trace's), named by `trace`'s layer ids (a trace placed in its
/// model renames them), dealt to the cluster's GPUs. The workload's counts
/// are checked against `trace`'s: the same batches, so nothing but the
/// sources changes.
fn token_workload(
    trace: &LoadTrace,
    tokens: &TokenTrace,
    (batch_tokens, deal): (usize, Deal),
    batches: Range<usize>,
    topology: Topology,
    meter: &mut Meter,
) -> Result<Workload> {
    let n = tokens.num_tokens();
    check_batches(&batches, n.div_ceil(batch_tokens.max(1)))?;
    let (first, last) = (
        batches.start * batch_tokens,
        (batches.end * batch_tokens).min(n),
    );
    let layers = tokens.num_layers();
    if trace.num_layers() != layers {
        return Err(Error::Mismatch(format!(
            "the trace has {} layers, its token routes {layers}",
            trace.num_layers()
        )));
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
        return Err(Error::Mismatch(
            "the token routes do not count to the trace's batches".into(),
        ));
    }
    Ok(work)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn workload(
        trace: LoadTrace,
        sources: &Sources,
        batches: Range<usize>,
        topology: Topology,
    ) -> Result<Workload> {
        super::workload(trace, sources, batches, topology, &mut Vec::new())
    }

    /// Five tokens of three sequences (0, 0, 1, 2, 2), cut into batches of
    /// two like a folder read with `--tokens-per-batch 2`.
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

    fn sources(tokens: TokenTrace, budget: ReadLimits) -> Sources {
        Sources::Tokens {
            tokens,
            batch_tokens: 2,
            deal: Deal::Sequences,
            meter: Meter::new(budget),
        }
    }

    /// Sequences dealt round-robin to the GPUs (2 here: sequence 2 back on
    /// GPU 0), whole batches, the trace's counts; held-out batches carry
    /// their own tokens' sources.
    #[test]
    fn token_workload_keeps_the_traces_batches() {
        let (trace, t) = tokens();
        let src = sources(t, ReadLimits::default());
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
        let tight = ReadLimits {
            max_bytes: 5 * 2 * 2 * 4 + 8,
            ..ReadLimits::default()
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
        let enough = ReadLimits {
            max_bytes: 5 * 2 * 2 * 4 + 3 * 2 * 4 * 8,
            ..ReadLimits::default()
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
