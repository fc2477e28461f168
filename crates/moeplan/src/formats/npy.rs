//! NumPy `.npy` and `.npz` load arrays: `B × L × E` (batches) or `L × E` (one
//! whole-run total, as `np.save(path, logical_count)` writes it), any
//! integer, float (half included) or bool dtype, either byte order, C or
//! Fortran order. Layers whose counts are all zero are dense layers:
//! dropped, the others keep their row index as layer id (as SGLang's JSON).
//! In an `.npz`, the array named `logical_count` or `counts` is read, or the
//! only array there is.
//!
//! The header is parsed here rather than by a general NumPy crate because
//! its shape is an attacker's claim: the element count is checked against
//! the bytes that follow *and* against the reading [`ReadLimits`](crate::ReadLimits)
//! before anything is allocated, and an `.npz` member is inflated through
//! the [`Meter`], which counts what it expands to instead of trusting the
//! zip's declared size.

use std::io::Cursor;

use ndarray::{Array3, ArrayD, Axis, IxDyn};

use crate::data::limits::Meter;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

const NPY: &str = "NumPy .npy";
const NPZ: &str = "NumPy .npz";

/// The magic string every `.npy` starts with.
pub(crate) const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Longest header NumPy itself writes or reads (`numpy.lib.format` refuses
/// larger ones unless asked to).
const MAX_HEADER: usize = 1 << 16;
/// Most dimensions NumPy allows.
const MAX_DIMS: usize = 64;

/// Reads a `.npy` holding expert loads.
pub(crate) fn read_npy(bytes: &[u8], meter: &mut Meter) -> Result<LoadTrace> {
    to_trace(decode(bytes, meter, NPY)?, NPY)
}

/// Reads a `.npz` (zip of `.npy` files, stored or deflated).
pub(crate) fn read_npz(bytes: &[u8], meter: &mut Meter) -> Result<LoadTrace> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| Error::parse(NPZ, format!("not a readable zip of .npy files: {e}")))?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let stem = |n: &str| n.trim_end_matches(".npy").to_string();
    let arrays: Vec<&String> = names.iter().filter(|n| n.ends_with(".npy")).collect();
    let pick = arrays
        .iter()
        .find(|n| matches!(stem(n).as_str(), "logical_count" | "counts"))
        .or(if arrays.len() == 1 {
            arrays.first()
        } else {
            None
        })
        .map(|n| n.to_string())
        .ok_or_else(|| {
            Error::parse(
                NPZ,
                format!(
                    "no array named logical_count or counts among {:?}",
                    arrays.iter().map(|n| stem(n)).collect::<Vec<_>>()
                ),
            )
        })?;
    let member = zip
        .by_name(&pick)
        .map_err(|e| Error::parse(NPZ, format!("{pick}: {e}")))?;
    let declared = member.size();
    let what = format!("array {:?} once decompressed", stem(&pick));
    let npy = meter.read_all(member, declared, &what)?;
    to_trace(decode(&npy, meter, NPZ)?, NPZ)
}

/// What a `.npy` header says.
#[derive(Debug, Clone, PartialEq)]
struct Header {
    dtype: Dtype,
    fortran_order: bool,
    /// As declared: 64-bit even where `usize` is 32 (wasm), so a claim too
    /// large for the platform is reported as such, not as a parse error.
    shape: Vec<u64>,
}

/// The element types read, with their byte order.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Dtype {
    kind: Kind,
    width: usize,
    big_endian: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Float,
    Signed,
    Unsigned,
    Bool,
}

fn bad(format: &'static str, m: impl Into<String>) -> Error {
    Error::parse(format, m)
}

/// Parses the magic, version and header dict; returns the header and where
/// the data starts.
fn parse_header(bytes: &[u8], format: &'static str) -> Result<(Header, usize)> {
    let rest = bytes
        .strip_prefix(NPY_MAGIC)
        .ok_or_else(|| bad(format, "no \\x93NUMPY magic: not a .npy array"))?;
    let (major, len, start) = match rest {
        [1, _, a, b, ..] => (1, u16::from_le_bytes([*a, *b]) as usize, 10),
        [2 | 3, _, a, b, c, d, ..] => (rest[0], u32::from_le_bytes([*a, *b, *c, *d]) as usize, 12),
        [v, ..] => return Err(bad(format, format!("format version {v} is not 1, 2 or 3"))),
        [] => return Err(bad(format, "the header is cut off")),
    };
    if len > MAX_HEADER {
        return Err(bad(
            format,
            format!("a header of {len} bytes is larger than NumPy's {MAX_HEADER}"),
        ));
    }
    let text = bytes
        .get(start..start + len)
        .ok_or_else(|| bad(format, "the header is cut off"))?;
    let text = std::str::from_utf8(text)
        .map_err(|_| bad(format, format!("the version {major} header is not text")))?;
    Ok((parse_dict(text, format)?, start + len))
}

