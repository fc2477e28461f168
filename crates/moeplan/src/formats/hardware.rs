//! A custom hardware preset from JSON: the shape of
//! [`crate::data::hardware::Hardware`] (schema:
//! `schemas/moeplan.hardware.schema.json`), every field required but
//! `shared_by_node`, unknown fields refused, and the figures checked
//! ([`Hardware::check`]). The file is small: a reader refuses anything
//! over [`MAX_BYTES`] before parsing it.
//!
//! ```json
//! {"name": "h100-roce", "about": "H100 SXM with 200 Gb/s RoCE",
//!  "gpu": {"bf16_tflops": 989.5, "fp8_tflops": 1979, "hbm_gb_per_s": 3350, "memory_gib": 80},
//!  "intra_node": {"gb_per_s": 450, "latency_us": 3},
//!  "inter_node": {"gb_per_s": 25, "latency_us": 8},
//!  "efficiency": {"gemm": 0.75, "hbm": 0.88, "intra_node": 0.8, "inter_node": 0.9, "roofline_p": 1.22}}
//! ```

use crate::data::hardware::Hardware;
use crate::data::limits::{Meter, ReadLimits, charge_json};
use crate::error::{Error, Result};

/// The largest hardware file read: 64 KiB (a preset is under 1 KiB).
pub const MAX_BYTES: u64 = 64 << 10;

const WHAT: &str = "hardware JSON";

/// Reads one hardware preset from JSON bytes.
///
/// ```
/// use moeplan::formats::read_hardware;
/// let h100 = moeplan::data::hardware::preset("h100-ib-ndr")?;
/// let text = serde_json::to_vec(h100).unwrap();
/// assert_eq!(&read_hardware(&text)?, h100);
/// assert!(read_hardware(b"{\"name\": \"x\"}").is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_hardware(bytes: &[u8]) -> Result<Hardware> {
    let mut meter = Meter::new(ReadLimits::mib(1));
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Error::Argument(format!(
            "{WHAT}: {} bytes is more than the {MAX_BYTES}-byte limit for a hardware file",
            bytes.len()
        )));
    }
    meter.bytes(bytes.len() as u64, WHAT)?;
    charge_json(&mut meter, bytes, WHAT)?;
    let hardware: Hardware = serde_json::from_slice(bytes).map_err(|e| {
        Error::Argument(format!(
            "{WHAT}: {e} (schema: schemas/moeplan.hardware.schema.json)"
        ))
    })?;
    hardware.check()?;
    Ok(hardware)
}
