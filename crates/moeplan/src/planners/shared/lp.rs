//! The mixed-integer programme of one layer's replica counts and
//! placement (written out in [`super::oracle`]), and its linear relaxation's
//! copy counts: what the exact oracle solves and the joint search starts
//! from. Building the model is linear in its `Σ_e Σ_k (1 + D)` variables.

use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem, Variable};

/// Largest model the oracle builds: `Σ_e Σ_k (1 + D)` binaries.
pub(crate) const MAX_BINARIES: usize = 2_000;

/// The oracle's programme: `T`, then `u[e][i]` and `z[e][i][g]` for
/// `k = k_lo[e] + i` copies; binaries, or in `[0, 1]` for the relaxation.
pub(crate) struct Model {
    pub(crate) p: Problem,
    pub(crate) u: Vec<Vec<Variable>>,
    pub(crate) z: Vec<Vec<Vec<Variable>>>,
}

pub(crate) fn model(w: &[f64], capacity: &[usize], k_lo: &[usize], ub: f64, binary: bool) -> Model {
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
/// the joint search ([`joint_layer`](super::joint::joint_layer)) that owes nothing to the greedy
/// highest-load-per-copy order; `None` for a layer too large to model
/// ([`MAX_BINARIES`]) or when the solver fails. Polynomial (simplex).
pub(crate) fn relaxed_counts(loads: &[f64], capacity: &[usize]) -> Option<Vec<u32>> {
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
    crate::sort::sort_by(&mut order, |&a, &b| {
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

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn relaxed_counts() {
        use crate::planners::shared::lp::relaxed_counts;
        let w = [600.0, 560.0, 120.0, 120.0, 20.0, 10.0, 10.0, 10.0];
        let c = relaxed_counts(&w, &[2; 8]).unwrap();
        assert_eq!(c.iter().sum::<u32>(), 16);
        assert!(c[0] >= c[2] && c.iter().all(|&k| (1..=8).contains(&k)));
    }
}
