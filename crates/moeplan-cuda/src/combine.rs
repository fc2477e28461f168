//! Combine, CPU reference: each token's expert outputs, weighted by its
//! gates, summed back in token order.
//!
//! `out[t][h] = Σ_k w[t][k] · rows[dest[t·K + k]][h]`, summed over `k` in
//! order from zero with fused multiply-adds — the `combine` kernel's exact
//! arithmetic, so the two agree bit for bit.

use crate::expert::bf16_to_f32;

/// The combined output, `tokens × hidden` in f32, from the expert outputs
/// `rows` (dispatched order, bf16) and the dispatch's `dest`.
///
/// ```
/// use moeplan_cuda::combine::combine_cpu;
/// use moeplan_cuda::expert::f32_to_bf16;
/// // one token, top-2, hidden 1: rows hold 2.0 and 4.0
/// let rows = [f32_to_bf16(2.0), f32_to_bf16(4.0)];
/// assert_eq!(combine_cpu(&rows, 1, &[1, 0], &[0.25, 0.75], 2), [0.25 * 4.0 + 0.75 * 2.0]);
/// ```
pub fn combine_cpu(
    rows: &[u16],
    hidden: usize,
    dest: &[u32],
    weights: &[f32],
    top_k: usize,
) -> Vec<f32> {
    let tokens = dest.len() / top_k.max(1);
    let mut out = vec![0f32; tokens * hidden];
    for t in 0..tokens {
        let o = &mut out[t * hidden..(t + 1) * hidden];
        for k in 0..top_k {
            let i = t * top_k + k;
            let w = weights[i];
            let r = dest[i] as usize;
            for (acc, &v) in o.iter_mut().zip(&rows[r * hidden..(r + 1) * hidden]) {
                *acc = w.mul_add(bf16_to_f32(v), *acc);
            }
        }
    }
    out
}
