//! SGLang's `torch.save` expert-distribution dumps (`.pt`), in both of
//! torch's layouts:
//! - the zip (torch ≥ 1.6): a pickle (`*/data.pkl`) and raw tensor storages
//!   (`*/data/<key>`), read as little-endian arrays;
//! - the legacy stream (`_use_new_zipfile_serialization=False`): pickles of
//!   the magic number, the protocol version and the writer's sys info, then
//!   the main pickle, then a pickle of the storage keys, then each storage in
//!   that order as an 8-byte little-endian element count and its raw bytes.
//!
//! # The restricted unpickler
//! A pickle is a program written by whoever made the file. This one only
//! builds plain data: dicts, lists, tuples, numbers, strings and tensors. It
//! recognises exactly three callables — `torch._utils._rebuild_tensor_v2`
//! and `_rebuild_tensor` (a tensor view of a storage) and
//! `collections.OrderedDict` (an empty dict) — and never calls anything;
//! every other global stays an inert name, and what it would have built an
//! inert object.
//!
//! # Values live in an arena
//! Every value is a `Node` in one `Vec` (`pickle.rs`); a container refers to its
//! children by `u32` index, and the stack and the memo hold indices. So:
//! - a memo GET pushes the remembered index: it shares, never copies. A list
//!   of two references to the previous list, forty times over, is 41 nodes,
//!   not 2⁴⁰ elements;
//! - nothing recurses in proportion to the input: dropping the arena drops a
//!   flat `Vec`, `Debug` prints indices, and the lookups made afterwards
//!   (root dict → `logical_count`; `records` → each record →
//!   `global_physical_count`) are bounded index walks, so a cycle (a list
//!   appended to itself through the memo) is only an index pointing back;
//! - each node records its depth when built (1 + its deepest child, O(1) per
//!   APPEND, SETITEM or BUILD), and every constructor opcode refuses a depth
//!   past the budget's `max_depth`. Depth is a sanity limit, not what keeps
//!   the reader safe: a container filled through the memo after it was
//!   nested may be deeper than recorded, or cyclic, and nothing walks it.
//!
//! # Limits
//! Everything is charged to the reading [`Meter`] before it is allocated:
//! each node, child index, stack slot, mark and memo entry, each string's
//! bytes, each zip member as it is inflated (declared sizes are only hints),
//! and each tensor's elements (`numel × 8` bytes from its shape alone, so a
//! zero stride cannot expand a tiny storage into 10¹² values). Tensor views
//! are checked against the bytes their storage really holds.
//!
//! # Dump modes
//! - `stat`: `{"rank", "logical_count": [steps][layers][experts], …}` (or
//!   `[layers][experts]`);
//! - `per_pass`: records with `global_physical_count[layers][physical]`,
//!   mapped back to logical experts through `last_physical_to_logical_map`
//!   (top level or per record).
//!
//! Both drop the dense layers (all-zero rows over every step, as SGLang
//! records them) and keep the MoE layers' model ids and the model's layer
//! count; `stat` drops the buffer's steps no pass filled
//! (`super::sglang::recorded_steps`).

use std::collections::HashMap;
use std::io::Cursor;

use crate::data::limits::Meter;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

mod pickle;

use pickle::{Arena, Id, Node, PICKLE, Tensor, Unpickler};

const FORMAT: &str = "PyTorch .pt";

/// torch's legacy magic number 0x1950a86a20f9469cfc6c as pickle's LONG1
/// writes it: little-endian two's complement, wider than any `i64`.
const LEGACY_MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
/// The only legacy protocol version torch has written.
const LEGACY_PROTOCOL: i64 = 1001;

/// A decoded row's `Vec` header, or a record's cache entry.
const ROW_COST: u64 = 2 * std::mem::size_of::<Vec<f64>>() as u64;

fn err(m: impl Into<String>) -> Error {
    Error::parse(FORMAT, m)
}

