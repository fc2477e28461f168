//! The limits every reader works within: bytes materialised, values built
//! and nesting depth, checked *before* anything is allocated.
//!
//! Trace files come from the internet and from colleagues, so a reader
//! assumes an attacker wrote them: a size in a header, a zip's declared
//! length or a tensor's shape is a claim to check against the bytes that are
//! really there and against the [`ReadLimits`], never a number to allocate by.
//! Every reader charges a [`Meter`] for what it is about to build; the first
//! charge past the budget is a [`Error::Limit`] naming what was too large
//! and how to raise the limit.

use std::io::Read;

use crate::error::{Error, Result};

/// How much a reader may build from one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Most bytes materialised: the input itself, decompressed members,
    /// parsed values and the final arrays, together.
    pub max_bytes: u64,
    /// Most values (numbers, strings, pickle objects) built.
    pub max_values: u64,
    /// Deepest nesting of arrays, containers or pickle objects.
    pub max_depth: u32,
    /// How a user raises the limit, appended to the error
    /// (e.g. "raise it with --max-trace-mib").
    pub raise_hint: &'static str,
}

impl ReadLimits {
    /// The default reading limit in MiB (the CLI's `--max-trace-mib`).
    pub(crate) const DEFAULT_MIB: u64 = 512;
    /// Nesting no trace format needs more of (`[B][L][E]` is depth 3; a
    /// torch dump's dict → list → dict → tensor → tuple is about 8).
    pub(crate) const MAX_DEPTH: u32 = 64;

    /// A budget of `mib` MiB; values are capped at one per 8 bytes (no value
    /// costs less to hold).
    ///
    /// ```
    /// let b = moeplan::ReadLimits::mib(2);
    /// assert_eq!(b.max_bytes, 2 << 20);
    /// assert_eq!(b.max_values, (2 << 20) / 8);
    /// ```
    pub fn mib(mib: u64) -> ReadLimits {
        let max_bytes = mib.saturating_mul(1 << 20);
        ReadLimits {
            max_bytes,
            max_values: max_bytes / 8,
            max_depth: Self::MAX_DEPTH,
            raise_hint: "",
        }
    }

    /// The same budget, telling the user how to raise it.
    ///
    /// ```
    /// let b = moeplan::ReadLimits::mib(1).with_hint("raise it with --max-trace-mib");
    /// assert_eq!(b.raise_hint, "raise it with --max-trace-mib");
    /// ```
    pub fn with_hint(self, raise_hint: &'static str) -> ReadLimits {
        ReadLimits { raise_hint, ..self }
    }

    fn limit_error(&self, what: &str) -> Error {
        let mib = self.max_bytes as f64 / (1u64 << 20) as f64;
        let hint = if self.raise_hint.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.raise_hint)
        };
        Error::Limit(format!(
            "{what} needs more than the {mib:.0} MiB reading limit{hint}"
        ))
    }
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits::mib(ReadLimits::DEFAULT_MIB)
    }
}

/// What one read has spent of its [`ReadLimits`].
#[derive(Debug, Clone)]
pub struct Meter {
    budget: ReadLimits,
    bytes: u64,
    values: u64,
}

impl Meter {
    /// A fresh meter for one input.
    pub fn new(budget: ReadLimits) -> Meter {
        Meter {
            budget,
            bytes: 0,
            values: 0,
        }
    }

    /// The budget this meter counts against.
    pub(crate) fn budget(&self) -> ReadLimits {
        self.budget
    }

    /// Bytes still free.
    pub(crate) fn bytes_left(&self) -> u64 {
        self.budget.max_bytes.saturating_sub(self.bytes)
    }

    /// Charges `n` bytes about to be materialised for `what`.
    pub(crate) fn bytes(&mut self, n: u64, what: &str) -> Result<()> {
        match self.bytes.checked_add(n) {
            Some(total) if total <= self.budget.max_bytes => {
                self.bytes = total;
                Ok(())
            }
            _ => Err(self.budget.limit_error(what)),
        }
    }

