//! The exact optimum of one layer's replica counts and placement, for small
//! layers: a mixed-integer programme solved by microlp (pure Rust, builds
//! for wasm).
//!
//! Beyond the papers: ground truth for the tests and the page.
//! For one load vector `w` (one batch, or a layer's summed loads), slots
//! `cap[g]` on GPU `g` and `D` GPUs, with binaries `u[e][k]` (expert `e` has
//! `k` copies) and `z[e][k][g]` (with `k` copies, one of them on `g`):
//!
//! ```text
//! minimise T
//!   Σ_k u[e][k] = 1                       every expert one copy count
//!   Σ_g z[e][k][g] = k · u[e][k]          k copies on k distinct GPUs
//!   Σ_k z[e][k][g] ≤ 1                    never two copies on one GPU
//!   Σ_{e,k} z[e][k][g] = cap[g]           every slot used
//!   Σ_{e,k} z[e][k][g] · w[e] / k ≤ T     even split over copies
//!   load[g] ≥ load[g+1] when cap[g] = cap[g+1]   (GPU symmetry)
//! ```
//!
//! The optimum is the smallest possible busiest-GPU load, so the largest
//! balancedness (mean / max) of that load vector. Several batches (the mean
//! of per-batch maxima) are not modelled: callers pass summed loads or one
//! batch. Branch and bound is exponential in the worst case; the sizes are
//! guarded (`MAX_BINARIES`) and the solve is limited in work (`NODE_BUDGET`). The joint
//! search's plan ([`joint_layer`]) bounds the optimum from above: it rules
//! out copy counts whose per-copy load alone exceeds it and seeds the
//! solver's incumbent.

use std::time::Duration;

use microlp::{SolveOptions, Variable};

use super::joint::{JointOptions, joint_layer};
use super::lp::{MAX_BINARIES, Model, model};
use super::placement::peak_load;
use crate::error::{Error, Result};

const NAME: &str = "oracle";

/// The oracle's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimum {
    /// The smallest possible busiest-GPU load.
    pub max_load: f64,
    /// Mean GPU load / `max_load` (1.0 for an idle layer).
    pub balancedness: f64,
    /// A placement reaching it: the experts of every GPU.
    pub gpus: Vec<Vec<u32>>,
}

/// The optimal copies and placement of one load vector on GPUs with
/// `capacity[g]` slots each (see the module documentation).
///
/// ```
/// use moeplan::planners::optimal_layer;
/// // FlashLB's example: 8 devices × 2 slots; the optimum peaks at 590 / 3
/// let w = [600.0, 560.0, 120.0, 120.0, 20.0, 10.0, 10.0, 10.0];
/// let best = optimal_layer(&w, &[2; 8])?;
/// assert!((best.max_load - 590.0 / 3.0).abs() < 1e-6);
/// assert!(optimal_layer(&[1.0; 40], &[10; 8]).is_err()); // too large
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn optimal_layer(loads: &[f64], capacity: &[usize]) -> Result<Optimum> {
    solve(loads, capacity, None)
}

/// Branch-and-bound nodes the oracle may solve before giving up: a budget
/// of work, not of time, so that whether an optimum is proven does not
/// depend on the machine or its load (FlashLB's 8 × 2 example takes
/// 16,808; a 60 s limit once failed it on a loaded 2-core machine).
pub(crate) const NODE_BUDGET: u64 = 200_000;

/// [`optimal_layer`] with a time limit of the caller's: an error when the
/// optimum is not proven within `limit` (branch and bound on symmetric
/// GPUs can take long even on small layers).
#[cfg(test)]
pub(crate) fn optimal_layer_within(
    loads: &[f64],
    capacity: &[usize],
    limit: Duration,
) -> Result<Optimum> {
    solve(loads, capacity, Some(limit))
}

