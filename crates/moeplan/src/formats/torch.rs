//! SGLang's `torch.save` expert-distribution dumps (`.pt`): a zip holding a
//! pickle (`*/data.pkl`) and raw tensor storage (`*/data/<key>`).
//!
//! The pickle is read by a restricted unpickler that only builds plain data:
//! dicts, lists, tuples, numbers, strings, and tensors. It recognises exactly
//! two callables — `torch._utils._rebuild_tensor_v2` (a tensor view of a
//! storage) and `collections.OrderedDict` (an empty dict) — and never calls
//! anything; every other global stays an inert name. Storages are read from
//! the zip by key as little-endian arrays.
//!
//! Two dump modes are understood:
//! - `stat`: `{"rank", "logical_count": [steps][layers][experts], …}` (or
//!   `[layers][experts]`),
//! - `per_pass`: records with `global_physical_count[layers][physical]`,
//!   mapped back to logical experts through `last_physical_to_logical_map`
//!   (top level or per record).

use std::collections::HashMap;
use std::io::{Cursor, Read};

use crate::error::{Error, Result};
use crate::trace::LoadTrace;

const FORMAT: &str = "PyTorch .pt";
/// Deepest nesting the unpickler accepts (hostile pickles nest without end).
const MAX_DEPTH: usize = 64;
/// Most values on the unpickler's stack and memo.
const MAX_ITEMS: usize = 1 << 22;

/// A value the restricted unpickler builds.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    /// A global's `module.name`, never resolved.
    Global(String),
    /// `(storage key, dtype name, elements)` from a persistent id.
    Storage(String, String, usize),
    Tensor(Tensor),
    Mark,
}

#[derive(Debug, Clone, PartialEq)]
struct Tensor {
    key: String,
    dtype: String,
    offset: usize,
    size: Vec<usize>,
    stride: Vec<usize>,
}

fn err(m: impl Into<String>) -> Error {
    Error::parse(FORMAT, m)
}

/// Reads a `.pt` dump into a trace.
pub fn read_pt(bytes: &[u8], meter: &mut crate::Meter) -> Result<LoadTrace> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| err(format!("not a readable torch.save zip: {e}")))?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let pkl = names
        .iter()
        .find(|n| n.ends_with("data.pkl"))
        .cloned()
        .ok_or_else(|| err("no data.pkl inside"))?;
    let prefix = pkl.trim_end_matches("data.pkl").to_string();
    let pickle = read_member(&mut zip, &pkl)?;
    let root = Unpickler::new(&pickle).run()?;
    let mut storages: HashMap<String, Vec<u8>> = HashMap::new();
    let mut load = |key: &str| -> Result<Vec<u8>> {
        if let Some(b) = storages.get(key) {
            return Ok(b.clone());
        }
        let b = read_member(&mut zip, &format!("{prefix}data/{key}"))?;
        storages.insert(key.to_string(), b.clone());
        Ok(b)
    };
    let get = |v: &Value, k: &str| match v {
        Value::Dict(items) => items
            .iter()
            .find(|(key, _)| *key == Value::Str(k.into()))
            .map(|(_, v)| v.clone()),
        _ => None,
    };
    if let Some(Value::Tensor(t)) = get(&root, "logical_count") {
        let (shape, data) = tensor_f64(&t, &load(&t.key)?)?;
        return counts_to_trace(&shape, data);
    }
    let records = match get(&root, "records") {
        Some(Value::List(r)) => r,
        _ => match &root {
            Value::List(r) => r.clone(),
            _ => {
                return Err(err(
                    "neither a logical_count tensor nor per-pass records with global_physical_count",
                ));
            }
        },
    };
    let top_map = get(&root, "last_physical_to_logical_map");
    let mut window = Vec::new();
    let mut map: Option<Vec<Vec<i64>>> = None;
    for (i, rec) in records.iter().enumerate() {
        let Some(Value::Tensor(c)) = get(rec, "global_physical_count") else {
            return Err(err(format!(
                "record {i} has no global_physical_count tensor"
            )));
        };
        let (shape, data) = tensor_f64(&c, &load(&c.key)?)?;
        if shape.len() != 2 {
            return Err(err(format!(
                "record {i}: global_physical_count is {}-D, expected [layers][physical]",
                shape.len()
            )));
        }
        window.push(
            data.chunks(shape[1].max(1))
                .map(<[f64]>::to_vec)
                .collect::<Vec<_>>(),
        );
        if let Some(Value::Tensor(m)) =
            get(rec, "last_physical_to_logical_map").or_else(|| top_map.clone())
        {
            let (ms, md) = tensor_f64(&m, &load(&m.key)?)?;
            if ms.len() != 2 {
                return Err(err(
                    "last_physical_to_logical_map must be [layers][physical]",
                ));
            }
            map = Some(
                md.chunks(ms[1].max(1))
                    .map(|r| r.iter().map(|&x| x as i64).collect())
                    .collect(),
            );
        }
    }
    let map = map.ok_or_else(|| err("per-pass records without last_physical_to_logical_map"))?;
    super::vllm::physical_to_logical_counts(&window, &map, None, None, FORMAT, meter)
}