/// Reads a `.pt` dump (zip or legacy) into a trace, within `meter`'s budget.
pub(crate) fn read_pt(bytes: &[u8], meter: &mut Meter) -> Result<LoadTrace> {
    if is_legacy(bytes) {
        read_legacy(bytes, meter)
    } else {
        read_zip(bytes, meter)
    }
}

/// Runs the restricted unpickler over raw pickle bytes and the lookups a
/// dump needs, every storage reading as the input itself so that tensor
/// decoding is reached too; a legacy stream is read whole. For the fuzzer:
/// a zip's CRC check would otherwise reject every mutated pickle.
///
/// ```
/// let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
/// let e = moeplan::formats::read_pickle(b"\x80\x02]q\x00h\x00a.", &mut meter).unwrap_err();
/// assert!(e.to_string().contains("record 0 has no global_physical_count"), "{e}");
/// ```
#[doc(hidden)]
pub fn read_pickle(bytes: &[u8], meter: &mut Meter) -> Result<()> {
    if is_legacy(bytes) {
        return read_legacy(bytes, meter).map(drop);
    }
    let mut unpickler = Unpickler::new(bytes, meter);
    let root = unpickler.load()?;
    let arena = unpickler.into_arena();
    trace_from(&arena, root, &mut Storages::Input(bytes), meter).map(drop)
}

/// Whether `bytes` open like a legacy `torch.save` stream: PROTO, maybe a
/// FRAME, then LONG1 of the 10-byte magic number.
pub(crate) fn is_legacy(bytes: &[u8]) -> bool {
    let [0x80, _, rest @ ..] = bytes else {
        return false;
    };
    let rest = match rest {
        [0x95, _, _, _, _, _, _, _, _, tail @ ..] => tail,
        _ => rest,
    };
    rest.starts_with(&[0x8a, 0x0a]) && rest.get(2..12) == Some(&LEGACY_MAGIC[..])
}

fn read_zip(bytes: &[u8], meter: &mut Meter) -> Result<LoadTrace> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| err(format!("not a readable torch.save zip: {e}")))?;
    let pkl = zip
        .file_names()
        .find(|n| n.ends_with("data.pkl"))
        .map(str::to_string)
        .ok_or_else(|| err("no data.pkl inside"))?;
    let prefix = pkl.strip_suffix("data.pkl").unwrap_or_default().to_string();
    let pickle = read_member(&mut zip, &pkl, meter)?;
    let mut unpickler = Unpickler::new(&pickle, meter);
    let root = unpickler.load()?;
    let arena = unpickler.into_arena();
    let mut storages = Storages::Zip {
        zip,
        prefix,
        loaded: HashMap::new(),
    };
    trace_from(&arena, root, &mut storages, meter)
}

/// A zip member, counted as it inflates: its declared size is a claim.
fn read_member(
    zip: &mut zip::ZipArchive<Cursor<&[u8]>>,
    name: &str,
    meter: &mut Meter,
) -> Result<Vec<u8>> {
    let member = zip.by_name(name).map_err(|e| err(format!("{name}: {e}")))?;
    let declared = member.size();
    meter.read_all(member, declared, &format!("member {name}"))
}

fn read_legacy(bytes: &[u8], meter: &mut Meter) -> Result<LoadTrace> {
    let mut unpickler = Unpickler::new(bytes, meter);
    let magic = unpickler.load()?;
    if !matches!(unpickler.arena.node(magic), Some(Node::Long(b)) if **b == LEGACY_MAGIC) {
        return Err(err("legacy torch.save stream with a wrong magic number"));
    }
    let version = unpickler.load()?;
    if unpickler.arena.int(version) != Some(LEGACY_PROTOCOL) {
        return Err(err(format!(
            "legacy torch.save protocol version is not {LEGACY_PROTOCOL}"
        )));
    }
    let sys_info = unpickler.load()?;
    let little_endian = unpickler.arena.get(sys_info, "little_endian");
    if matches!(
        little_endian.and_then(|id| unpickler.arena.node(id)),
        Some(Node::Bool(false))
    ) {
        return Err(err("big-endian legacy torch.save files are not supported"));
    }
    let root = unpickler.load()?;
    let keys = unpickler.load()?;
    let data = bytes.get(unpickler.pos..).unwrap_or_default();
    let arena = unpickler.into_arena();
    let storages = legacy_storages(&arena, keys, data)?;
    trace_from(&arena, root, &mut Storages::Legacy(storages), meter)
}