    /// Charges `n` values of `each` bytes for `what` (both budgets).
    pub(crate) fn values(&mut self, n: u64, each: u64, what: &str) -> Result<()> {
        match self.values.checked_add(n) {
            Some(total) if total <= self.budget.max_values => {
                let bytes = n
                    .checked_mul(each)
                    .ok_or_else(|| self.budget.limit_error(what))?;
                self.bytes(bytes, what)?;
                self.values = total;
                Ok(())
            }
            _ => Err(self.budget.limit_error(what)),
        }
    }

    /// Checks a nesting depth for `what`.
    pub(crate) fn depth(&self, depth: u32, what: &str) -> Result<()> {
        if depth > self.budget.max_depth {
            Err(Error::Limit(format!(
                "{what} nests deeper than {} levels",
                self.budget.max_depth
            )))
        } else {
            Ok(())
        }
    }

    /// Reads `r` to its end, charging every byte as it arrives and stopping
    /// at the budget: what a stream (a zip member, say) expands to is
    /// counted, never trusted. `declared` is only a capacity hint, capped by
    /// what is left.
    pub(crate) fn read_all<R: Read>(&mut self, r: R, declared: u64, what: &str) -> Result<Vec<u8>> {
        const CHUNK: usize = 1 << 16;
        let left = self.bytes_left();
        // A member that admits to being too large is refused at once; one
        // that claims to be small is still counted below.
        if declared > left {
            return Err(self
                .budget
                .limit_error(&format!("{what} (declared {} MiB)", declared >> 20)));
        }
        let hint = declared.min(left).min(64 << 20) as usize;
        let mut out = Vec::with_capacity(hint);
        // One byte past the budget tells "exactly at the limit" from "over".
        let mut limited = r.take(left.saturating_add(1));
        let mut chunk = [0u8; CHUNK];
        loop {
            let n = limited.read(&mut chunk).map_err(|e| Error::Parse {
                format: "archive",
                message: format!("{what}: {e}"),
            })?;
            if n == 0 {
                break;
            }
            self.bytes(n as u64, what)?;
            out.extend_from_slice(&chunk[..n]);
        }
        Ok(out)
    }
}

/// Counts the numbers and the deepest bracket nesting of JSON text without
/// building anything, so a JSON reader can charge what parsing will build
/// before parsing. Strings are skipped (escapes included); anything that is
/// not JSON is left for the parser to reject.
#[cfg(test)]
pub(crate) fn json_shape(bytes: &[u8]) -> (u64, u32) {
    json_shape_within(bytes, u32::MAX)
}