fn read_member(zip: &mut zip::ZipArchive<Cursor<&[u8]>>, name: &str) -> Result<Vec<u8>> {
    let mut f = zip.by_name(name).map_err(|e| err(format!("{name}: {e}")))?;
    if f.size() > 1 << 32 {
        return Err(err(format!("{name} is larger than 4 GiB")));
    }
    let mut out = Vec::with_capacity(f.size() as usize);
    f.read_to_end(&mut out)
        .map_err(|e| err(format!("{name}: {e}")))?;
    Ok(out)
}

fn counts_to_trace(shape: &[usize], data: Vec<f64>) -> Result<LoadTrace> {
    let shape3 = match *shape {
        [l, e] => (1, l, e),
        [b, l, e] => (b, l, e),
        _ => {
            return Err(err(format!(
                "logical_count is {}-D, expected [layers][experts] or [steps][layers][experts]",
                shape.len()
            )));
        }
    };
    let a = ndarray::Array3::from_shape_vec(shape3, data).map_err(|e| err(e.to_string()))?;
    let l = shape3.1;
    let moe: Vec<usize> = (0..l)
        .filter(|&li| a.index_axis(ndarray::Axis(1), li).iter().any(|&x| x != 0.0))
        .collect();
    if moe.is_empty() {
        return Err(Error::Trace("every layer's counts are zero".into()));
    }
    let counts = a.select(ndarray::Axis(1), &moe);
    Ok(LoadTrace::new(counts, moe.iter().map(|&x| x as u32).collect())?.with_model_layers(l))
}

/// A tensor's elements as f64 in C order, with its shape.
fn tensor_f64(t: &Tensor, storage: &[u8]) -> Result<(Vec<usize>, Vec<f64>)> {
    let width = match t.dtype.as_str() {
        "LongStorage" | "DoubleStorage" => 8,
        "IntStorage" | "FloatStorage" => 4,
        "ShortStorage" => 2,
        "ByteStorage" | "CharStorage" | "BoolStorage" => 1,
        other => {
            return Err(err(format!(
                "tensor dtype {other} is not supported (integers, float32, float64)"
            )));
        }
    };
    if t.size.len() != t.stride.len() {
        return Err(err("tensor size and stride differ in length"));
    }
    let n: usize = t
        .size
        .iter()
        .try_fold(1usize, |a, &s| a.checked_mul(s))
        .ok_or_else(|| err("tensor too large"))?;
    if n > MAX_ITEMS * 16 {
        return Err(err("tensor too large"));
    }
    let elements = storage.len() / width;
    let read = |i: usize| -> Result<f64> {
        let b = storage
            .get(i * width..(i + 1) * width)
            .ok_or_else(|| err("tensor reaches past its storage"))?;
        Ok(match t.dtype.as_str() {
            "LongStorage" => i64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f64,
            "DoubleStorage" => f64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
            "IntStorage" => i32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as f64,
            "FloatStorage" => f32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as f64,
            "ShortStorage" => i16::from_le_bytes(b.try_into().unwrap_or([0; 2])) as f64,
            "CharStorage" => b[0] as i8 as f64,
            _ => b[0] as f64,
        })
    };
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; t.size.len()];
    for _ in 0..n {
        let pos = idx
            .iter()
            .zip(&t.stride)
            .try_fold(t.offset, |a, (&i, &s)| a.checked_add(i.checked_mul(s)?))
            .ok_or_else(|| err("tensor index overflows"))?;
        if pos >= elements {
            return Err(err("tensor reaches past its storage"));
        }
        out.push(read(pos)?);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < t.size[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok((t.size.clone(), out))
}

/// The restricted unpickler: a stack machine over the opcodes torch.save's
/// pickles use (protocols 2–4). Anything else is an error.
struct Unpickler<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<Value>,
    memo: HashMap<u32, Value>,
}

