//! Plans across workloads: one plan made on several traces at once, a
//! robust variant, and the cross-workload matrix (every plan made on each
//! trace, judged on every trace).
//!
//! A plan is made from yesterday's profile and serves today's traffic. With
//! several profiles ([`Mix`]: traces sharing layers × experts, each with a
//! share of the served batches) the planners see them as one workload:
//!
//! - **EPLB** on the weighted sum of the traces' per-batch loads
//!   ([`Mix::weighted_sum`]) — what an engine that accumulates counts over
//!   the mix would hand it. Exact for any weights.
//! - **CRAFT, mean** ([`craft_mean`]): CRAFT's benefit (Algorithm 1 of the
//!   CRAFT paper, §4.2) is balancedness averaged over the batches it
//!   replays, so CRAFT is prepared on the traces' batches one after another
//!   ([`Mix::combined`]), trace `i`'s repeated `n_i` times with
//!   `n_i · B_i ∝ w_i`: the mean over that trace's batches is then
//!   `Σ w_i · mean_i` exactly when the weights are realisable, and the
//!   realised shares ([`Mix::realised_weights`]) are what was planned
//!   otherwise (16 steps of resolution). Scaling counts would not do: a
//!   batch's balancedness does not change when its counts are scaled.
//!   Repeating also weights the placement's summed loads the same way.
//! - **CRAFT, robust** ([`craft_robust`]): maximises the worst balancedness
//!   over the traces at the same `R` by multiplicative weights — plan the
//!   weighted mean, judge the plan on every trace, raise each trace's
//!   weight by `exp(η_t · its shortfall)` (shortfall normalised to `[0, 1]`
//!   between the best and the worst trace, `η_t = 1 / (t + 1)` in round
//!   `t`, so the weights settle rather than swing between two mixes),
//!   re-plan; a fixed number of rounds, keeping the plan with the best
//!   worst case. Round 0 is the
//!   mean plan, so the robust plan's worst case is never below the mean
//!   plan's.
//!
//! Cost: EPLB as on one trace; CRAFT mean as CRAFT on `Σ n_i B_i` batches;
//! robust `rounds` times that plus one replay of every trace per round.

use crate::data::plan::{Plan, Provenance};
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};
use crate::judge::eval::evaluate;
use crate::planners::craft::{Craft, CraftOptions, ReplicaBudget};

use ndarray::{Array3, Axis, concatenate};

/// Resolution of the batch repeats that realise the weights: the most
/// repeats of any one batch.
const STEPS: usize = 16;
/// Most batches a combined trace may hold; the resolution is lowered first.
const MAX_COMBINED_BATCHES: usize = 1 << 14;

/// Several traces of one model (same MoE layer ids, same experts per layer),
/// each with its share of the served batches.
#[derive(Debug, Clone)]
pub struct Mix {
    traces: Vec<LoadTrace>,
    weights: Vec<f64>,
}

