//! NumPy `.npy` and `.npz` load arrays: `B × L × E` (batches) or `L × E` (one
//! whole-run total, as `np.save(path, logical_count)` writes it), any
//! integer or float dtype. Layers whose counts are all zero are dense layers:
//! dropped, the others keep their row index as layer id (as SGLang's JSON).
//! In an `.npz`, the array named `logical_count` or `counts` is read, or the
//! only array there is.

use std::io::Cursor;

use ndarray::{Array3, ArrayD, Axis, IxDyn};
use ndarray_npy::{NpzReader, ReadNpyExt, ReadableElement};

use crate::error::{Error, Result};
use crate::trace::LoadTrace;

const NPY: &str = "NumPy .npy";
const NPZ: &str = "NumPy .npz";

/// The magic string every `.npy` starts with.
pub const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Reads a `.npy` holding expert loads.
///
/// ```
/// // a 2 × 3 float64 array, C order, written by np.save
/// let mut npy = b"\x93NUMPY\x01\x00".to_vec();
/// let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
/// let pad = 64 - (10 + header.len() + 1) % 64;
/// let h = format!("{header}{}\n", " ".repeat(pad % 64));
/// npy.extend_from_slice(&(h.len() as u16).to_le_bytes());
/// npy.extend_from_slice(h.as_bytes());
/// for x in [0.0f64, 0.0, 0.0, 5.0, 1.0, 2.0] { npy.extend_from_slice(&x.to_le_bytes()); }
/// let t = moeplan::formats::npy::read_npy(&npy)?;
/// assert_eq!(t.layer_ids(), &[1]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_npy(bytes: &[u8]) -> Result<LoadTrace> {
    to_trace(read_any(|| Cursor::new(bytes), NPY)?, NPY)
}

/// Reads a `.npz` (zip of `.npy` files, compressed or not).
pub fn read_npz(bytes: &[u8]) -> Result<LoadTrace> {
    let mut npz = NpzReader::new(Cursor::new(bytes))
        .map_err(|e| Error::parse(NPZ, format!("not a readable zip of .npy files: {e}")))?;
    let names = npz.names().map_err(|e| Error::parse(NPZ, e.to_string()))?;
    let stem = |n: &str| n.trim_end_matches(".npy").to_string();
    let pick = names
        .iter()
        .find(|n| matches!(stem(n).as_str(), "logical_count" | "counts"))
        .or(if names.len() == 1 {
            names.first()
        } else {
            None
        })
        .cloned()
        .ok_or_else(|| {
            Error::parse(
                NPZ,
                format!(
                    "no array named logical_count or counts among {:?}",
                    names.iter().map(|n| stem(n)).collect::<Vec<_>>()
                ),
            )
        })?;
    macro_rules! try_dtype {
        ($($t:ty),*) => {{
            $(
                if let Ok(a) = npz.by_name::<ndarray::OwnedRepr<$t>, IxDyn>(&pick) {
                    return to_trace(a.mapv(|x| x as f64), NPZ);
                }
            )*
        }};
    }
    try_dtype!(f64, f32, i64, i32, i16, i8, u64, u32, u16, u8);
    Err(Error::parse(
        NPZ,
        format!(
            "array {:?}: unsupported dtype or layout (need a C-order integer or float array)",
            stem(&pick)
        ),
    ))
}

fn read_any<R: std::io::Read>(open: impl Fn() -> R, format: &'static str) -> Result<ArrayD<f64>> {
    fn read<T: ReadableElement + Copy, R: std::io::Read>(r: R) -> Option<ArrayD<T>> {
        ArrayD::<T>::read_npy(r).ok()
    }
    macro_rules! try_dtype {
        ($($t:ty),*) => {{
            $(
                if let Some(a) = read::<$t, R>(open()) {
                    return Ok(a.mapv(|x| x as f64));
                }
            )*
        }};
    }
    try_dtype!(f64, f32, i64, i32, i16, i8, u64, u32, u16, u8);
    Err(Error::parse(
        format,
        "not a C-order .npy of integers or floats (bad header, dtype, or truncated data)",
    ))
}

fn to_trace(a: ArrayD<f64>, format: &'static str) -> Result<LoadTrace> {
    let a3: Array3<f64> = match a.ndim() {
        2 => a
            .insert_axis(Axis(0))
            .into_dimensionality()
            .map_err(|e| Error::parse(format, e.to_string()))?,
        3 => a
            .into_dimensionality()
            .map_err(|e| Error::parse(format, e.to_string()))?,
        d => {
            return Err(Error::parse(
                format,
                format!(
                    "expected a 2-D [layers, experts] or 3-D [batches, layers, experts] array, got {d}-D"
                ),
            ));
        }
    };
    let (_, l, e) = a3.dim();
    if l == 0 || e == 0 {
        return Err(Error::parse(format, "the array is empty"));
    }
    let moe: Vec<usize> = (0..l)
        .filter(|&li| a3.index_axis(Axis(1), li).iter().any(|&x| x != 0.0))
        .collect();
    if moe.is_empty() {
        return Err(Error::Trace("every layer's counts are zero".into()));
    }
    let counts = a3.select(Axis(1), &moe);
    let ids = moe.iter().map(|&x| x as u32).collect();
    Ok(LoadTrace::new(counts, ids)?.with_model_layers(l))
}
