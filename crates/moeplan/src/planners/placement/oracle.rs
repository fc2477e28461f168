//! The exact optimum of one layer's replica counts and placement, for small
//! layers: a mixed-integer programme solved by microlp (pure Rust, builds
//! for wasm).
//!
//! Beyond the papers (issue 13): ground truth for the tests and the page.
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
//! guarded ([`MAX_BINARIES`]) and the solve is limited in time. The joint
//! search's plan ([`joint_layer`]) bounds the optimum from above: it rules
//! out copy counts whose per-copy load alone exceeds it and seeds the
//! solver's incumbent.

use std::time::Duration;

use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem, SolveOptions, Variable};

use super::joint::{JointOptions, joint_layer};
use crate::error::{Error, Result};

const NAME: &str = "oracle";

/// Largest model the oracle builds: `Σ_e Σ_k (1 + D)` binaries.
pub const MAX_BINARIES: usize = 2_000;

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
/// use moeplan::planners::placement::oracle::optimal_layer;
/// // FlashLB's example: 8 devices × 2 slots; the optimum peaks at 590 / 3
/// let w = [600.0, 560.0, 120.0, 120.0, 20.0, 10.0, 10.0, 10.0];
/// let best = optimal_layer(&w, &[2; 8])?;
/// assert!((best.max_load - 590.0 / 3.0).abs() < 1e-6);
/// assert!(optimal_layer(&[1.0; 40], &[10; 8]).is_err()); // too large
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn optimal_layer(loads: &[f64], capacity: &[usize]) -> Result<Optimum> {
    optimal_layer_within(loads, capacity, Duration::from_secs(60))
}

/// [`optimal_layer`] with a time limit of the caller's: an error when the
/// optimum is not proven within `limit` (branch and bound on symmetric
/// GPUs can take long even on small layers).
///
/// ```
/// use std::time::Duration;
/// use moeplan::planners::placement::oracle::optimal_layer_within;
/// let best = optimal_layer_within(&[4.0, 3.0, 2.0, 1.0], &[2, 2], Duration::from_secs(10))?;
/// assert_eq!(best.max_load, 5.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn optimal_layer_within(loads: &[f64], capacity: &[usize], limit: Duration) -> Result<Optimum> {
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
    let ub = peak(&w, &heuristic) * (1.0 + 1e-9);
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
    options.time_limit = Some(limit);
    options.warm_start = Some(warm);
    let outcome = p
        .solve_with(options)
        .map_err(|err| Error::planner(NAME, format!("the solver failed: {err}")))?;
    if !outcome.is_optimal() {
        return Err(Error::Limit(format!(
            "the exact oracle proved no optimum within {} s",
            limit.as_secs_f64()
        )));
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
    if !solved_ok || peak(loads, &gpus) > peak(loads, &heuristic) {
        gpus = heuristic;
    }
    let max_load = peak(loads, &gpus);
    let mean = loads.iter().sum::<f64>() / d as f64;
    Ok(Optimum {
        max_load,
        balancedness: if max_load > 0.0 { mean / max_load } else { 1.0 },
        gpus,
    })
}

/// The oracle's programme: `T`, then `u[e][i]` and `z[e][i][g]` for
/// `k = k_lo[e] + i` copies; binaries, or in `[0, 1]` for the relaxation.
struct Model {
    p: Problem,
    u: Vec<Vec<Variable>>,
    z: Vec<Vec<Vec<Variable>>>,
}