impl<'a> Unpickler<'a> {
    fn new(data: &'a [u8]) -> Self {
        Unpickler {
            data,
            pos: 0,
            stack: Vec::new(),
            memo: HashMap::new(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| err("pickle ends early"))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn pop(&mut self) -> Result<Value> {
        self.stack
            .pop()
            .ok_or_else(|| err("pickle stack underflow"))
    }

    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let m = self
            .stack
            .iter()
            .rposition(|v| *v == Value::Mark)
            .ok_or_else(|| err("pickle mark missing"))?;
        let items = self.stack.split_off(m + 1);
        self.stack.pop();
        Ok(items)
    }

    fn push(&mut self, v: Value) -> Result<()> {
        if self.stack.len() >= MAX_ITEMS {
            return Err(err("pickle too large"));
        }
        self.stack.push(v);
        Ok(())
    }

    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| err("pickle line without end"))?;
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| err("pickle name is not UTF-8"))?
            .to_string();
        self.pos += n + 1;
        Ok(s)
    }

    /// MEMOIZE-style opcodes: remember the top of the stack under `key`.
    fn memo_put(&mut self, key: u32) -> Result<()> {
        let v = self
            .stack
            .last()
            .cloned()
            .ok_or_else(|| err("memo of empty stack"))?;
        self.memo.insert(key, v);
        Ok(())
    }

    /// GET-style opcodes: push what was remembered under `key`.
    fn memo_get(&mut self, key: u32) -> Result<()> {
        let v = self
            .memo
            .get(&key)
            .cloned()
            .ok_or_else(|| err("memo key missing"))?;
        self.push(v)
    }

    /// String opcodes: push the next `n` bytes as text.
    fn push_string(&mut self, n: usize) -> Result<()> {
        let v = self.string(n)?;
        self.push(v)
    }

    fn string(&mut self, n: usize) -> Result<Value> {
        let b = self.take(n)?;
        Ok(Value::Str(String::from_utf8_lossy(b).into_owned()))
    }

    fn run(mut self) -> Result<Value> {
        loop {
            if self.memo.len() > MAX_ITEMS {
                return Err(err("pickle memo too large"));
            }
            let op = self.u8()?;
            match op {
                0x80 => {
                    self.u8()?;
                } // PROTO
                0x95 => {
                    self.take(8)?;
                } // FRAME
                b'.' => return self.pop(), // STOP
                b'}' => self.push(Value::Dict(Vec::new()))?,
                b']' => self.push(Value::List(Vec::new()))?,
                b')' => self.push(Value::Tuple(Vec::new()))?,
                b'(' => self.push(Value::Mark)?,
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'K' => {
                    let v = self.u8()?;
                    self.push(Value::Int(v.into()))?
                }
                b'M' => {
                    let b = self.take(2)?;
                    self.push(Value::Int(u16::from_le_bytes([b[0], b[1]]).into()))?
                }
                b'J' => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(v.into()))?
                }
                0x8a => {
                    // LONG1
                    let n = self.u8()? as usize;
                    let b = self.take(n)?;
                    if n > 8 {
                        return Err(err("integer wider than 64 bits"));
                    }
                    let mut buf = if b.last().is_some_and(|&x| x & 0x80 != 0) {
                        [0xffu8; 8]
                    } else {
                        [0u8; 8]
                    };
                    buf[..n].copy_from_slice(b);
                    self.push(Value::Int(i64::from_le_bytes(buf)))?
                }
                b'G' => {
                    let b = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    self.push(Value::Float(f64::from_be_bytes(a)))?
                }
                b'X' | b'T' => {
                    let n = self.u32()? as usize;
                    self.push_string(n)?
                }
                0x8c | b'U' => {
                    let n = self.u8()? as usize;
                    self.push_string(n)?
                }
                b'q' => {
                    let k = self.u8()?.into();
                    self.memo_put(k)?
                }
                b'r' => {
                    let k = self.u32()?;
                    self.memo_put(k)?
                }
                0x94 => self.memo_put(self.memo.len() as u32)?,
                b'h' => {
                    let k = self.u8()?.into();
                    self.memo_get(k)?
                }
                b'j' => {
                    let k = self.u32()?;
                    self.memo_get(k)?
                }
                b't' => {
                    let items = self.pop_mark()?;
                    self.push(Value::Tuple(items))?
                }
                0x85 => {
                    let a = self.pop()?;
                    self.push(Value::Tuple(vec![a]))?
                }
                0x86 => {
                    let b = self.pop()?;
                    let a = self.pop()?;
                    self.push(Value::Tuple(vec![a, b]))?
                }
                0x87 => {
                    let c = self.pop()?;
                    let b = self.pop()?;
                    let a = self.pop()?;
                    self.push(Value::Tuple(vec![a, b, c]))?
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Value::List(items))?
                }
                b'a' => {
                    let v = self.pop()?;
                    match self.stack.last_mut() {
                        Some(Value::List(l)) => l.push(v),
                        _ => return Err(err("APPEND to a non-list")),
                    }
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    match self.stack.last_mut() {
                        Some(Value::List(l)) => l.extend(items),
                        _ => return Err(err("APPENDS to a non-list")),
                    }
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    match self.stack.last_mut() {
                        Some(Value::Dict(d)) => d.push((k, v)),
                        _ => return Err(err("SETITEM on a non-dict")),
                    }
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(err("SETITEMS with an odd count"));
                    }
                    let pairs: Vec<(Value, Value)> = items
                        .chunks(2)
                        .map(|p| (p[0].clone(), p[1].clone()))
                        .collect();
                    match self.stack.last_mut() {
                        Some(Value::Dict(d)) => d.extend(pairs),
                        _ => return Err(err("SETITEMS on a non-dict")),
                    }
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.push(Value::Global(format!("{module}.{name}")))?
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module, name) {
                        (Value::Str(m), Value::Str(n)) => {
                            self.push(Value::Global(format!("{m}.{n}")))?
                        }
                        _ => return Err(err("STACK_GLOBAL needs two strings")),
                    }
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let v = storage_of(pid)?;
                    self.push(v)?
                }
                b'R' => {
                    let args = self.pop()?;
                    let f = self.pop()?;
                    let v = reduce(f, args)?;
                    self.push(v)?
                }
                b'b' => {
                    // BUILD: state onto an object; plain data ignores it.
                    self.pop()?;
                }
                _ => {
                    return Err(err(format!(
                        "unsupported pickle opcode 0x{op:02x} at byte {}",
                        self.pos - 1
                    )));
                }
            }
            if self.stack.len() > MAX_DEPTH * 1024 {
                return Err(err("pickle nests too deep"));
            }
        }
    }
}

