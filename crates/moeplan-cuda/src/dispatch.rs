//! Dispatch: group the (token, k) rows by destination copy, as
//! `moe_align_block_size`-style kernels do before the expert GEMMs.
//!
//! Rows are ordered by (physical slot, flattened index `t·top_k + k`) — a
//! stable counting sort — and slots are GPU-major, so GPU `g`'s rows are one
//! contiguous segment and, inside it, each hosted copy's rows are one
//! contiguous run in slot order, tokens ascending. The GPU kernels produce
//! exactly this order (`scatter_stable` in `gpu/kernels.cu`).

use crate::error::{Error, Result};
use crate::select::LayerSlots;

/// Where every row goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchIndex {
    /// Rows per physical slot.
    pub counts: Vec<u32>,
    /// Exclusive prefix sums of `counts`, plus the total: slot `s`'s rows are
    /// `offsets[s] .. offsets[s + 1]` (`S + 1` entries).
    pub offsets: Vec<u32>,
    /// `perm[row]` = the flattened (token, k) index placed at `row`.
    pub perm: Vec<u32>,
    /// `dest[i]` = the row (token, k) index `i` was placed at: `perm`'s inverse.
    pub dest: Vec<u32>,
}

impl DispatchIndex {
    /// Rows each GPU receives.
    pub fn rows_per_gpu(&self, slots: &LayerSlots) -> Vec<u32> {
        (0..slots.num_gpus())
            .map(|g| {
                let r = slots.gpu_slots(g);
                self.offsets[r.end] - self.offsets[r.start]
            })
            .collect()
    }

    /// Rows of GPU `g`: `start .. end` in the permuted order.
    pub fn gpu_rows(&self, slots: &LayerSlots, g: usize) -> std::ops::Range<usize> {
        let r = slots.gpu_slots(g);
        self.offsets[r.start] as usize..self.offsets[r.end] as usize
    }
}

/// Counts, offsets and the stable permutation for rows sent to `phys`
/// (a slot per row) over `num_slots` slots.
///
/// ```
/// use moeplan_cuda::dispatch::dispatch_cpu;
/// let d = dispatch_cpu(&[2, 0, 2, 1], 3)?;
/// assert_eq!(d.counts, [1, 1, 2]);
/// assert_eq!(d.offsets, [0, 1, 2, 4]);
/// assert_eq!(d.perm, [1, 3, 0, 2]);
/// assert_eq!(d.dest, [2, 0, 3, 1]);
/// # Ok::<(), moeplan_cuda::Error>(())
/// ```
pub fn dispatch_cpu(phys: &[u32], num_slots: usize) -> Result<DispatchIndex> {
    if phys.len() > u32::MAX as usize / 2 {
        return Err(Error::Argument(format!("{} rows is too many", phys.len())));
    }
    let mut counts = vec![0u32; num_slots];
    for (i, &s) in phys.iter().enumerate() {
        let c = counts.get_mut(s as usize).ok_or_else(|| {
            Error::Argument(format!("row {i} goes to slot {s}, only {num_slots} exist"))
        })?;
        *c += 1;
    }
    let mut offsets = Vec::with_capacity(num_slots + 1);
    let mut run = 0u32;
    for &c in &counts {
        offsets.push(run);
        run += c;
    }
    offsets.push(run);
    let mut cursor = offsets.clone();
    let mut perm = vec![0u32; phys.len()];
    let mut dest = vec![0u32; phys.len()];
    for (i, &s) in phys.iter().enumerate() {
        let d = cursor[s as usize];
        cursor[s as usize] += 1;
        perm[d as usize] = i as u32;
        dest[i] = d;
    }
    Ok(DispatchIndex {
        counts,
        offsets,
        perm,
        dest,
    })
}

/// The dispatched activations: `xp[row] = x[perm[row] / top_k]`, `hidden`
/// values per row (bf16 bit patterns).
pub fn gather_cpu(x: &[u16], hidden: usize, top_k: usize, perm: &[u32]) -> Vec<u16> {
    let mut xp = Vec::with_capacity(perm.len() * hidden);
    for &i in perm {
        let t = i as usize / top_k;
        xp.extend_from_slice(&x[t * hidden..(t + 1) * hidden]);
    }
    xp
}
