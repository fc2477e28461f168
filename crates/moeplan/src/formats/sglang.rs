//! SGLang's formats.
//!
//! - Reading: the expert-distribution JSON, `{"logical_count": [L][E]}` (one
//!   whole-run total) or `[N][L][E]` (N recorded steps, read as batches).
//!   Layers whose counts are all zero are dense layers and are dropped; the
//!   others keep their row index as layer id, so plans map back to the model.
//!   Steps whose counts are all zero are slots of SGLang's recorder buffer
//!   that no forward pass filled (`recorded_steps`) and are dropped too.
//! - Reading: the legacy per-rank CSVs (`layer_id,expert_id,count`, one file
//!   per rank), summed ([`read_rank_csvs`]) or with each rank's counts kept
//!   as the simulator's per-source counts ([`read_rank_csvs_by_rank`]; the
//!   rank is read from the file's name, `rank_from_file_name`).
//! - Writing: the `--init-expert-location` JSON,
//!   `{"physical_to_logical_map": [[...]]}`, one row per model layer (dense
//!   ones included: SGLang indexes rows by layer), each row the logical
//!   expert of every physical slot, GPU-major.

use ndarray::{Array3, Array4, Axis};
use serde::Serialize;
use serde_json::Value;

#[cfg(test)]
use crate::data::Workload;
use crate::data::plan::Plan;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

const FORMAT: &str = "SGLang expert-distribution JSON";

/// Reads `{"logical_count": ...}` from JSON bytes.
pub(crate) fn read_expert_distribution(bytes: &[u8]) -> Result<LoadTrace> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(FORMAT, e.to_string()))?;
    let lc = value
        .get("logical_count")
        .ok_or_else(|| Error::parse(FORMAT, "no \"logical_count\" key at the top level"))?;
    from_counts_value(lc)
}

/// Reads a `[L][E]` or `[N][L][E]` array of counts (the value of
/// `logical_count`, or a bare array file).
pub(crate) fn from_counts_value(lc: &Value) -> Result<LoadTrace> {
    let batches: Vec<&Value> = match depth(lc) {
        2 => vec![lc],
        3 => array(lc, "logical_count")?.iter().collect(),
        d => {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "logical_count must be a 2-D [layers][experts] or 3-D [steps][layers][experts] array, found depth {d}"
                ),
            ));
        }
    };
    let mut dense: Vec<Vec<Vec<f64>>> = Vec::with_capacity(batches.len());
    for (b, batch) in batches.iter().enumerate() {
        let path = if batches.len() == 1 && depth(lc) == 2 {
            "logical_count".to_string()
        } else {
            format!("logical_count[{b}]")
        };
        dense.push(matrix(batch, &path)?);
    }
    let (l, e) = (dense[0].len(), dense[0].first().map_or(0, Vec::len));
    if l == 0 || e == 0 {
        return Err(Error::parse(FORMAT, "logical_count is empty"));
    }
    for (b, m) in dense.iter().enumerate() {
        if m.len() != l {
            return Err(Error::parse(
                FORMAT,
                format!("step {b} has {} layers, step 0 has {l}", m.len()),
            ));
        }
        if let Some((li, row)) = m.iter().enumerate().find(|(_, r)| r.len() != e) {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "ragged rows: layer {li} of step {b} has {} experts, layer 0 has {e}",
                    row.len()
                ),
            ));
        }
    }
    dense.retain(|m| m.iter().flatten().any(|&x| x != 0.0));
    let moe: Vec<usize> = (0..l)
        .filter(|&li| dense.iter().any(|m| m[li].iter().any(|&x| x != 0.0)))
        .collect();
    if moe.is_empty() {
        return Err(Error::Trace("every layer's counts are zero".into()));
    }
    let counts = Array3::from_shape_fn((dense.len(), moe.len(), e), |(b, li, x)| {
        dense[b][moe[li]][x]
    });
    let ids = moe.iter().map(|&x| x as u32).collect();
    Ok(LoadTrace::new(counts, ids)?.with_model_layers(l))
}

