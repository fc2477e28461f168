//! Measured kernel times for `moeplan calibrate`: a JSON array of
//! [`Measurement`]s (`{"kind": "compute", …}` or `{"kind": "comm", …}`,
//! the fields [`crate::judge::calibrate`] documents), unknown fields
//! refused. A reader refuses a file over [`MAX_BYTES`] or of more than
//! `MAX_ROWS` measurements before parsing it.
//!
//! ```json
//! [{"kind": "compute", "expert_bytes": 44040192, "flops_per_row": 88080384,
//!   "peak_tflops": 1979, "copies": 32, "rows": 1024, "us": 531},
//!  {"kind": "comm", "kernel": "normal", "phase": "dispatch",
//!   "intra_bytes": 1.2e6, "inter_bytes": 0, "us": 48.6}]
//! ```

use crate::data::limits::{Meter, ReadLimits, charge_json};
use crate::error::{Error, Result};
use crate::judge::calibrate::Measurement;

/// The largest measurements file read: 16 MiB (AIConfigurator's whole
/// table set for one GPU is a few thousand rows, under 1 MiB).
pub const MAX_BYTES: u64 = 16 << 20;

/// The most measurements one file may hold.
pub(crate) const MAX_ROWS: usize = 200_000;

const WHAT: &str = "measurements JSON";

/// Refuses `bytes` over [`MAX_BYTES`] before any parsing; the meter that
/// then charges what parsing them builds.
fn metered(bytes: &[u8], what: &str) -> Result<Meter> {
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Error::Argument(format!(
            "{what}: {} bytes is more than the {MAX_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let mut meter = Meter::new(ReadLimits::mib(64));
    meter.bytes(bytes.len() as u64, what)?;
    Ok(meter)
}

/// Reads measurements from JSON bytes.
///
/// ```
/// use moeplan::formats::read_measurements;
/// let text = br#"[{"kind": "comm", "kernel": "low-latency", "phase": "combine",
///   "intra_bytes": 1e6, "inter_bytes": 0, "us": 20}]"#;
/// assert_eq!(read_measurements(text)?.len(), 1);
/// assert!(read_measurements(b"[{\"kind\": \"comm\"}]").is_err()); // fields missing
/// assert!(read_measurements(b"[]").is_err()); // nothing to fit
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_measurements(bytes: &[u8]) -> Result<Vec<Measurement>> {
    let mut meter = metered(bytes, WHAT)?;
    charge_json(&mut meter, bytes, WHAT)?;
    // Each measurement is an object of at most 8 values: a cheap bound
    // on the rows before they are built.
    let objects = bytes.iter().filter(|&&b| b == b'{').count();
    if objects > MAX_ROWS {
        return Err(Error::Argument(format!(
            "{WHAT}: {objects} objects is more than the {MAX_ROWS} measurements one file may hold"
        )));
    }
    let rows: Vec<Measurement> = serde_json::from_slice(bytes).map_err(|e| {
        Error::Argument(format!(
            "{WHAT}: {e} (an array of {{\"kind\": \"compute\" | \"comm\", …}}; see docs/cost.md)"
        ))
    })?;
    if rows.is_empty() {
        return Err(Error::Argument(format!("{WHAT}: no measurements")));
    }
    Ok(rows)
}

/// One line of `moeplan-cuda bench --json`, the fields read.
#[derive(serde::Deserialize)]
struct BenchLine {
    rows_per_rank: Vec<f64>,
    slots_per_rank: Vec<f64>,
    rank_ms: Vec<f64>,
    hidden: f64,
    inter: f64,
    bytes_per_weight: f64,
}

/// Expert-compute measurements from `moeplan-cuda bench --json` output:
/// every rank of every line, its rows over its slots, its measured time;
/// `peak_tflops` the GPU's tensor peak at the bench's precision. Lines of
/// `--predict-only` (no `rank_ms`) are refused: they measured nothing.
///
/// ```
/// use moeplan::formats::read_cuda_bench;
/// let line = concat!(
///     r#"{"rows_per_rank": [512, 0], "slots_per_rank": [4, 4], "rank_ms": [0.2, 0.0], "#,
///     r#""hidden": 7168, "inter": 2048, "bytes_per_weight": 2, "plan": "craft"}"#,
/// );
/// // one result per line; the idle rank measured nothing
/// assert_eq!(read_cuda_bench(line.as_bytes(), 989.5)?.len(), 1);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_cuda_bench(bytes: &[u8], peak_tflops: f64) -> Result<Vec<Measurement>> {
    const BENCH: &str = "moeplan-cuda bench JSON";
    let mut meter = metered(bytes, BENCH)?;
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::Argument(format!("{BENCH}: not UTF-8 ({e})")))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        charge_json(&mut meter, line.as_bytes(), BENCH)?;
        let b: BenchLine = serde_json::from_str(line).map_err(|e| {
            Error::Argument(format!(
                "{BENCH} line {}: {e} (one `moeplan-cuda bench --json` result per line)",
                i + 1
            ))
        })?;
        let ranks = b.rank_ms.len();
        if b.rows_per_rank.len() != ranks || b.slots_per_rank.len() != ranks {
            return Err(Error::Argument(format!(
                "{BENCH} line {}: {} rank times for {} rows and {} slots",
                i + 1,
                ranks,
                b.rows_per_rank.len(),
                b.slots_per_rank.len()
            )));
        }
        let expert = 3.0 * b.hidden * b.inter;
        for r in 0..ranks {
            let (rows, slots, ms) = (b.rows_per_rank[r], b.slots_per_rank[r], b.rank_ms[r]);
            if rows <= 0.0 || ms <= 0.0 {
                continue;
            }
            if out.len() >= MAX_ROWS {
                return Err(Error::Argument(format!(
                    "{BENCH}: more than the {MAX_ROWS} measurements one file may hold"
                )));
            }
            out.push(Measurement::Compute {
                expert_bytes: expert * b.bytes_per_weight,
                flops_per_row: 2.0 * expert,
                peak_tflops,
                copies: slots.max(1.0).min(rows),
                rows,
                us: ms * 1e3,
            });
        }
    }
    if out.is_empty() {
        return Err(Error::Argument(format!(
            "{BENCH}: no rank with rows and a measured time"
        )));
    }
    Ok(out)
}
