//! TensorRT-LLM's MoE load balancer (wide expert parallelism), its offline
//! flow: the expert statistics an engine dumps are read in, the placement
//! YAML it loads is written and read back.
//!
//! Where the formats come from (NVIDIA/TensorRT-LLM; the code here is our
//! own, written against what those files write and read):
//! - Statistics: `tensorrt_llm/_torch/expert_statistic.py` (commit
//!   c85e8726ad9c) saves, per EP rank, `rank<r>.safetensors`: one 1-D tensor
//!   per recorded iteration and MoE layer, keyed `"{iteration}_{layer}"`,
//!   the `torch.bincount` of the experts that rank's tokens chose (int64;
//!   int32 in the co-occurrence variant), and rank 0 `meta_info.json`
//!   (`num_experts`, `num_experts_per_token`). The co-occurrence variant
//!   (read by `examples/wide_ep/ep_load_balancer/utils.py` and
//!   `generate_eplb_config_cooccurrence.py`, commit 6bf781a48c2f) adds
//!   `cooccurrence_rank<r>.safetensors` (int32 `E × E` per key: tokens that
//!   chose both experts, the diagonal counting each expert's own tokens) and
//!   `token_selected_experts_rank<r>.safetensors` (routes); later versions
//!   (utils.py at 7ce477f3c73b) write the routes as `rank<r>_raw.safetensors`.
//! - Placement: `examples/wide_ep/ep_load_balancer/generate_eplb_config.py`
//!   (commit 76a646e90c8e) writes `num_slots`, `initial_global_assignments`
//!   (model layer index → the expert of every slot, rank-major: rank `r`
//!   owns slots `r·S .. (r+1)·S`) and `layer_updates_per_iter` (0: static).
//!   The engine's `MoeLoadBalancerConfig` and fused-MoE layer
//!   (`_torch/model_config.py`, `_torch/modules/fused_moe`) require every
//!   MoE layer's list to hold `num_slots` entries, `num_slots` to be a
//!   multiple of the EP size (equal slots per rank) and at least the expert
//!   count, and every expert to appear.
//!
//! Iterations are the trace's batches (ascending), summed over ranks; the
//! rank of each statistics file comes from its name
//! (`super::sglang::rank_from_file_name`) and its counts are kept as the
//! simulator's per-source counts when they fit the reading budget.
//!
//! Cost: reading is linear in the files' bytes; the trace is `B × L × E`
//! doubles, the per-rank counts `B × L × S × E`, the co-occurrence `L × E²`;
//! writing is linear in the plan's slots.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use ndarray::{Array2, Array3, Array4, Axis};
use safetensors::{Dtype, SafeTensors};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

mod placement;

pub(crate) use placement::is_placement;
pub use placement::{Placement, read_placement, write_placement};

/// The statistics format's name in messages.
pub(crate) const STATISTICS: &str = "TensorRT-LLM expert statistics";
/// The placement format's name in messages.
pub const PLACEMENT: &str = "TensorRT-LLM load-balancer YAML";

/// What a file of a statistics folder holds, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatFile {
    /// `rank<r>.safetensors`: per-iteration expert counts.
    Counts,
    /// `cooccurrence_rank<r>.safetensors`: per-iteration `E × E` pair counts.
    Cooccurrence,
    /// `token_selected_experts_rank<r>.safetensors` or
    /// `rank<r>_raw.safetensors`: the raw routes (not read here).
    Routes,
    /// `meta_info.json`: expert count and top-k.
    Meta,
    /// Anything else: not part of the dump.
    Other,
}

/// Tells a statistics folder's files apart by name (folders before the last
/// `/` or `\\` ignored).
pub(crate) fn file_kind(name: &str) -> StatFile {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    if base == "meta_info.json" {
        return StatFile::Meta;
    }
    let Some(stem) = base.strip_suffix(".safetensors") else {
        return StatFile::Other;
    };
    if stem.starts_with("cooccurrence") {
        StatFile::Cooccurrence
    } else if stem.starts_with("token_selected_experts") || stem.ends_with("_raw") {
        StatFile::Routes
    } else {
        StatFile::Counts
    }
}