/// The solve, within [`NODE_BUDGET`] nodes and `limit` if given.
fn solve(loads: &[f64], capacity: &[usize], limit: Option<Duration>) -> Result<Optimum> {
    let e = loads.len();
    let d = capacity.len();
    let slots: usize = capacity.iter().sum();
    if e == 0 || d == 0 {
        return Err(Error::planner(NAME, "no experts or no GPUs"));
    }
    if loads.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return Err(Error::planner(
            NAME,
            "loads must be finite and non-negative",
        ));
    }
    if slots < e || capacity.iter().any(|&c| c > e) || slots > e * d {
        return Err(Error::planner(
            NAME,
            format!("{slots} slots cannot hold {e} experts once each on {d} GPUs"),
        ));
    }
    // Copies beyond D share a GPU; beyond `slots − (E − 1)` leave another
    // expert without a slot.
    let k_max = d.min(slots + 1 - e);
    if e * k_max * (1 + d) > 8 * MAX_BINARIES {
        return Err(too_large(e * k_max * (1 + d), e, d, k_max));
    }
    let scale = loads.iter().copied().fold(0.0, f64::max);
    // An idle layer is balanced whatever the placement; any valid one will
    // do, so the model is solved with equal loads.
    let w: Vec<f64> = match scale > 0.0 {
        true => loads.iter().map(|x| x / scale).collect(),
        false => vec![1.0; e],
    };
    // The heuristic's plan is an upper bound: it prunes the search, rules
    // out copy counts whose per-copy load alone exceeds it, and seeds the
    // incumbent.
    let heuristic = joint_layer(&w, capacity, None, JointOptions::default())?;
    let ub = peak_load(&w, &heuristic) * (1.0 + 1e-9);
    let k_lo: Vec<usize> = w
        .iter()
        .map(|&x| (1..=k_max).find(|&k| x / k as f64 <= ub).unwrap_or(k_max))
        .collect();
    let binaries: usize = k_lo.iter().map(|&lo| (k_max + 1 - lo) * (1 + d)).sum();
    if binaries > MAX_BINARIES {
        return Err(too_large(binaries, e, d, k_max));
    }
    let Model { p, z, .. } = model(&w, capacity, &k_lo, ub, true);
    let warm = warm_start(&w, capacity, &heuristic, &k_lo, &z);
    let mut options = SolveOptions::default();
    options.time_limit = limit;
    options.node_limit = Some(NODE_BUDGET);
    options.warm_start = Some(warm);
    let outcome = p
        .solve_with(options)
        .map_err(|err| Error::planner(NAME, format!("the solver failed: {err}")))?;
    if !outcome.is_optimal() {
        return Err(Error::Limit(match limit {
            Some(l) => format!(
                "the exact oracle proved no optimum within {} s or {NODE_BUDGET} nodes",
                l.as_secs_f64()
            ),
            None => format!("the exact oracle proved no optimum within {NODE_BUDGET} nodes"),
        }));
    }
    let sol = outcome
        .solution()
        .ok_or_else(|| Error::planner(NAME, "the solver returned no solution"))?;
    let mut gpus: Vec<Vec<u32>> = vec![Vec::new(); d];
    for (x, zx) in z.iter().enumerate() {
        for zi in zx {
            for (g, &v) in zi.iter().enumerate() {
                if sol.var_value(v) > 0.5 {
                    gpus[g].push(x as u32);
                }
            }
        }
    }
    // The answer is read back off the placement, exactly, rather than off
    // the solver's scaled objective; the heuristic stands if rounding made
    // the solver's placement no better.
    let solved_ok = gpus.iter().map(Vec::len).eq(capacity.iter().copied());
    if !solved_ok || peak_load(loads, &gpus) > peak_load(loads, &heuristic) {
        gpus = heuristic;
    }
    let max_load = peak_load(loads, &gpus);
    let mean = loads.iter().sum::<f64>() / d as f64;
    Ok(Optimum {
        max_load,
        balancedness: if max_load > 0.0 { mean / max_load } else { 1.0 },
        gpus,
    })
}

fn too_large(binaries: usize, e: usize, d: usize, k_max: usize) -> Error {
    Error::Limit(format!(
        "the exact oracle needs {binaries} binaries (limit {MAX_BINARIES}): \
         {e} experts, {d} GPUs, up to {k_max} copies"
    ))
}

/// The heuristic's placement as a partial solver assignment (the solver
/// completes the rest), GPUs of equal slot counts in the order of the
/// symmetry rows (heavier first).
fn warm_start(
    w: &[f64],
    capacity: &[usize],
    heuristic: &[Vec<u32>],
    k_lo: &[usize],
    z: &[Vec<Vec<Variable>>],
) -> Vec<(Variable, f64)> {
    let d = capacity.len();
    let mut copies = vec![0usize; w.len()];
    heuristic
        .iter()
        .flatten()
        .for_each(|&x| copies[x as usize] += 1);
    let load = |g: usize| -> f64 {
        heuristic[g]
            .iter()
            .map(|&x| w[x as usize] / copies[x as usize].max(1) as f64)
            .sum()
    };
    let mut order: Vec<usize> = (0..d).collect();
    let mut start = 0;
    while start < d {
        let mut end = start + 1;
        while end < d && capacity[end] == capacity[start] {
            end += 1;
        }
        crate::sort::sort_by(&mut order[start..end], |&a, &b| load(b).total_cmp(&load(a)));
        start = end;
    }
    let mut hint = Vec::new();
    for (x, zx) in z.iter().enumerate() {
        for (i, zi) in zx.iter().enumerate() {
            let count = k_lo[x] + i == copies[x];
            for (slot, &v) in zi.iter().enumerate() {
                let on = count && heuristic[order[slot]].contains(&(x as u32));
                hint.push((v, if on { 1.0 } else { 0.0 }));
            }
        }
    }
    hint
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn oracle_optimal_layer_within_example() {
        let run = || {
            use super::optimal_layer_within;
            use std::time::Duration;
            let best =
                optimal_layer_within(&[4.0, 3.0, 2.0, 1.0], &[2, 2], Duration::from_secs(10))?;
            assert_eq!(best.max_load, 5.0);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
