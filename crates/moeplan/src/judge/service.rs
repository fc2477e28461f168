//! [`Judge`]: one workload judged for every front end — the CLI, the
//! JavaScript API and the page's view are adapters to it.
//!
//! It chooses the model once ([`ModelChoice::choose`]: asked, else the
//! trace's, else DeepSeek-V3), so the bytes a plan's traffic and copies
//! cost and the sizes its time is priced with are one model's
//! ([`Judge::priced_on`]). It keeps what it measured, by the plan's
//! content and the rule (and the pricing): a front end asks again and is
//! answered from memory, and holds no judging cache of its own. The
//! speed-up over BASE has one definition, `Judge::base_prediction`
//! (beside BASE itself, in `planners/eplb.rs`: the judge sits below the
//! planners).
//!
//! Cost: each answer is the simulator's ([`super::simulate`]) or the
//! evaluator's the first time, a lookup in at most [`KEPT`] entries after
//! (plus one pass over the plan's slots and profile to fingerprint it).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::cost::{Prediction, Pricing};
use super::eval::{EvalReport, evaluate, per_batch_imbalance};
use super::{
    CostModel, ModelChoice, Replay, Rule, Schedule, Served, Steps, Traffic, Verdict, Workload,
};
use crate::data::hardware::Hardware;
use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::Result;

/// Answers a [`Judge`] keeps, the most recently used last: a page shows a
/// handful of plans under a rule and a pricing, and returns to budgets it
/// showed before.
pub(crate) const KEPT: usize = 128;

/// Where a plan's (token, expert) pairs are served, over all batches: the
/// pair counts of [`Traffic`] (what a view shows without replaying the
/// busiest GPU's ingress and egress).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct PairTraffic {
    /// Pairs in all.
    pub pairs: f64,
    /// Served on their source GPU.
    pub local: f64,
    /// Served on another GPU of the source's node.
    pub intra_node: f64,
    /// Served on another node.
    pub cross_node: f64,
    /// Cross-node pairs × hidden size × bytes per activation element.
    pub cross_node_bytes: f64,
}

impl From<&Traffic> for PairTraffic {
    fn from(t: &Traffic) -> Self {
        PairTraffic {
            pairs: t.pairs,
            local: t.local,
            intra_node: t.intra_node,
            cross_node: t.cross_node,
            cross_node_bytes: t.cross_node_bytes,
        }
    }
}

/// A per-batch planner's base and schedule, judged once ([`Judge::schedule`]):
/// what a front end keeps to show it and to price it later.
#[derive(Debug, Clone)]
pub struct JudgedSchedule {
    /// The static base an engine loads.
    pub base: Plan,
    /// Its plans per batch and their rule.
    pub schedule: Schedule,
    /// Its verdict, pair traffic only (no token messages).
    pub verdict: Verdict,
    /// Unique in the process: what its prices are kept by (a schedule is a
    /// plan per batch, too large to fingerprint on every view).
    id: u64,
}

/// One workload, judged: see the module doc.
///
/// ```
/// use moeplan::judge::{Judge, Rule, Served};
/// use moeplan::{data::{hardware, model}, planners, synth::generator, Topology, Workload};
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let judge = Judge::new(Workload::new(trace), None)?;
/// assert_eq!(judge.model().from, "the trace");
/// let plan = planners::eplb(judge.trace(), Topology::new(1, 8)?, planners::EplbConfig { redundant_experts: 8, groups: 1 })?;
/// let pricing = judge.priced_on(hardware::preset("h100-ib-ndr")?);
/// let v = judge.verdict(Served::Plan { plan: &plan, rule: Rule::Vllm }, Some(&pricing), |_, _| {})?;
/// // Asked again, answered from memory, the same to the bit.
/// assert_eq!(judge.replay_pairs(&plan, Rule::Vllm)?.balancedness, v.replay.balancedness);
/// assert!(v.predicted.unwrap().step_ms > 0.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Judge {
    work: Arc<Workload>,
    model: ModelChoice,
    cost: CostModel,
    /// Every batch's counts averaged, tokens arriving evenly: what
    /// [`Judge::price_mean`] prices a static plan on.
    mean: Arc<OnceLock<Workload>>,
    /// With sources, every batch as one ([`Workload::one_batch`]): under
    /// `even` a plan's pair traffic is this batch's, one step per layer.
    one_batch: Arc<OnceLock<Arc<Workload>>>,
    /// Pairs in all, summed as the closed form of even arrival needs them.
    pairs: Arc<OnceLock<f64>>,
    memo: Arc<Mutex<VecDeque<(Key, Kept)>>>,
}

