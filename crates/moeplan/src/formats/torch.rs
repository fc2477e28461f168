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
//! Every value is a [`Node`] in one `Vec`; a container refers to its
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
//! ([`super::sglang::recorded_steps`]).

use std::collections::HashMap;
use std::io::Cursor;

use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};
use crate::formats::limits::Meter;

const FORMAT: &str = "PyTorch .pt";
/// What limit errors call the unpickler's work.
const PICKLE: &str = "the pickle";

/// torch's legacy magic number 0x1950a86a20f9469cfc6c as pickle's LONG1
/// writes it: little-endian two's complement, wider than any `i64`.
const LEGACY_MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
/// The only legacy protocol version torch has written.
const LEGACY_PROTOCOL: i64 = 1001;

/// A node's index in the arena.
type Id = u32;

// What each thing costs to hold, doubled where it lives in a `Vec` or a
// map that may keep up to twice the capacity it uses.
const NODE_COST: u64 = 2 * (std::mem::size_of::<Node>() + std::mem::size_of::<u32>()) as u64;
const SLOT_COST: u64 = 2 * std::mem::size_of::<Id>() as u64;
const MARK_COST: u64 = 2 * std::mem::size_of::<usize>() as u64;
const MEMO_COST: u64 = 4 * (std::mem::size_of::<u32>() + std::mem::size_of::<Id>()) as u64;
/// A decoded row's `Vec` header, or a record's cache entry.
const ROW_COST: u64 = 2 * std::mem::size_of::<Vec<f64>>() as u64;

/// A value the restricted unpickler builds. Children are arena indices, so
/// every derived trait here is flat.
#[derive(Debug)]
enum Node {
    None,
    Bool(bool),
    Int(i64),
    /// An integer wider than 64 bits: pickle's little-endian bytes.
    Long(Box<[u8]>),
    /// A float or bytes: nothing here reads their value, so none is kept.
    Float,
    Str(Box<str>),
    Bytes,
    Tuple(Vec<Id>),
    /// Lists, and sets (which nothing here reads).
    List(Vec<Id>),
    Dict(Vec<(Id, Id)>),
    /// A global's `module.name`, never resolved.
    Global(Box<str>),
    Storage(Box<Storage>),
    Tensor(Box<Tensor>),
    /// What an unrecognised callable would have built.
    Object,
}