/// The steps of a `[steps][layers][experts]` recorder dump that a forward
/// pass filled: SGLang's `stat` recorder dumps its whole buffer
/// (`_CircularBuffer.get_all`, `--expert-distribution-recorder-buffer-size`,
/// 1,000 steps unless set), zeros where no pass was recorded, and every
/// recorded pass routes tokens in every MoE layer. Read as batches, the
/// empty slots would each count as a perfectly balanced batch.
pub(crate) fn recorded_steps(counts: &Array3<f64>) -> Vec<usize> {
    counts
        .outer_iter()
        .enumerate()
        .filter(|(_, step)| step.iter().any(|&x| x != 0.0))
        .map(|(b, _)| b)
        .collect()
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.first().map_or(0, depth),
        _ => 0,
    }
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>> {
    v.as_array().ok_or_else(|| {
        Error::parse(
            FORMAT,
            format!("{path}: expected an array, found {}", kind(v)),
        )
    })
}

fn matrix(v: &Value, path: &str) -> Result<Vec<Vec<f64>>> {
    array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, row)| {
            array(row, &format!("{path}[{i}]"))?
                .iter()
                .enumerate()
                .map(|(j, x)| {
                    x.as_f64().ok_or_else(|| {
                        Error::parse(
                            FORMAT,
                            format!("{path}[{i}][{j}]: expected a number, found {}", kind(x)),
                        )
                    })
                })
                .collect()
        })
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[derive(Serialize)]
struct InitExpertLocation {
    physical_to_logical_map: Vec<Vec<u32>>,
}

/// Writes SGLang's `--init-expert-location` JSON for a model of
/// `model_layers` layers in all, dense ones included. Needs the same slot
/// count on every GPU in every layer (SGLang has one physical-expert count
/// per GPU); rows of dense layers hold the plain mapping `slot mod E`, which
/// SGLang never reads.
///
/// SGLang (`eplb/expert_location.py`, `init_by_mapping`) turns the map into
/// a `[layers][physical]` tensor and every MoE layer reads the row of its own
/// model layer id; GPU `g` owns slots `g·S .. (g+1)·S`. Older SGLang accepts
/// a file with too few rows silently, serves each MoE layer another layer's
/// placement and fails at dispatch past the last row. So the row count must
/// be the model's real layer count and the plan's layer ids model layer
/// ids: `model_layers` is `None` when the trace does not know them
/// ([`LoadTrace::known_model_layers`]), and the file is then refused with
/// how to name the model.
pub(crate) fn write_init_expert_location(
    plan: &Plan,
    model_layers: Option<usize>,
) -> Result<String> {
    let export = |m: String| Error::Export {
        format: "SGLang --init-expert-location",
        message: m,
    };
    super::check_plan_model_layers(super::ModelKeyed::Rows, plan, model_layers)?;
    // (known once the check passed; 0 would be refused below)
    let model_layers = model_layers.unwrap_or_default();
    let per_gpu = plan.uniform_slots_per_gpu().ok_or_else(|| {
        export(
            "slot counts differ between GPUs or layers; SGLang needs the same number of \
             physical experts on every GPU in every layer"
                .into(),
        )
    })?;
    let slots = per_gpu * plan.topology().num_gpus();
    let rows = plan.physical_to_logical();
    let last = plan.layers().last().map_or(0, |l| l.layer as usize);
    if model_layers <= last {
        return Err(export(format!(
            "the plan has MoE layer {last} but the model only {model_layers} layers"
        )));
    }
    let e = plan.num_experts() as u32;
    let mut map: Vec<Vec<u32>> = (0..model_layers)
        .map(|_| (0..slots as u32).map(|s| s % e).collect())
        .collect();
    for (lp, row) in plan.layers().iter().zip(rows) {
        map[lp.layer as usize] = row;
    }
    serde_json::to_string(&InitExpertLocation {
        physical_to_logical_map: map,
    })
    .map_err(|x| export(x.to_string()))
}