#[derive(Debug, Clone, PartialEq)]
enum Key {
    Pairs(u64, Rule),
    EvenTraffic(u64),
    Series(u64),
    Mean(u64, Rule, Pricing),
    Schedule(u64, Pricing),
    Eval(u64),
}

#[derive(Debug, Clone)]
enum Kept {
    Replay(Arc<Replay>),
    Traffic(PairTraffic),
    Series(Arc<Vec<f64>>),
    Prediction(Arc<Prediction>),
    Eval(Arc<EvalReport>),
}

impl Judge {
    /// Judges `work` on `asked`'s model (a preset name; an unknown one is
    /// an error), else the trace's, else DeepSeek-V3.
    pub fn new(work: impl Into<Arc<Workload>>, asked: Option<&str>) -> Result<Judge> {
        let work = work.into();
        let model = ModelChoice::choose(asked, work.trace())?;
        Ok(Judge::with_model(work, model))
    }

    /// Judges `work` on a model already chosen ([`ModelChoice::choose`]):
    /// a front end that priced its planning with it before the workload
    /// to judge was made (a held-out split).
    pub fn with_model(work: impl Into<Arc<Workload>>, model: ModelChoice) -> Judge {
        Judge {
            cost: model.cost(),
            model,
            work: work.into(),
            mean: Arc::default(),
            one_batch: Arc::default(),
            pairs: Arc::default(),
            memo: Arc::default(),
        }
    }

    /// The same judge sharing `one`'s summed batch (`Workload::one_batch`
    /// of this very workload, made by an earlier judge): a page's next
    /// cluster does not sum the tokens again.
    #[must_use]
    pub fn sharing_one_batch(self, one: Option<Arc<Workload>>) -> Judge {
        if let Some(one) = one {
            let _ = self.one_batch.set(one);
        }
        self
    }

    /// The workload judged.
    pub fn workload(&self) -> &Workload {
        &self.work
    }

    /// Its trace.
    pub fn trace(&self) -> &LoadTrace {
        self.work.trace()
    }

    /// The model chosen, and from where.
    pub fn model(&self) -> ModelChoice {
        self.model
    }

    /// The chosen model's sizes: what turns pairs and copies into bytes.
    pub fn cost(&self) -> &CostModel {
        &self.cost
    }

    /// `hardware` priced with the chosen model and the default
    /// assumptions: the same model for time as for bytes.
    pub fn priced_on(&self, hardware: &Hardware) -> Pricing {
        Pricing::new(hardware, self.model.preset)
    }

    /// The summed batch with sources, made once (`None` without sources).
    pub(crate) fn one_batch(&self) -> Result<Option<Arc<Workload>>> {
        if self.work.num_sources().is_none() {
            return Ok(None);
        }
        if let Some(one) = self.one_batch_made() {
            return Ok(Some(one));
        }
        let one = Arc::new(self.work.one_batch()?);
        Ok(Some(self.one_batch.get_or_init(|| one).clone()))
    }

    /// The summed batch if one was made already (by this judge or one it
    /// shares it with).
    pub fn one_batch_made(&self) -> Option<Arc<Workload>> {
        self.one_batch.get().cloned()
    }