impl Mix {
    /// A mix of `traces` with `weights` (one per trace, finite, at least
    /// one positive; normalised to sum to 1), equal shares when `None`.
    /// Traces of different layers or experts are a [`Error::Mismatch`].
    ///
    /// ```
    /// use moeplan::studies::Mix;
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let a = LoadTrace::new(Array3::from_elem((1, 2, 4), 1.0), vec![0, 1])?;
    /// let b = LoadTrace::new(Array3::from_elem((2, 2, 4), 2.0), vec![0, 1])?;
    /// let mix = Mix::new(vec![a.clone(), b], Some(&[1.0, 3.0]))?;
    /// assert_eq!(mix.weights(), &[0.25, 0.75]);
    /// let odd = LoadTrace::new(Array3::from_elem((1, 2, 8), 1.0), vec![0, 1])?;
    /// assert!(Mix::new(vec![a, odd], None).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(traces: Vec<LoadTrace>, weights: Option<&[f64]>) -> Result<Mix> {
        let Some(first) = traces.first() else {
            return Err(Error::Argument("a mix needs at least one trace".into()));
        };
        for (i, t) in traces.iter().enumerate().skip(1) {
            if t.num_experts() != first.num_experts() || t.layer_ids() != first.layer_ids() {
                return Err(Error::Mismatch(format!(
                    "trace {} has {} MoE layers (ids {}..) of {} experts, trace 1 has {} (ids {}..) of {}: \
                     plans across traces need the same model",
                    i + 1,
                    t.num_layers(),
                    t.layer_ids().first().copied().unwrap_or(0),
                    t.num_experts(),
                    first.num_layers(),
                    first.layer_ids().first().copied().unwrap_or(0),
                    first.num_experts(),
                )));
            }
        }
        let n = traces.len();
        let raw = match weights {
            Some(w) if w.len() != n => {
                return Err(Error::Argument(format!(
                    "{} weights for {n} traces",
                    w.len()
                )));
            }
            Some(w) => w.to_vec(),
            None => vec![1.0; n],
        };
        if raw.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err(Error::Argument(
                "weights must be finite and non-negative".into(),
            ));
        }
        let total: f64 = raw.iter().sum();
        if total.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return Err(Error::Argument(
                "at least one weight must be positive".into(),
            ));
        }
        Ok(Mix {
            traces,
            weights: raw.iter().map(|w| w / total).collect(),
        })
    }

    /// The traces, in the order given.
    pub fn traces(&self) -> &[LoadTrace] {
        &self.traces
    }

    /// Each trace's share of the served batches (sums to 1).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The same traces with other weights.
    pub(crate) fn with_weights(&self, weights: &[f64]) -> Result<Mix> {
        Mix::new(self.traces.clone(), Some(weights))
    }

    /// How many times each trace's batches are repeated in [`Mix::combined`]
    /// so that `n_i · B_i ∝ w_i`, rounded at a resolution of 16 (lowered
    /// when the combined trace would exceed 16,384 batches) and reduced by
    /// their common divisor. A zero weight gives no repeats.
    pub(crate) fn repeats(&self) -> Vec<usize> {
        let per_batch: Vec<f64> = self
            .traces
            .iter()
            .zip(&self.weights)
            .map(|(t, w)| w / t.num_batches() as f64)
            .collect();
        let top = per_batch.iter().copied().fold(0.0, f64::max);
        let mut steps = STEPS;
        loop {
            let n: Vec<usize> = per_batch
                .iter()
                .map(|&p| {
                    if p > 0.0 {
                        ((steps as f64 * p / top).round() as usize).max(1)
                    } else {
                        0
                    }
                })
                .collect();
            let batches: usize = n
                .iter()
                .zip(&self.traces)
                .map(|(k, t)| k * t.num_batches())
                .sum();
            if batches <= MAX_COMBINED_BATCHES || steps == 1 {
                let g = n.iter().fold(0, |g, &k| gcd(g, k)).max(1);
                return n.iter().map(|k| k / g).collect();
            }
            steps /= 2;
        }
    }

    /// The shares [`Mix::combined`] really gives each trace (the weights,
    /// up to the repeats' rounding).
    pub fn realised_weights(&self) -> Vec<f64> {
        let b: Vec<f64> = self
            .repeats()
            .iter()
            .zip(&self.traces)
            .map(|(&k, t)| (k * t.num_batches()) as f64)
            .collect();
        let total: f64 = b.iter().sum::<f64>().max(1.0);
        b.iter().map(|x| x / total).collect()
    }

    /// Every trace's batches one after another, trace `i`'s repeated
    /// `Mix::repeats``[i]` times: what a planner that averages over
    /// batches (CRAFT) is prepared on.
    ///
    /// ```
    /// use moeplan::studies::Mix;
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let a = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?;
    /// let b = LoadTrace::new(Array3::from_elem((2, 1, 4), 2.0), vec![0])?;
    /// let mix = Mix::new(vec![a, b], None)?; // equal shares: a's batch twice
    /// assert_eq!(mix.combined()?.num_batches(), 4);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn combined(&self) -> Result<LoadTrace> {
        let repeats = self.repeats();
        let views: Vec<_> = self
            .traces
            .iter()
            .zip(&repeats)
            .flat_map(|(t, &k)| std::iter::repeat_n(t.counts().view(), k))
            .collect();
        let counts = concatenate(Axis(0), &views)
            .map_err(|e| Error::Argument(format!("combining traces: {e}")))?;
        self.like_first(counts)
    }

    /// One batch: `Σ_i w_i · (trace i's loads summed over batches) / B_i`,
    /// the counts an engine accumulates over the mix (what EPLB reads).
    ///
    /// ```
    /// use moeplan::studies::Mix;
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let a = LoadTrace::new(Array3::from_elem((1, 1, 2), 2.0), vec![0])?;
    /// let b = LoadTrace::new(Array3::from_elem((2, 1, 2), 4.0), vec![0])?;
    /// let s = Mix::new(vec![a, b], None)?.weighted_sum()?;
    /// assert_eq!(s.counts()[[0, 0, 1]], 0.5 * 2.0 + 0.5 * 4.0);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn weighted_sum(&self) -> Result<LoadTrace> {
        let mut sum = self.traces.first().map_or_else(
            || ndarray::Array2::zeros((0, 0)),
            |t| ndarray::Array2::zeros((t.num_layers(), t.num_experts())),
        );
        for (t, w) in self.traces.iter().zip(&self.weights) {
            sum.scaled_add(w / t.num_batches() as f64, &t.summed());
        }
        self.like_first(sum.insert_axis(Axis(0)))
    }

    /// What a plan made on this mix records.
    pub fn provenance(&self) -> Result<Provenance> {
        let refs: Vec<&LoadTrace> = self.traces.iter().collect();
        Provenance::of_all(&refs, &self.weights)
    }

    fn like_first(&self, counts: Array3<f64>) -> Result<LoadTrace> {
        let first = self
            .traces
            .first()
            .ok_or_else(|| Error::Argument("a mix needs at least one trace".into()))?;
        let mut t = LoadTrace::new(counts, first.layer_ids().to_vec())?;
        if let Some(k) = first.top_k() {
            t = t.with_top_k(k);
        }
        if let Some(m) = first.model() {
            t = t.with_model(m);
        }
        if let Some(n) = first.known_model_layers() {
            t = t.with_model_layers(n);
        }
        Ok(t)
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// EPLB on the mix's weighted sum ([`Mix::weighted_sum`]).
#[cfg(test)]
pub(crate) fn eplb_mix(
    mix: &Mix,
    topology: Topology,
    config: crate::planners::EplbConfig,
) -> Result<Plan> {
    crate::planners::eplb(&mix.weighted_sum()?, topology, config)
}

/// CRAFT maximising the weighted mean balancedness over the mix's traces:
/// CRAFT prepared on [`Mix::combined`], then planned at `budget`.
///
/// ```
/// use moeplan::studies::{Mix, craft_mean};
/// use moeplan::planners::{ReplicaBudget, CraftOptions};
/// use moeplan::{synth::generator, data::model, Topology};
/// let p = model::preset("olmoe")?;
/// let a = generator::generate(&generator::GenConfig { seed: 1, ..generator::GenConfig::new(p, 2) })?;
/// let b = generator::generate(&generator::GenConfig { seed: 2, ..generator::GenConfig::new(p, 2) })?;
/// let mix = Mix::new(vec![a, b], None)?;
/// let plan = craft_mean(&mix, Topology::new(1, 8)?, &CraftOptions::default(), ReplicaBudget::ReplicasPerGpu(2))?;
/// assert!(plan.summary().replicas <= 16);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn craft_mean(
    mix: &Mix,
    topology: Topology,
    options: &CraftOptions,
    budget: ReplicaBudget,
) -> Result<Plan> {
    Ok(Craft::prepare(&mix.combined()?, topology, options)?
        .plan(budget)?
        .plan)
}

