//! CRAFT's Algorithm 2 — the replica allocation (CRAFT paper, §4.2 Step 3
//! and appendix A, Algorithm 2).
//!
//! One replica count per layer (0 or a count the benefit table measured),
//! the total within the budget `r = R · D`, maximising the summed gain —
//! a multiple-choice knapsack ([`crate::planners::shared::knapsack`]). Among the
//! totals it reaches, one that keeps every GPU's slot count equal over all
//! layers is preferred (`E · L + total` divisible by `D`). The paper's own
//! objective (`r × T[r][ℓ]`) is [`Objective::PaperWeighted`]; with
//! [`Objective::Time`] the gain is the predicted compute time saved.
//!
//! Complexity: O(L · r · K) for `L` layers, budget `r` and `K` measured
//! counts.

use serde::Serialize;

use super::Objective;
use super::benefit::BenefitTable;
use crate::planners::shared::knapsack::Knapsack;

/// Algorithm 2's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allocation {
    /// Replicas of each layer (0 or one of the table's counts).
    pub per_layer: Vec<usize>,
    /// Replicas in all.
    pub total: usize,
    /// The objective reached.
    pub value: f64,
    /// Predicted mean balancedness over layers: `mean(base + gain)`.
    pub predicted_balancedness: f64,
}

/// Algorithm 2: picks one replica count per layer (0 or one of
/// `table.counts`) with total at most `capacity`, maximising `objective`.
/// With `equal_memory = Some((base_slots, d))` the total is also chosen so
/// that `base_slots + total` is a multiple of `d` (when some total within the
/// capacity allows it). Ties prefer fewer replicas.
pub(crate) fn solve_allocation(
    table: &BenefitTable,
    capacity: usize,
    objective: Objective,
    equal_memory: Option<(usize, usize)>,
) -> Allocation {
    let choices: Vec<Vec<(usize, f64)>> = (0..table.layers())
        .map(|l| {
            std::iter::once((0, 0.0))
                .chain(table.counts.iter().enumerate().map(|(k, &r)| {
                    let t = table.gains[k][l];
                    let v = match objective {
                        Objective::MeanBalancedness => t,
                        Objective::PaperWeighted => r as f64 * t,
                        Objective::Time => table.time_saved_us(k, l),
                    };
                    (r, v)
                }))
                .collect()
        })
        .collect();
    let dp = Knapsack::solve(&choices, capacity);
    let total = dp.best_total(|c| equal_memory.is_none_or(|(base, d)| (base + c) % d == 0));
    let per_layer = dp
        .backtrack(&choices, total)
        .unwrap_or_else(|| vec![0; choices.len()]);
    let gain: f64 = per_layer
        .iter()
        .enumerate()
        .map(|(l, &r)| gain_of(table, l, r))
        .sum();
    let l = table.layers().max(1) as f64;
    Allocation {
        value: dp.value(total),
        total: per_layer.iter().sum(),
        predicted_balancedness: (table.base.iter().sum::<f64>() + gain) / l,
        per_layer,
    }
}

fn gain_of(table: &BenefitTable, l: usize, r: usize) -> f64 {
    table
        .counts
        .iter()
        .position(|&x| x == r)
        .map_or(0.0, |k| table.gains[k][l])
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn allocation_solve_allocation_example() {
        use super::{BenefitTable, Objective, solve_allocation};
        let table = BenefitTable {
            counts: vec![1, 2],
            base: vec![0.5, 0.5],
            gains: vec![vec![0.30, 0.30], vec![0.35, 0.30]],
            imbalance: vec![],
            compute_us: vec![],
        };
        let a = solve_allocation(&table, 2, Objective::MeanBalancedness, None);
        assert_eq!(a.per_layer, vec![1, 1]); // total gain 0.6
        let p = solve_allocation(&table, 2, Objective::PaperWeighted, None);
        assert_eq!(p.per_layer, vec![2, 0]); // 2 × 0.35 = 0.7 > 0.6, yet the mean is lower
        assert!(p.predicted_balancedness < a.predicted_balancedness);
    }
}
