//! A migration-capped, variance-aware re-plan, in the spirit of
//! vllm-ascend's STAIR policy: only a layer whose balancedness on the new
//! window fell below a gate is re-planned, and it walks from the served
//! placement toward the fresh plan (relabelled onto the served GPUs) one
//! copy at a time, at most `M` copies from one GPU to another per layer,
//! taking copies from a holder on the receiver's own node before any that
//! cross nodes. It stops when no allowed copy improves the layer.
//!
//! Each step replaces one slot of a GPU whose expert the fresh plan no
//! longer keeps there by an expert the fresh plan puts there, from a
//! holder chosen as the pause model chooses (its own node first, then the
//! one that sent least); a slot is given up only while its expert keeps
//! another copy. Slots per GPU never change (same memory). Balance is the
//! even split's on the window's loads, as [`super::incremental`] judges it.
//!
//! Complexity: per layer below the gate, `O(R² · s)` for `R` slots that
//! differ from the target and `s` slots in the layer (each step tries
//! every remaining replacement).

use ndarray::ArrayView2;
use serde::Serialize;

use super::incremental::balance;
use crate::data::plan::{LayerPlacement, Plan};
use crate::error::{Error, Result};

const NAME: &str = "STAIR-like re-plan";

/// The gate and the cap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stair {
    /// Re-plan only layers whose balancedness on the window is below this.
    pub gate: f64,
    /// Copies one GPU may send another in one layer, at most.
    pub per_pair: usize,
}

impl Default for Stair {
    /// A gate of 0.9 and two copies per GPU pair a layer.
    fn default() -> Self {
        Stair {
            gate: 0.9,
            per_pair: 2,
        }
    }
}

/// `current` moved toward `target` (the fresh plan relabelled onto
/// `current`'s GPUs; same topology, experts and layers) as `stair` allows,
/// on the window's `loads` (`layers × experts`).
pub(crate) fn stair(
    current: &Plan,
    target: &Plan,
    loads: ArrayView2<'_, f64>,
    stair: Stair,
) -> Result<Plan> {
    let l_n = current.layers().len();
    if target.layers().len() != l_n
        || loads.nrows() != l_n
        || loads.ncols() != current.num_experts()
        || target.num_experts() != current.num_experts()
        || target.topology() != current.topology()
    {
        return Err(Error::planner(
            NAME,
            "the served plan, the fresh one and the window differ in shape".to_string(),
        ));
    }
    if !(0.0..=1.0).contains(&stair.gate) || stair.per_pair == 0 {
        return Err(Error::Argument(format!(
            "{NAME}: the gate is between 0 and 1 and at least one copy a GPU pair ({}, {})",
            stair.gate, stair.per_pair
        )));
    }
    let gpn = current.topology().gpus_per_node().max(1);
    let mut layers = Vec::with_capacity(l_n);
    for (l, (cur, tgt)) in current.layers().iter().zip(target.layers()).enumerate() {
        let row: Vec<f64> = loads.row(l).to_vec();
        let mut gpus = cur.gpus.clone();
        if balance(&row, &gpus) < stair.gate {
            walk(&row, &mut gpus, &tgt.gpus, stair.per_pair, gpn);
        }
        layers.push(LayerPlacement {
            layer: cur.layer,
            gpus,
        });
    }
    Plan::new(
        current.topology(),
        current.num_experts(),
        layers,
        current.algorithm(),
    )
}

/// One slot replacement toward the target: on GPU `gpu`, `out` gives way
/// to `inn`.
#[derive(Debug, Clone, Copy)]
struct Replace {
    gpu: usize,
    out: u32,
    inn: u32,
}

/// Moves `gpus` toward `target` (see the module documentation).
fn walk(row: &[f64], gpus: &mut [Vec<u32>], target: &[Vec<u32>], per_pair: usize, gpn: usize) {
    let d = gpus.len();
    // Pair each GPU's slots the target drops with those it adds.
    let mut todo: Vec<Replace> = Vec::new();
    for (g, (have, want)) in gpus.iter().zip(target).enumerate() {
        let outs = without(have, want);
        let ins = without(want, have);
        todo.extend(
            outs.into_iter()
                .zip(ins)
                .map(|(out, inn)| Replace { gpu: g, out, inn }),
        );
    }
    let mut sent = vec![0usize; d * d];
    let mut sends = vec![0usize; d];
    let mut bal = balance(row, gpus);
    loop {
        // (index, sender, balancedness after, crosses nodes)
        let mut best: Option<(usize, usize, f64, bool)> = None;
        for (i, r) in todo.iter().enumerate() {
            let Some(from) = sender(gpus, r, &sent, &sends, per_pair, gpn) else {
                continue;
            };
            if copies_of(gpus, r.out) < 2 || gpus[r.gpu].contains(&r.inn) {
                continue;
            }
            let Some(slot) = gpus[r.gpu].iter().position(|&x| x == r.out) else {
                continue;
            };
            gpus[r.gpu][slot] = r.inn;
            let after = balance(row, gpus);
            gpus[r.gpu][slot] = r.out;
            let cross = from / gpn != r.gpu / gpn;
            // Improving moves only; one within a node before one across.
            let better = match best {
                None => true,
                Some((_, _, b, c)) => (cross, -after) < (c, -b),
            };
            if after > bal + 1e-12 && better {
                best = Some((i, from, after, cross));
            }
        }
        let Some((i, from, after, _)) = best else {
            break;
        };
        let r = todo.swap_remove(i);
        if let Some(slot) = gpus[r.gpu].iter().position(|&x| x == r.out) {
            gpus[r.gpu][slot] = r.inn;
        }
        sent[from * d + r.gpu] += 1;
        sends[from] += 1;
        bal = after;
    }
}

