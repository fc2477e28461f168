//! Multiple-choice knapsack by dynamic programming: pick exactly one option
//! per group (a layer), each option costing whole units (replicas) and
//! bringing a value (balancedness gain), to maximise the total value within
//! a capacity.
//!
//! CRAFT's Algorithm 2 (CRAFT paper, appendix A) and its per-budget bound
//! use it; any planner that spends a replica budget over layers (GRACE-MoE's
//! per-layer allocation) can too. The table keeps the best value for every
//! exact total `0..=capacity`, so a caller can pick among totals (CRAFT
//! picks one that keeps every GPU's memory equal) and backtrack once.
//!
//! Complexity: O(L · C · K) time and O(L · C) memory for `L` groups, `C`
//! units of capacity and `K` options per group.

/// Multiple-choice knapsack over layers: `best[l][c]` is the best value of
/// the first `l` layers using exactly `c` units.
#[derive(Debug, Clone)]
pub(crate) struct Knapsack {
    capacity: usize,
    layers: usize,
    /// `(layers + 1) × (capacity + 1)`, row-major; NEG_INFINITY = unreachable.
    best: Vec<f64>,
    /// Index of the choice taken at `(l, c)` (row `l` for layers `0..l`).
    choice: Vec<u32>,
}

impl Knapsack {
    /// Fills the table for `choices[l]` = layer `l`'s options as
    /// `(units, value)`, within `capacity` units. Among options of equal
    /// value at a total, the earlier one stays (list cheaper options first to
    /// prefer them).
    pub(crate) fn solve(choices: &[Vec<(usize, f64)>], capacity: usize) -> Knapsack {
        let w = capacity + 1;
        let layers = choices.len();
        let mut best = vec![f64::NEG_INFINITY; (layers + 1) * w];
        let mut choice = vec![0u32; (layers + 1) * w];
        best[0] = 0.0;
        for (l, opts) in choices.iter().enumerate() {
            let (prev, next) = best.split_at_mut((l + 1) * w);
            let prev = &prev[l * w..];
            let next = &mut next[..w];
            let ch = &mut choice[(l + 1) * w..(l + 2) * w];
            for (k, &(r, v)) in opts.iter().enumerate() {
                for c in r..w {
                    let p = prev[c - r];
                    // strictly better only: among equal values the earlier
                    // (smaller) choice stays
                    if p > f64::NEG_INFINITY && p + v > next[c] {
                        next[c] = p + v;
                        ch[c] = k as u32;
                    }
                }
            }
        }
        Knapsack {
            capacity,
            layers,
            best,
            choice,
        }
    }

    /// The best value of all layers for each exact total `0..=capacity`
    /// (`NEG_INFINITY`: no choice reaches that total).
    pub(crate) fn last_row(&self) -> &[f64] {
        let w = self.capacity + 1;
        &self.best[self.best.len() - w..]
    }

    /// The best value for exactly `total` units (`NEG_INFINITY` when
    /// unreachable or beyond the capacity).
    pub(crate) fn value(&self, total: usize) -> f64 {
        self.last_row()
            .get(total)
            .copied()
            .unwrap_or(f64::NEG_INFINITY)
    }

    /// The reachable total with the best value among those `allowed`
    /// (falling back to every total if none is), fewest units on ties.
    pub(crate) fn best_total(&self, allowed: impl Fn(usize) -> bool) -> usize {
        let row = self.last_row();
        let pick = |filter: &dyn Fn(usize) -> bool| {
            let mut best: Option<usize> = None;
            for (c, &v) in row.iter().enumerate() {
                if v > f64::NEG_INFINITY && filter(c) && best.is_none_or(|b| v > row[b] + 1e-12) {
                    best = Some(c);
                }
            }
            best
        };
        pick(&allowed).or_else(|| pick(&|_| true)).unwrap_or(0)
    }

    /// The units each layer takes in a best choice reaching exactly `total`
    /// — `choices` must be the ones [`Knapsack::solve`] was given. `None`
    /// when `total` is beyond the capacity or the choices do not match.
    pub(crate) fn backtrack(
        &self,
        choices: &[Vec<(usize, f64)>],
        total: usize,
    ) -> Option<Vec<usize>> {
        if total > self.capacity || choices.len() != self.layers {
            return None;
        }
        let w = self.capacity + 1;
        let mut c = total;
        let mut out = vec![0; choices.len()];
        for l in (0..choices.len()).rev() {
            let k = *self.choice.get((l + 1) * w + c)? as usize;
            let r = choices[l].get(k)?.0;
            out[l] = r;
            c = c.checked_sub(r)?;
        }
        Some(out)
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn knapsack() {
        use crate::planners::shared::knapsack::Knapsack;
        // two layers; options are (units, value), the first option costs nothing
        let choices = vec![
            vec![(0, 0.0), (1, 0.3), (2, 0.35)],
            vec![(0, 0.0), (1, 0.3)],
        ];
        let dp = Knapsack::solve(&choices, 2);
        let total = dp.best_total(|_| true);
        assert_eq!(total, 2);
        assert_eq!(dp.backtrack(&choices, total), Some(vec![1, 1]));
        assert!((dp.value(total) - 0.6).abs() < 1e-12);
    }
    #[test]
    fn solve() {
        use crate::planners::shared::knapsack::Knapsack;
        let dp = Knapsack::solve(&[vec![(0, 0.0), (3, 1.0)]], 2);
        assert_eq!(dp.last_row(), &[0.0, f64::NEG_INFINITY, f64::NEG_INFINITY]);
    }
    #[test]
    fn last_row() {
        use crate::planners::shared::knapsack::Knapsack;
        let dp = Knapsack::solve(&[vec![(0, 0.0), (1, 0.5)]], 1);
        assert_eq!(dp.last_row(), &[0.0, 0.5]);
    }
    #[test]
    fn value() {
        use crate::planners::shared::knapsack::Knapsack;
        let dp = Knapsack::solve(&[vec![(0, 0.0), (1, 0.5)]], 1);
        assert_eq!(dp.value(1), 0.5);
        assert_eq!(dp.value(7), f64::NEG_INFINITY);
    }
    #[test]
    fn best_total() {
        use crate::planners::shared::knapsack::Knapsack;
        let dp = Knapsack::solve(&[vec![(0, 0.0), (1, 0.5), (2, 0.6)]], 2);
        assert_eq!(dp.best_total(|_| true), 2);
        assert_eq!(dp.best_total(|c| c % 2 == 1), 1);
    }
    #[test]
    fn backtrack() {
        use crate::planners::shared::knapsack::Knapsack;
        let choices = vec![vec![(0, 0.0), (1, 0.5)], vec![(0, 0.0), (1, 0.2)]];
        let dp = Knapsack::solve(&choices, 2);
        assert_eq!(dp.backtrack(&choices, 1), Some(vec![1, 0]));
        assert_eq!(dp.backtrack(&choices, 3), None);
    }
}