/// The header is a Python dict literal with exactly three keys.
fn parse_dict(text: &str, format: &'static str) -> Result<Header> {
    let descr = string_value(text, "descr")
        .ok_or_else(|| bad(format, "the header has no 'descr' (dtype)"))?;
    let fortran_order = match after_key(text, "fortran_order") {
        Some(v) if v.starts_with("True") => true,
        Some(v) if v.starts_with("False") => false,
        _ => return Err(bad(format, "the header has no 'fortran_order' True/False")),
    };
    let shape_text = after_key(text, "shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(|| bad(format, "the header has no 'shape' tuple"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L').parse::<u64>().map_err(|_| {
                bad(
                    format,
                    format!("shape entry {s:?} is not a non-negative whole number"),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if shape.len() > MAX_DIMS {
        return Err(bad(format, format!("{} dimensions", shape.len())));
    }
    Ok(Header {
        dtype: dtype_of(descr, format)?,
        fortran_order,
        shape,
    })
}

/// The text after `'key':`, trimmed.
fn after_key<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text
        .find(&format!("'{key}'"))
        .or_else(|| text.find(&format!("\"{key}\"")))?;
    let rest = text.get(at + key.len() + 2..)?.trim_start();
    Some(rest.strip_prefix(':')?.trim_start())
}

fn string_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let v = after_key(text, key)?;
    let quote = v.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    v.get(1..)?.split(quote).next()
}

fn dtype_of(descr: &str, format: &'static str) -> Result<Dtype> {
    let unsupported = || {
        bad(
            format,
            format!(
                "dtype {descr:?} is not supported: need integers, floats or bools (e.g. '<i8', '<f4')"
            ),
        )
    };
    let mut chars = descr.chars();
    let order = chars.next().ok_or_else(unsupported)?;
    let big_endian = match order {
        '<' | '|' | '=' => false,
        '>' => true,
        _ => return Err(unsupported()),
    };
    let kind = match chars.next() {
        Some('f') => Kind::Float,
        Some('i') => Kind::Signed,
        Some('u') => Kind::Unsigned,
        Some('b') => Kind::Bool,
        _ => return Err(unsupported()),
    };
    let width: usize = chars.as_str().parse().map_err(|_| unsupported())?;
    let ok = match kind {
        Kind::Float => matches!(width, 2 | 4 | 8),
        Kind::Signed | Kind::Unsigned => matches!(width, 1 | 2 | 4 | 8),
        Kind::Bool => width == 1,
    };
    if !ok {
        return Err(unsupported());
    }
    Ok(Dtype {
        kind,
        width,
        big_endian,
    })
}

/// Decodes the array: the element count is checked against the data that
/// is there and charged to the meter before the output is allocated.
fn decode(bytes: &[u8], meter: &mut Meter, format: &'static str) -> Result<ArrayD<f64>> {
    let (h, start) = parse_header(bytes, format)?;
    let overflows = || bad(format, format!("shape {:?} overflows", h.shape));
    let n = h
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(overflows)?;
    let data = bytes.get(start..).unwrap_or_default();
    let needed = n.checked_mul(h.dtype.width as u64).ok_or_else(overflows)?;
    if (data.len() as u64) < needed {
        return Err(bad(
            format,
            format!(
                "shape {:?} needs {needed} bytes of data but the file holds only {}",
                h.shape,
                data.len()
            ),
        ));
    }
    meter.values(n, 8, "the array")?;
    // Every dimension fits: n elements of at least one byte are in memory
    // (a zero-sized array may still declare huge sides).
    let dims = h
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<Vec<usize>, _>>()
        .map_err(|_| overflows())?;
    let values: Vec<f64> = data
        .chunks_exact(h.dtype.width)
        .take(n as usize)
        .map(|c| element(c, h.dtype))
        .collect();
    let shape = IxDyn(&dims);
    let array = if h.fortran_order {
        let reversed: Vec<usize> = dims.iter().rev().copied().collect();
        ArrayD::from_shape_vec(IxDyn(&reversed), values)
            .map(|a| a.reversed_axes().as_standard_layout().into_owned())
    } else {
        ArrayD::from_shape_vec(shape, values)
    };
    array.map_err(|e| bad(format, e.to_string()))
}