/// Whether `bytes` look like a safetensors file: an 8-byte little-endian
/// header length, then the JSON header's `{`. A text file never has the
/// length's top byte (a NUL) where it stands, so no JSON or CSV trace is
/// taken for one; a file whose length claims more than it holds still is,
/// so that the reader can say what is wrong with it.
pub(crate) fn is_safetensors(bytes: &[u8]) -> bool {
    bytes.len() > 8 && bytes[7] == 0 && bytes[8] == b'{'
}

/// TensorRT-LLM's statistics read: the counts summed over ranks, and each
/// rank's own counts when the files name their ranks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Statistics {
    /// `B × L × E`: batch `b` is the `b`-th recorded iteration, layers are
    /// the keys' layer ids (the model's layer index), summed over ranks.
    pub trace: LoadTrace,
    /// The recorded iteration of every batch, ascending.
    pub iterations: Vec<u64>,
    /// `B × L × S × E`: what rank `s` routed (`S` is the highest rank + 1; a
    /// rank with no file sent nothing). `None` when a file's name gives no
    /// rank, or when keeping them would pass the reading budget
    /// (`sources_dropped`).
    pub by_source: Option<Array4<f64>>,
    /// The ranks that had a file, ascending (empty when unknown).
    pub ranks: Vec<u32>,
    /// The per-rank counts were named but not kept: over the budget.
    pub sources_dropped: bool,
}

/// A safetensors file opened within the budget: the header's JSON charged
/// before it is parsed, the declared lengths checked against the bytes.
fn open<'a>(name: &str, bytes: &'a [u8], meter: &mut crate::Meter) -> Result<SafeTensors<'a>> {
    let fail = |m: String| Error::parse(STATISTICS, format!("{name}: {m}"));
    let Some(len_bytes) = bytes.get(..8) else {
        return Err(fail(format!(
            "{} bytes, shorter than safetensors' 8-byte header length",
            bytes.len()
        )));
    };
    let mut word = [0u8; 8];
    word.copy_from_slice(len_bytes);
    let declared = u64::from_le_bytes(word);
    let held = (bytes.len() - 8) as u64;
    if declared > held {
        return Err(fail(format!(
            "the header length says {declared} bytes but only {held} follow: the file is cut off or not safetensors"
        )));
    }
    // `declared <= held`, so the range is inside `bytes`.
    let header = bytes.get(8..8 + declared as usize).unwrap_or_default();
    crate::data::limits::charge_json(meter, header, "the safetensors header")?;
    SafeTensors::deserialize(bytes)
        .map_err(|e| fail(format!("not a readable safetensors file: {e}")))
}

/// `"{iteration}_{layer}"`, TensorRT-LLM's key.
fn parse_key(name: &str, key: &str) -> Result<(u64, u32)> {
    let parsed = key
        .split_once('_')
        .and_then(|(i, l)| Some((i.parse().ok()?, l.parse().ok()?)));
    let (iteration, layer) = parsed.ok_or_else(|| {
        Error::parse(
            STATISTICS,
            format!("{name}: tensor {key:?} is not named \"<iteration>_<layer>\""),
        )
    })?;
    if layer as usize >= crate::data::trace::MAX_LAYERS {
        return Err(Error::parse(
            STATISTICS,
            format!("{name}: layer {layer} of tensor {key:?} is out of range"),
        ));
    }
    Ok((iteration, layer))
}