fn model(w: &[f64], capacity: &[usize], k_lo: &[usize], ub: f64, binary: bool) -> Model {
    let (e, d) = (w.len(), capacity.len());
    let k_max = d.min((capacity.iter().sum::<usize>() + 1).saturating_sub(e));
    let mean = w.iter().sum::<f64>() / d as f64;
    let mut p = Problem::new(OptimizationDirection::Minimize);
    let t = p.add_var(1.0, (mean * (1.0 - 1e-9), ub));
    let var = |p: &mut Problem| {
        if binary {
            p.add_binary_var(0.0)
        } else {
            p.add_var(0.0, (0.0, 1.0))
        }
    };
    // u[e][i], z[e][i][g] for k = k_lo[e] + i copies
    let mut u = Vec::with_capacity(e);
    let mut z = Vec::with_capacity(e);
    for &lo in k_lo {
        let n = k_max + 1 - lo;
        u.push((0..n).map(|_| var(&mut p)).collect::<Vec<_>>());
        z.push(
            (0..n)
                .map(|_| (0..d).map(|_| var(&mut p)).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
        );
    }
    let copies_of = |x: usize, i: usize| (k_lo[x] + i) as f64;
    for x in 0..e {
        p.add_constraint(u[x].iter().map(|&v| (v, 1.0)), ComparisonOp::Eq, 1.0);
        // The busiest GPU carries at least one copy's share: a cut that
        // makes the relaxation far tighter than the load rows alone.
        let mut item = LinearExpr::empty();
        for (i, &v) in u[x].iter().enumerate() {
            item.add(v, w[x] / copies_of(x, i));
        }
        item.add(t, -1.0);
        p.add_constraint(item, ComparisonOp::Le, 0.0);
        for (i, zi) in z[x].iter().enumerate() {
            let mut expr = LinearExpr::empty();
            zi.iter().for_each(|&v| expr.add(v, 1.0));
            expr.add(u[x][i], -copies_of(x, i));
            p.add_constraint(expr, ComparisonOp::Eq, 0.0);
        }
        for g in 0..d {
            p.add_constraint(z[x].iter().map(|zi| (zi[g], 1.0)), ComparisonOp::Le, 1.0);
        }
    }
    let load_of = |g: usize, sign: f64, expr: &mut LinearExpr| {
        for (x, zx) in z.iter().enumerate() {
            for (i, zi) in zx.iter().enumerate() {
                let c = sign * w[x] / copies_of(x, i);
                if c != 0.0 {
                    expr.add(zi[g], c);
                }
            }
        }
    };
    for g in 0..d {
        let mut count = LinearExpr::empty();
        z.iter().flatten().for_each(|zi| count.add(zi[g], 1.0));
        p.add_constraint(count, ComparisonOp::Eq, capacity[g] as f64);
        let mut load = LinearExpr::empty();
        load_of(g, 1.0, &mut load);
        load.add(t, -1.0);
        p.add_constraint(load, ComparisonOp::Le, 0.0);
        // GPUs with equal slot counts are interchangeable: order them.
        if g + 1 < d && capacity[g] == capacity[g + 1] {
            let mut order = LinearExpr::empty();
            load_of(g, 1.0, &mut order);
            load_of(g + 1, -1.0, &mut order);
            p.add_constraint(order, ComparisonOp::Ge, 0.0);
        }
    }
    Model { p, u, z }
}

/// Copy counts from the oracle's linear relaxation (every binary in
/// `[0, 1]`): each expert's expected copy count `Σ k · u[e][k]`, rounded by
/// largest remainder so the counts fill the slots, `1 ≤ c ≤ D`. A start for
/// the joint search ([`joint_layer`]) that owes nothing to the greedy
/// highest-load-per-copy order; `None` for a layer too large to model
/// ([`MAX_BINARIES`]) or when the solver fails. Polynomial (simplex).
///
/// ```
/// use moeplan::planners::placement::oracle::relaxed_counts;
/// let w = [600.0, 560.0, 120.0, 120.0, 20.0, 10.0, 10.0, 10.0];
/// let c = relaxed_counts(&w, &[2; 8]).unwrap();
/// assert_eq!(c.iter().sum::<u32>(), 16);
/// assert!(c[0] >= c[2] && c.iter().all(|&k| (1..=8).contains(&k)));
/// ```
pub fn relaxed_counts(loads: &[f64], capacity: &[usize]) -> Option<Vec<u32>> {
    let e = loads.len();
    let d = capacity.len();
    let slots: usize = capacity.iter().sum();
    if e == 0 || d == 0 || slots < e || slots > e * d || capacity.iter().any(|&c| c > e) {
        return None;
    }
    if loads.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return None;
    }
    let k_max = d.min(slots + 1 - e);
    if e * k_max * (1 + d) > MAX_BINARIES {
        return None;
    }
    let scale = loads.iter().copied().fold(0.0, f64::max);
    if scale <= 0.0 {
        return None;
    }
    let w: Vec<f64> = loads.iter().map(|x| x / scale).collect();
    let Model { p, u, .. } = model(&w, capacity, &vec![1; e], 1.0, false);
    let outcome = p.solve().ok()?;
    let sol = outcome.solution()?;
    let expected: Vec<f64> = u
        .iter()
        .map(|ux| {
            ux.iter()
                .enumerate()
                .map(|(i, &v)| (i + 1) as f64 * sol.var_value(v).clamp(0.0, 1.0))
                .sum::<f64>()
                .clamp(1.0, k_max as f64)
        })
        .collect();
    let mut counts: Vec<u32> = expected.iter().map(|&c| c.floor() as u32).collect();
    let mut left = slots.checked_sub(counts.iter().map(|&c| c as usize).sum())?;
    // largest remainder first, then the highest load per copy
    let mut order: Vec<usize> = (0..e).collect();
    order.sort_by(|&a, &b| {
        (expected[b] - expected[b].floor())
            .total_cmp(&(expected[a] - expected[a].floor()))
            .then((w[b] / f64::from(counts[b])).total_cmp(&(w[a] / f64::from(counts[a]))))
    });
    while left > 0 {
        let before = left;
        for &x in &order {
            if left > 0 && (counts[x] as usize) < k_max {
                counts[x] += 1;
                left -= 1;
            }
        }
        if left == before {
            return None;
        }
    }
    Some(counts)
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
        order[start..end].sort_by(|&a, &b| load(b).total_cmp(&load(a)));
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

/// The busiest GPU's load with each expert's load split evenly over its
/// copies.
///
/// ```
/// use moeplan::planners::placement::oracle::peak;
/// assert_eq!(peak(&[4.0, 1.0], &[vec![0, 1], vec![0]]), 3.0);
/// ```
pub fn peak(loads: &[f64], gpus: &[Vec<u32>]) -> f64 {
    let mut copies = vec![0usize; loads.len()];
    for &x in gpus.iter().flatten() {
        if let Some(c) = copies.get_mut(x as usize) {
            *c += 1;
        }
    }
    gpus.iter()
        .map(|s| {
            s.iter()
                .filter_map(|&x| {
                    let c = *copies.get(x as usize)?;
                    Some(loads.get(x as usize)? / c.max(1) as f64)
                })
                .sum::<f64>()
        })
        .fold(0.0, f64::max)
}
