//! Reading trace files, in a worker of its own (`bin/reader.rs`) that the
//! planning worker starts when a file arrives and stops once it has read
//! it. The format readers (torch, zip, npz, CSV, JSON, YAML, TensorRT-LLM)
//! and their decompressors are 179 KB of gzip the planning worker no longer
//! carries, so the page loads them only when a person reads a file
//! (docs/speed.md, "What the page weighs").
//!
//! Messages, as between the page and the planning worker (see
//! [`crate::protocol`]): the reader says [`READER_READY`] once its wasm
//! listens; the planning worker then posts `[json ReadAsk, bytes]`
//! (the files' bytes transferred, not copied); the reader answers `[json
//! ReadAnswer, Float64Array | null]`: each trace's header in the JSON and
//! every trace's counts, one after another, in one transferred array
//! ([`pack`] / [`unpack`]). The planning worker builds the traces again
//! with [`LoadTrace::new`], which checks every count once more.

use moeplan::formats::{self, ReadOptions};
use moeplan::{LoadTrace, ReadLimits, data::model};
use ndarray::Array3;
use serde::{Deserialize, Serialize};

use crate::protocol::{Request, Source};

/// The page's reading limit in MiB: a file larger than this on disk is
/// refused before it is read, and reading may build no more than this
/// (the file itself, what it decompresses to and the parsed values).
pub const MAX_TRACE_MIB: u64 = 512;

/// Largest trace file the page accepts, in bytes.
pub const MAX_FILE_BYTES: u64 = MAX_TRACE_MIB << 20;

/// Tells a page user what the limit is and where to go past it.
pub const BUDGET_HINT: &str = "the page reads files that expand to at most 512 MiB; \
use the moeplan CLI with --max-trace-mib for larger ones";

/// How the phase the worker reports while it reads begins (`reading
/// big.pt`, `reading the files`): the page's read deadline runs until a
/// later phase or an answer arrives.
pub const READING_PHASE: &str = "reading";

/// The budget the worker reads every file with.
///
/// ```
/// let b = moeplan_app::reader::read_budget();
/// assert_eq!(b.max_bytes, moeplan_app::reader::MAX_FILE_BYTES);
/// assert!(b.raise_hint.contains("--max-trace-mib"));
/// ```
pub fn read_budget() -> ReadLimits {
    ReadLimits::mib(MAX_TRACE_MIB).with_hint(BUDGET_HINT)
}

/// The message for a file of `size` bytes on disk when it is over the
/// page's limit, or `None` when the page may read it.
///
/// ```
/// use moeplan_app::reader::{MAX_FILE_BYTES, too_large};
/// assert!(too_large("a.json", MAX_FILE_BYTES as f64).is_none());
/// let m = too_large("a.json", (600u64 << 20) as f64).unwrap();
/// assert!(m.starts_with("a.json: 600 MiB on disk") && m.contains("512 MiB"), "{m}");
/// ```
pub fn too_large(name: &str, size: f64) -> Option<String> {
    (size > MAX_FILE_BYTES as f64).then(|| {
        format!(
            "{name}: {:.0} MiB on disk is more than the {MAX_TRACE_MIB} MiB the page reads \
(use the moeplan CLI with --max-trace-mib for larger files)",
            (size / (1u64 << 20) as f64).ceil()
        )
    })
}

/// Most traces the page judges plans across: the matrix costs `3 · T + 2`
/// plannings and `(3 · T + 3) · T` evaluations.
pub const MAX_CROSS_TRACES: usize = 8;

/// The reader's first message: it is listening (its wasm has started, so
/// the files posted now are not lost).
pub const READER_READY: &str = "ready";

/// What to read: the files' names and sizes, their bytes one after another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadAsk {
    /// The files' names, in order.
    pub names: Vec<String>,
    /// Bytes of each file.
    pub sizes: Vec<usize>,
    /// Several traces to judge plans across: each is read within its share
    /// of the page's budget, and there must be 2 to [`MAX_CROSS_TRACES`].
    pub cross: bool,
}

