//! The simulated predictor: each true expert kept with probability `p`,
//! a dropped one replaced by a draw from the layer's marginal (see the
//! module above), seeded per (layer, token).

use super::*;

/// Libra's predictor stood in for by calibrated noise (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Noisy {
    pub(super) accuracy: f64,
    pub(super) seed: u64,
    pub(super) experts: usize,
    /// Per layer, the cumulative marginal over experts (`L × E`).
    pub(super) cdf: Vec<f64>,
    pub(super) marginal: Vec<f64>,
}

impl Noisy {
    /// A predictor of accuracy `p` (0 to 1) on `work`, its marginals the
    /// workload's counts summed over batches, its draws seeded by `seed`.
    ///
    /// ```
    /// use moeplan::{planners::Noisy, data::Workload, LoadTrace};
    /// use ndarray::Array3;
    /// let w = Workload::new(LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?);
    /// assert!(Noisy::new(&w, 0.8, 7).is_ok());
    /// assert!(Noisy::new(&w, 1.5, 7).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(work: &Workload, p: f64, seed: u64) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::planner(
                NAME,
                format!("predictor accuracy {p} is outside 0..=1"),
            ));
        }
        let counts = work.trace().counts();
        let (_, l_n, e_n) = counts.dim();
        let summed = counts.sum_axis(ndarray::Axis(0));
        let marginal: Vec<f64> = summed.iter().copied().collect();
        let mut cdf = Vec::with_capacity(l_n * e_n);
        for l in 0..l_n {
            let mut acc = 0.0;
            for e in 0..e_n {
                acc += marginal[l * e_n + e];
                cdf.push(acc);
            }
        }
        Ok(Noisy {
            accuracy: p,
            seed,
            experts: e_n,
            cdf,
            marginal,
        })
    }

    /// The accuracy it is calibrated to.
    pub fn accuracy(&self) -> f64 {
        self.accuracy
    }

    /// Token `t`'s predicted set at layer index `l` given its true set.
    pub(super) fn draw(&self, l: usize, t: usize, truth: &[u32], out: &mut Vec<u32>) {
        let e_n = self.experts;
        let mut rng = SplitMix(
            self.seed ^ (l as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64).rotate_left(32),
        );
        out.clear();
        let mut dropped = 0usize;
        for &e in truth {
            if rng.unit() < self.accuracy {
                out.push(e);
            } else {
                dropped += 1;
            }
        }
        let cdf = self.cdf.get(l * e_n..(l + 1) * e_n).unwrap_or(&[]);
        let weights = self.marginal.get(l * e_n..(l + 1) * e_n).unwrap_or(&[]);
        let total = cdf.last().copied().unwrap_or(0.0);
        let banned = |e: u32, out: &[u32]| truth.contains(&e) || out.contains(&e);
        for _ in 0..dropped {
            let mut pick = None;
            if total > 0.0 {
                // Rejection keeps the draw proportional to the marginal
                // over the allowed experts; the scan below is the fallback
                // when the banned ones hold nearly all the mass.
                for _ in 0..64 {
                    let u = rng.unit() * total;
                    let e = cdf.partition_point(|&c| c <= u).min(e_n.saturating_sub(1)) as u32;
                    if !banned(e, out) && weights.get(e as usize).copied().unwrap_or(0.0) > 0.0 {
                        pick = Some(e);
                        break;
                    }
                }
            }
            if pick.is_none() {
                let allowed: f64 = (0..e_n as u32)
                    .filter(|&e| !banned(e, out))
                    .map(|e| weights.get(e as usize).copied().unwrap_or(0.0))
                    .sum();
                let free = (0..e_n as u32).filter(|&e| !banned(e, out)).count();
                if free == 0 {
                    break;
                }
                if allowed > 0.0 {
                    let mut u = rng.unit() * allowed;
                    for e in (0..e_n as u32).filter(|&e| !banned(e, out)) {
                        u -= weights.get(e as usize).copied().unwrap_or(0.0);
                        if u < 0.0 {
                            pick = Some(e);
                            break;
                        }
                    }
                }
                if pick.is_none() {
                    let i = ((rng.unit() * free as f64) as usize).min(free - 1);
                    pick = (0..e_n as u32).filter(|&e| !banned(e, out)).nth(i);
                }
            }
            if let Some(e) = pick {
                out.push(e);
            }
        }
    }
}

/// SplitMix64: a tiny, fast generator; seeded per (layer, token) so a
/// token's draws do not depend on the order predictions are asked in.
pub(super) struct SplitMix(u64);

impl SplitMix {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