/// [`json_shape`] that stops as soon as the nesting passes `stop_above`:
/// a file nested too deep is refused after its first levels, not after a
/// scan of all of it (the numbers are then those seen so far).
pub(crate) fn json_shape_within(bytes: &[u8], stop_above: u32) -> (u64, u32) {
    let (mut numbers, mut depth, mut deepest) = (0u64, 0u32, 0u32);
    let (mut in_string, mut escaped, mut in_number) = (false, false, false);
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        let numeric = b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E');
        if numeric && !in_number {
            numbers += 1;
        }
        in_number = numeric;
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > stop_above {
                    break;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    (numbers, deepest)
}

/// An upper bound on the flow-collection nesting (`[`, `{`) that a YAML
/// parser meets in `bytes`, found without parsing, stopping as soon as it
/// passes `stop_above` (a hostile file is refused after its first levels,
/// not after a scan of all of it).
///
/// libyaml's scanner (serde_yaml_ng's) keeps one simple-key slot per flow
/// level and walks them at every token, so its time grows with tokens ×
/// depth: a 200 KB file of nested `[` took 19 s. Whether a quote opens a
/// quoted scalar depends on where it stands (a plain scalar may hold one),
/// and a bracket inside quotes nests nothing, so the scan follows both
/// readings of every quote — still outside quotes, and inside — keeping the
/// deepest level of each; every step is monotone in the depth, so the
/// result bounds every reading, the parser's included. Comments (`#` after
/// a blank or at a line's start, outside quotes) are skipped. Block
/// nesting (indentation, `- `) is not counted: the parser handles it in
/// linear time and its deserializer stops at 128 levels. O(n).
pub(crate) fn yaml_flow_depth(bytes: &[u8], stop_above: u32) -> u32 {
    // The deepest level of each reading, `None` when no reading is there:
    // outside quotes, in a comment, inside "…" (and just after its `\`),
    // inside '…'.
    let [mut plain, mut comment, mut dq, mut dq_escaped, mut sq]: [Option<u32>; 5] =
        [Some(0), None, None, None, None];
    let join = |a: Option<u32>, b: Option<u32>| match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) | (None, x) => x,
    };
    let mut deepest = 0u32;
    let mut blank_before = true;
    for (i, &b) in bytes.iter().enumerate() {
        let mut out = None;
        // inside "…"
        let was_escaped = dq_escaped.take();
        match b {
            b'\\' => dq_escaped = dq.take(),
            b'"' => out = dq.take(),
            _ => {}
        }
        dq = join(dq, was_escaped);
        // inside '…': `''` is a quote inside, so both readings go on
        if b == b'\'' && sq.is_some() {
            out = join(out, sq);
            if bytes.get(i + 1) != Some(&b'\'') {
                sq = None;
            }
        }
        // a comment ends with its line
        if b == b'\n' {
            out = join(out, comment.take());
        }
        if let Some(d) = plain.as_mut() {
            match b {
                b'[' | b'{' => {
                    *d += 1;
                    deepest = deepest.max(*d);
                    if deepest > stop_above {
                        return deepest;
                    }
                }
                b']' | b'}' => *d = d.saturating_sub(1),
                b'#' if blank_before => comment = join(comment, plain.take()),
                b'"' => dq = join(dq, Some(*d)),
                b'\'' => sq = join(sq, Some(*d)),
                _ => {}
            }
        }
        plain = join(plain, out);
        blank_before = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    }
    deepest
}

/// Charges what parsing `bytes` as JSON into `serde_json::Value`s will
/// build: every number as one `Value`, and the nesting. Call before
/// `serde_json::from_slice`.
pub(crate) fn charge_json(meter: &mut Meter, bytes: &[u8], what: &str) -> Result<()> {
    charge_json_shape(meter, bytes, None, what)
}

/// [`charge_json`] with the shape [`json_first`] already scanned, when it
/// did (one pass over a large file, not two).
pub(crate) fn charge_json_shape(
    meter: &mut Meter,
    bytes: &[u8],
    shape: Option<(u64, u32)>,
    what: &str,
) -> Result<()> {
    let (numbers, depth) =
        shape.unwrap_or_else(|| json_shape_within(bytes, meter.budget().max_depth));
    meter.depth(depth, what)?;
    meter.values(
        numbers,
        std::mem::size_of::<serde_json::Value>() as u64,
        what,
    )
}

/// For text that opens like JSON (`{` or `[`): its shape, scanned before
/// anything else looks at the whole text (detection included), and its
/// nesting checked — the scan stops at the first level too deep. `None`
/// for other text.
pub(crate) fn json_first(meter: &Meter, body: &[u8], what: &str) -> Result<Option<(u64, u32)>> {
    if !matches!(
        body.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    ) {
        return Ok(None);
    }
    let shape = json_shape_within(body, meter.budget().max_depth);
    meter.depth(shape.1, what)?;
    Ok(Some(shape))
}