/// The GPU that sends `r.inn` to `r.gpu`: a holder under the pair cap, on
/// the receiver's node if any, the one that sent least.
fn sender(
    gpus: &[Vec<u32>],
    r: &Replace,
    sent: &[usize],
    sends: &[usize],
    per_pair: usize,
    gpn: usize,
) -> Option<usize> {
    let d = gpus.len();
    (0..d)
        .filter(|&h| h != r.gpu && gpus[h].contains(&r.inn) && sent[h * d + r.gpu] < per_pair)
        .min_by_key(|&h| (h / gpn != r.gpu / gpn, sends[h], h))
}

/// The items of `a` not in `b`, counted as multisets.
fn without(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut rest = b.to_vec();
    a.iter()
        .filter(|x| match rest.iter().position(|y| y == *x) {
            Some(i) => {
                rest.swap_remove(i);
                false
            }
            None => true,
        })
        .copied()
        .collect()
}

fn copies_of(gpus: &[Vec<u32>], e: u32) -> usize {
    gpus.iter().flatten().filter(|&&x| x == e).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;
    use crate::judge::migration::migration;
    use ndarray::Array2;

    fn plan(topo: Topology, e: usize, gpus: Vec<Vec<u32>>) -> Result<Plan> {
        Plan::new(topo, e, vec![LayerPlacement { layer: 0, gpus }], "t")
    }

    /// Below the gate the layer moves toward the target, no GPU pair
    /// carrying more than the cap, every expert kept; at or above it the
    /// layer stays; a copy within the node is taken before one across.
    #[test]
    fn moves_below_the_gate_within_the_cap() -> Result<()> {
        let topo = Topology::new(2, 2)?;
        // expert 0 is hot and has one copy, on GPU 0; 1 holds a spare of 1
        let served = plan(
            topo,
            6,
            vec![vec![0, 1], vec![2, 1], vec![3, 4], vec![5, 2]],
        )?;
        // the fresh plan gives 0 a copy on GPUs 1, 2 and 3
        let target = plan(
            topo,
            6,
            vec![vec![0, 1], vec![2, 0], vec![3, 0], vec![5, 4]],
        )?;
        let mut loads = Array2::from_elem((1, 6), 10.0);
        loads[[0, 0]] = 90.0;
        let b0 = balance(
            loads.row(0).as_slice().unwrap_or(&[]),
            &served.layers()[0].gpus,
        );
        let one = stair(
            &served,
            &target,
            loads.view(),
            Stair {
                gate: 0.99,
                per_pair: 1,
            },
        )?;
        let m = migration(&served, &one)?;
        let b1 = balance(
            loads.row(0).as_slice().unwrap_or(&[]),
            &one.layers()[0].gpus,
        );
        assert!(b1 > b0, "{b0} → {b1}");
        // GPU 0 holds the only copy of 0: one copy to each GPU at most,
        // and its node's GPU 1 first
        assert!(one.layers()[0].gpus[1].contains(&0));
        assert_eq!(
            m.per_gpu_sent_intra_node[0] + m.per_gpu_sent_inter_node[0],
            m.copies()
        );
        for e in 0..6u32 {
            assert!(copies_of(&one.layers()[0].gpus, e) >= 1, "expert {e} lost");
        }
        // at the gate nothing moves
        let kept = stair(
            &served,
            &target,
            loads.view(),
            Stair {
                gate: b0,
                per_pair: 1,
            },
        )?;
        assert_eq!(kept, served);
        Ok(())
    }

    #[test]
    fn refuses_a_bad_gate_or_cap() -> Result<()> {
        let topo = Topology::new(1, 2)?;
        let p = plan(topo, 2, vec![vec![0], vec![1]])?;
        let loads = Array2::from_elem((1, 2), 1.0);
        assert!(
            stair(
                &p,
                &p,
                loads.view(),
                Stair {
                    gate: 1.5,
                    per_pair: 1
                }
            )
            .is_err()
        );
        assert!(
            stair(
                &p,
                &p,
                loads.view(),
                Stair {
                    gate: 0.9,
                    per_pair: 0
                }
            )
            .is_err()
        );
        Ok(())
    }
}