    /// Everything: the evaluator's report with the rule's balance, the
    /// replay with token messages, and with `pricing` the prediction
    /// ([`super::judge`]); `progress(done, total)` follows the evaluator's
    /// layers. Not kept: a front end asks it once per plan.
    pub fn verdict(
        &self,
        served: Served<'_>,
        pricing: Option<&Pricing>,
        progress: impl FnMut(usize, usize),
    ) -> Result<Verdict> {
        super::judge(&self.work, served, &self.cost, pricing, progress)
    }

    /// The evaluator's report of `plan` (balance under the even split,
    /// memory, the bound), kept.
    pub fn eval_report(&self, plan: &Plan) -> Result<Arc<EvalReport>> {
        let key = Key::Eval(plan.content_hash());
        if let Some(Kept::Eval(r)) = self.kept(&key) {
            return Ok(r);
        }
        let r = Arc::new(evaluate(self.trace(), plan)?);
        self.keep(key, Kept::Eval(r.clone()));
        Ok(r)
    }

    /// `plan` replayed under `rule` without token messages (balance and
    /// pair traffic; [`super::simulate_pairs`]), kept.
    pub fn replay_pairs(&self, plan: &Plan, rule: Rule) -> Result<Arc<Replay>> {
        let key = Key::Pairs(plan.content_hash(), rule);
        if let Some(Kept::Replay(r)) = self.kept(&key) {
            return Ok(r);
        }
        let all = 0..self.trace().num_batches();
        let r = Arc::new(super::simulate_parts(
            &self.work,
            &[(all, plan)],
            rule,
            &self.cost,
            false,
        )?);
        self.keep(key, Kept::Replay(r.clone()));
        Ok(r)
    }

    /// `plan`'s pair traffic under `even`. Tokens arriving evenly: each of
    /// the D GPUs sends 1 / D of every expert's pairs wherever its copies
    /// are, a closed form that does not depend on the placement. With
    /// sources: the summed batch replayed (`Workload::one_batch`), the sum
    /// of the batches' to rounding; kept.
    pub fn even_traffic(&self, plan: &Plan) -> Result<PairTraffic> {
        if self.work.num_sources().is_none() {
            return Ok(self.even_closed_form(plan.topology()));
        }
        let key = Key::EvenTraffic(plan.content_hash());
        if let Some(Kept::Traffic(t)) = self.kept(&key) {
            return Ok(t);
        }
        let one = self.one_batch()?;
        let work = one.as_deref().unwrap_or(&*self.work);
        let all = 0..work.trace().num_batches();
        let r = super::simulate_parts(work, &[(all, plan)], Rule::Even, &self.cost, false)?;
        let t = PairTraffic::from(&r.traffic);
        self.keep(key, Kept::Traffic(t));
        Ok(t)
    }

    /// The closed form of [`Judge::even_traffic`] on `topology`.
    fn even_closed_form(&self, topology: Topology) -> PairTraffic {
        let (d, g) = (topology.num_gpus() as f64, topology.gpus_per_node() as f64);
        let pairs = *self.pairs.get_or_init(|| self.trace().summed().sum());
        let cross = pairs * (d - g) / d;
        PairTraffic {
            pairs,
            local: pairs / d,
            intra_node: pairs * (g - 1.0) / d,
            cross_node: cross,
            cross_node_bytes: cross
                * self.cost.hidden as f64
                * self.cost.bytes_per_activation as f64,
        }
    }

    /// `plan`'s imbalance ratio per batch under `even`
    /// (`per_batch_imbalance`): kept once made; made when `make`, else
    /// `None` when not kept (a replay a caller may not want to wait for).
    pub fn per_batch_even(&self, plan: &Plan, make: bool) -> Result<Option<Arc<Vec<f64>>>> {
        let key = Key::Series(plan.content_hash());
        if let Some(Kept::Series(s)) = self.kept(&key) {
            return Ok(Some(s));
        }
        if !make {
            return Ok(None);
        }
        let s = Arc::new(per_batch_imbalance(self.trace(), plan)?);
        self.keep(key, Kept::Series(s.clone()));
        Ok(Some(s))
    }

