//! AIConfigurator's measured kernel tables → [`Measurement`]s, for
//! `moeplan calibrate --aiconfigurator DIR` (issue 47).
//!
//! NVIDIA's configurator ships one folder of Parquet tables per GPU in the
//! `aiconfigurator-core` wheel (`aiconfigurator_core/systems/data/<gpu>/`;
//! docs/cost.md, "AIConfigurator's tables", says what each column means,
//! from its collectors). Read here, from the newest SGLang version folder
//! holding each:
//!
//! - `moe/sglang/<v>/wideep_generation_moe_perf.parquet`: one rank's
//!   decode expert computation (`latency`, ms) at a **global** `num_tokens`
//!   over `moe_ep_size` ranks, each holding `num_experts / moe_ep_size`
//!   experts and computing `num_tokens / moe_ep_size · topk` rows under
//!   `uniform` routing — one [`Measurement::Compute`] per row.
//! - `comm/sglang/<v>/wideep_deepep_normal_perf.parquet` and
//!   `wideep_deepep_ll_perf.parquet`: DeepEP's normal and low-latency
//!   dispatch and combine (µs) at `num_token` tokens per rank on
//!   `node_num` nodes of 8 — one [`Measurement::Comm`] per row and phase,
//!   its bytes counted as the cost model counts them ([`uniform_rank_bytes`]).
//!
//! Only the rows of the model's shape (`--model`: hidden size, expert
//! intermediate size, top-k, experts) in the range the model's structure
//! covers are kept (see [`RANGE`]); the context (prefill) table is not read
//! (its kernel carries a fixed ~0.3–0.4 ms the cost model has no term for).
//!
//! Budgets, all checked before the work they bound: each file at most
//! [`MAX_BYTES`] on disk, at most [`MAX_ROWS`] rows and [`MAX_DECODED`]
//! bytes of decoded column chunks by its footer, and the columns read
//! present with their types before a row is read. Native only: the wasm
//! never links Parquet.

use std::path::{Path, PathBuf};

use moeplan::data::hardware::Hardware;
use moeplan::data::model::ModelPreset;
use moeplan::judge::cost::Kernel;
use moeplan::judge::{CommPhase, Measurement, uniform_rank_bytes};
use parquet::basic::Type as Physical;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};

use crate::error::CliError;

/// The largest table read: 16 MiB (the wheel's largest SGLang table is
/// 1.3 MB; the wide-EP ones 7–50 KB).
pub const MAX_BYTES: u64 = 16 << 20;

/// The most rows one table may declare: the wide-EP tables read hold
/// 95–2,484; rows are read whole, about 0.6 KB each.
pub const MAX_ROWS: i64 = 50_000;

/// The most bytes one table's column chunks may decode to, by its footer.
pub const MAX_DECODED: i64 = 64 << 20;

/// GPUs per node in the DeepEP tables (`node_num` counts nodes of 8: the
/// collector runs one process per GPU of an 8-GPU node).
const GPUS_PER_NODE: usize = 8;

/// The range kept, where the cost model's structure holds: decode MoE at
/// EP 8–256 and 64–16,384 tokens (below EP 8 the masked GEMM also spends
/// time on the experts that get no rows, which the model does not charge),
/// DeepEP normal at 512–16,384 tokens per rank and low-latency at
/// 32–1,024, at the 20 SMs the configurator itself reads.
pub struct Range {
    pub ep: (usize, usize),
    pub compute_tokens: (i64, i64),
    pub normal_tokens: (i64, i64),
    pub low_latency_tokens: (i64, i64),
    pub sms: i64,
}

/// See [`Range`].
pub const RANGE: Range = Range {
    ep: (8, 256),
    compute_tokens: (64, 16_384),
    normal_tokens: (512, 16_384),
    low_latency_tokens: (32, 1_024),
    sms: 20,
};

const GENERATION: &str = "wideep_generation_moe_perf.parquet";
const NORMAL: &str = "wideep_deepep_normal_perf.parquet";
const LOW_LATENCY: &str = "wideep_deepep_ll_perf.parquet";

/// What a table set gave: the measurements and a line saying where from.
pub struct Read {
    pub measurements: Vec<Measurement>,
    pub source: String,
}

