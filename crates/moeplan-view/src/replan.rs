//! Re-planning within a workspace: the per-batch planners' options
//! (Libra's), the planners left pending after a cluster change (GRACE on a
//! cluster it has not clustered), and the static planners' own options
//! (GRACE's ratio). Each keeps what it does not change.

use super::*;

impl Workspace {
    /// Re-plans the per-batch planners (Libra) with `settings` (their
    /// options: Libra's `N`, predictor, …), leaving every other plan as it
    /// is — the budget's planner is not touched. On an error (a path-table
    /// predictor on counts) nothing changes.
    ///
    /// ```
    /// use moeplan::planners::{Settings, Value};
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let mut ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let before = ws.view(None, 0)?.plans.into_iter().find(|p| p.name == "libra").unwrap();
    /// ws.replan_scheduled(&Settings::new().with("extra_experts_per_gpu", Value::Count(1))?)?;
    /// let after = ws.view(None, 0)?.plans.into_iter().find(|p| p.name == "libra").unwrap();
    /// assert!(after.imbalance_ratio > before.imbalance_ratio); // fewer copies
    /// let path = Settings::new().with("predictor", Value::Word("path-table".into()))?;
    /// assert!(ws.replan_scheduled(&path).is_err()); // counts only: no token paths
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn replan_scheduled(&mut self, settings: &Settings) -> Result<()> {
        self.replan_per_batch(settings, false, |_| {}).map(|_| ())
    }

    /// Times the schedules planned from now on in their own replay, priced
    /// on `pricing` (the page's hardware): a priced view then shows a new
    /// schedule's price without replaying every batch again. `None`: they
    /// are priced apart, when a view asks with its series.
    pub fn price_schedules_on(&mut self, pricing: Option<Pricing>) {
        self.schedule_pricing = pricing;
    }

    /// Whether a per-batch planner waits for [`Workspace::plan_pending`]
    /// (see [`Workspace::of_workload_deferring`]).
    pub fn has_pending(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e.state, State::Pending))
    }

    /// Plans the planners left pending: GRACE with the workspace's options,
    /// the per-batch planners with `settings` (their options); whether
    /// there were any. On an error the per-batch planners are unchanged
    /// (GRACE, planned first, keeps its plan: what a new workspace holds).
    pub fn plan_pending(
        &mut self,
        settings: &Settings,
        mut phase: impl FnMut(&str),
    ) -> Result<bool> {
        if !self.has_pending() {
            return Ok(false);
        }
        self.plan_pending_static(&mut phase)?;
        self.replan_per_batch(settings, true, phase).map(|_| true)
    }

    /// Plans the static planners left pending (GRACE on a cluster its
    /// analysis had not clustered) as a new workspace would have.
    pub(crate) fn plan_pending_static(&mut self, phase: &mut impl FnMut(&str)) -> Result<()> {
        let settings = self
            .options
            .clone()
            .with(GROUPS.name, Value::Count(self.cluster.groups))?;
        for i in 0..self.entries.len() {
            let Some(entry) = self.entries.get(i) else {
                continue;
            };
            let planner = entry.id.planner()?;
            if planner.per_batch() || !matches!(entry.state, State::Pending) {
                continue;
            }
            phase(&planner.preparing());
            let (state, notes) = plan_static(
                planner,
                (&self.judge, self.topology),
                &settings,
                &mut self.grace_analysis,
                &mut self.grace,
            );
            if let Some(entry) = self.entries.get_mut(i) {
                entry.state = state;
                entry.notes = notes;
            }
            self.grouping = Arc::default();
        }
        Ok(())
    }

    /// Re-plans the static planners that read an option `options` sets
    /// or the last call set (GRACE's `nonuniformity`), keeping the others'
    /// plans and GRACE's analysis; a cluster change keeps these options.
    /// Options of the budget's planner or of a per-batch planner are
    /// refused (those have their own calls), and then nothing changes; a
    /// planner that cannot plan with the options says why in its row, as
    /// in a new workspace. Whether anything changed.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::planners::{Settings, Value};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let c = Cluster { nodes: 2, gpus_per_node: 4, groups: 1 };
    /// let mut ws = Workspace::of_workload(work.clone(), c, |_| {})?;
    /// let auto = Settings::new().with("nonuniformity", Value::Word("auto".into()))?;
    /// assert!(!ws.set_options(&auto, |_| {})?); // the default, named
    /// let ratio = Settings::new().with("nonuniformity", Value::Word("0".into()))?;
    /// assert!(ws.set_options(&ratio, |_| {})?);
    /// let g = ws.view(Some(2), 3)?.grouping.unwrap();
    /// assert_eq!(g.ratio, Some(0.0));
    /// // r = 0: a node's GPUs hold its experts in groups of m / G ± 1.
    /// assert!(g.sizes.chunks(4).all(|n| n.iter().max().unwrap() - n.iter().min().unwrap() <= 2));
    /// assert!(!ws.set_options(&ratio, |_| {})?); // nothing new
    /// let next = Workspace::of_workload_reusing(work, Cluster { nodes: 1, gpus_per_node: 8, ..c }, Some(&ws), |_| {})?;
    /// assert_eq!(next.view(Some(2), 3)?.grouping.unwrap().ratio, Some(0.0)); // kept
    /// let typo = Settings::new().with("extra_experts_per_gpu", Value::Count(2))?;
    /// assert!(ws.set_options(&typo, |_| {}).is_err()); // Libra's: `replan_scheduled`
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn set_options(&mut self, options: &Settings, mut phase: impl FnMut(&str)) -> Result<bool> {
        let changed = changed_static_options(options, &self.options)?;
        if changed.is_empty() {
            return Ok(false);
        }
        let reads = |p: &dyn Planner| p.options().iter().any(|o| changed.contains(&o.name));
        let settings = options
            .clone()
            .with(GROUPS.name, Value::Count(self.cluster.groups))?;
        let (mut analysis, mut ready) = (self.grace_analysis.clone(), self.grace.clone());
        let mut next = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let planner = entry.id.planner()?;
            if !reads(planner) {
                continue;
            }
            phase(&planner.preparing());
            let (state, notes) = plan_static(
                planner,
                (&self.judge, self.topology),
                &settings,
                &mut analysis,
                &mut ready,
            );
            next.push((i, state, notes));
        }
        for (i, state, notes) in next {
            if let Some(entry) = self.entries.get_mut(i) {
                entry.state = state;
                entry.notes = notes;
            }
        }
        (self.grace_analysis, self.grace) = (analysis, ready);
        self.options = options.clone();
        // What was kept of the re-planned planners is theirs no longer
        // (the judge keeps by the plans themselves).
        self.grouping = Arc::default();
        Ok(true)
    }

    pub(crate) fn replan_per_batch(
        &mut self,
        settings: &Settings,
        only_pending: bool,
        mut phase: impl FnMut(&str),
    ) -> Result<()> {
        let settings = settings
            .clone()
            .with(GROUPS.name, Value::Count(self.cluster.groups))?;
        let mut next = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let planner = entry.id.planner()?;
            if !planner.per_batch()
                || too_large_per_batch(self.work(), self.topology).is_some()
                || (only_pending && !matches!(entry.state, State::Pending))
            {
                continue;
            }
            let key = settings.resolved_for(planner.spec());
            if let Some((.., s, notes)) = self
                .schedules
                .iter()
                .find(|(id, k, ..)| *id == entry.id && *k == key)
            {
                next.push((i, key, s.clone(), notes.clone()));
                continue;
            }
            phase(&planner.preparing());
            let ready = prepare(planner, self.work(), self.topology, &settings)?;
            let planned = ready.plan(None)?;
            let Some(s) = ready.schedule(&planned.plan, self.work())? else {
                continue;
            };
            let s = Arc::new(Scheduled {
                judged: self
                    .judge
                    .schedule(&planned.plan, s, self.schedule_pricing.as_ref())?,
            });
            next.push((i, key, s, ready.notes()));
        }
        for (i, key, s, notes) in next {
            let Some(entry) = self.entries.get_mut(i) else {
                continue;
            };
            entry.state = State::Scheduled(s.clone());
            entry.notes = notes.clone();
            self.schedules
                .retain(|(id, k, ..)| !(*id == entry.id && *k == key));
            self.schedules.push((entry.id, key, s, notes));
            if self.schedules.len() > KEPT_SCHEDULES {
                self.schedules.remove(0);
            }
        }
        Ok(())
    }
}