/// A persistent id `('storage', <dtype global>, key, location, numel)`.
fn storage_of(pid: Value) -> Result<Value> {
    match pid {
        Value::Tuple(t) if t.len() == 5 && t[0] == Value::Str("storage".into()) => {
            let dtype = match &t[1] {
                Value::Global(g) => g.rsplit('.').next().unwrap_or_default().to_string(),
                _ => return Err(err("storage type is not a global")),
            };
            let key = match &t[2] {
                Value::Str(k) => k.clone(),
                _ => return Err(err("storage key is not a string")),
            };
            let numel = match t[4] {
                Value::Int(n) if n >= 0 => n as usize,
                _ => return Err(err("storage size is not a count")),
            };
            Ok(Value::Storage(key, dtype, numel))
        }
        _ => Err(err("unknown persistent id (only tensor storages are read)")),
    }
}

/// The two calls a tensor dump needs; anything else becomes an inert name.
fn reduce(f: Value, args: Value) -> Result<Value> {
    let Value::Global(name) = f else {
        return Err(err("REDUCE of something that is not a global"));
    };
    let Value::Tuple(a) = args else {
        return Err(err("REDUCE arguments are not a tuple"));
    };
    match name.as_str() {
        "torch._utils._rebuild_tensor_v2" | "torch._utils._rebuild_tensor" => {
            let (
                Some(Value::Storage(key, dtype, _)),
                Some(Value::Int(offset)),
                Some(Value::Tuple(size)),
                Some(Value::Tuple(stride)),
            ) = (a.first(), a.get(1), a.get(2), a.get(3))
            else {
                return Err(err("malformed tensor"));
            };
            let ints = |v: &[Value]| -> Result<Vec<usize>> {
                v.iter()
                    .map(|x| match x {
                        Value::Int(i) if *i >= 0 => Ok(*i as usize),
                        _ => Err(err("tensor size or stride is not a count")),
                    })
                    .collect()
            };
            if *offset < 0 {
                return Err(err("negative tensor offset"));
            }
            Ok(Value::Tensor(Tensor {
                key: key.clone(),
                dtype: dtype.clone(),
                offset: *offset as usize,
                size: ints(size)?,
                stride: ints(stride)?,
            }))
        }
        "collections.OrderedDict" => Ok(Value::Dict(Vec::new())),
        other => Ok(Value::Global(other.to_string())),
    }
}