/// Reads the tables under `dir` (one GPU's folder) for `model`'s shape,
/// pricing the expert compute at `hardware`'s tensor peak for the tables'
/// precision.
pub fn read_dir(dir: &Path, model: &ModelPreset, hardware: &Hardware) -> Result<Read, CliError> {
    if !dir.is_dir() {
        return Err(argument(format!(
            "--aiconfigurator {}: not a folder (give one GPU's folder of the aiconfigurator-core wheel, e.g. aiconfigurator_core/systems/data/h100_sxm)",
            dir.display()
        )));
    }
    let mut measurements = Vec::new();
    let mut read = Vec::new();
    let found = [
        (newest(dir, "moe", GENERATION), Kind::Generation),
        (newest(dir, "comm", NORMAL), Kind::Normal),
        (newest(dir, "comm", LOW_LATENCY), Kind::LowLatency),
    ];
    for (path, kind) in found {
        let Some(path) = path else { continue };
        let rows = table(&path, kind.columns())?;
        let before = measurements.len();
        for row in &rows.rows {
            kind.measure(row, model, hardware, &mut measurements)
                .map_err(CliError::in_file(&path))?;
        }
        read.push(format!(
            "{} ({} of {} rows)",
            path.strip_prefix(dir).unwrap_or(&path).display(),
            match kind {
                Kind::Generation => measurements.len() - before,
                // Two measurements per row kept: dispatch and combine.
                _ => (measurements.len() - before) / 2,
            },
            rows.rows.len()
        ));
    }
    if read.is_empty() {
        return Err(argument(format!(
            "--aiconfigurator {}: no tables found (looked for moe/sglang/<version>/{GENERATION} and comm/sglang/<version>/{{{NORMAL}, {LOW_LATENCY}}})",
            dir.display()
        )));
    }
    if measurements.is_empty() {
        return Err(argument(format!(
            "--aiconfigurator {}: no rows of {}'s shape (hidden {}, expert intermediate {}, top-{}, {} experts) in the range read (EP {}–{}, uniform routing; {})",
            dir.display(),
            model.name,
            model.hidden,
            model.moe_intermediate,
            model.top_k,
            model.experts,
            RANGE.ep.0,
            RANGE.ep.1,
            read.join(", ")
        )));
    }
    Ok(Read {
        measurements,
        source: format!("AIConfigurator tables, {}: {}", model.name, read.join(", ")),
    })
}

fn argument(message: String) -> CliError {
    moeplan::Error::Argument(message).into()
}

/// `dir/<group>/sglang/<newest version holding file>/file`.
fn newest(dir: &Path, group: &str, file: &str) -> Option<PathBuf> {
    let versions = std::fs::read_dir(dir.join(group).join("sglang")).ok()?;
    versions
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join(file).is_file())
        .max_by_key(|p| version_key(p.file_name().and_then(|n| n.to_str()).unwrap_or("")))
        .map(|p| p.join(file))
}

/// `0.5.12` after `0.5.6.post2`: each dot-separated part by its leading
/// number, then its rest.
fn version_key(v: &str) -> Vec<(u64, String)> {
    v.split('.')
        .map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            (
                digits.parse().unwrap_or(0),
                part[digits.len()..].to_string(),
            )
        })
        .collect()
}

/// A table's rows.
struct Table {
    rows: Vec<Row>,
}

/// A column read, by name and type.
type Column = (&'static str, Physical);

/// Reads `path` within the budgets, its `columns` present with their types.
fn table(path: &Path, columns: &[Column]) -> Result<Table, CliError> {
    let fail = |message: String| CliError::in_file(path)(moeplan::Error::Argument(message));
    crate::io::refuse_over(path, MAX_BYTES, |len| {
        format!("{len} bytes is more than the {MAX_BYTES}-byte limit for an AIConfigurator table")
    })?;
    let file = std::fs::File::open(path).map_err(|source| CliError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| fail(format!("not a readable Parquet file ({e})")))?;
    let meta = reader.metadata();
    let rows = meta.file_metadata().num_rows();
    if !(0..=MAX_ROWS).contains(&rows) {
        return Err(fail(format!(
            "{rows} rows declared: at most {MAX_ROWS} are read"
        )));
    }
    let decoded: i64 = meta
        .row_groups()
        .iter()
        .flat_map(|g| g.columns())
        .map(|c| c.uncompressed_size().max(0))
        .fold(0i64, i64::saturating_add);
    if decoded > MAX_DECODED {
        return Err(fail(format!(
            "its columns decode to {decoded} bytes: at most {MAX_DECODED} are read"
        )));
    }
    let schema = meta.file_metadata().schema_descr();
    let names: Vec<String> = schema
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    for &(name, ty) in columns {
        match schema.columns().iter().find(|c| c.name() == name) {
            None => {
                return Err(fail(format!(
                    "no column {name:?} (this is not the table it is named after; columns: {})",
                    names.join(", ")
                )));
            }
            Some(c) if c.physical_type() != ty => {
                return Err(fail(format!(
                    "column {name:?} is {} where {ty} was expected",
                    c.physical_type()
                )));
            }
            Some(_) => {}
        }
    }
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| fail(format!("cannot read its rows ({e})")))?
        .collect::<Result<Vec<Row>, _>>()
        .map_err(|e| fail(format!("cannot read its rows ({e})")))?;
    Ok(Table { rows })
}

