//! The project's own trace JSON, written by `moeplan gen`.
//!
//! ```json
//! {"format": "moeplan.trace", "version": 1, "model": "deepseek-v3",
//!  "top_k": 8, "model_layers": 61, "layer_ids": [3, 4, ...],
//!  "counts": [[[...E counts...], ...L layers...], ...B batches...]}
//! ```

use std::fmt::Write;

use ndarray::Array3;
use serde::Deserialize;

use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

const FORMAT: &str = "moeplan trace JSON";
/// Value of the `format` field.
pub(crate) const TRACE_FORMAT: &str = "moeplan.trace";

#[derive(Deserialize)]
struct TraceIn {
    format: Option<String>,
    version: Option<u32>,
    model: Option<String>,
    top_k: Option<usize>,
    model_layers: Option<usize>,
    layer_ids: Option<Vec<u32>>,
    counts: Vec<Vec<Vec<f64>>>,
}

/// Writes a trace; integral counts are written without a fraction.
///
/// ```
/// use moeplan::{LoadTrace, formats};
/// use ndarray::Array3;
/// let t = LoadTrace::new(Array3::from_elem((2, 1, 3), 4.0), vec![7])?.with_top_k(2);
/// let back = formats::read_trace_json(formats::write_trace_json(&t).as_bytes())?;
/// assert_eq!(back, t);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn write(trace: &LoadTrace) -> String {
    let c = trace.counts();
    let mut s = String::with_capacity(c.len() * 6 + 256);
    let _ = write!(s, "{{\"format\":\"{TRACE_FORMAT}\",\"version\":1");
    if let Some(m) = trace.model() {
        let _ = write!(s, ",\"model\":{}", serde_json::Value::from(m));
    }
    if let Some(k) = trace.top_k() {
        let _ = write!(s, ",\"top_k\":{k}");
    }
    // Only a known count: an assumed one would read back as known.
    if let Some(n) = trace.known_model_layers() {
        let _ = write!(s, ",\"model_layers\":{n}");
    }
    let _ = write!(s, ",\"layer_ids\":{:?},\"counts\":[", trace.layer_ids());
    for (b, batch) in c.outer_iter().enumerate() {
        s.push_str(if b == 0 { "[" } else { ",[" });
        for (l, row) in batch.outer_iter().enumerate() {
            s.push_str(if l == 0 { "[" } else { ",[" });
            for (e, &v) in row.iter().enumerate() {
                if e > 0 {
                    s.push(',');
                }
                if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    let _ = write!(s, "{}", v as i64);
                } else {
                    let _ = write!(s, "{v}");
                }
            }
            s.push(']');
        }
        s.push(']');
    }
    s.push_str("]}");
    s
}

/// Reads a trace JSON.
pub fn read(bytes: &[u8]) -> Result<LoadTrace> {
    let raw: TraceIn =
        serde_json::from_slice(bytes).map_err(|e| Error::parse(FORMAT, e.to_string()))?;
    if let Some(f) = raw.format.as_deref().filter(|f| *f != TRACE_FORMAT) {
        return Err(Error::parse(
            FORMAT,
            format!("format is {f:?}, expected {TRACE_FORMAT:?}"),
        ));
    }
    if let Some(v) = raw.version.filter(|&v| v > 1) {
        return Err(Error::parse(
            FORMAT,
            format!("version {v} is newer than this moeplan understands (1)"),
        ));
    }
    let b = raw.counts.len();
    let l = raw.counts.first().map_or(0, Vec::len);
    let e = raw
        .counts
        .first()
        .and_then(|x| x.first())
        .map_or(0, Vec::len);
    for (bi, batch) in raw.counts.iter().enumerate() {
        if batch.len() != l {
            return Err(Error::parse(
                FORMAT,
                format!("counts[{bi}] has {} layers, counts[0] has {l}", batch.len()),
            ));
        }
        if let Some(li) = batch.iter().position(|r| r.len() != e) {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "counts[{bi}][{li}] has {} experts, counts[0][0] has {e}",
                    batch[li].len()
                ),
            ));
        }
    }
    let ids = raw.layer_ids.unwrap_or_else(|| (0..l as u32).collect());
    let counts = Array3::from_shape_vec(
        (b, l, e),
        raw.counts.into_iter().flatten().flatten().collect(),
    )
    .map_err(|x| Error::parse(FORMAT, x.to_string()))?;
    let mut t = LoadTrace::new(counts, ids)?;
    if let Some(k) = raw.top_k {
        t = t.with_top_k(k);
    }
    if let Some(m) = raw.model {
        t = t.with_model(m);
    }
    if let Some(n) = raw.model_layers {
        t = t.with_model_layers(n);
    }
    Ok(t)
}