/// Charges `meter` for the fields of delimited text (commas, tabs and line
/// ends: an upper bound on the numbers a CSV or ESFT file can hold), `each`
/// bytes apiece, counting no further than the budget can hold: a file of
/// commas as large as the limit is refused at once, not after a pass over
/// all of it.
pub(crate) fn charge_fields(meter: &mut Meter, bytes: &[u8], each: u64, what: &str) -> Result<()> {
    let fit = meter
        .budget
        .max_values
        .saturating_sub(meter.values)
        .min(meter.bytes_left() / each.max(1));
    let mut n = 1u64;
    for &b in bytes {
        if matches!(b, b',' | b'\t' | b'\n') {
            n += 1;
            if n > fit {
                break;
            }
        }
    }
    meter.values(n, each, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_refuses_the_byte_past_the_limit() -> Result<()> {
        let mut m = Meter::new(ReadLimits::mib(1));
        m.bytes(1 << 20, "all of it")?;
        assert!(m.bytes(1, "one more").is_err());
        Ok(())
    }

    #[test]
    fn read_all_reads_exactly_the_budget_and_no_more() -> Result<()> {
        let mut m = Meter::new(ReadLimits::mib(1));
        let ok = m.read_all(std::io::repeat(1).take(1 << 20), 0, "x")?;
        assert_eq!(ok.len(), 1 << 20);
        let mut m = Meter::new(ReadLimits::mib(1));
        assert!(
            m.read_all(std::io::repeat(1).take((1 << 20) + 1), 0, "x")
                .is_err()
        );
        Ok(())
    }

    #[test]
    fn json_shape_ignores_brackets_and_digits_in_strings() {
        assert_eq!(json_shape(br#"["[[[1", "\"]2"]"#), (0, 1));
        assert_eq!(json_shape(b"[[[[[]]]]]"), (0, 5));
        assert_eq!(json_shape(b"[1,22,333]"), (3, 1));
    }

    #[test]
    fn hint_is_in_the_message() {
        let mut m = Meter::new(ReadLimits::mib(1).with_hint("raise it with --max-trace-mib"));
        let e = m.bytes(2 << 20, "the file").unwrap_err().to_string();
        assert!(e.contains("--max-trace-mib"), "{e}");
    }

    /// A stream that declares too much is refused; one that lies is stopped at the budget.
    #[test]
    fn read_all_refuses_a_declared_size_and_stops_an_undeclared_one() {
        let mut m = Meter::new(ReadLimits::mib(1));
        let zeros = || std::io::repeat(0).take(4 << 20); // 4 MiB
        assert!(m.read_all(zeros(), 4 << 20, "member x").is_err()); // says so: refused at once
        assert!(m.read_all(zeros(), 0, "member x").is_err()); // lies: counted, stopped at 1 MiB
    }

    /// The JSON scan stops at the first level past `stop_above`.
    #[test]
    fn json_shape_within_stops_at_the_first_level_too_deep() {
        let deep = vec![b'['; 1 << 20];
        assert_eq!(json_shape_within(&deep, 64).1, 65);
    }

    /// Flow nesting skips comments and quoted brackets and stops past the limit.
    #[test]
    fn yaml_flow_depth_counts_nested_flow_collections() {
        assert_eq!(
            yaml_flow_depth(b"a: [[1, 2], [3]]\n# [[[[ not counted\n", 64),
            2
        );
        assert_eq!(yaml_flow_depth(br#"a: ["]]]", [[1]]]"#, 64), 3); // quoted brackets close nothing
        assert_eq!(yaml_flow_depth(&[b'['; 1 << 20], 64), 65); // stops at the first level too deep
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn bytes() {
        let mut m = crate::Meter::new(crate::ReadLimits::mib(1));
        assert!(m.bytes(1 << 19, "half").is_ok());
        let e = m.bytes(1 << 20, "a member").unwrap_err().to_string();
        assert!(
            e.contains("a member needs more than the 1 MiB reading limit"),
            "{e}"
        );
    }
    #[test]
    fn values() {
        let mut m = crate::Meter::new(crate::ReadLimits::mib(1));
        assert!(m.values(1000, 8, "counts").is_ok());
        assert!(m.values(u64::MAX / 4, 8, "a shape").is_err());
    }
    #[test]
    fn depth() {
        let m = crate::Meter::new(crate::ReadLimits::default());
        assert!(m.depth(3, "an array").is_ok());
        assert!(
            m.depth(1000, "an array")
                .unwrap_err()
                .to_string()
                .contains("nests deeper")
        );
    }
    #[test]
    fn json_shape() {
        assert_eq!(
            crate::data::limits::json_shape(br#"{"a": [[1, 2.5e3], [-3]], "s": "[1,2]"}"#),
            (3, 3)
        );
    }
}