#[derive(serde::Deserialize)]
struct InitExpertLocationIn {
    physical_to_logical_map: Vec<Vec<u32>>,
}

/// Reads `--init-expert-location` JSON back into a plan: the rows of the
/// MoE layers `layer_ids` (rows are indexed by model layer), split over
/// `topology`'s GPUs.
pub fn read_init_expert_location(
    bytes: &[u8],
    topology: crate::data::topology::Topology,
    layer_ids: &[u32],
    num_experts: usize,
) -> Result<Plan> {
    const F: &str = "SGLang --init-expert-location";
    let doc: InitExpertLocationIn =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(F, e.to_string()))?;
    let rows = layer_ids
        .iter()
        .map(|&l| {
            doc.physical_to_logical_map
                .get(l as usize)
                .cloned()
                .ok_or_else(|| Error::parse(F, format!("no row for layer {l}")))
        })
        .collect::<Result<Vec<_>>>()?;
    super::vllm::plan_from_rows(&rows, topology, layer_ids, num_experts, F)
}

/// SGLang's legacy per-rank expert-count CSVs (`layer_id,expert_id,count`,
/// one file per rank): summed over ranks into one batch. Experts that never
/// appear get 0; `num_experts` fixes the count (default: highest id + 1).
/// `read_rank_csvs_by_rank` keeps each rank's counts apart.
///
/// ```
/// let r0 = (String::from("rank0.csv"), b"layer_id,expert_id,count\n3,0,5\n3,1,2\n".to_vec());
/// let r1 = (String::from("rank1.csv"), b"layer_id,expert_id,count\n3,1,4\n".to_vec());
/// let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
/// let t = moeplan::formats::read_rank_csvs(&[r0, r1], None, &mut meter)?;
/// assert_eq!(t.counts()[[0, 0, 1]], 6.0);
/// assert_eq!(t.layer_ids(), &[3]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_rank_csvs(
    files: &[(String, Vec<u8>)],
    num_experts: Option<usize>,
    meter: &mut crate::Meter,
) -> Result<LoadTrace> {
    let mut cells: std::collections::BTreeMap<(u32, u32), f64> = Default::default();
    for (name, bytes) in files {
        for_each_count(name, bytes, |l, e, c| {
            *cells.entry((l, e)).or_insert(0.0) += c;
            Ok(())
        })?;
    }
    let (layers, e) = grid(cells.keys().copied(), num_experts)?;
    // A few sparse lines can name a huge layer × expert grid.
    meter.values(
        (layers.len() as u64).saturating_mul(e as u64),
        8,
        "the layer × expert counts",
    )?;
    let mut counts = Array3::zeros((1, layers.len(), e));
    for (&(l, x), &c) in &cells {
        if let Ok(li) = layers.binary_search(&l) {
            counts[[0, li, x as usize]] = c;
        }
    }
    LoadTrace::new(counts, layers)
}

const RANK_CSV: &str = "SGLang per-rank CSV";

/// SGLang's per-rank CSVs read with each file's rank kept: what the
/// simulator needs to replay rank-by-rank dispatch (SGLang's `static` rule
/// sends all of one rank's tokens for an expert to one copy).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RankCounts {
    /// The counts summed over ranks: one batch, the layers the files name.
    pub trace: LoadTrace,
    /// `1 × L × S × E`: the tokens rank `s` routed to each expert. `S` is
    /// the highest rank + 1; a rank with no file sent nothing.
    pub by_source: Array4<f64>,
    /// The ranks that had a file, ascending.
    pub ranks: Vec<u32>,
}

impl RankCounts {
    /// The simulator's workload: the summed counts with per-source counts.
    #[cfg(test)]
    pub(crate) fn workload(self) -> Result<Workload> {
        Workload::new(self.trace).with_sources(self.by_source)
    }
}