/// A persistent id `('storage', <type global>, key, location, numel[, view])`.
#[derive(Debug)]
struct Storage {
    key: Box<str>,
    /// The storage type's name without its module, e.g. `LongStorage`.
    dtype: Box<str>,
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, …)`: a view.
#[derive(Debug)]
struct Tensor {
    storage: Id,
    offset: u64,
    size: Box<[u64]>,
    stride: Box<[u64]>,
}

fn err(m: impl Into<String>) -> Error {
    Error::parse(FORMAT, m)
}

/// Reads a `.pt` dump (zip or legacy) into a trace, within `meter`'s budget.
///
/// ```
/// let mut meter = moeplan::Meter::new(moeplan::Budget::default());
/// let e = moeplan::formats::torch::read_pt(b"PK\x05\x06", &mut meter).unwrap_err();
/// assert!(e.to_string().contains("not a readable torch.save zip"), "{e}");
/// ```
pub fn read_pt(bytes: &[u8], meter: &mut Meter) -> Result<LoadTrace> {
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
/// let mut meter = moeplan::Meter::new(moeplan::Budget::default());
/// let e = moeplan::formats::torch::read_pickle(b"\x80\x02]q\x00h\x00a.", &mut meter).unwrap_err();
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

/// Every value one file's pickles built, with each node's depth.
#[derive(Debug, Default)]
struct Arena {
    nodes: Vec<Node>,
    depths: Vec<u32>,
}

impl Arena {
    fn add(&mut self, node: Node, depth: u32, meter: &mut Meter) -> Result<Id> {
        meter.depth(depth, PICKLE)?;
        meter.values(1, NODE_COST, PICKLE)?;
        let id = Id::try_from(self.nodes.len())
            .map_err(|_| err("the pickle builds more than 2³² values"))?;
        self.nodes.push(node);
        self.depths.push(depth);
        Ok(id)
    }

    fn node(&self, id: Id) -> Option<&Node> {
        self.nodes.get(id as usize)
    }

    fn node_mut(&mut self, id: Id) -> Option<&mut Node> {
        self.nodes.get_mut(id as usize)
    }

    fn depth(&self, id: Id) -> u32 {
        self.depths.get(id as usize).copied().unwrap_or(0)
    }

    /// The depth of a container holding `children`.
    fn over(&self, children: impl IntoIterator<Item = Id>) -> u32 {
        let deepest = children.into_iter().map(|c| self.depth(c)).max();
        deepest.unwrap_or(0).saturating_add(1)
    }

    /// Raises `id`'s depth to hold a child of `child` depth, within limits.
    fn deepen(&mut self, id: Id, child: u32, meter: &Meter) -> Result<()> {
        let d = child.saturating_add(1);
        if let Some(slot) = self.depths.get_mut(id as usize) {
            if d > *slot {
                meter.depth(d, PICKLE)?;
                *slot = d;
            }
        }
        Ok(())
    }

    fn str(&self, id: Id) -> Option<&str> {
        match self.node(id)? {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    fn int(&self, id: Id) -> Option<i64> {
        match self.node(id)? {
            Node::Int(i) => Some(*i),
            _ => None,
        }
    }

    fn list(&self, id: Id) -> Option<&[Id]> {
        match self.node(id)? {
            Node::List(items) => Some(items),
            _ => None,
        }
    }

    fn tuple(&self, id: Id) -> Option<&[Id]> {
        match self.node(id)? {
            Node::Tuple(items) => Some(items),
            _ => None,
        }
    }

    fn tensor(&self, id: Id) -> Option<&Tensor> {
        match self.node(id)? {
            Node::Tensor(t) => Some(t),
            _ => None,
        }
    }

    fn storage(&self, id: Id) -> Option<&Storage> {
        match self.node(id)? {
            Node::Storage(s) => Some(s),
            _ => None,
        }
    }

    /// `dict[key]` for a string key; the last assignment wins, as in Python.
    fn get(&self, dict: Id, key: &str) -> Option<Id> {
        match self.node(dict)? {
            Node::Dict(pairs) => pairs
                .iter()
                .rev()
                .find(|&&(k, _)| self.str(k) == Some(key))
                .map(|&(_, v)| v),
            _ => None,
        }
    }

    /// Each storage key's type name, first seen first (as torch keeps it).
    fn storage_dtypes(&self) -> HashMap<&str, &str> {
        let mut out = HashMap::new();
        for node in &self.nodes {
            if let Node::Storage(s) = node {
                out.entry(&*s.key).or_insert(&*s.dtype);
            }
        }
        out
    }

    /// What a node is, for messages.
    fn kind(&self, id: Id) -> &'static str {
        match self.node(id) {
            None => "missing",
            Some(Node::None) => "None",
            Some(Node::Bool(_)) => "a bool",
            Some(Node::Int(_) | Node::Long(_)) => "an integer",
            Some(Node::Float) => "a float",
            Some(Node::Str(_)) => "a string",
            Some(Node::Bytes) => "bytes",
            Some(Node::Tuple(_)) => "a tuple",
            Some(Node::List(_)) => "a list",
            Some(Node::Dict(_)) => "a dict",
            Some(Node::Global(_)) => "a global",
            Some(Node::Storage(_)) => "a storage",
            Some(Node::Tensor(_)) => "a tensor",
            Some(Node::Object) => "an object",
        }
    }
}

/// The restricted unpickler: a stack machine over the opcodes of protocols
/// 2–5 that build data (text-mode protocol 0 opcodes other than GLOBAL are
/// refused). One instance reads a file's successive pickles into one arena.
struct Unpickler<'a, 'm> {
    data: &'a [u8],
    pos: usize,
    arena: Arena,
    stack: Vec<Id>,
    /// Stack heights at each open MARK. As in CPython's metastack, what lies
    /// below the top mark is out of reach until the mark is taken.
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
    meter: &'m mut Meter,
}

impl<'a, 'm> Unpickler<'a, 'm> {
    fn new(data: &'a [u8], meter: &'m mut Meter) -> Self {
        Unpickler {
            data,
            pos: 0,
            arena: Arena::default(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            meter,
        }
    }

    fn into_arena(self) -> Arena {
        self.arena
    }

    /// Reads the next pickle (to its STOP) and returns its value. The memo
    /// and stack are the pickle's own; the arena is shared.
    fn load(&mut self) -> Result<Id> {
        self.stack.clear();
        self.marks.clear();
        self.memo.clear();
        loop {
            let at = self.pos;
            let op = self.byte()?;
            if op == b'.' {
                return self.pop();
            }
            self.step(op, at)?;
        }
    }

    fn step(&mut self, op: u8, at: usize) -> Result<()> {
        match op {
            0x80 => self.proto(),
            // FRAME: a hint for buffered readers; the frame's opcodes follow.
            0x95 => self.take(8).map(drop),
            b'(' => self.mark(),
            b'N' => self.leaf(Node::None),
            0x88 => self.leaf(Node::Bool(true)),
            0x89 => self.leaf(Node::Bool(false)),
            b'K' => {
                let v = self.byte()?;
                self.leaf(Node::Int(v.into()))
            }
            b'M' => {
                let v = u16::from_le_bytes(self.array()?);
                self.leaf(Node::Int(v.into()))
            }
            b'J' => {
                let v = i32::from_le_bytes(self.array()?);
                self.leaf(Node::Int(v.into()))
            }
            0x8a => {
                let n = self.byte()?;
                self.long(n.into())
            }
            0x8b => {
                let n = i32::from_le_bytes(self.array()?);
                self.long(usize::try_from(n).map_err(|_| err("negative LONG4 length"))?)
            }
            b'G' => {
                self.take(8)?;
                self.leaf(Node::Float)
            }
            b'X' | b'T' | b'B' | 0x8c | b'U' | b'C' | 0x8d | 0x8e | 0x96 => self.text_or_bytes(op),
            b')' => self.leaf(Node::Tuple(Vec::new())),
            b']' | 0x8f => self.leaf(Node::List(Vec::new())),
            b'}' => self.leaf(Node::Dict(Vec::new())),
            b't' | 0x91 => {
                let items = self.pop_mark()?;
                self.container(items, Node::Tuple)
            }
            0x85..=0x87 => self.small_tuple(usize::from(op - 0x84)),
            b'l' => {
                let items = self.pop_mark()?;
                self.container(items, Node::List)
            }
            b'd' => {
                let items = self.pop_mark()?;
                self.dict(items)
            }
            b'a' => {
                let v = self.pop()?;
                self.append(vec![v])
            }
            b'e' | 0x90 => {
                let items = self.pop_mark()?;
                self.append(items)
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.set_items(vec![k, v])
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.set_items(items)
            }
            b'c' => self.global(),
            0x93 => self.stack_global(),
            b'q' => {
                let k = self.byte()?;
                self.memo_put(k.into())
            }
            b'r' => {
                let k = u32::from_le_bytes(self.array()?);
                self.memo_put(k)
            }
            0x94 => {
                let k = u32::try_from(self.memo.len()).map_err(|_| err("pickle memo too large"))?;
                self.memo_put(k)
            }
            b'h' => {
                let k = self.byte()?;
                self.memo_get(k.into())
            }
            b'j' => {
                let k = u32::from_le_bytes(self.array()?);
                self.memo_get(k)
            }
            b'2' => {
                let top = self.top()?;
                self.push(top)
            }
            b'0' => self.pop_any(),
            b'1' => self.pop_mark().map(drop),
            b'Q' => self.persistent_id(),
            b'R' => self.reduce(),
            0x81 => self.new_object(1),
            0x92 => self.new_object(2),
            b'b' => self.build(),
            _ => Err(err(format!(
                "unsupported pickle opcode 0x{op:02x} at byte {at}"
            ))),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let data: &'a [u8] = self.data;
        let s = self
            .pos
            .checked_add(n)
            .and_then(|end| data.get(self.pos..end))
            .ok_or_else(|| err("pickle ends early"))?;
        self.pos += n;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8> {
        let b = self.array::<1>()?;
        Ok(u8::from_le_bytes(b))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.take(N)?
            .try_into()
            .map_err(|_| err("pickle ends early"))
    }

    /// A length argument of `N` bytes (little-endian, unsigned).
    fn length<const N: usize>(&mut self) -> Result<usize> {
        let mut b = [0u8; 8];
        for (d, s) in b.iter_mut().zip(self.array::<N>()?) {
            *d = s;
        }
        usize::try_from(u64::from_le_bytes(b)).map_err(|_| err("pickle ends early"))
    }

    fn line(&mut self) -> Result<&'a str> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| err("pickle ends early, inside a line"))?;
        let line = self.take(n + 1)?;
        std::str::from_utf8(line.get(..n).unwrap_or_default())
            .map_err(|_| err("pickle name is not UTF-8"))
    }

    fn proto(&mut self) -> Result<()> {
        let v = self.byte()?;
        if v > 5 {
            return Err(err(format!("pickle protocol {v} is newer than 5")));
        }
        Ok(())
    }

    /// The bottom of the current mark's frame.
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn push(&mut self, id: Id) -> Result<()> {
        self.meter.bytes(SLOT_COST, PICKLE)?;
        self.stack.push(id);
        Ok(())
    }

    fn pop(&mut self) -> Result<Id> {
        if self.stack.len() <= self.floor() {
            return Err(err("pickle stack underflow"));
        }
        self.stack
            .pop()
            .ok_or_else(|| err("pickle stack underflow"))
    }

    fn top(&self) -> Result<Id> {
        match self.stack.last() {
            Some(&id) if self.stack.len() > self.floor() => Ok(id),
            _ => Err(err("pickle stack underflow")),
        }
    }

    fn mark(&mut self) -> Result<()> {
        self.meter.bytes(MARK_COST, PICKLE)?;
        self.marks.push(self.stack.len());
        Ok(())
    }

    /// Everything above the top mark, and the mark itself.
    fn pop_mark(&mut self) -> Result<Vec<Id>> {
        let m = self.marks.pop().ok_or_else(|| err("pickle mark missing"))?;
        if m > self.stack.len() {
            return Err(err("pickle stack underflow"));
        }
        Ok(self.stack.split_off(m))
    }

    /// POP: the top item, or an empty mark frame (as CPython does).
    fn pop_any(&mut self) -> Result<()> {
        if self.stack.len() > self.floor() {
            self.pop().map(drop)
        } else {
            self.pop_mark().map(drop)
        }
    }

    fn add(&mut self, node: Node, depth: u32) -> Result<()> {
        let id = self.arena.add(node, depth, self.meter)?;
        self.push(id)
    }

    fn leaf(&mut self, node: Node) -> Result<()> {
        self.add(node, 1)
    }

    fn charge_children(&mut self, n: usize) -> Result<()> {
        self.meter
            .bytes((n as u64).saturating_mul(SLOT_COST), PICKLE)
    }

    fn container(&mut self, items: Vec<Id>, make: fn(Vec<Id>) -> Node) -> Result<()> {
        self.charge_children(items.len())?;
        let depth = self.arena.over(items.iter().copied());
        self.add(make(items), depth)
    }

    fn small_tuple(&mut self, n: usize) -> Result<()> {
        if self.stack.len() < self.floor().saturating_add(n) {
            return Err(err("pickle stack underflow"));
        }
        let items = self.stack.split_off(self.stack.len() - n);
        self.container(items, Node::Tuple)
    }

    fn dict(&mut self, items: Vec<Id>) -> Result<()> {
        let pairs = pairs(&items)?;
        self.charge_children(items.len())?;
        let depth = self.arena.over(items);
        self.add(Node::Dict(pairs), depth)
    }

    /// APPEND, APPENDS (and ADDITEMS to a set): the list is below the items.
    fn append(&mut self, items: Vec<Id>) -> Result<()> {
        let target = self.top()?;
        self.charge_children(items.len())?;
        let child = self.arena.over(items.iter().copied()).saturating_sub(1);
        match self.arena.node_mut(target) {
            Some(Node::List(list)) => list.extend(items),
            _ => return Err(err("APPEND to something that is not a list")),
        }
        self.arena.deepen(target, child, self.meter)
    }

    /// SETITEM, SETITEMS: the dict is below the key, value pairs.
    fn set_items(&mut self, items: Vec<Id>) -> Result<()> {
        let target = self.top()?;
        let new = pairs(&items)?;
        self.charge_children(items.len())?;
        let child = self.arena.over(items).saturating_sub(1);
        match self.arena.node_mut(target) {
            Some(Node::Dict(dict)) => dict.extend(new),
            _ => return Err(err("SETITEM on something that is not a dict")),
        }
        self.arena.deepen(target, child, self.meter)
    }

    fn text_or_bytes(&mut self, op: u8) -> Result<()> {
        let n = match op {
            b'U' | b'C' | 0x8c => self.length::<1>()?,
            b'X' | b'B' => self.length::<4>()?,
            // BINSTRING's length is signed.
            b'T' => usize::try_from(i32::from_le_bytes(self.array()?))
                .map_err(|_| err("negative string length"))?,
            _ => self.length::<8>()?,
        };
        let b = self.take(n)?;
        if matches!(op, b'B' | b'C' | 0x8e | 0x96) {
            return self.leaf(Node::Bytes);
        }
        self.meter.bytes(n as u64, PICKLE)?;
        let s = self.text(b)?;
        self.leaf(Node::Str(s))
    }

    /// Text as Python 2 strings may hold it: UTF-8, else lossily.
    fn text(&mut self, b: &[u8]) -> Result<Box<str>> {
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.into()),
            Err(_) => {
                // Each replaced byte may become three.
                self.meter.bytes(2 * b.len() as u64, PICKLE)?;
                Ok(String::from_utf8_lossy(b).into())
            }
        }
    }

    fn long(&mut self, n: usize) -> Result<()> {
        let b = self.take(n)?;
        if n <= 8 {
            return self.leaf(Node::Int(le_signed(b)));
        }
        self.meter.bytes(n as u64, PICKLE)?;
        self.leaf(Node::Long(b.into()))
    }

    fn global(&mut self) -> Result<()> {
        let module = self.line()?;
        let name = self.line()?;
        self.named_global(module, name)
    }

    fn stack_global(&mut self) -> Result<()> {
        let name = self.pop()?;
        let module = self.pop()?;
        match (self.arena.str(module), self.arena.str(name)) {
            (Some(m), Some(n)) => {
                let full = format!("{m}.{n}");
                self.meter.bytes(full.len() as u64, PICKLE)?;
                self.leaf(Node::Global(full.into()))
            }
            _ => Err(err("STACK_GLOBAL needs two strings")),
        }
    }

    fn named_global(&mut self, module: &str, name: &str) -> Result<()> {
        let full = format!("{module}.{name}");
        self.meter.bytes(full.len() as u64, PICKLE)?;
        self.leaf(Node::Global(full.into()))
    }

    fn memo_put(&mut self, key: u32) -> Result<()> {
        let id = self.top()?;
        if !self.memo.contains_key(&key) {
            self.meter.bytes(MEMO_COST, PICKLE)?;
        }
        self.memo.insert(key, id);
        Ok(())
    }

    /// GET pushes the remembered index: the value is shared, never copied.
    fn memo_get(&mut self, key: u32) -> Result<()> {
        let id = *self
            .memo
            .get(&key)
            .ok_or_else(|| err(format!("pickle memo key {key} missing")))?;
        self.push(id)
    }

    fn persistent_id(&mut self) -> Result<()> {
        let pid = self.pop()?;
        let storage = self.storage_of(pid)?;
        self.meter
            .bytes((storage.key.len() + storage.dtype.len()) as u64, PICKLE)?;
        let depth = self.arena.over([pid]);
        self.add(Node::Storage(Box::new(storage)), depth)
    }

    /// `('storage', <type global>, key, location, numel)`, with a sixth
    /// `view_metadata` (always None since torch 1.0) in legacy streams.
    fn storage_of(&self, pid: Id) -> Result<Storage> {
        let unknown = || err("unknown persistent id (only tensor storages are read)");
        let t = self.arena.tuple(pid).ok_or_else(unknown)?;
        let (Some(&tag), Some(&ty), Some(&key), Some(&numel)) =
            (t.first(), t.get(1), t.get(2), t.get(4))
        else {
            return Err(unknown());
        };
        if self.arena.str(tag) != Some("storage") || t.len() > 6 {
            return Err(unknown());
        }
        let dtype = match self.arena.node(ty) {
            Some(Node::Global(g)) => g.rsplit('.').next().unwrap_or_default(),
            _ => return Err(err("storage type is not a global")),
        };
        let key = self
            .arena
            .str(key)
            .ok_or_else(|| err("storage key is not a string"))?;
        if self.arena.int(numel).is_none_or(|n| n < 0) {
            return Err(err("storage size is not a count"));
        }
        if let Some(&view) = t.get(5) {
            if !matches!(self.arena.node(view), Some(Node::None)) {
                return Err(err(
                    "storage views (legacy view metadata) are not supported",
                ));
            }
        }
        Ok(Storage {
            key: key.into(),
            dtype: dtype.into(),
        })
    }

    /// REDUCE never calls: the three recognised callables build data, any
    /// other leaves an inert object.
    fn reduce(&mut self) -> Result<()> {
        let args = self.pop()?;
        let f = self.pop()?;
        let name = match self.arena.node(f) {
            Some(Node::Global(g)) => g,
            _ => return Err(err("REDUCE of something that is not a global")),
        };
        let a = self
            .arena
            .tuple(args)
            .ok_or_else(|| err("REDUCE arguments are not a tuple"))?;
        let node = match &**name {
            "torch._utils._rebuild_tensor_v2" | "torch._utils._rebuild_tensor" => {
                Node::Tensor(Box::new(self.tensor_of(a)?))
            }
            "collections.OrderedDict" => Node::Dict(Vec::new()),
            _ => Node::Object,
        };
        if let Node::Tensor(t) = &node {
            self.meter
                .bytes(8 * (t.size.len() + t.stride.len()) as u64, PICKLE)?;
        }
        let depth = self.arena.over([f, args]);
        self.add(node, depth)
    }

    fn tensor_of(&self, args: &[Id]) -> Result<Tensor> {
        let (Some(&storage), Some(&offset), Some(&size), Some(&stride)) =
            (args.first(), args.get(1), args.get(2), args.get(3))
        else {
            return Err(err("malformed tensor"));
        };
        if self.arena.storage(storage).is_none() {
            return Err(err("tensor without a storage"));
        }
        let offset = self
            .arena
            .int(offset)
            .and_then(|o| u64::try_from(o).ok())
            .ok_or_else(|| err("tensor offset is not a count"))?;
        Ok(Tensor {
            storage,
            offset,
            size: self.counts(size)?,
            stride: self.counts(stride)?,
        })
    }

    /// A tuple of non-negative integers (a tensor's size or stride).
    fn counts(&self, id: Id) -> Result<Box<[u64]>> {
        let not_counts = || err("tensor size or stride is not a tuple of counts");
        self.arena
            .tuple(id)
            .ok_or_else(not_counts)?
            .iter()
            .map(|&i| {
                self.arena
                    .int(i)
                    .and_then(|v| u64::try_from(v).ok())
                    .ok_or_else(not_counts)
            })
            .collect()
    }

    /// NEWOBJ (`cls, args`) and NEWOBJ_EX (`cls, args, kwargs`): inert.
    fn new_object(&mut self, args: usize) -> Result<()> {
        let mut parts = Vec::with_capacity(args + 1);
        for _ in 0..=args {
            parts.push(self.pop()?);
        }
        let depth = self.arena.over(parts);
        self.add(Node::Object, depth)
    }

    /// BUILD: state for the object below it. Plain data ignores the state,
    /// but the object now holds it, so its depth grows.
    fn build(&mut self) -> Result<()> {
        let state = self.pop()?;
        let target = self.top()?;
        let child = self.arena.depth(state);
        self.arena.deepen(target, child, self.meter)
    }
}

/// Key, value pairs from a flat run of items.
fn pairs(items: &[Id]) -> Result<Vec<(Id, Id)>> {
    let chunks = items.chunks_exact(2);
    if !chunks.remainder().is_empty() {
        return Err(err("SETITEMS or DICT with an odd count"));
    }
    Ok(chunks
        .filter_map(|p| match *p {
            [k, v] => Some((k, v)),
            _ => None,
        })
        .collect())
}

/// A little-endian two's-complement integer of at most 8 bytes.
fn le_signed(b: &[u8]) -> i64 {
    let fill = if b.last().is_some_and(|&x| x & 0x80 != 0) {
        0xff
    } else {
        0
    };
    let mut buf = [fill; 8];
    for (d, s) in buf.iter_mut().zip(b) {
        *d = *s;
    }
    i64::from_le_bytes(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Budget;

    /// `stat` mode dumps its whole recorder buffer: the steps no pass filled
    /// (all zero) are dropped, the recorded ones kept in order.
    #[test]
    fn stat_drops_the_buffer_steps_no_pass_filled() {
        let mut meter = Meter::new(Budget::mib(1));
        let data = vec![
            0.0, 0.0, 4.0, 1.0, // step 0: layer 0 dense, layer 1 recorded
            0.0, 0.0, 0.0, 0.0, // step 1: an empty slot
            0.0, 0.0, 1.0, 5.0, // step 2
        ];
        let t = stat_trace(&[3, 2, 2], data, &mut meter).unwrap();
        assert_eq!(t.num_batches(), 2);
        assert_eq!(t.layer_ids(), &[1]);
        assert_eq!(t.counts().as_slice().unwrap(), &[4.0, 1.0, 1.0, 5.0]);
        let mut meter = Meter::new(Budget::mib(1));
        assert!(stat_trace(&[2, 1, 2], vec![0.0; 4], &mut meter).is_err());
    }

    fn unpickle(bytes: &[u8], budget: Budget) -> Result<(Arena, Id)> {
        let mut meter = Meter::new(budget);
        let mut u = Unpickler::new(bytes, &mut meter);
        let root = u.load()?;
        Ok((u.into_arena(), root))
    }

    /// `[]`, then `count` times a list of two references to the previous.
    fn memo_bomb(count: u8) -> Vec<u8> {
        let mut p = b"\x80\x02]q\x00".to_vec();
        for i in 0..count {
            p.extend_from_slice(&[b'(', b'h', i, b'h', i, b'l', b'q', i + 1]);
        }
        p.push(b'.');
        p
    }

    #[test]
    fn memo_gets_share_instead_of_copying() -> Result<()> {
        let (arena, root) = unpickle(&memo_bomb(60), Budget::mib(1))?;
        // 2^60 elements as Python sees them, 61 nodes here.
        assert_eq!(arena.nodes.len(), 61);
        let children = arena.list(root).map(<[Id]>::to_vec);
        assert_eq!(children.as_ref().map(Vec::len), Some(2));
        assert_eq!(
            children.as_ref().and_then(|c| c.first()),
            children.as_ref().and_then(|c| c.get(1))
        );
        assert_eq!(arena.depth(root), 61);
        Ok(())
    }

    #[test]
    fn nesting_is_refused_at_the_budget_depth_for_every_constructor() {
        let cases: [(&str, Vec<u8>); 5] = [
            ("TUPLE1", [b"N".as_slice(), &[0x85; 100]].concat()),
            (
                "TUPLE",
                [b"(".repeat(100), b"N".to_vec(), b"t".repeat(100)].concat(),
            ),
            ("APPEND", [b"]".repeat(100), b"a".repeat(99)].concat()),
            (
                "SETITEM",
                [b"}".to_vec(), b"K\x00}".repeat(100), b"s".repeat(100)].concat(),
            ),
            // x → os.system(x), forty times over, through the memo
            (
                "REDUCE",
                [
                    b"N".as_slice(),
                    &b"q\x000cos\nsystem\nh\x00\x85R".repeat(40),
                ]
                .concat(),
            ),
        ];
        for (name, body) in cases {
            let p = [b"\x80\x02".as_slice(), &body, b"."].concat();
            let e = unpickle(&p, Budget::mib(1))
                .map(drop)
                .unwrap_err()
                .to_string();
            assert!(e.contains("nests deeper than 64 levels"), "{name}: {e}");
        }
    }

    #[test]
    fn a_deep_arena_drops_without_recursion() -> Result<()> {
        // With the depth limit lifted, a million nested tuples still build
        // and drop flat (a recursive drop would overflow the test's stack).
        let budget = Budget {
            max_depth: u32::MAX,
            ..Budget::mib(256)
        };
        let p = [b"\x80\x02N".as_slice(), &[0x85; 1_000_000], b"."].concat();
        let (arena, root) = unpickle(&p, budget)?;
        assert_eq!(arena.depth(root), 1_000_001);
        drop(arena);
        Ok(())
    }

    #[test]
    fn a_list_holding_itself_is_just_an_index() -> Result<()> {
        let (arena, root) = unpickle(b"\x80\x02]q\x00h\x00a.", Budget::mib(1))?;
        assert_eq!(arena.list(root), Some(&[root][..]));
        Ok(())
    }

    #[test]
    fn marks_fence_off_the_stack_below() {
        // APPEND inside a mark frame must not reach the list below the mark.
        let e = unpickle(b"\x80\x02](Na.", Budget::mib(1))
            .map(drop)
            .unwrap_err();
        assert!(e.to_string().contains("underflow"), "{e}");
        let e = unpickle(b"\x80\x02N(\x85.", Budget::mib(1))
            .map(drop)
            .unwrap_err();
        assert!(e.to_string().contains("underflow"), "{e}");
    }

    #[test]
    fn long1_wider_than_64_bits_is_kept_as_bytes() -> Result<()> {
        let (arena, root) = unpickle(
            b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.",
            Budget::mib(1),
        )?;
        assert!(matches!(arena.node(root), Some(Node::Long(b)) if **b == LEGACY_MAGIC));
        let (arena, root) = unpickle(b"\x80\x02\x8a\x02\x00\xff.", Budget::mib(1))?;
        assert_eq!(arena.int(root), Some(-256));
        Ok(())
    }

    #[test]
    fn every_allocation_is_charged() {
        // 100k empty lists at ~80 bytes each do not fit in 1 MiB.
        let p = [b"\x80\x02(".as_slice(), &b"]".repeat(100_000), b"l."].concat();
        let e = unpickle(&p, Budget::mib(1))
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("reading limit"), "{e}");
        // A string is charged for its bytes.
        let mut s = b"\x80\x02X".to_vec();
        s.extend_from_slice(&(2u32 << 20).to_le_bytes());
        s.extend(std::iter::repeat_n(b'a', 2 << 20));
        s.push(b'.');
        let e = unpickle(&s, Budget::mib(1))
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("reading limit"), "{e}");
    }

    #[test]
    fn tensors_are_charged_by_shape_before_decoding() {
        let t = Tensor {
            storage: 0,
            offset: 0,
            size: vec![1_000_000, 1_000_000].into(),
            stride: vec![0, 0].into(),
        };
        let mut meter = Meter::new(Budget::mib(8));
        let e = tensor_f64(&t, Dtype::I64, &[0; 8], &mut meter, "x").unwrap_err();
        assert!(matches!(e, Error::Limit(_)), "{e}");
        let t = Tensor {
            storage: 0,
            offset: 1,
            size: vec![2, 2].into(),
            stride: vec![1, 2].into(),
        };
        let data: Vec<u8> = (0u16..6)
            .flat_map(|x| half::f16::from_f32(f32::from(x)).to_le_bytes())
            .collect();
        assert_eq!(
            tensor_f64(&t, Dtype::F16, &data, &mut meter, "x"),
            Ok(vec![1.0, 3.0, 2.0, 4.0])
        );
        let data: Vec<u8> = (0u16..6)
            .flat_map(|x| half::bf16::from_f32(f32::from(x)).to_le_bytes())
            .collect();
        assert_eq!(
            tensor_f64(&t, Dtype::Bf16, &data, &mut meter, "x"),
            Ok(vec![1.0, 3.0, 2.0, 4.0])
        );
        let e = tensor_f64(&t, Dtype::Bf16, &data[..8], &mut meter, "x").unwrap_err();
        assert!(e.to_string().contains("past its storage"), "{e}");
    }

    #[test]
    fn legacy_detection_needs_the_magic() {
        let head = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
        assert!(is_legacy(head));
        assert!(!is_legacy(&head[..10]));
        assert!(!is_legacy(
            b"\x80\x02\x8a\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00."
        ));
        let framed = [
            b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00".as_slice(),
            &head[2..],
        ]
        .concat();
        assert!(is_legacy(&framed));
    }
}