/// Calls `each(i, value)` for every element of a tensor, decoded from its
/// little-endian bytes; counts must be finite and non-negative.
fn for_each_value(
    name: &str,
    key: &str,
    dtype: Dtype,
    data: &[u8],
    mut each: impl FnMut(usize, f64),
) -> Result<()> {
    fn run<const N: usize>(data: &[u8], f: fn([u8; N]) -> f64) -> impl Iterator<Item = f64> + '_ {
        data.chunks_exact(N)
            .filter_map(|c| <[u8; N]>::try_from(c).ok())
            .map(f)
    }
    let values: Box<dyn Iterator<Item = f64> + '_> = match dtype {
        Dtype::U8 => Box::new(run::<1>(data, |b| f64::from(b[0]))),
        Dtype::I8 => Box::new(run::<1>(data, |b| f64::from(i8::from_le_bytes(b)))),
        Dtype::I16 => Box::new(run::<2>(data, |b| f64::from(i16::from_le_bytes(b)))),
        Dtype::U16 => Box::new(run::<2>(data, |b| f64::from(u16::from_le_bytes(b)))),
        Dtype::I32 => Box::new(run::<4>(data, |b| f64::from(i32::from_le_bytes(b)))),
        Dtype::U32 => Box::new(run::<4>(data, |b| f64::from(u32::from_le_bytes(b)))),
        Dtype::I64 => Box::new(run::<8>(data, |b| i64::from_le_bytes(b) as f64)),
        Dtype::U64 => Box::new(run::<8>(data, |b| u64::from_le_bytes(b) as f64)),
        Dtype::F32 => Box::new(run::<4>(data, |b| f64::from(f32::from_le_bytes(b)))),
        Dtype::F64 => Box::new(run::<8>(data, f64::from_le_bytes)),
        other => {
            return Err(Error::parse(
                STATISTICS,
                format!(
                    "{name}: tensor {key:?} has dtype {other}; counts are integers (TensorRT-LLM writes int64 or int32) or float32/float64"
                ),
            ));
        }
    };
    for (i, v) in values.enumerate() {
        if !v.is_finite() || v < 0.0 {
            return Err(Error::parse(
                STATISTICS,
                format!(
                    "{name}: tensor {key:?} holds {v} at {i}: counts must be finite and non-negative"
                ),
            ));
        }
        each(i, v);
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct Meta {
    num_experts: Option<usize>,
    num_experts_per_token: Option<usize>,
}

fn read_meta(name: &str, bytes: &[u8], meter: &mut crate::Meter) -> Result<Meta> {
    crate::data::limits::charge_json(meter, bytes, "meta_info.json")?;
    serde_json::from_slice(bytes).map_err(|e| Error::parse(STATISTICS, format!("{name}: {e}")))
}

/// One counts tensor's place: file, key, iteration, layer.
struct Entry<'a> {
    file: usize,
    key: String,
    at: (u64, u32),
    view: safetensors::tensor::TensorView<'a>,
}

/// The ranks of the counts files, when every name gives one.
fn ranks_of(names: &[&str]) -> Result<Option<Vec<u32>>> {
    let mut ranks = Vec::with_capacity(names.len());
    for name in names {
        let Some(rank) = super::sglang::rank_from_file_name(name) else {
            return Ok(None);
        };
        if rank as usize >= crate::data::topology::MAX_GPUS {
            return Err(Error::parse(
                STATISTICS,
                format!(
                    "{name}: rank {rank} is past the {} GPUs a cluster may have",
                    crate::data::topology::MAX_GPUS
                ),
            ));
        }
        if let Some(i) = ranks.iter().position(|&r| r == rank) {
            return Err(Error::parse(
                STATISTICS,
                format!("{} and {name} both hold rank {rank}", names[i]),
            ));
        }
        ranks.push(rank);
    }
    Ok(Some(ranks))
}

