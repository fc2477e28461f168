//! Measured kernel times for `moeplan calibrate`: a JSON array of
//! [`Measurement`]s (`{"kind": "compute", …}` or `{"kind": "comm", …}`,
//! the fields [`crate::judge::calibrate`] documents), unknown fields
//! refused. A reader refuses a file over [`MAX_BYTES`] or of more than
//! [`MAX_ROWS`] measurements before parsing it.
//!
//! ```json
//! [{"kind": "compute", "expert_bytes": 44040192, "flops_per_row": 88080384,
//!   "peak_tflops": 1979, "copies": 32, "rows": 1024, "us": 531},
//!  {"kind": "comm", "kernel": "normal", "phase": "dispatch",
//!   "intra_bytes": 1.2e6, "inter_bytes": 0, "us": 48.6}]
//! ```

use crate::error::{Error, Result};
use crate::formats::limits::{Budget, Meter, charge_json};
use crate::judge::calibrate::Measurement;

/// The largest measurements file read: 16 MiB (AIConfigurator's whole
/// table set for one GPU is a few thousand rows, under 1 MiB).
pub const MAX_BYTES: u64 = 16 << 20;

/// The most measurements one file may hold.
pub const MAX_ROWS: usize = 200_000;

const WHAT: &str = "measurements JSON";

/// Reads measurements from JSON bytes.
///
/// ```
/// use moeplan::formats::measurements::read_measurements;
/// let text = br#"[{"kind": "comm", "kernel": "low-latency", "phase": "combine",
///   "intra_bytes": 1e6, "inter_bytes": 0, "us": 20}]"#;
/// assert_eq!(read_measurements(text)?.len(), 1);
/// assert!(read_measurements(b"[{\"kind\": \"comm\"}]").is_err()); // fields missing
/// assert!(read_measurements(b"[]").is_err()); // nothing to fit
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_measurements(bytes: &[u8]) -> Result<Vec<Measurement>> {
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Error::Argument(format!(
            "{WHAT}: {} bytes is more than the {MAX_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let mut meter = Meter::new(Budget::mib(64));
    meter.bytes(bytes.len() as u64, WHAT)?;
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