/// Balancedness of `plan` on every trace of the mix (even split).
///
/// ```
/// use moeplan::studies::{Mix, judge_each};
/// use moeplan::{planners::contiguous, LoadTrace, Topology};
/// use ndarray::Array3;
/// let a = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?;
/// let mix = Mix::new(vec![a.clone(), a.clone()], None)?;
/// let plan = contiguous(&a, Topology::new(1, 2)?)?;
/// assert_eq!(judge_each(&mix, &plan)?, vec![1.0, 1.0]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn judge_each(mix: &Mix, plan: &Plan) -> Result<Vec<f64>> {
    mix.traces
        .iter()
        .map(|t| Ok(evaluate(t, plan)?.balancedness))
        .collect()
}

/// One round of [`craft_robust`]: the weights planned with and the plan's
/// balancedness on every trace.
#[derive(Debug, Clone)]
pub struct Round {
    /// The shares planned with (as realised by the repeats).
    pub weights: Vec<f64>,
    /// The round's plan judged on each trace.
    pub balancedness: Vec<f64>,
}

impl Round {
    /// The worst balancedness over the traces.
    pub fn worst(&self) -> f64 {
        self.balancedness
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
    }
}

/// What [`craft_robust`] found: the plan with the best worst case, which
/// round made it, and every round.
#[derive(Debug, Clone)]
pub struct Robust {
    /// The plan with the best worst case over the traces.
    pub plan: Plan,
    /// Index in `rounds` of the round that made it (0: the mean plan).
    pub best: usize,
    /// Every round, in order; round 0 plans with the mix's own weights.
    pub rounds: Vec<Round>,
    /// `R`, the same in every round (`auto` resolved on round 0).
    pub replicas_per_gpu: usize,
}