/// Splits the raw storages after a legacy stream's pickles, in the order of
/// `keys`, each as an element count then `count × width` bytes. They are
/// borrowed from the input, which is already charged.
fn legacy_storages<'a>(
    arena: &Arena,
    keys: Id,
    mut rest: &'a [u8],
) -> Result<HashMap<Box<str>, &'a [u8]>> {
    let keys = arena
        .list(keys)
        .ok_or_else(|| err("legacy storage keys are not a list"))?;
    let dtypes = arena.storage_dtypes();
    let mut out = HashMap::new();
    for &k in keys {
        let key = arena
            .str(k)
            .ok_or_else(|| err("legacy storage key is not a string"))?;
        let dtype = dtypes
            .get(key)
            .ok_or_else(|| err(format!("legacy storage {key} is used by no tensor")))?;
        let width = Dtype::of_storage(dtype)?.width();
        let cut_off = |left: usize| {
            err(format!(
                "legacy storage {key} is cut off ({left} bytes left)"
            ))
        };
        let (count, tail) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| cut_off(rest.len()))?;
        let (data, tail) = u64::from_le_bytes(*count)
            .checked_mul(width as u64)
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| tail.split_at_checked(n))
            .ok_or_else(|| cut_off(tail.len()))?;
        out.insert(Box::from(key), data);
        rest = tail;
    }
    Ok(out)
}

/// Where tensors' bytes come from.
enum Storages<'a> {
    /// Zip members `{prefix}data/{key}`, inflated once each.
    Zip {
        zip: zip::ZipArchive<Cursor<&'a [u8]>>,
        prefix: String,
        loaded: HashMap<Box<str>, Vec<u8>>,
    },
    /// Slices of a legacy stream.
    Legacy(HashMap<Box<str>, &'a [u8]>),
    /// Every storage is these bytes (the fuzzer's pickle).
    Input(&'a [u8]),
}

impl Storages<'_> {
    fn bytes(&mut self, key: &str, meter: &mut Meter) -> Result<&[u8]> {
        match self {
            Storages::Zip {
                zip,
                prefix,
                loaded,
            } => {
                if !loaded.contains_key(key) {
                    let b = read_member(zip, &format!("{prefix}data/{key}"), meter)?;
                    loaded.insert(Box::from(key), b);
                }
                loaded
                    .get(key)
                    .map(Vec::as_slice)
                    .ok_or_else(|| err(format!("storage {key} is missing")))
            }
            Storages::Legacy(map) => map
                .get(key)
                .copied()
                .ok_or_else(|| err(format!("storage {key} is not among the file's storages"))),
            Storages::Input(b) => Ok(*b),
        }
    }
}

/// Finds the counts in an unpickled dump: `stat` mode's `logical_count`,
/// else `per_pass` records (under `records`, or the root list itself).
fn trace_from(
    arena: &Arena,
    root: Id,
    storages: &mut Storages,
    meter: &mut Meter,
) -> Result<LoadTrace> {
    if let Some(lc) = arena.get(root, "logical_count") {
        let t = arena
            .tensor(lc)
            .ok_or_else(|| err(format!("logical_count is {}, not a tensor", arena.kind(lc))))?;
        let values = decode(arena, t, storages, meter, "tensor logical_count")?;
        return stat_trace(&t.size, values, meter);
    }
    let records = arena.get(root, "records").unwrap_or(root);
    let Some(records) = arena.list(records) else {
        return Err(err(
            "neither a logical_count tensor nor per-pass records with global_physical_count",
        ));
    };
    let top_map = arena.get(root, "last_physical_to_logical_map");
    per_pass_trace(arena, records, top_map, storages, meter)
}