    /// A static plan priced on `pricing`'s hardware on the workload's mean
    /// batch (one batch: what a view pays per budget change; `verdict`
    /// prices every batch), kept.
    pub fn price_mean(&self, plan: &Plan, rule: Rule, pricing: &Pricing) -> Result<Prediction> {
        let key = Key::Mean(plan.content_hash(), rule, pricing.clone());
        if let Some(Kept::Prediction(p)) = self.kept(&key) {
            return Ok(p.as_ref().clone());
        }
        let mean = self
            .mean
            .get_or_init(|| Workload::new(self.trace().mean_batch()));
        let served = Served::Plan { plan, rule };
        let p = super::price(mean, served, &self.cost, pricing)?;
        self.keep(key, Kept::Prediction(Arc::new(p.clone())));
        Ok(p)
    }

    /// `base` served through `schedule`, judged with pair traffic only
    /// ([`super::judge_pairs`]); with `pricing`, timed in the same replay
    /// and its price kept ([`Judge::price_schedule`] then replays nothing).
    pub fn schedule(
        &self,
        base: &Plan,
        schedule: Schedule,
        pricing: Option<&Pricing>,
    ) -> Result<JudgedSchedule> {
        let served = Served::Schedule {
            base,
            schedule: &schedule,
        };
        let verdict = match pricing {
            Some(p) => super::verdict::judge_pairs_priced(&self.work, served, &self.cost, p)?,
            None => super::judge_pairs(&self.work, served, &self.cost)?,
        };
        let predicted = verdict.predicted.clone();
        let judged = JudgedSchedule::new(base, schedule, verdict);
        if let (Some(p), Some(predicted)) = (pricing, predicted) {
            self.keep(
                Key::Schedule(judged.id, p.clone()),
                Kept::Prediction(Arc::new(predicted)),
            );
        }
        Ok(judged)
    }

    /// [`Judge::schedule`] from its replay made in parts
    /// ([`super::judge_pairs_replayed`]): the same verdict to the bit.
    pub fn schedule_joined(
        &self,
        base: &Plan,
        schedule: Schedule,
        steps: &Steps,
    ) -> Result<JudgedSchedule> {
        let verdict = super::judge_pairs_replayed(&self.work, base, &schedule, &self.cost, steps)?;
        Ok(JudgedSchedule::new(base, schedule, verdict))
    }

    /// A judged schedule priced on every batch (its copies change from
    /// batch to batch: it has no mean batch), under its own rule, with pair
    /// traffic (as the mean batch prices a static plan); kept. Made only
    /// when `make` (a replay of every batch: a quarter second natively on
    /// the page's route default), else the kept one or `None`.
    pub fn price_schedule(
        &self,
        s: &JudgedSchedule,
        pricing: &Pricing,
        make: bool,
    ) -> Result<Option<Prediction>> {
        let key = Key::Schedule(s.id, pricing.clone());
        if let Some(Kept::Prediction(p)) = self.kept(&key) {
            return Ok(Some(p.as_ref().clone()));
        }
        if !make {
            return Ok(None);
        }
        let served = Served::Schedule {
            base: &s.base,
            schedule: &s.schedule,
        };
        let p = super::verdict::price_pairs(&self.work, served, &self.cost, pricing)?;
        self.keep(key, Kept::Prediction(Arc::new(p.clone())));
        Ok(Some(p))
    }

    fn kept(&self, key: &Key) -> Option<Kept> {
        let mut memo = self.memo.lock().ok()?;
        let at = memo.iter().position(|(k, _)| k == key)?;
        // The most recently used last: what a view shows stays kept.
        let hit = memo.remove(at)?;
        let kept = hit.1.clone();
        memo.push_back(hit);
        Some(kept)
    }