/// Rounds [`craft_robust`] runs by default.
pub const ROBUST_ROUNDS: usize = 6;
/// Step size of the first weight update: a trace at the bottom gains
/// `e^η` in weight relative to one at the top (`e^(η / (t + 1))` in round `t`).
pub(crate) const ROBUST_STEP: f64 = 1.0;

/// CRAFT maximising the worst balancedness over the mix's traces at the
/// same budget, by multiplicative weights over the traces (see the module
/// comment): `rounds` plans (at least one), the best worst case kept, ties
/// to the earlier round, every round at the same `R` (`auto`: the knee of
/// the mean plan). Stops early when every trace is equally balanced.
///
/// ```
/// use moeplan::studies::{Mix, craft_mean, craft_robust, judge_each};
/// use moeplan::planners::{ReplicaBudget, CraftOptions};
/// use moeplan::{synth::generator, data::model, Topology};
/// let p = model::preset("olmoe")?;
/// let a = generator::generate(&generator::GenConfig { seed: 1, ..generator::GenConfig::new(p, 2) })?;
/// let b = generator::generate(&generator::GenConfig { seed: 2, ..generator::GenConfig::new(p, 2) })?;
/// let mix = Mix::new(vec![a, b], None)?;
/// let (t, o, r) = (Topology::new(1, 8)?, CraftOptions::default(), ReplicaBudget::ReplicasPerGpu(2));
/// let robust = craft_robust(&mix, t, &o, r, 3)?;
/// let worst = |v: Vec<f64>| v.into_iter().fold(1.0, f64::min);
/// let mean = craft_mean(&mix, t, &o, r)?;
/// assert!(worst(judge_each(&mix, &robust.plan)?) >= worst(judge_each(&mix, &mean)?));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn craft_robust(
    mix: &Mix,
    topology: Topology,
    options: &CraftOptions,
    budget: ReplicaBudget,
    rounds: usize,
) -> Result<Robust> {
    let mut weights = mix.weights.clone();
    let mut best: Option<(f64, usize, Plan)> = None;
    let mut history = Vec::new();
    let mut budget = budget;
    for round in 0..rounds.max(1) {
        let this = mix.with_weights(&weights)?;
        let craft = Craft::prepare(&this.combined()?, topology, options)?;
        // `auto` is resolved once, on the mean plan: every round spends
        // the same memory.
        if budget == ReplicaBudget::Auto {
            budget = ReplicaBudget::ReplicasPerGpu(craft.auto_replicas_per_gpu());
        }
        let plan = craft.plan(budget)?.plan;
        let bal = judge_each(mix, &plan)?;
        let r = Round {
            weights: this.realised_weights(),
            balancedness: bal.clone(),
        };
        let worst = r.worst();
        history.push(r);
        if best.as_ref().is_none_or(|(w, _, _)| worst > *w) {
            best = Some((worst, round, plan));
        }
        let top = bal.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let spread = top - worst;
        if spread <= 1e-12 || spread.is_nan() {
            break;
        }
        // A shrinking step: with a fixed one the weights swing between two
        // mixes (one trace worst, then the other) instead of settling.
        let step = ROBUST_STEP / (round + 1) as f64;
        for (w, b) in weights.iter_mut().zip(&bal) {
            *w *= (step * (top - b) / spread).exp();
        }
        let total: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= total);
    }
    let (_, best, plan) =
        best.ok_or_else(|| Error::planner("craft", "the robust variant made no plan"))?;
    let replicas_per_gpu = match budget {
        ReplicaBudget::ReplicasPerGpu(r) => r,
        ReplicaBudget::Auto => 0,
    };
    Ok(Robust {
        plan,
        best,
        rounds: history,
        replicas_per_gpu,
    })
}