/// Reads TensorRT-LLM's expert statistics: the `rank<r>.safetensors` files
/// of one dump (and its `meta_info.json`, for the top-k and a check of the
/// expert count), given as `(name, bytes)`. Co-occurrence and route files
/// among them are skipped ([`read_cooccurrence`] reads the former). The
/// files' bytes are the caller's to charge; what is built from them is
/// charged to `meter` first.
///
/// Every iteration must have counts for every layer (TensorRT-LLM records
/// each MoE layer in each iteration); a rank may lack a key (it counted
/// nothing there).
pub(crate) fn read_statistics<N: AsRef<str>, B: AsRef<[u8]>>(
    files: &[(N, B)],
    meter: &mut crate::Meter,
) -> Result<Statistics> {
    let mut meta = None;
    let mut counts_files: Vec<(&str, &[u8])> = Vec::new();
    for (name, bytes) in files {
        let (name, bytes) = (name.as_ref(), bytes.as_ref());
        match file_kind(name) {
            StatFile::Meta => meta = Some(read_meta(name, bytes, meter)?),
            StatFile::Cooccurrence | StatFile::Routes => {}
            StatFile::Counts | StatFile::Other => counts_files.push((name, bytes)),
        }
    }
    if counts_files.is_empty() {
        return Err(Error::parse(
            STATISTICS,
            "no rank<N>.safetensors counts among the files",
        ));
    }
    let names: Vec<&str> = counts_files.iter().map(|(n, _)| *n).collect();
    let ranks = ranks_of(&names)?;
    let opened = counts_files
        .iter()
        .map(|(name, bytes)| open(name, bytes, meter))
        .collect::<Result<Vec<_>>>()?;
    let mut entries = Vec::new();
    let mut experts: Option<(usize, String)> = None;
    for (file, st) in opened.iter().enumerate() {
        let name = names.get(file).copied().unwrap_or_default();
        for (key, view) in st.tensors() {
            let at = parse_key(name, &key)?;
            let e = match view.shape() {
                [e] => *e,
                shape => {
                    return Err(Error::parse(
                        STATISTICS,
                        format!(
                            "{name}: tensor {key:?} has shape {shape:?}; expert counts are 1-D (co-occurrence and route files are read apart)"
                        ),
                    ));
                }
            };
            match &experts {
                None => experts = Some((e, format!("{name}: {key:?}"))),
                Some((first, at)) if *first != e => {
                    return Err(Error::parse(
                        STATISTICS,
                        format!("{name}: tensor {key:?} counts {e} experts, {at} {first}"),
                    ));
                }
                Some(_) => {}
            }
            entries.push(Entry {
                file,
                key,
                at,
                view,
            });
        }
    }
    let Some((e, _)) = experts else {
        return Err(Error::parse(STATISTICS, "the files hold no tensors"));
    };
    if e == 0 || e > crate::data::trace::MAX_EXPERTS {
        return Err(Error::parse(
            STATISTICS,
            format!("{e} experts per layer is out of range"),
        ));
    }
    let meta = meta.unwrap_or(Meta {
        num_experts: None,
        num_experts_per_token: None,
    });
    if let Some(m) = meta.num_experts.filter(|&m| m != e) {
        let at = experts.map(|(_, at)| at).unwrap_or_default();
        // With the load balancer on, TensorRT-LLM's `ExpertStatistic` is fed
        // `maybe_add_info(self.num_slots, token_selected_slots)`: one count
        // per slot (num_slots ≥ num_experts), which no expert count can be
        // recovered from without the slot map of every iteration.
        return Err(Error::parse(
            STATISTICS,
            if e > m {
                format!(
                    "{at} counts {e} entries but meta_info.json says {m} experts: the dump was \
                     taken with TensorRT-LLM's MoE load balancer on, which records its {e} slots, \
                     not experts; take the statistics again with the balancer off (no \
                     moe_config.load_balancer in the LLM API options, EXPERT_STATISTIC_PATH set as before)"
                )
            } else {
                format!("{at} counts {e} entries, fewer than the {m} experts meta_info.json says")
            },
        ));
    }
    let cells: BTreeSet<(u64, u32)> = entries.iter().map(|x| x.at).collect();
    let iterations: Vec<u64> = cells
        .iter()
        .map(|c| c.0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let layers: Vec<u32> = cells
        .iter()
        .map(|c| c.1)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for &i in &iterations {
        if let Some(l) = layers.iter().find(|&&l| !cells.contains(&(i, l))) {
            return Err(Error::parse(
                STATISTICS,
                format!("iteration {i} has no counts for layer {l}, which other iterations have"),
            ));
        }
    }
    let (b, l) = (iterations.len(), layers.len());
    let cell = (b as u64).saturating_mul(l as u64).saturating_mul(e as u64);
    meter.values(cell, 8, "the iteration × layer × expert counts")?;
    let mut sources_dropped = false;
    let mut by_source = match &ranks {
        Some(r) => {
            let s_n = r.iter().map(|&x| x as usize + 1).max().unwrap_or(1);
            // Kept only when they fit: the summed counts are what planning needs.
            match meter.values(cell.saturating_mul(s_n as u64), 8, "the per-rank counts") {
                Ok(()) => Some(Array4::<f64>::zeros((b, l, s_n, e))),
                Err(_) => {
                    sources_dropped = true;
                    None
                }
            }
        }
        None => None,
    };
    let mut counts = Array3::<f64>::zeros((b, l, e));
    for x in &entries {
        let name = names.get(x.file).copied().unwrap_or_default();
        let (bi, li) = (
            iterations.binary_search(&x.at.0).unwrap_or_default(),
            layers.binary_search(&x.at.1).unwrap_or_default(),
        );
        let rank = ranks
            .as_ref()
            .and_then(|r| r.get(x.file))
            .map(|&r| r as usize);
        let mut sum = counts.index_axis_mut(Axis(0), bi);
        let mut row = sum.index_axis_mut(Axis(0), li);
        for_each_value(name, &x.key, x.view.dtype(), x.view.data(), |i, v| {
            if let Some(c) = row.get_mut(i) {
                *c += v;
            }
            if let (Some(src), Some(s)) = (by_source.as_mut(), rank) {
                if let Some(c) = src.get_mut([bi, li, s, i]) {
                    *c += v;
                }
            }
        })?;
    }
    let mut trace = LoadTrace::new(counts, layers)?;
    if let Some(k) = meta.num_experts_per_token {
        trace = trace.with_top_k(k);
    }
    let mut ranks = ranks.unwrap_or_default();
    ranks.sort_unstable();
    Ok(Statistics {
        trace,
        iterations,
        by_source,
        ranks,
        sources_dropped,
    })
}

/// Co-occurrence counts as GRACE-MoE's affinity: per MoE layer, `A[i][j]`
/// the tokens whose top-k held both `i` and `j`, over every recorded
/// iteration and rank.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cooccurrence {
    /// The layers, ascending (the keys' layer ids).
    pub layer_ids: Vec<u32>,
    /// One `E × E` matrix per layer, symmetric, its diagonal zero
    /// (TensorRT-LLM counts each expert with itself; an affinity does not).
    pub matrices: Vec<Array2<f64>>,
}

