//! Expert compute, CPU reference: each copy's rows through its expert's
//! feed-forward block, `down(SiLU(x·W_gateᵀ) ⊙ (x·W_upᵀ))`.
//!
//! Storage is bf16 (raw bit patterns in `u16`), arithmetic f32, as on the
//! GPU: the gate/up product is rounded to bf16 (the GEMM's output type), the
//! activation is rounded to bf16, the down product is rounded to bf16.
//! Weights are row-major PyTorch `Linear` layouts:
//!
//! - `w13`: `2·inter × hidden` — rows `0..inter` the gate projection, rows
//!   `inter..2·inter` the up projection, so `y = x · w13ᵀ` holds `[gate | up]`;
//! - `w2`: `hidden × inter`, `out = act · w2ᵀ`.
//!
//! Test and benchmark data come from a counter-based hash ([`hash_unit`]),
//! identical on CPU and GPU, so the GPU can fill gigabytes of weights
//! without a transfer and the CPU can regenerate any part of them.
//!
//! Weights: `pool` distinct experts are generated and logical expert `e`
//! uses set `e mod pool` — enough distinct sets that consecutive GEMMs never
//! find their weights in cache, without allocating every expert of a large
//! model.

use crate::dispatch::DispatchIndex;
use crate::error::{Error, Result};
use crate::select::LayerSlots;

/// bf16 bit pattern → f32 (exact).
pub fn bf16_to_f32(x: u16) -> f32 {
    f32::from_bits((x as u32) << 16)
}

/// f32 → bf16 bit pattern, rounding to nearest even; NaN stays (quiet) NaN.
///
/// ```
/// use moeplan_cuda::expert::{bf16_to_f32, f32_to_bf16};
/// assert_eq!(bf16_to_f32(f32_to_bf16(1.0)), 1.0);
/// assert_eq!(bf16_to_f32(f32_to_bf16(1.0 + 1.0 / 256.0)), 1.0); // tie → even
/// assert_eq!(bf16_to_f32(f32_to_bf16(1.0 + 3.0 / 256.0)), 1.0 + 4.0 / 256.0);
/// ```
pub fn f32_to_bf16(f: f32) -> u16 {
    let u = f.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 0x40) as u16;
    }
    let lsb = (u >> 16) & 1;
    (u.wrapping_add(0x7fff + lsb) >> 16) as u16
}

/// splitmix64 of (index, seed) — `splitmix` in `gpu/kernels.cu`.
fn splitmix(idx: u64, seed: u32) -> u64 {
    const G: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut z = idx.wrapping_add((seed as u64).wrapping_mul(G));
    z = z.wrapping_add(G);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The value at `idx` of the stream `seed`: uniform in `[-scale, scale)`
/// before rounding to bf16 — what `fill_uniform_bf16` writes, bit for bit.
pub fn hash_unit(idx: u64, seed: u32, scale: f32) -> u16 {
    let h = splitmix(idx, seed);
    let u = ((h >> 40) as u32 as f32) * 5.960_464_5e-8; // 2^-24
    f32_to_bf16((2.0 * u - 1.0) * scale)
}

/// `hash_unit` for indices `start .. start + n`.
pub fn fill_uniform(start: u64, n: usize, seed: u32, scale: f32) -> Vec<u16> {
    (0..n as u64)
        .map(|i| hash_unit(start + i, seed, scale))
        .collect()
}

/// Seeds of the generated tensors.
pub mod seeds {
    /// Token activations `x`.
    pub const X: u32 = 11;
    /// Gate/up weights.
    pub const W13: u32 = 12;
    /// Down weights.
    pub const W2: u32 = 13;
}

/// Sizes of one expert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpertShape {
    /// Hidden size (model dimension).
    pub hidden: usize,
    /// Intermediate size of one expert.
    pub inter: usize,
}

impl ExpertShape {
    /// Checks the sizes fit the kernels' and cuBLAS's 32-bit dimensions.
    pub fn new(hidden: usize, inter: usize) -> Result<Self> {
        if hidden == 0 || inter == 0 || hidden > 1 << 20 || inter > 1 << 20 {
            return Err(Error::Argument(format!(
                "hidden {hidden} and intermediate {inter} must be between 1 and 2^20"
            )));
        }
        Ok(ExpertShape { hidden, inter })
    }

    /// Values of one expert's `w13` (`2·inter × hidden`).
    pub fn w13_len(&self) -> usize {
        2 * self.inter * self.hidden
    }

    /// Values of one expert's `w2` (`hidden × inter`).
    pub fn w2_len(&self) -> usize {
        self.hidden * self.inter
    }

    /// Scale of the generated `w13`: variance `1 / hidden`.
    pub fn w13_scale(&self) -> f32 {
        (3.0 / self.hidden as f32).sqrt()
    }

    /// Scale of the generated `w2`: variance `1 / inter`.
    pub fn w2_scale(&self) -> f32 {
        (3.0 / self.inter as f32).sqrt()
    }

    /// FLOPs of `rows` rows through one expert (both GEMMs).
    pub fn flops(&self, rows: usize) -> f64 {
        6.0 * rows as f64 * self.hidden as f64 * self.inter as f64
    }
}