/// `logical_count` as `[layers][experts]` or `[steps][layers][experts]`,
/// all-zero (dense) layers dropped.
fn stat_trace(size: &[u64], data: Vec<f64>, meter: &mut Meter) -> Result<LoadTrace> {
    let dim = |d: u64| usize::try_from(d).map_err(|_| err("logical_count is too large"));
    let shape = match *size {
        [l, e] => (1, dim(l)?, dim(e)?),
        [b, l, e] => (dim(b)?, dim(l)?, dim(e)?),
        _ => {
            return Err(err(format!(
                "logical_count is {}-D, expected [layers][experts] or [steps][layers][experts]",
                size.len()
            )));
        }
    };
    // An empty axis would let the others be as long as they claim: the
    // layer scan below must be bounded by the elements really decoded.
    if shape.0 == 0 || shape.1 == 0 || shape.2 == 0 {
        return Err(err("logical_count is empty"));
    }
    let a = ndarray::Array3::from_shape_vec(shape, data).map_err(|e| err(e.to_string()))?;
    // The recorder's buffer slots no pass filled (all zero) are not batches;
    // being zero, they change no layer's dense-or-MoE verdict below.
    let steps = super::sglang::recorded_steps(&a);
    let layers = shape.1;
    let moe: Vec<usize> = (0..layers)
        .filter(|&l| a.index_axis(ndarray::Axis(1), l).iter().any(|&x| x != 0.0))
        .collect();
    if moe.is_empty() {
        return Err(Error::Trace("every layer's counts are zero".into()));
    }
    meter.bytes(
        (steps.len() * moe.len() * shape.2 * 8) as u64,
        "the MoE layers' counts",
    )?;
    // One copy: the recorded steps of the MoE layers.
    let counts = ndarray::Array3::from_shape_fn((steps.len(), moe.len(), shape.2), |(b, l, e)| {
        a[[steps[b], moe[l], e]]
    });
    Ok(LoadTrace::new(counts, layer_ids(&moe)?)?.with_model_layers(layers))
}

fn layer_ids(layers: &[usize]) -> Result<Vec<u32>> {
    layers
        .iter()
        .map(|&l| u32::try_from(l).map_err(|_| err("too many layers")))
        .collect()
}

/// `per_pass` records: each record's `global_physical_count[layers][physical]`
/// is one step, mapped to logical experts by the last map seen (a record's
/// own, else the top-level one); dense layers are dropped as in `stat`.
fn per_pass_trace(
    arena: &Arena,
    records: &[Id],
    mut map: Option<Id>,
    storages: &mut Storages,
    meter: &mut Meter,
) -> Result<LoadTrace> {
    // The memo lets a list repeat one record dict many times: each dict is
    // scanned once, so lookups stay linear in what the pickle built.
    let mut fields: HashMap<Id, (Option<Id>, Option<Id>)> = HashMap::new();
    let mut window = Vec::new();
    for (i, &rec) in records.iter().enumerate() {
        meter.bytes(ROW_COST, PICKLE)?;
        let (count, own_map) = *fields.entry(rec).or_insert_with(|| {
            (
                arena.get(rec, "global_physical_count"),
                arena.get(rec, "last_physical_to_logical_map"),
            )
        });
        let t = count
            .and_then(|c| arena.tensor(c))
            .ok_or_else(|| err(format!("record {i} has no global_physical_count tensor")))?;
        let what = format!("record {i}: global_physical_count");
        window.push(rows(arena, t, storages, meter, &what)?);
        map = own_map.or(map);
    }
    let map = map
        .and_then(|m| arena.tensor(m))
        .ok_or_else(|| err("per-pass records without a last_physical_to_logical_map tensor"))?;
    let map = rows(arena, map, storages, meter, "last_physical_to_logical_map")?;
    let map = logical_ids(map, meter)?;
    let layers = map.len();
    if let Some((b, step)) = window.iter().enumerate().find(|(_, s)| s.len() != layers) {
        return Err(err(format!(
            "window step {b} has {} layers, the map {layers}",
            step.len()
        )));
    }
    let moe: Vec<bool> = (0..layers)
        .map(|l| {
            window
                .iter()
                .any(|s| s.get(l).is_some_and(|r| r.iter().any(|&x| x != 0.0)))
        })
        .collect();
    let kept: Vec<usize> = (0..layers).filter(|&l| moe.get(l) == Some(&true)).collect();
    if kept.is_empty() {
        return Err(Error::Trace("every layer's counts are zero".into()));
    }
    let window: Vec<_> = window.into_iter().map(|s| keep(s, &moe)).collect();
    let map = keep(map, &moe);
    super::vllm::physical_to_logical_counts(
        &window,
        &map,
        Some(layer_ids(&kept)?),
        None,
        FORMAT,
        meter,
    )
    .map(|t| t.with_model_layers(layers))
}