/// Balancedness of every plan on every trace: `out[i][j]` is `plans[i]`
/// judged on `traces[j]` (rows: made on, columns: judged on, for plans made
/// one per trace).
///
/// ```
/// use moeplan::studies::cross_matrix;
/// use moeplan::{planners::base, LoadTrace, Topology};
/// use ndarray::Array3;
/// let mut c = Array3::from_elem((1, 1, 4), 1.0);
/// c[[0, 0, 0]] = 9.0;
/// let a = LoadTrace::new(c, vec![0])?;
/// let b = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?;
/// let t = Topology::new(1, 2)?;
/// let plans = vec![base(&a, t, 1)?, base(&b, t, 1)?];
/// let m = cross_matrix(&plans, &[a, b])?;
/// assert!(m[0][0] >= m[1][0]); // planned on a, judged on a: at least as good
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn cross_matrix(plans: &[Plan], traces: &[LoadTrace]) -> Result<Vec<Vec<f64>>> {
    plans
        .iter()
        .map(|p| {
            traces
                .iter()
                .map(|t| Ok(evaluate(t, p)?.balancedness))
                .collect()
        })
        .collect()
}

/// One row of [`cross_table`]: a plan and its figures on every trace.
#[derive(Debug, Clone)]
pub struct CrossRow {
    /// The plan's name in reports (`EPLB (+64)`, `CRAFT (R = 8) mean`).
    pub name: String,
    /// The registry id of the planner that made it; `craft-robust` for
    /// [`craft_robust`].
    pub planner: &'static str,
    /// Index of the trace it was made on; `None`: made on all of them.
    pub made_on: Option<usize>,
    /// The plan, its provenance recorded.
    pub plan: Plan,
    /// Per judged trace, in the traces' order.
    pub cells: Vec<CrossCell>,
}

impl CrossRow {
    /// The lowest balancedness over the judged traces.
    pub fn worst(&self) -> f64 {
        self.cells
            .iter()
            .map(|c| c.balancedness)
            .fold(f64::INFINITY, f64::min)
    }
}

/// A plan judged on one trace (even split over copies).
#[derive(Debug, Clone)]
pub struct CrossCell {
    /// Mean balancedness over the trace's batches and layers.
    pub balancedness: f64,
    /// Mean max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Where the figure comes from, relative to the plan's data.
    pub scope: crate::data::plan::Scope,
}