/// One element as f64; `c` is exactly `dtype.width` bytes.
fn element(c: &[u8], dtype: Dtype) -> f64 {
    let mut b = [0u8; 8];
    let w = dtype.width.min(8);
    b[..w].copy_from_slice(&c[..w]);
    if dtype.big_endian {
        b[..w].reverse();
    }
    let u = u64::from_le_bytes(b);
    match (dtype.kind, w) {
        (Kind::Float, 2) => half::f16::from_bits(u as u16).to_f64(),
        (Kind::Float, 4) => f32::from_bits(u as u32) as f64,
        (Kind::Float, _) => f64::from_bits(u),
        (Kind::Signed, 1) => u as u8 as i8 as f64,
        (Kind::Signed, 2) => u as u16 as i16 as f64,
        (Kind::Signed, 4) => u as u32 as i32 as f64,
        (Kind::Signed, _) => u as i64 as f64,
        (Kind::Unsigned | Kind::Bool, _) => u as f64,
    }
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
    let trace = LoadTrace::new(counts, ids)?;
    // All-zero rows are dense layers: the array then has a row per model
    // layer. Without any, it may hold the MoE rows only, and the model's
    // layer count stays unknown (engines index their files by model layer).
    Ok(if moe.len() < l {
        trace.with_model_layers(l)
    } else {
        trace
    })
}

/// Parses a `.npy` header only (no data), for the fuzzer: everything a
/// hostile header can claim is checked here.
#[doc(hidden)]
pub fn fuzz_header(bytes: &[u8], meter: &mut Meter) -> Result<()> {
    decode(bytes, meter, NPY).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReadLimits;

    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        let mut out = NPY_MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        let h = format!("{header}\n");
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn read(bytes: &[u8]) -> Result<ArrayD<f64>> {
        decode(bytes, &mut Meter::new(ReadLimits::mib(1)), NPY)
    }

    #[test]
    fn a_shape_larger_than_the_data_is_refused_before_allocating() {
        let e = read(&npy("<f8", false, "(10000000000000,)", &[0; 16]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds only 16"), "{e}");
    }

    #[test]
    fn a_shape_larger_than_the_budget_is_refused() {
        // 2^18 float64 = 2 MiB of data present, 1 MiB budget
        let e = read(&npy("<f8", false, "(262144,)", &vec![0; 1 << 21]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("reading limit"), "{e}");
    }

    #[test]
    fn fortran_order_and_big_endian_read_as_numpy_does() -> Result<()> {
        // [[1, 2, 3], [4, 5, 6]] stored column by column, big-endian int16
        let data: Vec<u8> = [1i16, 4, 2, 5, 3, 6]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        let a = read(&npy(">i2", true, "(2, 3)", &data))?;
        assert_eq!(a.shape(), &[2, 3]);
        assert_eq!(
            a.iter().copied().collect::<Vec<_>>(),
            [1., 2., 3., 4., 5., 6.]
        );
        Ok(())
    }

    #[test]
    fn half_floats_decode() -> Result<()> {
        let data: Vec<u8> = [1.0f32, 2.5, 1024.0]
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect();
        let a = read(&npy("<f2", false, "(3,)", &data))?;
        assert_eq!(a.iter().copied().collect::<Vec<_>>(), [1.0, 2.5, 1024.0]);
        Ok(())
    }

    #[test]
    fn strings_are_named_as_unsupported() {
        let e = read(&npy("<U3", false, "(1,)", &[0; 12]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not supported"), "{e}");
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn read_npy() -> crate::Result<()> {
        // a 2 × 3 float64 array, C order, written by np.save
        let mut npy = b"\x93NUMPY\x01\x00".to_vec();
        let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
        let pad = 64 - (10 + header.len() + 1) % 64;
        let h = format!("{header}{}\n", " ".repeat(pad % 64));
        npy.extend_from_slice(&(h.len() as u16).to_le_bytes());
        npy.extend_from_slice(h.as_bytes());
        for x in [0.0f64, 0.0, 0.0, 5.0, 1.0, 2.0] {
            npy.extend_from_slice(&x.to_le_bytes());
        }
        let mut meter = crate::Meter::new(crate::ReadLimits::default());
        let t = crate::formats::npy::read_npy(&npy, &mut meter)?;
        assert_eq!(t.layer_ids(), &[1]);
        Ok(())
    }
}