/// The rank a per-rank file's name gives (any folders before the last `/`
/// or `\\` ignored):
/// 1. the digits right after the last `rank` in the name, any case
///    (`rank3.csv`, `decode_rank3.csv`, SGLang's own
///    `expert_distribution_rank3_timestamp1744347750.37.csv` — whose
///    timestamp must not be read as the rank);
/// 2. else the digits the name ends with before its extension (`3.csv`,
///    `counts-03.csv`);
/// 3. else none.
pub(crate) fn rank_from_file_name(name: &str) -> Option<u32> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let lower = base.to_ascii_lowercase();
    let digits = |s: &str| -> Option<u32> {
        let d: &str = &s[..s.bytes().take_while(u8::is_ascii_digit).count()];
        if d.is_empty() { None } else { d.parse().ok() }
    };
    if let Some(r) = lower
        .match_indices("rank")
        .filter_map(|(i, w)| lower.get(i + w.len()..))
        .filter_map(digits)
        .last()
    {
        return Some(r);
    }
    let stem = match base.rfind('.') {
        Some(i) if i > 0 => &base[..i],
        _ => base,
    };
    let tail = stem.bytes().rev().take_while(u8::is_ascii_digit).count();
    digits(&stem[stem.len() - tail..])
}

/// SGLang's per-rank CSVs with each file's rank kept apart: the rank comes
/// from the file's name (`rank_from_file_name`; a name that gives none is
/// an error, so is a rank two files share, or one at or past
/// `crate::data::MAX_GPUS`). Counts within a file add up; the summed
/// trace is [`read_rank_csvs`]'s. Whether the ranks fit a cluster is the
/// simulator's check (every source rank is a GPU).
///
/// SGLang wrote these files from each rank's own `select_experts` (its
/// tokens' top-k): under data-parallel attention a rank counts the tokens
/// it routes, which is what a source is. Under plain tensor parallelism
/// every rank routes every token and all files are alike.
pub(crate) fn read_rank_csvs_by_rank(
    files: &[(String, Vec<u8>)],
    num_experts: Option<usize>,
    meter: &mut crate::Meter,
) -> Result<RankCounts> {
    let mut ranks: Vec<(u32, &str)> = Vec::with_capacity(files.len());
    for (name, _) in files {
        let rank = rank_from_file_name(name).ok_or_else(|| {
            Error::parse(
                RANK_CSV,
                format!(
                    "{name}: cannot tell its rank: name per-rank files rank<N>.csv (or ending in the rank number)"
                ),
            )
        })?;
        if rank as usize >= crate::data::topology::MAX_GPUS {
            return Err(Error::parse(
                RANK_CSV,
                format!(
                    "{name}: rank {rank} is past the {} GPUs a cluster may have",
                    crate::data::topology::MAX_GPUS
                ),
            ));
        }
        if let Some((_, other)) = ranks.iter().find(|(r, _)| *r == rank) {
            return Err(Error::parse(
                RANK_CSV,
                format!("{other} and {name} both hold rank {rank}"),
            ));
        }
        ranks.push((rank, name));
    }
    // (rank, layer, expert) → count; every entry charged before it is made.
    let mut cells: std::collections::BTreeMap<(u32, u32, u32), f64> = Default::default();
    for ((name, bytes), &(rank, _)) in files.iter().zip(&ranks) {
        for_each_count(name, bytes, |l, e, c| {
            match cells.entry((rank, l, e)) {
                std::collections::btree_map::Entry::Occupied(mut o) => *o.get_mut() += c,
                std::collections::btree_map::Entry::Vacant(v) => {
                    meter.values(1, 32, "the per-rank counts")?;
                    v.insert(c);
                }
            }
            Ok(())
        })?;
    }
    let (layers, e) = grid(cells.keys().map(|&(_, l, e)| (l, e)), num_experts)?;
    let s_n = ranks
        .iter()
        .map(|&(r, _)| r as usize + 1)
        .max()
        .unwrap_or(1);
    // The counts per source and their sum over sources.
    meter.values(
        (layers.len() as u64)
            .saturating_mul(e as u64)
            .saturating_mul(s_n as u64 + 1),
        8,
        "the rank × layer × expert counts",
    )?;
    let mut by_source = Array4::zeros((1, layers.len(), s_n, e));
    for (&(s, l, x), &c) in &cells {
        if let Ok(li) = layers.binary_search(&l) {
            by_source[[0, li, s as usize, x as usize]] = c;
        }
    }
    let trace = LoadTrace::new(by_source.sum_axis(Axis(2)), layers)?;
    let mut ranks: Vec<u32> = ranks.into_iter().map(|(r, _)| r).collect();
    ranks.sort_unstable();
    Ok(RankCounts {
        trace,
        by_source,
        ranks,
    })
}

