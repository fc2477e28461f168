//! ESFT's token-level routing dumps (deepseek-ai/ESFT,
//! `results/expert_scores/<task>/expert_weights_<layer>.txt`): one file per
//! MoE layer; one line per input sequence with the tab-separated expert ids
//! of every token (`tokens × top_k`, flattened), an empty field, then the
//! gate weights in the same order. Line `i` is the same sequence in every
//! file, so tokens can be followed across layers.
//!
//! Read into a [`TokenTrace`] (each token's source is its sequence's line
//! number: ESFT records no ranks; a caller deals the tokens to a cluster's
//! ranks, [`TokenTrace::with_sequences_on_ranks`] whole sequences
//! round-robin or [`TokenTrace::with_tokens_dealt_evenly`] equal shares of
//! each batch) and from there into load batches of a chosen number of
//! tokens. The core reads no folders: callers hand it the
//! files' names and bytes.

use ndarray::Array2;

use crate::data::trace::{MAX_EXPERTS, TokenTrace};
use crate::error::{Error, Result};

const FORMAT: &str = "ESFT expert_weights";

/// Reads ESFT layer files. `files` are `(file name, bytes)`; names other than
/// `expert_weights_<N>.txt` are ignored (a folder's `summary.json`, say).
/// `num_experts` is the model's routed-expert count (ids must be below it);
/// `top_k` its experts per token.
///
/// ```
/// use moeplan::formats::read_esft;
/// let l1 = b"1\t2\t3\t0\t\t0.5\t0.5\t0.6\t0.4\n".to_vec();
/// let l2 = b"0\t3\t2\t1\t\t0.5\t0.5\t0.6\t0.4\n".to_vec();
/// let files = vec![("expert_weights_2.txt".to_string(), l2), ("expert_weights_1.txt".to_string(), l1)];
/// let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
/// let t = read_esft(&files, 4, 2, &mut meter)?;
/// assert_eq!((t.num_tokens(), t.top_k()), (2, 2));
/// let load = t.to_load_trace(2)?;
/// assert_eq!(load.layer_ids(), &[1, 2]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_esft(
    files: &[(String, Vec<u8>)],
    num_experts: usize,
    top_k: usize,
    meter: &mut crate::Meter,
) -> Result<TokenTrace> {
    if top_k == 0 || num_experts == 0 || num_experts > MAX_EXPERTS {
        return Err(Error::Argument(format!(
            "top-k {top_k} and {num_experts} experts are out of range"
        )));
    }
    let mut layers: Vec<(u32, &str, &[u8])> = files
        .iter()
        .filter_map(|(name, bytes)| layer_of(name).map(|l| (l, name.as_str(), bytes.as_slice())))
        .collect();
    if layers.is_empty() {
        return Err(Error::parse(FORMAT, "no expert_weights_<layer>.txt files"));
    }
    crate::sort::sort_by_key(&mut layers, |&(l, ..)| l);
    if let Some(w) = layers.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::parse(
            FORMAT,
            format!("layer {} appears twice", w[0].0),
        ));
    }
    let mut routes = Vec::with_capacity(layers.len());
    let mut sequence_tokens: Option<Vec<usize>> = None;
    for &(layer, name, bytes) in &layers {
        // Every field may become one id (4 bytes) and one weight count.
        crate::data::limits::charge_fields(meter, bytes, 8, name)?;
        let (ids, per_line) = parse_layer(name, bytes, num_experts, top_k)?;
        match &sequence_tokens {
            None => sequence_tokens = Some(per_line),
            Some(first) if *first != per_line => {
                return Err(Error::parse(
                    FORMAT,
                    format!(
                        "{name}: its sequences have other token counts than layer {}'s ({} vs {} tokens in all)",
                        layers[0].0,
                        per_line.iter().sum::<usize>(),
                        first.iter().sum::<usize>()
                    ),
                ));
            }
            Some(_) => {}
        }
        let tokens = ids.len() / top_k;
        let arr = Array2::from_shape_vec((tokens, top_k), ids)
            .map_err(|e| Error::parse(FORMAT, format!("{name}: {e}")))?;
        routes.push((layer, arr));
    }
    let source_rank: Vec<u32> = sequence_tokens
        .unwrap_or_default()
        .iter()
        .enumerate()
        .flat_map(|(line, &n)| std::iter::repeat_n(line as u32, n))
        .collect();
    let (ids, routes): (Vec<u32>, Vec<Array2<u32>>) = routes.into_iter().unzip();
    TokenTrace::new(num_experts, ids, routes, source_rank)
}

fn layer_of(name: &str) -> Option<u32> {
    let base = name.rsplit(['/', '\\']).next()?;
    base.strip_prefix("expert_weights_")?
        .strip_suffix(".txt")?
        .parse()
        .ok()
}

/// Expert ids of every token, and tokens per line.
fn parse_layer(
    name: &str,
    bytes: &[u8],
    num_experts: usize,
    top_k: usize,
) -> Result<(Vec<u32>, Vec<usize>)> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::parse(FORMAT, format!("{name}: not UTF-8 text ({e})")))?;
    let mut ids = Vec::new();
    let mut per_line = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let mut fields = line.split('\t');
        let before = ids.len();
        for f in fields.by_ref() {
            if f.is_empty() {
                break;
            }
            let e: u32 = f.trim().parse().map_err(|_| {
                Error::parse(
                    FORMAT,
                    format!("{name}, line {}: {f:?} is not an expert id", i + 1),
                )
            })?;
            if e as usize >= num_experts {
                return Err(Error::parse(
                    FORMAT,
                    format!(
                        "{name}, line {}: expert {e}, but the model has {num_experts}",
                        i + 1
                    ),
                ));
            }
            ids.push(e);
        }
        let n = ids.len() - before;
        if n == 0 || n % top_k != 0 {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "{name}, line {}: {n} expert ids is not a whole number of tokens × top-{top_k}",
                    i + 1
                ),
            ));
        }
        let weights = fields.filter(|f| !f.is_empty()).count();
        if weights != 0 && weights != n {
            return Err(Error::parse(
                FORMAT,
                format!(
                    "{name}, line {}: {n} expert ids but {weights} gate weights",
                    i + 1
                ),
            ));
        }
        per_line.push(n / top_k);
    }
    if per_line.is_empty() {
        return Err(Error::parse(FORMAT, format!("{name}: no sequences")));
    }
    Ok((ids, per_line))
}
