//! The restricted unpickler (see the module above): pickle's opcodes run
//! over an arena of plain values, three callables recognised and none
//! called, everything charged to the reading meter before it is built.

use std::collections::HashMap;

use super::err;
use crate::data::limits::Meter;
use crate::error::Result;

/// What limit errors call the unpickler's work.
pub(super) const PICKLE: &str = "the pickle";

/// A node's index in the arena.
pub(super) type Id = u32;

// What each thing costs to hold, doubled where it lives in a `Vec` or a
// map that may keep up to twice the capacity it uses.
pub(super) const NODE_COST: u64 =
    2 * (std::mem::size_of::<Node>() + std::mem::size_of::<u32>()) as u64;
pub(super) const SLOT_COST: u64 = 2 * std::mem::size_of::<Id>() as u64;
pub(super) const MARK_COST: u64 = 2 * std::mem::size_of::<usize>() as u64;
pub(super) const MEMO_COST: u64 =
    4 * (std::mem::size_of::<u32>() + std::mem::size_of::<Id>()) as u64;

/// A value the restricted unpickler builds. Children are arena indices, so
/// every derived trait here is flat.
#[derive(Debug)]
pub(super) enum Node {
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
pub(super) struct Storage {
    pub(super) key: Box<str>,
    /// The storage type's name without its module, e.g. `LongStorage`.
    pub(super) dtype: Box<str>,
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, …)`: a view.
#[derive(Debug)]
pub(super) struct Tensor {
    pub(super) storage: Id,
    pub(super) offset: u64,
    pub(super) size: Box<[u64]>,
    pub(super) stride: Box<[u64]>,
}

/// Every value one file's pickles built, with each node's depth.
#[derive(Debug, Default)]
pub(super) struct Arena {
    pub(super) nodes: Vec<Node>,
    pub(super) depths: Vec<u32>,
}

impl Arena {
    pub(super) fn add(&mut self, node: Node, depth: u32, meter: &mut Meter) -> Result<Id> {
        meter.depth(depth, PICKLE)?;
        meter.values(1, NODE_COST, PICKLE)?;
        let id = Id::try_from(self.nodes.len())
            .map_err(|_| err("the pickle builds more than 2³² values"))?;
        self.nodes.push(node);
        self.depths.push(depth);
        Ok(id)
    }

    pub(super) fn node(&self, id: Id) -> Option<&Node> {
        self.nodes.get(id as usize)
    }

    pub(super) fn node_mut(&mut self, id: Id) -> Option<&mut Node> {
        self.nodes.get_mut(id as usize)
    }

    pub(super) fn depth(&self, id: Id) -> u32 {
        self.depths.get(id as usize).copied().unwrap_or(0)
    }

    /// The depth of a container holding `children`.
    pub(super) fn over(&self, children: impl IntoIterator<Item = Id>) -> u32 {
        let deepest = children.into_iter().map(|c| self.depth(c)).max();
        deepest.unwrap_or(0).saturating_add(1)
    }

    /// Raises `id`'s depth to hold a child of `child` depth, within limits.
    pub(super) fn deepen(&mut self, id: Id, child: u32, meter: &Meter) -> Result<()> {
        let d = child.saturating_add(1);
        if let Some(slot) = self.depths.get_mut(id as usize) {
            if d > *slot {
                meter.depth(d, PICKLE)?;
                *slot = d;
            }
        }
        Ok(())
    }

    pub(super) fn str(&self, id: Id) -> Option<&str> {
        match self.node(id)? {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn int(&self, id: Id) -> Option<i64> {
        match self.node(id)? {
            Node::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub(super) fn list(&self, id: Id) -> Option<&[Id]> {
        match self.node(id)? {
            Node::List(items) => Some(items),
            _ => None,
        }
    }

    pub(super) fn tuple(&self, id: Id) -> Option<&[Id]> {
        match self.node(id)? {
            Node::Tuple(items) => Some(items),
            _ => None,
        }
    }

    pub(super) fn tensor(&self, id: Id) -> Option<&Tensor> {
        match self.node(id)? {
            Node::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub(super) fn storage(&self, id: Id) -> Option<&Storage> {
        match self.node(id)? {
            Node::Storage(s) => Some(s),
            _ => None,
        }
    }

    /// `dict[key]` for a string key; the last assignment wins, as in Python.
    pub(super) fn get(&self, dict: Id, key: &str) -> Option<Id> {
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
    pub(super) fn storage_dtypes(&self) -> HashMap<&str, &str> {
        let mut out = HashMap::new();
        for node in &self.nodes {
            if let Node::Storage(s) = node {
                out.entry(&*s.key).or_insert(&*s.dtype);
            }
        }
        out
    }

    /// What a node is, for messages.
    pub(super) fn kind(&self, id: Id) -> &'static str {
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
pub(super) struct Unpickler<'a, 'm> {
    pub(super) data: &'a [u8],
    pub(super) pos: usize,
    pub(super) arena: Arena,
    pub(super) stack: Vec<Id>,
    /// Stack heights at each open MARK. As in CPython's metastack, what lies
    /// below the top mark is out of reach until the mark is taken.
    pub(super) marks: Vec<usize>,
    pub(super) memo: HashMap<u32, Id>,
    pub(super) meter: &'m mut Meter,
}

impl<'a, 'm> Unpickler<'a, 'm> {
    pub(super) fn new(data: &'a [u8], meter: &'m mut Meter) -> Self {
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

    pub(super) fn into_arena(self) -> Arena {
        self.arena
    }

    /// Reads the next pickle (to its STOP) and returns its value. The memo
    /// and stack are the pickle's own; the arena is shared.
    pub(super) fn load(&mut self) -> Result<Id> {
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

    pub(super) fn step(&mut self, op: u8, at: usize) -> Result<()> {
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

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let data: &'a [u8] = self.data;
        let s = self
            .pos
            .checked_add(n)
            .and_then(|end| data.get(self.pos..end))
            .ok_or_else(|| err("pickle ends early"))?;
        self.pos += n;
        Ok(s)
    }

    pub(super) fn byte(&mut self) -> Result<u8> {
        let b = self.array::<1>()?;
        Ok(u8::from_le_bytes(b))
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.take(N)?
            .try_into()
            .map_err(|_| err("pickle ends early"))
    }

    /// A length argument of `N` bytes (little-endian, unsigned).
    pub(super) fn length<const N: usize>(&mut self) -> Result<usize> {
        let mut b = [0u8; 8];
        for (d, s) in b.iter_mut().zip(self.array::<N>()?) {
            *d = s;
        }
        usize::try_from(u64::from_le_bytes(b)).map_err(|_| err("pickle ends early"))
    }

    pub(super) fn line(&mut self) -> Result<&'a str> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| err("pickle ends early, inside a line"))?;
        let line = self.take(n + 1)?;
        std::str::from_utf8(line.get(..n).unwrap_or_default())
            .map_err(|_| err("pickle name is not UTF-8"))
    }

    pub(super) fn proto(&mut self) -> Result<()> {
        let v = self.byte()?;
        if v > 5 {
            return Err(err(format!("pickle protocol {v} is newer than 5")));
        }
        Ok(())
    }

    /// The bottom of the current mark's frame.
    pub(super) fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    pub(super) fn push(&mut self, id: Id) -> Result<()> {
        self.meter.bytes(SLOT_COST, PICKLE)?;
        self.stack.push(id);
        Ok(())
    }

    pub(super) fn pop(&mut self) -> Result<Id> {
        if self.stack.len() <= self.floor() {
            return Err(err("pickle stack underflow"));
        }
        self.stack
            .pop()
            .ok_or_else(|| err("pickle stack underflow"))
    }

    pub(super) fn top(&self) -> Result<Id> {
        match self.stack.last() {
            Some(&id) if self.stack.len() > self.floor() => Ok(id),
            _ => Err(err("pickle stack underflow")),
        }
    }

    pub(super) fn mark(&mut self) -> Result<()> {
        self.meter.bytes(MARK_COST, PICKLE)?;
        self.marks.push(self.stack.len());
        Ok(())
    }

    /// Everything above the top mark, and the mark itself.
    pub(super) fn pop_mark(&mut self) -> Result<Vec<Id>> {
        let m = self.marks.pop().ok_or_else(|| err("pickle mark missing"))?;
        if m > self.stack.len() {
            return Err(err("pickle stack underflow"));
        }
        Ok(self.stack.split_off(m))
    }

    /// POP: the top item, or an empty mark frame (as CPython does).
    pub(super) fn pop_any(&mut self) -> Result<()> {
        if self.stack.len() > self.floor() {
            self.pop().map(drop)
        } else {
            self.pop_mark().map(drop)
        }
    }

    pub(super) fn add(&mut self, node: Node, depth: u32) -> Result<()> {
        let id = self.arena.add(node, depth, self.meter)?;
        self.push(id)
    }

    pub(super) fn leaf(&mut self, node: Node) -> Result<()> {
        self.add(node, 1)
    }

    pub(super) fn charge_children(&mut self, n: usize) -> Result<()> {
        self.meter
            .bytes((n as u64).saturating_mul(SLOT_COST), PICKLE)
    }

    pub(super) fn container(&mut self, items: Vec<Id>, make: fn(Vec<Id>) -> Node) -> Result<()> {
        self.charge_children(items.len())?;
        let depth = self.arena.over(items.iter().copied());
        self.add(make(items), depth)
    }

    pub(super) fn small_tuple(&mut self, n: usize) -> Result<()> {
        if self.stack.len() < self.floor().saturating_add(n) {
            return Err(err("pickle stack underflow"));
        }
        let items = self.stack.split_off(self.stack.len() - n);
        self.container(items, Node::Tuple)
    }

    pub(super) fn dict(&mut self, items: Vec<Id>) -> Result<()> {
        let pairs = pairs(&items)?;
        self.charge_children(items.len())?;
        let depth = self.arena.over(items);
        self.add(Node::Dict(pairs), depth)
    }

    /// APPEND, APPENDS (and ADDITEMS to a set): the list is below the items.
    pub(super) fn append(&mut self, items: Vec<Id>) -> Result<()> {
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
    pub(super) fn set_items(&mut self, items: Vec<Id>) -> Result<()> {
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

    pub(super) fn text_or_bytes(&mut self, op: u8) -> Result<()> {
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
    pub(super) fn text(&mut self, b: &[u8]) -> Result<Box<str>> {
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.into()),
            Err(_) => {
                // Each replaced byte may become three.
                self.meter.bytes(2 * b.len() as u64, PICKLE)?;
                Ok(String::from_utf8_lossy(b).into())
            }
        }
    }

    pub(super) fn long(&mut self, n: usize) -> Result<()> {
        let b = self.take(n)?;
        if n <= 8 {
            return self.leaf(Node::Int(le_signed(b)));
        }
        self.meter.bytes(n as u64, PICKLE)?;
        self.leaf(Node::Long(b.into()))
    }

    pub(super) fn global(&mut self) -> Result<()> {
        let module = self.line()?;
        let name = self.line()?;
        self.named_global(module, name)
    }

    pub(super) fn stack_global(&mut self) -> Result<()> {
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

    pub(super) fn named_global(&mut self, module: &str, name: &str) -> Result<()> {
        let full = format!("{module}.{name}");
        self.meter.bytes(full.len() as u64, PICKLE)?;
        self.leaf(Node::Global(full.into()))
    }

    pub(super) fn memo_put(&mut self, key: u32) -> Result<()> {
        let id = self.top()?;
        if !self.memo.contains_key(&key) {
            self.meter.bytes(MEMO_COST, PICKLE)?;
        }
        self.memo.insert(key, id);
        Ok(())
    }

    /// GET pushes the remembered index: the value is shared, never copied.
    pub(super) fn memo_get(&mut self, key: u32) -> Result<()> {
        let id = *self
            .memo
            .get(&key)
            .ok_or_else(|| err(format!("pickle memo key {key} missing")))?;
        self.push(id)
    }

    pub(super) fn persistent_id(&mut self) -> Result<()> {
        let pid = self.pop()?;
        let storage = self.storage_of(pid)?;
        self.meter
            .bytes((storage.key.len() + storage.dtype.len()) as u64, PICKLE)?;
        let depth = self.arena.over([pid]);
        self.add(Node::Storage(Box::new(storage)), depth)
    }

    /// `('storage', <type global>, key, location, numel)`, with a sixth
    /// `view_metadata` (always None since torch 1.0) in legacy streams.
    pub(super) fn storage_of(&self, pid: Id) -> Result<Storage> {
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
    pub(super) fn reduce(&mut self) -> Result<()> {
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

    pub(super) fn tensor_of(&self, args: &[Id]) -> Result<Tensor> {
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
    pub(super) fn counts(&self, id: Id) -> Result<Box<[u64]>> {
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
    pub(super) fn new_object(&mut self, args: usize) -> Result<()> {
        let mut parts = Vec::with_capacity(args + 1);
        for _ in 0..=args {
            parts.push(self.pop()?);
        }
        let depth = self.arena.over(parts);
        self.add(Node::Object, depth)
    }

    /// BUILD: state for the object below it. Plain data ignores the state,
    /// but the object now holds it, so its depth grows.
    pub(super) fn build(&mut self) -> Result<()> {
        let state = self.pop()?;
        let target = self.top()?;
        let child = self.arena.depth(state);
        self.arena.deepen(target, child, self.meter)
    }
}

/// Key, value pairs from a flat run of items.
pub(super) fn pairs(items: &[Id]) -> Result<Vec<(Id, Id)>> {
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
pub(super) fn le_signed(b: &[u8]) -> i64 {
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