/// Reads TensorRT-LLM's `cooccurrence_rank<r>.safetensors` files (others
/// among `files` are skipped), summed over iterations and ranks, into
/// [`Cooccurrence`]: the affinity GRACE-MoE's grouping reads
/// ([`crate::planners::affinity`] builds the same matrices from token
/// routes).
pub(crate) fn read_cooccurrence<N: AsRef<str>, B: AsRef<[u8]>>(
    files: &[(N, B)],
    meter: &mut crate::Meter,
) -> Result<Cooccurrence> {
    read_cooccurrence_in(files, 0..=u64::MAX, meter)
}

/// [`read_cooccurrence`] of the iterations in `iterations` only (the
/// others' tensors are skipped unread): the affinity of the batches a plan
/// is made on, not of those held out to judge it.
pub(crate) fn read_cooccurrence_in<N: AsRef<str>, B: AsRef<[u8]>>(
    files: &[(N, B)],
    iterations: std::ops::RangeInclusive<u64>,
    meter: &mut crate::Meter,
) -> Result<Cooccurrence> {
    let mut sums: BTreeMap<u32, Array2<f64>> = BTreeMap::new();
    let mut experts: Option<usize> = None;
    for (name, bytes) in files {
        let (name, bytes) = (name.as_ref(), bytes.as_ref());
        if file_kind(name) != StatFile::Cooccurrence {
            continue;
        }
        let st = open(name, bytes, meter)?;
        for (key, view) in st.tensors() {
            let (iteration, layer) = parse_key(name, &key)?;
            if !iterations.contains(&iteration) {
                continue;
            }
            let e = match view.shape() {
                [a, b] if a == b => *a,
                shape => {
                    return Err(Error::parse(
                        STATISTICS,
                        format!(
                            "{name}: tensor {key:?} has shape {shape:?}, not experts × experts"
                        ),
                    ));
                }
            };
            if *experts.get_or_insert(e) != e {
                return Err(Error::parse(
                    STATISTICS,
                    format!(
                        "{name}: tensor {key:?} is {e} × {e}, other tensors are for {} experts",
                        experts.unwrap_or(e)
                    ),
                ));
            }
            if e == 0 || e > crate::data::workload::MAX_AFFINITY_EXPERTS {
                return Err(Error::parse(
                    STATISTICS,
                    format!("{name}: {e} experts is out of range for an affinity"),
                ));
            }
            let m = match sums.entry(layer) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    meter.values((e * e) as u64, 8, "the co-occurrence matrices")?;
                    v.insert(Array2::zeros((e, e)))
                }
            };
            for_each_value(name, &key, view.dtype(), view.data(), |i, v| {
                if let Some(c) = m.get_mut((i / e, i % e)) {
                    *c += v;
                }
            })?;
        }
    }
    if sums.is_empty() {
        let within = if iterations == (0..=u64::MAX) {
            String::new()
        } else {
            format!(
                " of iterations {}..={}",
                iterations.start(),
                iterations.end()
            )
        };
        return Err(Error::parse(
            STATISTICS,
            format!("no cooccurrence_rank<N>.safetensors counts{within} among the files"),
        ));
    }
    let mut layer_ids = Vec::with_capacity(sums.len());
    let mut matrices = Vec::with_capacity(sums.len());
    for (layer, mut m) in sums {
        let e = m.nrows();
        for i in 0..e {
            for j in i + 1..e {
                if m[[i, j]] != m[[j, i]] {
                    return Err(Error::parse(
                        STATISTICS,
                        format!(
                            "layer {layer}: co-occurrence of experts {i} and {j} is {} one way and {} the other",
                            m[[i, j]],
                            m[[j, i]]
                        ),
                    ));
                }
            }
            m[[i, i]] = 0.0;
        }
        layer_ids.push(layer);
        matrices.push(m);
    }
    Ok(Cooccurrence {
        layer_ids,
        matrices,
    })
}