/// The layers named (ascending) and the expert count: `num_experts`, else
/// the highest expert id + 1.
fn grid(
    cells: impl Iterator<Item = (u32, u32)>,
    num_experts: Option<usize>,
) -> Result<(Vec<u32>, usize)> {
    let mut layers = Vec::new();
    let mut max_e = None;
    for (l, e) in cells {
        layers.push(l);
        max_e = max_e.max(Some(e as usize));
    }
    let Some(max_e) = max_e else {
        return Err(Error::parse(RANK_CSV, "no counts"));
    };
    let e = num_experts.unwrap_or(max_e + 1);
    if e <= max_e {
        return Err(Error::parse(
            RANK_CSV,
            format!("expert {max_e} appears but there are {e} experts"),
        ));
    }
    layers.sort_unstable();
    layers.dedup();
    Ok((layers, e))
}

/// Calls `each(layer, expert, count)` for every line of one per-rank CSV.
fn for_each_count(
    name: &str,
    bytes: &[u8],
    mut each: impl FnMut(u32, u32, f64) -> Result<()>,
) -> Result<()> {
    const F: &str = RANK_CSV;
    let mut reader = ::csv::ReaderBuilder::new().from_reader(bytes);
    let header = reader
        .headers()
        .map_err(|e| Error::parse(F, format!("{name}: {e}")))?
        .clone();
    if header.iter().map(str::trim).collect::<Vec<_>>() != ["layer_id", "expert_id", "count"] {
        return Err(Error::parse(
            F,
            format!("{name}: header must be layer_id,expert_id,count"),
        ));
    }
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| Error::parse(F, format!("{name}, line {}: {e}", i + 2)))?;
        let id = |k: usize| -> Result<u32> {
            rec[k].trim().parse().map_err(|_| {
                Error::parse(
                    F,
                    format!(
                        "{name}, line {}: {:?} is not a whole number",
                        i + 2,
                        &rec[k]
                    ),
                )
            })
        };
        let c: f64 = rec[2].trim().parse().map_err(|_| {
            Error::parse(
                F,
                format!(
                    "{name}, line {}: count {:?} is not a number",
                    i + 2,
                    &rec[2]
                ),
            )
        })?;
        let (l, e) = (id(0)?, id(1)?);
        if e as usize >= crate::data::trace::MAX_EXPERTS {
            return Err(Error::parse(
                F,
                format!("{name}, line {}: expert {e} is out of range", i + 2),
            ));
        }
        each(l, e, c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `stat` dump of a buffer of 4 steps with 2 recorded (SGLang's
    /// circular buffer, zeros where no pass was): 2 batches, not 4, and the
    /// dense layer still dropped.
    #[test]
    fn steps_no_pass_filled_are_not_batches() {
        let json = br#"{"logical_count": [
            [[0, 0], [3, 1]],
            [[0, 0], [0, 0]],
            [[0, 0], [2, 2]],
            [[0, 0], [0, 0]]]}"#;
        let t = read_expert_distribution(json).unwrap();
        assert_eq!(t.num_batches(), 2);
        assert_eq!(t.layer_ids(), &[1]);
        assert_eq!(t.counts().as_slice().unwrap(), &[3.0, 1.0, 2.0, 2.0]);
        let none = br#"{"logical_count": [[[0, 0]], [[0, 0]]]}"#;
        assert!(read_expert_distribution(none).is_err());
    }

    /// The rank is the digits after the last `rank`, else those the name ends with.
    #[test]
    fn rank_from_file_name_reads_the_rank_digits() {
        assert_eq!(
            rank_from_file_name("expert_distribution_rank12_timestamp1744347750.37.csv"),
            Some(12)
        );
        assert_eq!(rank_from_file_name("dumps/decode_Rank3.csv"), Some(3));
        assert_eq!(rank_from_file_name("counts-07.csv"), Some(7));
        assert_eq!(rank_from_file_name("counts.csv"), None);
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn read_expert_distribution() -> crate::Result<()> {
        let json = br#"{"logical_count": [[0, 0], [3, 1], [2, 2]]}"#;
        let t = crate::formats::sglang::read_expert_distribution(json)?;
        assert_eq!(t.layer_ids(), &[1, 2]); // layer 0 is dense
        assert_eq!(t.model_layers(), 3);
        Ok(())
    }

    #[test]
    fn recorded_steps() {
        let a =
            ndarray::Array3::from_shape_vec((3, 1, 2), vec![1.0, 2.0, 0.0, 0.0, 3.0, 0.0]).unwrap();
        assert_eq!(crate::formats::sglang::recorded_steps(&a), vec![0, 2]);
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn sglang_write_init_expert_location_example() {
        let run = || {
            use moeplan::{LoadTrace, Topology, formats::sglang, planners::eplb};
            use ndarray::Array3;
            let trace = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![1])?;
            let plan = eplb::base(&trace, Topology::new(1, 2)?, 1)?;
            let json = sglang::write_init_expert_location(&plan, Some(2))?;
            assert!(json.starts_with(r#"{"physical_to_logical_map":[[0,1,2,3],["#));
            // a trace that only knows its MoE layers: refused, not a short file
            assert!(sglang::write_init_expert_location(&plan, trace.known_model_layers()).is_err());
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn sglang_read_rank_csvs_by_rank_example() {
        let run = || {
            let f = |n: &str, t: &str| (n.to_string(), t.as_bytes().to_vec());
            let files = [
                f("rank0.csv", "layer_id,expert_id,count\n3,0,5\n3,1,2\n"),
                f("rank2.csv", "layer_id,expert_id,count\n3,1,4\n"),
            ];
            let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
            let r = super::read_rank_csvs_by_rank(&files, None, &mut meter)?;
            assert_eq!(r.by_source.dim(), (1, 1, 3, 2)); // ranks 0..=2, rank 1 sent nothing
            assert_eq!(
                (r.by_source[[0, 0, 2, 1]], r.trace.counts()[[0, 0, 1]]),
                (4.0, 6.0)
            );
            assert_eq!(r.ranks, [0, 2]);
            let twice = [
                f("rank2.csv", "layer_id,expert_id,count\n3,1,4\n"),
                f("x_rank2.csv", "layer_id,expert_id,count\n3,1,4\n"),
            ];
            assert!(super::read_rank_csvs_by_rank(&twice, None, &mut meter).is_err());
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod test_only_examples {
    #[test]
    fn sglang_workload_example() {
        let run = || {
            let f = |n: &str, t: &str| (n.to_string(), t.as_bytes().to_vec());
            let files = [f("rank1.csv", "layer_id,expert_id,count\n0,0,3\n")];
            let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
            let w = super::read_rank_csvs_by_rank(&files, None, &mut meter)?.workload()?;
            assert_eq!(
                (w.num_sources(), w.sources()),
                (Some(2), "per-source counts")
            );
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