    fn keep(&self, key: Key, kept: Kept) {
        if let Ok(mut memo) = self.memo.lock() {
            memo.retain(|(k, _)| *k != key);
            if memo.len() >= KEPT {
                memo.pop_front();
            }
            memo.push_back((key, kept));
        }
    }
}

impl JudgedSchedule {
    fn new(base: &Plan, schedule: Schedule, verdict: Verdict) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        JudgedSchedule {
            base: base.clone(),
            schedule,
            verdict,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{hardware, model};
    use crate::planners::{EplbConfig, eplb};
    use crate::synth::generator::{GenConfig, generate};

    fn judged() -> (Judge, Plan) {
        let t = generate(&GenConfig::new(model::preset("olmoe").unwrap(), 3)).unwrap();
        let plan = eplb(
            &t,
            Topology::new(2, 4).unwrap(),
            EplbConfig {
                redundant_experts: 8,
                groups: 1,
            },
        )
        .unwrap();
        (Judge::new(Workload::new(t), None).unwrap(), plan)
    }

    /// What the judge keeps is what a fresh judge makes, and a plan that
    /// differs only in what a rule reads (GRACE's profile) is not taken
    /// for the one kept.
    #[test]
    fn kept_answers_are_fresh_answers_of_the_same_plan() {
        let (judge, plan) = judged();
        let rule = Rule::GraceWeighted;
        let first = judge.replay_pairs(&plan, rule).unwrap();
        let again = judge.replay_pairs(&plan, rule).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "asked again, not kept");
        let mut profile = judge.trace().summed();
        profile[[0, 0]] += 1000.0;
        let other = plan.clone().with_profile(Some(profile)).unwrap();
        let theirs = judge.replay_pairs(&other, rule).unwrap();
        let fresh = Judge::new(judge.workload().clone(), None)
            .unwrap()
            .replay_pairs(&other, rule)
            .unwrap();
        assert_eq!(theirs.per_layer, fresh.per_layer);
        assert_ne!(
            theirs.per_layer, first.per_layer,
            "another profile, another answer"
        );
        // Prices by pricing: another hardware is another answer.
        let h100 = judge.priced_on(hardware::preset("h100-ib-ndr").unwrap());
        let b200 = judge.priced_on(hardware::preset("b200-ib-ndr").unwrap());
        let a = judge.price_mean(&plan, Rule::Even, &h100).unwrap();
        let b = judge.price_mean(&plan, Rule::Even, &b200).unwrap();
        assert_ne!(a.step_ms, b.step_ms);
        assert_eq!(judge.price_mean(&plan, Rule::Even, &h100).unwrap(), a);
        assert_eq!(a.model, "olmoe", "the trace's model prices it");
    }

    /// The closed form of even arrival is the replay's, and the memo keeps
    /// at most [`KEPT`] answers, the most recently used.
    #[test]
    fn even_traffic_is_the_replays_and_the_memo_is_bounded() {
        let (judge, plan) = judged();
        let closed = judge.even_traffic(&plan).unwrap();
        let replayed = judge.replay_pairs(&plan, Rule::Even).unwrap();
        let t = PairTraffic::from(&replayed.traffic);
        for (a, b) in [
            (closed.local, t.local),
            (closed.intra_node, t.intra_node),
            (closed.cross_node, t.cross_node),
            (closed.cross_node_bytes, t.cross_node_bytes),
        ] {
            assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} vs {b}");
        }
        let series = judge.per_batch_even(&plan, true).unwrap().unwrap();
        assert_eq!(*series, replayed.per_batch_imbalance_ratio);
        for i in 0..KEPT + 8 {
            let mut profile = judge.trace().summed();
            profile[[0, 0]] += i as f64;
            let p = plan.clone().with_profile(Some(profile)).unwrap();
            judge.per_batch_even(&p, true).unwrap();
        }
        let kept = judge.memo.lock().unwrap().len();
        assert_eq!(kept, KEPT);
        assert!(
            judge.per_batch_even(&plan, false).unwrap().is_none(),
            "the oldest answer left first"
        );
    }
}