impl ReadAsk {
    /// The files `req` carries, `len` bytes in all: its cross-workload
    /// files, or its file source; `None` when it carries none.
    ///
    /// ```
    /// use moeplan_app::protocol::{Request, Source};
    /// use moeplan_app::reader::ReadAsk;
    /// let mut req: Request = serde_json::from_str(r#"{"id":1,"source":null,"cluster":null,
    ///     "replicas_per_gpu":null,"layer":0,"export":null}"#)?;
    /// assert_eq!(ReadAsk::of(&req, 0), None);
    /// req.source = Some(Source::File { name: "a.pt".into() });
    /// assert_eq!(ReadAsk::of(&req, 9).unwrap().sizes, vec![9]);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn of(req: &Request, len: usize) -> Option<ReadAsk> {
        if let Some(ask) = req.cross.as_ref().filter(|a| !a.names.is_empty()) {
            return Some(ReadAsk {
                names: ask.names.clone(),
                sizes: ask.sizes.clone(),
                cross: true,
            });
        }
        match &req.source {
            Some(Source::File { name }) if req.cross.is_none() => Some(ReadAsk {
                names: vec![name.clone()],
                sizes: vec![len],
                cross: false,
            }),
            _ => None,
        }
    }

    /// What the reader is doing, for the progress line (it begins with
    /// [`READING_PHASE`], which the page's read deadline watches for).
    pub fn phase(&self) -> String {
        match self.names.as_slice() {
            [one] if !self.cross => format!("{READING_PHASE} {one}"),
            _ => format!("{READING_PHASE} the files"),
        }
    }
}

/// Reads every file `ask` names from `bytes`, each within the page's
/// reading budget (a cross-workload request's files within a share of it
/// each); a trace of one model preset's shape is placed in that model
/// ([`placed_in_model`]). The names returned are the ones the page shows.
pub fn read(ask: &ReadAsk, bytes: &[u8]) -> Result<Vec<(String, LoadTrace)>, String> {
    let n = ask.names.len();
    if ask.cross && n < 2 {
        return Err("plans across workloads need at least two traces: choose several files".into());
    }
    if ask.cross && n > MAX_CROSS_TRACES {
        return Err(format!(
            "{n} traces: the page judges plans across at most {MAX_CROSS_TRACES} (use `moeplan cross` for more)"
        ));
    }
    if n == 0 || ask.sizes.len() != n || ask.sizes.iter().sum::<usize>() != bytes.len() {
        return Err("the files' bytes did not arrive whole".into());
    }
    let whole = if ask.cross {
        "these files together"
    } else {
        &ask.names[0]
    };
    if let Some(message) = too_large(whole, bytes.len() as f64) {
        return Err(message);
    }
    let options = ReadOptions {
        budget: if ask.cross {
            ReadLimits::mib(MAX_TRACE_MIB / n as u64).with_hint(BUDGET_HINT)
        } else {
            read_budget()
        },
        ..ReadOptions::default()
    };
    let mut rest = bytes;
    let mut traces = Vec::with_capacity(n);
    for (name, &size) in ask.names.iter().zip(&ask.sizes) {
        let (file, after) = rest
            .split_at_checked(size)
            .ok_or("the files' bytes did not arrive whole")?;
        rest = after;
        let t = formats::read_trace(file, &options).map_err(|e| format!("{name}: {e}"))?;
        let (t, shown) = placed_in_model(t, name);
        traces.push((shown, t));
    }
    Ok(traces)
}

/// A file that holds only its MoE layers (a `.npy` of DeepSeek-V3's 58 ×
/// 256, say) does not say where they sit in the model, and SGLang indexes
/// its placement rows by model layer. When exactly one model preset has the
/// trace's shape, the page places the trace there (DeepSeek-V3: MoE layers
/// 3..60) and says so in the source line, so the SGLang export is right;
/// otherwise the trace stays as read and that export explains itself.
pub fn placed_in_model(t: LoadTrace, name: &str) -> (LoadTrace, String) {
    if t.known_model_layers().is_some() {
        return (t, name.to_string());
    }
    let mut shaped = model::PRESETS
        .iter()
        .filter(|p| p.experts == t.num_experts() && p.moe_layers() == t.num_layers());
    let (Some(p), None) = (shaped.next(), shaped.next()) else {
        return (t, name.to_string());
    };
    match t.clone().in_model(p.total_layers, Some(p.first_moe_layer)) {
        Ok(placed) => (
            placed.with_model(p.name),
            format!(
                "{name} (placed as {}: {} dense layers first)",
                p.name, p.first_moe_layer
            ),
        ),
        Err(_) => (t, name.to_string()),
    }
}

/// A trace as it travels from the reader: everything but its counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadTrace {
    /// The name the page shows.
    pub name: String,
    /// Batches, MoE layers and experts: the counts' shape.
    pub shape: [usize; 3],
    /// The model's id of each MoE layer.
    pub layer_ids: Vec<u32>,
    /// [`LoadTrace::known_model_layers`].
    pub model_layers: Option<usize>,
    /// [`LoadTrace::top_k`].
    pub top_k: Option<usize>,
    /// [`LoadTrace::model`].
    pub model: Option<String>,
}

/// The reader's answer: the traces' headers, or why the files were refused.
pub type ReadAnswer = Result<Vec<ReadTrace>, String>;