#[cfg(test)]
mod tests;

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn trtllm_read_statistics_example() {
        let run = || {
            use super::read_statistics;
            // rank0.safetensors: iteration 7, layer 3, int32 counts [2, 0, 1]
            let header = br#"{"7_3":{"dtype":"I32","shape":[3],"data_offsets":[0,12]}}"#;
            let mut file = (header.len() as u64).to_le_bytes().to_vec();
            file.extend_from_slice(header);
            for c in [2i32, 0, 1] {
                file.extend_from_slice(&c.to_le_bytes());
            }
            let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
            let s = read_statistics(&[("rank0.safetensors", &file)], &mut meter)?;
            assert_eq!(s.trace.layer_ids(), &[3]);
            assert_eq!(s.iterations, [7]);
            assert_eq!(s.trace.counts()[[0, 0, 0]], 2.0);
            assert_eq!(s.ranks, [0]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn trtllm_read_cooccurrence_example() {
        let run = || {
            use super::read_cooccurrence;
            // one token chose experts {0, 1}: [[1, 1], [1, 1]] for iteration 0, layer 2
            let header = br#"{"0_2":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}"#;
            let mut file = (header.len() as u64).to_le_bytes().to_vec();
            file.extend_from_slice(header);
            for c in [1i32, 1, 1, 1] {
                file.extend_from_slice(&c.to_le_bytes());
            }
            let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
            let a = read_cooccurrence(&[("cooccurrence_rank0.safetensors", &file)], &mut meter)?;
            assert_eq!(a.layer_ids, [2]);
            assert_eq!(a.matrices[0], ndarray::array![[0.0, 1.0], [1.0, 0.0]]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn trtllm_read_cooccurrence_in_example() {
        let run = || {
            use super::read_cooccurrence_in;
            // iteration 7, layer 0: one token chose experts {0, 1}
            let header = br#"{"7_0":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}"#;
            let mut file = (header.len() as u64).to_le_bytes().to_vec();
            file.extend_from_slice(header);
            for c in [1i32, 1, 1, 1] {
                file.extend_from_slice(&c.to_le_bytes());
            }
            let files = [("cooccurrence_rank0.safetensors", &file)];
            let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
            assert_eq!(
                read_cooccurrence_in(&files, 5..=7, &mut meter)?.matrices[0][[0, 1]],
                1.0
            );
            assert!(read_cooccurrence_in(&files, 0..=6, &mut meter).is_err()); // none left
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