/// The rows whose flag in `moe` is set.
fn keep<T>(rows: Vec<T>, moe: &[bool]) -> Vec<T> {
    rows.into_iter()
        .zip(moe)
        .filter(|(_, m)| **m)
        .map(|(r, _)| r)
        .collect()
}

/// A 2-D tensor as rows of f64 (neither axis empty).
fn rows(
    arena: &Arena,
    t: &Tensor,
    storages: &mut Storages,
    meter: &mut Meter,
    what: &str,
) -> Result<Vec<Vec<f64>>> {
    let [layers, cols] = *t.size else {
        return Err(err(format!(
            "{what} is {}-D, expected [layers][physical]",
            t.size.len()
        )));
    };
    // Zero columns would make rows cost nothing to decode yet a Vec each.
    if layers == 0 || cols == 0 {
        return Err(err(format!("{what} is empty")));
    }
    let data = decode(arena, t, storages, meter, what)?;
    let cols = usize::try_from(cols).map_err(|_| err(format!("{what} is too large")))?;
    meter.values(layers, ROW_COST / 2 + 8 * cols as u64, what)?;
    Ok(data.chunks(cols).map(<[f64]>::to_vec).collect())
}

/// A physical → logical map's entries as expert ids (checked later).
fn logical_ids(map: Vec<Vec<f64>>, meter: &mut Meter) -> Result<Vec<Vec<i64>>> {
    let n: usize = map.iter().map(Vec::len).sum();
    meter.values(n as u64, 8, "last_physical_to_logical_map")?;
    map.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|x| {
                    if x.is_finite() && x.fract() == 0.0 {
                        Ok(x as i64)
                    } else {
                        Err(err(format!(
                            "last_physical_to_logical_map holds {x}, not an expert id"
                        )))
                    }
                })
                .collect()
        })
        .collect()
}

/// A tensor's elements as f64 in C order, from its storage's bytes.
fn decode(
    arena: &Arena,
    t: &Tensor,
    storages: &mut Storages,
    meter: &mut Meter,
    what: &str,
) -> Result<Vec<f64>> {
    let storage = arena
        .storage(t.storage)
        .ok_or_else(|| err(format!("{what} has no storage")))?;
    let dtype = Dtype::of_storage(&storage.dtype)?;
    let bytes = storages.bytes(&storage.key, meter)?;
    tensor_f64(t, dtype, bytes, meter, what)
}