/// Which table.
#[derive(Clone, Copy)]
enum Kind {
    Generation,
    Normal,
    LowLatency,
}

impl Kind {
    fn columns(self) -> &'static [Column] {
        match self {
            Kind::Generation => &[
                ("moe_dtype", Physical::BYTE_ARRAY),
                ("distribution", Physical::BYTE_ARRAY),
                ("num_tokens", Physical::INT64),
                ("hidden_size", Physical::INT64),
                ("inter_size", Physical::INT64),
                ("topk", Physical::INT64),
                ("num_experts", Physical::INT64),
                ("moe_tp_size", Physical::INT64),
                ("moe_ep_size", Physical::INT64),
                ("latency", Physical::DOUBLE),
            ],
            Kind::Normal => &[
                ("node_num", Physical::INT64),
                ("hidden_size", Physical::INT64),
                ("num_token", Physical::INT64),
                ("num_topk", Physical::INT64),
                ("num_experts", Physical::INT64),
                ("dispatch_sms", Physical::INT64),
                ("dispatch_transmit_us", Physical::DOUBLE),
                ("dispatch_notify_us", Physical::DOUBLE),
                ("combine_sms", Physical::INT64),
                ("combine_transmit_us", Physical::DOUBLE),
                ("combine_notify_us", Physical::DOUBLE),
            ],
            Kind::LowLatency => &[
                ("node_num", Physical::INT64),
                ("hidden_size", Physical::INT64),
                ("num_token", Physical::INT64),
                ("num_topk", Physical::INT64),
                ("num_experts", Physical::INT64),
                ("dispatch_avg_t_us", Physical::DOUBLE),
                ("combine_avg_t_us", Physical::DOUBLE),
            ],
        }
    }

    /// The measurements of one row, if it is of `model`'s shape and in
    /// [`RANGE`].
    fn measure(
        self,
        row: &Row,
        model: &ModelPreset,
        hardware: &Hardware,
        out: &mut Vec<Measurement>,
    ) -> moeplan::Result<()> {
        // By name on the row itself: a nested schema's leaves would not
        // line up with the row's fields by position.
        let field = |name: &str| -> moeplan::Result<&Field> {
            row.get_column_iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, f)| f)
                .ok_or_else(|| {
                    moeplan::Error::Argument(format!("a row has no top-level column {name:?}"))
                })
        };
        let wrong = |name: &str, f: &Field, want: &str| {
            moeplan::Error::Argument(format!("column {name:?} holds {f}, not {want}"))
        };
        let long = |name: &str| -> moeplan::Result<i64> {
            match field(name)? {
                Field::Long(x) => Ok(*x),
                f => Err(wrong(name, f, "a 64-bit integer")),
            }
        };
        let double = |name: &str| -> moeplan::Result<f64> {
            match field(name)? {
                Field::Double(x) => Ok(*x),
                f => Err(wrong(name, f, "a number")),
            }
        };
        let text = |name: &str| -> moeplan::Result<String> {
            match field(name)? {
                Field::Str(x) => Ok(x.clone()),
                f => Err(wrong(name, f, "text")),
            }
        };
        let is = |x: i64, want: usize| usize::try_from(x).is_ok_and(|x| x == want);
        let within = |x: i64, (lo, hi): (i64, i64)| (lo..=hi).contains(&x);
        match self {
            Kind::Generation => {
                let ep = long("moe_ep_size")?;
                let tokens = long("num_tokens")?;
                let shape = is(long("hidden_size")?, model.hidden)
                    && is(long("inter_size")?, model.moe_intermediate)
                    && is(long("topk")?, model.top_k)
                    && is(long("num_experts")?, model.experts)
                    && long("moe_tp_size")? == 1;
                let ep_ok = usize::try_from(ep).is_ok_and(|e| {
                    (RANGE.ep.0..=RANGE.ep.1).contains(&e) && model.experts.is_multiple_of(e)
                });
                if !(shape
                    && ep_ok
                    && within(tokens, RANGE.compute_tokens)
                    && text("distribution")? == "uniform")
                {
                    return Ok(());
                }
                let dtype = text("moe_dtype")?;
                // FP8 with one 4-byte scale per 128 × 128 block (DeepGEMM's
                // block scaling); BF16 otherwise.
                let (bytes_per_weight, peak) = if dtype.starts_with("fp8") {
                    let peak = if hardware.gpu.fp8_tflops > 0.0 {
                        hardware.gpu.fp8_tflops
                    } else {
                        hardware.gpu.bf16_tflops
                    };
                    (1.0 + 4.0 / (128.0 * 128.0), peak)
                } else {
                    (2.0, hardware.gpu.bf16_tflops)
                };
                let weights = 3.0 * model.hidden as f64 * model.moe_intermediate as f64;
                let ep = ep as f64;
                let rows = tokens as f64 / ep * model.top_k as f64;
                let experts = model.experts as f64 / ep;
                out.push(Measurement::Compute {
                    expert_bytes: weights * bytes_per_weight,
                    flops_per_row: 2.0 * weights,
                    peak_tflops: peak,
                    // Fewer rows than experts: one row on each of the first.
                    copies: experts.min(rows),
                    rows,
                    us: double("latency")? * 1e3,
                });
            }
            Kind::Normal | Kind::LowLatency => {
                let (kernel, range) = match self {
                    Kind::Normal => (Kernel::Normal, RANGE.normal_tokens),
                    _ => (Kernel::LowLatency, RANGE.low_latency_tokens),
                };
                let tokens = long("num_token")?;
                let nodes = long("node_num")?;
                let shape = is(long("hidden_size")?, model.hidden)
                    && is(long("num_topk")?, model.top_k)
                    && is(long("num_experts")?, model.experts);
                let sms = match self {
                    Kind::Normal => {
                        long("dispatch_sms")? == RANGE.sms && long("combine_sms")? == RANGE.sms
                    }
                    _ => true,
                };
                let Ok(nodes) = usize::try_from(nodes) else {
                    return Ok(());
                };
                if !(shape && sms && within(tokens, range) && (1..=64).contains(&nodes)) {
                    return Ok(());
                }
                let times = match self {
                    Kind::Normal => [
                        double("dispatch_transmit_us")? + double("dispatch_notify_us")?,
                        double("combine_transmit_us")? + double("combine_notify_us")?,
                    ],
                    _ => [double("dispatch_avg_t_us")?, double("combine_avg_t_us")?],
                };
                // Dispatch sends FP8 with a 4-byte scale per 128 values;
                // combine sends BF16 back (what the cost model charges).
                let hidden = model.hidden as f64;
                let messages = [hidden + hidden / 128.0 * 4.0, 2.0 * hidden];
                let phases = [CommPhase::Dispatch, CommPhase::Combine];
                for ((phase, us), msg) in phases.into_iter().zip(times).zip(messages) {
                    let (intra_bytes, inter_bytes) = uniform_rank_bytes(
                        kernel,
                        tokens as f64,
                        model.top_k,
                        nodes * GPUS_PER_NODE,
                        GPUS_PER_NODE,
                        msg,
                    );
                    out.push(Measurement::Comm {
                        kernel,
                        phase,
                        intra_bytes,
                        inter_bytes,
                        us,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_by_number() {
        let mut v = vec!["0.5.6.post2", "0.5.12", "0.5.10", "0.5.9"];
        v.sort_by_key(|s| version_key(s));
        assert_eq!(v, vec!["0.5.6.post2", "0.5.9", "0.5.10", "0.5.12"]);
    }
}
