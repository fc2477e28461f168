//! Incremental re-planning: from the plan being served, the fewest expert
//! copies that reach a balance or spend a move budget — instead of a fresh
//! plan that moves almost everything (vLLM PR #23243 asks for such minimal
//! adjustments; deepseek-ai/EPLB PR #13 for a knob trading balance against
//! migration).
//!
//! Greedy over layers: each layer's next move is one step of the joint
//! search (`joint_search` with one move: a swap of two copies, or a copy
//! re-targeted to another expert, around the layer's busiest GPU); the move
//! taken is the one, over all layers, that gains the most balancedness per
//! expert copy it makes. It stops at the target balance, when the next
//! move would pass the copy budget, or when no layer improves. Slots per
//! GPU never change (same memory); balance is the even split's on the
//! loads given (the new window).
//!
//! Complexity: one joint-search step per layer to start, then one per
//! move taken, each O(s² · D · c + s · E · c) (see `joint_search`).

use ndarray::ArrayView2;
use serde::Serialize;

use super::joint::{JointOptions, joint_search};
use super::placement::peak_load;
use crate::data::plan::{LayerPlacement, Plan};
use crate::error::{Error, Result};
use crate::judge::migration::{layer_copies, migration};

const NAME: &str = "incremental re-plan";

/// When to stop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Goal {
    /// Expert copies the move may make at most (`None`: no limit).
    pub max_moved_experts: Option<usize>,
    /// Stop once the mean balancedness over layers reaches this.
    pub min_balancedness: Option<f64>,
}

/// An incremental re-plan and what it did.
#[derive(Debug, Clone)]
pub struct Incremental {
    /// The adjusted plan.
    pub plan: Plan,
    /// Expert copies moving from the served plan to it makes.
    pub copies: usize,
    /// Moves taken.
    pub moves: usize,
    /// Mean balancedness over layers on the loads, before and after.
    pub balancedness: (f64, f64),
}

/// Adjusts `current` toward `loads` (`layers × experts`, e.g. the last
/// window summed) until `goal` (see the module documentation).
///
/// ```
/// use moeplan::planners::{incremental, Goal};
/// use moeplan::planners::{eplb, EplbConfig};
/// use moeplan::{judge::migration, LoadTrace, Topology};
/// use ndarray::Array3;
/// // served: planned on even loads, one spare slot per GPU
/// let flat = LoadTrace::new(Array3::from_elem((1, 1, 8), 10.0), vec![0])?;
/// let config = EplbConfig { redundant_experts: 4, groups: 1 };
/// let served = eplb(&flat, Topology::new(1, 4)?, config)?;
/// // now expert 5 is hot
/// let mut c = Array3::from_elem((1, 1, 8), 10.0);
/// c[[0, 0, 5]] = 80.0;
/// let now = LoadTrace::new(c, vec![0])?;
/// let goal = Goal { max_moved_experts: Some(4), min_balancedness: None };
/// let r = incremental(&served, now.summed().view(), goal)?;
/// assert!(r.balancedness.1 > r.balancedness.0);
/// assert!(r.copies <= 4 && migration(&served, &r.plan)?.copies() == r.copies);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn incremental(current: &Plan, loads: ArrayView2<'_, f64>, goal: Goal) -> Result<Incremental> {
    let l_n = current.layers().len();
    if loads.nrows() != l_n || loads.ncols() != current.num_experts() {
        return Err(Error::planner(
            NAME,
            format!(
                "the loads are {} × {}, the plan has {l_n} layers × {} experts",
                loads.nrows(),
                loads.ncols(),
                current.num_experts()
            ),
        ));
    }
    let rows: Vec<Vec<f64>> = loads.outer_iter().map(|r| r.to_vec()).collect();
    let mut gpus: Vec<Vec<Vec<u32>>> = current.layers().iter().map(|l| l.gpus.clone()).collect();
    let bal: Vec<f64> = (0..l_n).map(|l| balance(&rows[l], &gpus[l])).collect();
    let before = mean(&bal);
    let mut bal = bal;
    let budget = goal.max_moved_experts.unwrap_or(usize::MAX);
    // Each layer's next step: (its placement, balancedness, copies).
    let step = |l: usize, from: &[Vec<u32>]| -> Result<Step> {
        let mut next = from.to_vec();
        let options = JointOptions {
            max_moves: 1,
            kicks: Some(0),
            ..JointOptions::default()
        };
        // (a second copy on one GPU is refilled without counting as a move)
        if joint_search(&rows[l], &mut next, options)? == 0 && next.as_slice() == from {
            return Ok(None);
        }
        Ok(Some((
            next.clone(),
            balance(&rows[l], &next),
            layer_copies(from, &next),
        )))
    };
    let mut next: Vec<Step> = (0..l_n).map(|l| step(l, &gpus[l])).collect::<Result<_>>()?;
    let (mut spent, mut moves) = (0usize, 0usize);
    loop {
        if goal.min_balancedness.is_some_and(|t| mean(&bal) >= t) {
            break;
        }
        // the best gain per copy that fits the budget
        let best = next
            .iter()
            .enumerate()
            .filter_map(|(l, n)| n.as_ref().map(|(_, b, c)| (l, b - bal[l], *c)))
            .filter(|&(_, gain, c)| gain > 0.0 && spent.saturating_add(c) <= budget)
            .max_by(|a, b| per_copy(a.1, a.2).total_cmp(&per_copy(b.1, b.2)));
        let Some((l, _, c)) = best else { break };
        if let Some((g, b, _)) = next[l].take() {
            gpus[l] = g;
            bal[l] = b;
        }
        spent += c;
        moves += 1;
        next[l] = step(l, &gpus[l])?;
    }
    let layers = current
        .layers()
        .iter()
        .zip(gpus)
        .map(|(lp, gpus)| LayerPlacement {
            layer: lp.layer,
            gpus,
        })
        .collect();
    let plan = Plan::new(
        current.topology(),
        current.num_experts(),
        layers,
        current.algorithm(),
    )?;
    Ok(Incremental {
        copies: migration(current, &plan)?.copies(),
        plan,
        moves,
        balancedness: (before, mean(&bal)),
    })
}

/// A layer's next move: its placement after it, its balancedness and the
/// copies it makes (`None`: the layer cannot improve).
type Step = Option<(Vec<Vec<u32>>, f64, usize)>;

fn per_copy(gain: f64, copies: usize) -> f64 {
    gain / copies.max(1) as f64
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The even split's balancedness of one layer: mean GPU load over the
/// busiest (the STAIR-like re-plan judges alike).
pub(super) fn balance(loads: &[f64], gpus: &[Vec<u32>]) -> f64 {
    let peak = peak_load(loads, gpus);
    let total: f64 = loads.iter().sum();
    if peak > 0.0 {
        total / gpus.len().max(1) as f64 / peak
    } else {
        1.0
    }
}