fn tensor_f64(
    t: &Tensor,
    dtype: Dtype,
    storage: &[u8],
    meter: &mut Meter,
    what: &str,
) -> Result<Vec<f64>> {
    if t.size.len() != t.stride.len() {
        return Err(err(format!("{what}: size and stride differ in length")));
    }
    let n = t
        .size
        .iter()
        .try_fold(1u64, |a, &s| a.checked_mul(s))
        .ok_or_else(|| err(format!("{what}: its shape overflows")))?;
    let past = || err(format!("{what} reaches past its storage"));
    if n > 0 {
        let elements = (storage.len() / dtype.width()) as u64;
        let last = t
            .size
            .iter()
            .zip(&t.stride)
            .try_fold(t.offset, |a, (&s, &st)| {
                a.checked_add(s.saturating_sub(1).checked_mul(st)?)
            });
        if last.is_none_or(|p| p >= elements) {
            return Err(past());
        }
    }
    // The shape, not the storage, says how much is built: a zero stride
    // repeats one element as often as the shape claims.
    meter.values(n, 8, what)?;
    let n = usize::try_from(n).map_err(|_| err(format!("{what} is too large")))?;
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0u64; t.size.len()];
    for _ in 0..n {
        let pos = index.iter().zip(&t.stride).fold(t.offset, |a, (&i, &s)| {
            a.saturating_add(i.saturating_mul(s))
        });
        out.push(dtype.read(storage, pos).ok_or_else(past)?);
        advance(&mut index, &t.size);
    }
    Ok(out)
}

/// The next index in C order (an odometer over `size`).
fn advance(index: &mut [u64], size: &[u64]) {
    for (i, &s) in index.iter_mut().zip(size).rev() {
        *i += 1;
        if *i < s {
            return;
        }
        *i = 0;
    }
}

/// Element types a count tensor may have, by storage type name.
#[derive(Debug, Clone, Copy)]
enum Dtype {
    I64,
    F64,
    I32,
    F32,
    I16,
    F16,
    Bf16,
    I8,
    U8,
}

impl Dtype {
    fn of_storage(name: &str) -> Result<Dtype> {
        Ok(match name {
            "LongStorage" => Dtype::I64,
            "DoubleStorage" => Dtype::F64,
            "IntStorage" => Dtype::I32,
            "FloatStorage" => Dtype::F32,
            "ShortStorage" => Dtype::I16,
            "HalfStorage" => Dtype::F16,
            "BFloat16Storage" => Dtype::Bf16,
            "CharStorage" => Dtype::I8,
            "ByteStorage" | "BoolStorage" | "UntypedStorage" => Dtype::U8,
            other => {
                return Err(err(format!(
                    "tensor dtype {other} is not supported (integers, float16, bfloat16, float32, float64)"
                )));
            }
        })
    }

    fn width(self) -> usize {
        match self {
            Dtype::I64 | Dtype::F64 => 8,
            Dtype::I32 | Dtype::F32 => 4,
            Dtype::I16 | Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::I8 | Dtype::U8 => 1,
        }
    }

    /// Element `pos` of a little-endian storage, if it is there.
    fn read(self, storage: &[u8], pos: u64) -> Option<f64> {
        let w = self.width();
        let start = usize::try_from(pos).ok()?.checked_mul(w)?;
        let b = storage.get(start..start.checked_add(w)?)?;
        Some(match self {
            Dtype::I64 => i64::from_le_bytes(b.try_into().ok()?) as f64,
            Dtype::F64 => f64::from_le_bytes(b.try_into().ok()?),
            Dtype::I32 => i32::from_le_bytes(b.try_into().ok()?).into(),
            Dtype::F32 => f32::from_le_bytes(b.try_into().ok()?).into(),
            Dtype::I16 => i16::from_le_bytes(b.try_into().ok()?).into(),
            Dtype::F16 => half::f16::from_le_bytes(b.try_into().ok()?).to_f64(),
            Dtype::Bf16 => half::bf16::from_le_bytes(b.try_into().ok()?).to_f64(),
            Dtype::I8 => i8::from_le_bytes(b.try_into().ok()?).into(),
            Dtype::U8 => u8::from_le_bytes(b.try_into().ok()?).into(),
        })
    }
}

#[cfg(test)]
mod tests;

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn read_pt() {
        let mut meter = crate::Meter::new(crate::ReadLimits::default());
        let e = crate::formats::torch::read_pt(b"PK\x05\x06", &mut meter).unwrap_err();
        assert!(
            e.to_string().contains("not a readable torch.save zip"),
            "{e}"
        );
    }
}