/// Plans across workloads, as `moeplan cross` and the page show them: BASE,
/// EPLB and CRAFT made on each trace, then EPLB on the weighted sum, CRAFT
/// mean and CRAFT robust (at the mean plan's `R`: the same memory) made on
/// all of them (equal weights), every plan judged on every trace. Options
/// (budgets, groups) come from `settings`, as for one trace. Needs at least
/// two traces of one model.
///
/// Cost: `3 · T + 2` plannings (the robust one [`ROBUST_ROUNDS`] times
/// CRAFT on all batches) and `(3 · T + 3) · T` evaluations, for `T` traces.
///
/// ```
/// use moeplan::studies::cross_table;
/// use moeplan::planners::Settings;
/// use moeplan::{synth::generator, data::model, Topology};
/// let make = |seed| generator::generate(&generator::GenConfig { seed, ..generator::GenConfig::new(model::preset("olmoe")?, 4) });
/// let rows = cross_table(&[make(1)?, make(2)?], Topology::new(1, 8)?, &Settings::new())?;
/// assert_eq!(rows.len(), 3 * 2 + 3);
/// let craft_on_first = &rows[4];
/// assert_eq!((craft_on_first.planner, craft_on_first.made_on), ("craft", Some(0)));
/// assert_eq!(craft_on_first.cells[0].scope.kind(), "in-sample");
/// assert_eq!(craft_on_first.cells[1].scope.kind(), "another-trace");
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn cross_table(
    traces: &[LoadTrace],
    topology: Topology,
    settings: &crate::planners::Settings,
) -> Result<Vec<CrossRow>> {
    use crate::data::Workload;
    use crate::planners::{self, Planner};
    if traces.len() < 2 {
        return Err(Error::Argument(
            "plans across workloads need at least two traces".into(),
        ));
    }
    // Same layers × experts, or a typed error naming the two shapes.
    let mix = Mix::new(traces.to_vec(), None)?;
    // Fingerprinting hashes every count: once per trace, not per cell.
    let own = traces
        .iter()
        .map(|t| Provenance::of(t, 0..t.num_batches()))
        .collect::<Result<Vec<_>>>()?;
    let prints: Vec<String> = own
        .iter()
        .map(|p| {
            p.traces
                .first()
                .map(|r| r.fingerprint.clone())
                .unwrap_or_default()
        })
        .collect();
    let of_mix = mix.provenance()?;
    let made = |planner: &dyn Planner, trace: LoadTrace| -> Result<(String, Plan, Option<usize>)> {
        let budget = match planner.budget() {
            Some(spec) => settings.budget(spec)?,
            None => None,
        };
        let planned =
            planners::prepare(planner, &Workload::new(trace), topology, settings)?.plan(budget)?;
        Ok((planner.label(planned.budget), planned.plan, planned.budget))
    };
    let judged = |name: String, planner: &'static str, made_on, plan: Plan| -> Result<CrossRow> {
        let provenance = plan.provenance().cloned();
        let cells = traces
            .iter()
            .zip(&prints)
            .map(|(t, print)| {
                let r = evaluate(t, &plan)?;
                let batches = 0..t.num_batches();
                let scope = match &provenance {
                    Some(p) => p.scope(print, batches),
                    None => crate::data::plan::Scope::Unknown {
                        batches,
                        holdout: false,
                    },
                };
                Ok(CrossCell {
                    balancedness: r.balancedness,
                    imbalance_ratio: r.imbalance_ratio,
                    scope,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CrossRow {
            name,
            planner,
            made_on,
            plan,
            cells,
        })
    };
    let mut rows = Vec::with_capacity(3 * traces.len() + 3);
    for id in ["base", "eplb", "craft"] {
        let planner = planners::find(id)?;
        for (i, (t, p)) in traces.iter().zip(&own).enumerate() {
            let (name, plan, _) = made(planner, t.clone())?;
            let plan = plan.with_provenance(Some(p.clone()));
            rows.push(judged(name, planner.id().as_str(), Some(i), plan)?);
        }
    }
    // Made on all: EPLB on the weighted sum (what an engine accumulates),
    // CRAFT on the traces' batches (the mean), CRAFT robust (the worst case).
    let (name, plan, _) = made(planners::find("eplb")?, mix.weighted_sum()?)?;
    rows.push(judged(
        name,
        "eplb",
        None,
        plan.with_provenance(Some(of_mix.clone())),
    )?);
    let craft = planners::find("craft")?;
    let (name, plan, mean_budget) = made(craft, mix.combined()?)?;
    rows.push(judged(
        format!("{name} mean"),
        "craft",
        None,
        plan.with_provenance(Some(of_mix.clone())),
    )?);
    let options = CraftOptions::from_settings(settings)?;
    let budget = mean_budget.map_or(ReplicaBudget::Auto, ReplicaBudget::ReplicasPerGpu);
    let robust = craft_robust(&mix, topology, &options, budget, ROBUST_ROUNDS)?;
    let name = format!("{} robust", craft.label(Some(robust.replicas_per_gpu)));
    rows.push(judged(
        name,
        "craft-robust",
        None,
        robust.plan.with_provenance(Some(of_mix)),
    )?);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: &[f64]) -> LoadTrace {
        let a = Array3::from_shape_vec((1, 1, v.len()), v.to_vec()).unwrap();
        LoadTrace::new(a, vec![0]).unwrap()
    }

    #[test]
    fn weights_are_realised_by_repeats() {
        let a = LoadTrace::new(Array3::from_elem((2, 1, 2), 1.0), vec![0]).unwrap();
        let b = one(&[1.0, 2.0]);
        // equal shares of two-batch and one-batch traces: b's batch twice
        let mix = Mix::new(vec![a.clone(), b.clone()], None).unwrap();
        assert_eq!(mix.repeats(), vec![1, 2]);
        assert_eq!(mix.realised_weights(), vec![0.5, 0.5]);
        // a share not reachable exactly is rounded at 1/16 of the largest
        let mix = Mix::new(vec![one(&[1.0, 1.0]), b], Some(&[0.3, 0.7])).unwrap();
        let r = mix.realised_weights();
        assert!((r[0] - 0.3).abs() < 0.02, "{r:?}");
        // zero weight: the trace is left out
        let mix = Mix::new(vec![a, one(&[1.0, 1.0])], Some(&[0.0, 1.0])).unwrap();
        assert_eq!(mix.repeats(), vec![0, 1]);
        assert_eq!(mix.combined().unwrap().num_batches(), 1);
    }

    /// Three traces hot in layer 0 and one hot in layer 1, with a budget
    /// that serves one layer: the mean plan serves the majority, so the
    /// first update must move weight to the fourth trace, and the kept
    /// plan's worst case is at least round 0's.
    #[test]
    fn robust_moves_weight_to_the_worst_trace() {
        let two = |l0: [f64; 8], l1: [f64; 8]| {
            let v: Vec<f64> = l0.iter().chain(&l1).copied().collect();
            LoadTrace::new(Array3::from_shape_vec((1, 2, 8), v).unwrap(), vec![0, 1]).unwrap()
        };
        let flat = [1.0; 8];
        let hot = |x: f64| [x, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let mix = Mix::new(
            vec![
                two(hot(60.0), flat),
                two(hot(61.0), flat),
                two(hot(59.0), flat),
                two(flat, hot(12.0)),
            ],
            None,
        )
        .unwrap();
        let t = Topology::new(1, 4).unwrap();
        let r = craft_robust(
            &mix,
            t,
            &CraftOptions::default(),
            ReplicaBudget::ReplicasPerGpu(1),
            3,
        )
        .unwrap();
        let first = &r.rounds[0];
        let worst = (0..4)
            .min_by(|&a, &b| first.balancedness[a].total_cmp(&first.balancedness[b]))
            .unwrap();
        assert_eq!(worst, 3, "{:?}", first.balancedness);
        assert!(
            r.rounds[1].weights[3] > first.weights[3] + 0.1,
            "{:?}",
            r.rounds
        );
        let kept = judge_each(&mix, &r.plan).unwrap();
        let kept_worst = kept.iter().copied().fold(1.0, f64::min);
        assert!(kept_worst >= first.worst());
        assert_eq!(r.replicas_per_gpu, 1);
    }

    #[test]
    fn bad_weights_are_refused() {
        let t = || one(&[1.0, 1.0]);
        assert!(Mix::new(vec![t(), t()], Some(&[1.0])).is_err());
        assert!(Mix::new(vec![t(), t()], Some(&[0.0, 0.0])).is_err());
        assert!(Mix::new(vec![t(), t()], Some(&[f64::NAN, 1.0])).is_err());
        assert!(Mix::new(vec![t(), t()], Some(&[-1.0, 2.0])).is_err());
        assert!(Mix::new(vec![], None).is_err());
        let other_ids = LoadTrace::new(Array3::from_elem((1, 1, 2), 1.0), vec![3]).unwrap();
        assert!(matches!(
            Mix::new(vec![t(), other_ids], None),
            Err(Error::Mismatch(_))
        ));
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn repeats() -> Result<(), Box<dyn std::error::Error>> {
        use crate::LoadTrace;
        use crate::studies::across::Mix;
        use ndarray::Array3;
        let one = |v| LoadTrace::new(Array3::from_elem((1, 1, 4), v), vec![0]);
        let mix = Mix::new(vec![one(1.0)?, one(2.0)?], Some(&[1.0, 2.0]))?;
        assert_eq!(mix.repeats(), vec![1, 2]);
        Ok(())
    }
    #[test]
    fn eplb_mix() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::EplbConfig;
        use crate::studies::across::{Mix, eplb_mix};
        use crate::{Topology, data::model, synth::generator};
        let p = model::preset("olmoe")?;
        let a = generator::generate(&generator::GenConfig {
            seed: 1,
            ..generator::GenConfig::new(p, 2)
        })?;
        let b = generator::generate(&generator::GenConfig {
            seed: 2,
            ..generator::GenConfig::new(p, 2)
        })?;
        let cfg = EplbConfig {
            redundant_experts: 8,
            groups: 1,
        };
        let plan = eplb_mix(&Mix::new(vec![a, b], None)?, Topology::new(1, 8)?, cfg)?;
        assert_eq!(plan.summary().replicas, 8 * 16);
        Ok(())
    }
}