/// Splits named traces into headers and every count, trace after trace.
pub fn pack(traces: &[(String, LoadTrace)]) -> (Vec<ReadTrace>, Vec<f64>) {
    let total = traces.iter().map(|(_, t)| t.counts().len()).sum();
    let mut counts = Vec::with_capacity(total);
    let headers = traces
        .iter()
        .map(|(name, t)| {
            counts.extend(t.counts().iter());
            let (b, l, e) = t.counts().dim();
            ReadTrace {
                name: name.clone(),
                shape: [b, l, e],
                layer_ids: t.layer_ids().to_vec(),
                model_layers: t.known_model_layers(),
                top_k: t.top_k(),
                model: t.model().map(str::to_string),
            }
        })
        .collect();
    (headers, counts)
}

/// The traces [`pack`] split, built again (and checked again).
///
/// ```
/// use moeplan::LoadTrace;
/// use moeplan_app::reader::{pack, unpack};
/// let t = LoadTrace::new(ndarray::Array3::from_elem((2, 1, 4), 3.0), vec![5])?.with_top_k(2);
/// let named = vec![("a.json".to_string(), t)];
/// let (headers, counts) = pack(&named);
/// assert_eq!(unpack(&headers, &counts).unwrap(), named);
/// assert!(unpack(&headers, &counts[1..]).is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn unpack(headers: &[ReadTrace], counts: &[f64]) -> Result<Vec<(String, LoadTrace)>, String> {
    let mut rest = counts;
    let mut traces = Vec::with_capacity(headers.len());
    for h in headers {
        let [b, l, e] = h.shape;
        let len = b
            .checked_mul(l)
            .and_then(|x| x.checked_mul(e))
            .ok_or("a trace's shape is too large")?;
        let (mine, after) = rest
            .split_at_checked(len)
            .ok_or("the traces' counts did not arrive whole")?;
        rest = after;
        let array = Array3::from_shape_vec((b, l, e), mine.to_vec()).map_err(|e| e.to_string())?;
        let mut t =
            LoadTrace::new(array, h.layer_ids.clone()).map_err(|e| format!("{}: {e}", h.name))?;
        if let Some(m) = h.model_layers {
            t = t.with_model_layers(m);
        }
        if let Some(k) = h.top_k {
            t = t.with_top_k(k);
        }
        if let Some(m) = &h.model {
            t = t.with_model(m.clone());
        }
        traces.push((h.name.clone(), t));
    }
    if !rest.is_empty() {
        return Err(format!("{} counts left over after the traces", rest.len()));
    }
    Ok(traces)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every trace fixture the reader accepts crosses to the planning
    /// worker unchanged, names and model placement included.
    #[test]
    fn every_readable_fixture_survives_the_trip() {
        let root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../crates/moeplan/tests/fixtures"
        );
        let mut dirs = vec![std::path::PathBuf::from(root)];
        let (mut crossed, mut refused) = (0, 0);
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    if !path.ends_with("broken") {
                        dirs.push(path);
                    }
                    continue;
                }
                let bytes = std::fs::read(&path).unwrap();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                let ask = ReadAsk {
                    names: vec![name],
                    sizes: vec![bytes.len()],
                    cross: false,
                };
                let Ok(traces) = read(&ask, &bytes) else {
                    refused += 1;
                    continue;
                };
                let (headers, counts) = pack(&traces);
                assert_eq!(unpack(&headers, &counts).unwrap(), traces, "{path:?}");
                crossed += 1;
            }
        }
        assert!(
            crossed >= 8,
            "only {crossed} fixtures read ({refused} refused)"
        );
    }

    #[test]
    fn asks_that_do_not_add_up_are_refused() {
        let ask = |n: usize, sizes: Vec<usize>, cross| ReadAsk {
            names: (0..n).map(|i| format!("f{i}")).collect(),
            sizes,
            cross,
        };
        let bytes = b"[[1, 2], [3, 4]]";
        assert!(read(&ask(1, vec![bytes.len()], false), bytes).is_ok());
        assert!(
            read(&ask(1, vec![3], false), bytes)
                .unwrap_err()
                .contains("whole")
        );
        assert!(
            read(&ask(1, vec![bytes.len()], true), bytes)
                .unwrap_err()
                .contains("at least two")
        );
        let many = MAX_CROSS_TRACES + 1;
        assert!(
            read(&ask(many, vec![0; many], true), &[])
                .unwrap_err()
                .contains("at most")
        );
        let two = [&bytes[..], &bytes[..]].concat();
        let both = read(&ask(2, vec![bytes.len(); 2], true), &two).unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(both[0].1, both[1].1);
    }
}