/// The options `options` sets to other values than `from` (compared at
/// their values: a default named equals one left unset); refused when the
/// budget's planner or a per-batch planner reads one (those have their own
/// controls: the budget, [`Workspace::replan_scheduled`]).
pub(crate) fn changed_static_options(
    options: &Settings,
    from: &Settings,
) -> Result<Vec<&'static str>> {
    let changed: Vec<&'static str> = moeplan::planners::all_options()
        .into_iter()
        .filter(|o| options.value(o) != from.value(o))
        .map(|o| o.name)
        .collect();
    let own_control = registry().iter().find(|p| {
        (p.budget_unit() == Some(Unit::ReplicasPerGpu) || p.per_batch())
            && p.options().iter().any(|o| changed.contains(&o.name))
    });
    match own_control {
        Some(p) => Err(Error::Argument(format!(
            "{}'s options are set with its own control, not here",
            p.display()
        ))),
        None => Ok(changed),
    }
}

/// A shown planner prepared: GRACE from the kept analysis when the
/// workload has token routes (and the grouping kept for the page's GRACE
/// views), any other through the registry.
pub(crate) fn prepare_shown(
    planner: &dyn Planner,
    work: &Workload,
    topology: Topology,
    settings: &Settings,
    analysis: &mut Option<Arc<GraceAnalysis>>,
    ready: &mut Option<Arc<Grace>>,
) -> Result<Box<dyn Prepared>> {
    if planner.id() == grace::ID && work.tokens().is_some() {
        // GRACE's own type kept for its views, checked and profiled as
        // every planner's preparation is.
        moeplan::planners::prepare_by(planner, work, || {
            grace::prepare(work, topology, settings, analysis, ready)
        })
    } else {
        prepare(planner, work, topology, settings)
    }
}

/// A static planner prepared and planned at its default, as a new
/// workspace does: one that cannot plan here says why in its row.
fn plan_static(
    planner: &dyn Planner,
    (judge, topology): (&Judge, Topology),
    settings: &Settings,
    analysis: &mut Option<Arc<GraceAnalysis>>,
    ready: &mut Option<Arc<Grace>>,
) -> (State, Vec<String>) {
    match prepare_shown(
        planner,
        judge.workload(),
        topology,
        settings,
        analysis,
        ready,
    ) {
        Ok(p) => (
            plan_at_default(planner, p.as_ref(), judge, topology),
            p.notes(),
        ),
        Err(e) => (State::Failed(e.to_string()), Vec::new()),
    }
}