/// Generated weights of `pool` experts (host copy; small shapes only).
#[derive(Debug, Clone)]
pub struct WeightPool {
    /// Sizes.
    pub shape: ExpertShape,
    /// Distinct weight sets; expert `e` uses set `e mod pool`.
    pub pool: usize,
    /// `pool × 2·inter × hidden`.
    pub w13: Vec<u16>,
    /// `pool × hidden × inter`.
    pub w2: Vec<u16>,
}

impl WeightPool {
    /// The generated weights (the same values the GPU fills).
    pub fn generate(shape: ExpertShape, pool: usize) -> Self {
        WeightPool {
            shape,
            pool,
            w13: fill_uniform(0, pool * shape.w13_len(), seeds::W13, shape.w13_scale()),
            w2: fill_uniform(0, pool * shape.w2_len(), seeds::W2, shape.w2_scale()),
        }
    }

    /// Set `p`'s gate/up weights.
    pub fn w13(&self, p: usize) -> &[u16] {
        let n = self.shape.w13_len();
        &self.w13[p * n..(p + 1) * n]
    }

    /// Set `p`'s down weights.
    pub fn w2(&self, p: usize) -> &[u16] {
        let n = self.shape.w2_len();
        &self.w2[p * n..(p + 1) * n]
    }
}

/// `y = bf16(x · w13ᵀ)` for `x` of `rows × hidden`: `rows × 2·inter`.
pub fn gate_up_cpu(x: &[u16], w13: &[u16], shape: ExpertShape) -> Vec<u16> {
    let (h, o) = (shape.hidden, 2 * shape.inter);
    let rows = x.len() / h;
    let wf: Vec<f32> = w13.iter().map(|&v| bf16_to_f32(v)).collect();
    let mut y = Vec::with_capacity(rows * o);
    let mut xf = vec![0f32; h];
    for r in 0..rows {
        for (d, &v) in xf.iter_mut().zip(&x[r * h..(r + 1) * h]) {
            *d = bf16_to_f32(v);
        }
        for j in 0..o {
            let w = &wf[j * h..(j + 1) * h];
            let acc: f32 = xf.iter().zip(w).map(|(a, b)| a * b).sum();
            y.push(f32_to_bf16(acc));
        }
    }
    y
}

/// SiLU of a value, as the `silu_mul` kernel evaluates it: `g / (1 + e^-g)`.
pub fn silu(g: f32) -> f32 {
    g / (1.0 + (-g).exp())
}

/// `act = bf16(SiLU(gate) · up)` for `y` of `rows × 2·inter`: `rows × inter`.
pub fn silu_mul_cpu(y: &[u16], inter: usize) -> Vec<u16> {
    let rows = y.len() / (2 * inter);
    let mut act = Vec::with_capacity(rows * inter);
    for r in 0..rows {
        let yr = &y[r * 2 * inter..(r + 1) * 2 * inter];
        for j in 0..inter {
            let g = bf16_to_f32(yr[j]);
            let u = bf16_to_f32(yr[inter + j]);
            act.push(f32_to_bf16(silu(g) * u));
        }
    }
    act
}

/// `out = bf16(act · w2ᵀ)` for `act` of `rows × inter`: `rows × hidden`.
pub fn down_cpu(act: &[u16], w2: &[u16], shape: ExpertShape) -> Vec<u16> {
    let (h, i) = (shape.hidden, shape.inter);
    let rows = act.len() / i;
    let wf: Vec<f32> = w2.iter().map(|&v| bf16_to_f32(v)).collect();
    let mut out = Vec::with_capacity(rows * h);
    let mut af = vec![0f32; i];
    for r in 0..rows {
        for (d, &v) in af.iter_mut().zip(&act[r * i..(r + 1) * i]) {
            *d = bf16_to_f32(v);
        }
        for c in 0..h {
            let w = &wf[c * i..(c + 1) * i];
            let acc: f32 = af.iter().zip(w).map(|(a, b)| a * b).sum();
            out.push(f32_to_bf16(acc));
        }
    }
    out
}

/// One expert on `x` (`rows × hidden`): gate/up, SiLU·up, down.
pub fn ffn_cpu(x: &[u16], w13: &[u16], w2: &[u16], shape: ExpertShape) -> Vec<u16> {
    let y = gate_up_cpu(x, w13, shape);
    let act = silu_mul_cpu(&y, shape.inter);
    down_cpu(&act, w2, shape)
}

/// Every copy's rows of the dispatched activations `xp` through its expert:
/// the expert outputs, in dispatched row order (`rows × hidden`).
pub fn experts_cpu(
    xp: &[u16],
    index: &DispatchIndex,
    slots: &LayerSlots,
    weights: &WeightPool,
) -> Result<Vec<u16>> {
    let h = weights.shape.hidden;
    let rows = index.perm.len();
    if xp.len() != rows * h || weights.pool == 0 {
        return Err(Error::Argument(format!(
            "{} dispatched values for {rows} rows of {h}, or an empty weight pool",
            xp.len()
        )));
    }
    let mut out = vec![0u16; rows * h];
    for s in 0..slots.num_slots() {
        let (a, b) = (index.offsets[s] as usize, index.offsets[s + 1] as usize);
        if a == b {
            continue;
        }
        let p = slots.slot_expert[s] as usize % weights.pool;
        let o = ffn_cpu(
            &xp[a * h..b * h],
            weights.w13(p),
            weights.w2(p),
            weights.shape,
        );
        out[a * h..b * h].copy_from_slice(&o);
    }
    Ok(out)
}
