//! Libra — per-batch expert prefetching and token rebalancing (Libra
//! paper: §3, appendices B and C).
//!
//! Static plans (EPLB, CRAFT, GRACE) place experts once; Libra re-places
//! every layer of every batch: while layer `i` runs it predicts layer
//! `i + 1`'s routing (`predict`), copies up to `N` experts per GPU onto
//! a static base ([`prefetch()`], Algorithm 1), and shards the remote pairs
//! of replicated experts over the copies on the CPU
//! ([`crate::judge::Rebalancer`], Algorithm 2, the dispatch rule
//! [`Rule::Libra`]).
//!
//! [`libra_schedule`] turns a workload, a base plan and a predictor into a
//! [`Placement::Schedule`] of one plan per batch (each layer the base plus
//! that batch's copies), which [`crate::judge::simulate`] replays under
//! [`Rule::Libra`]; its `moves` count the slots that change between
//! consecutive batches, and [`LibraSchedule::copies`] every copy Libra makes
//! (it refills its buffers every layer of every batch).
//!
//! **Files.** This one: options and the schedule. `predict`: the
//! predictors and their accuracy (Table 1's metric). [`prefetch`](mod@prefetch):
//! Algorithm 1. The rebalancer lives in the judge (`judge/rebalance.rs`).
//!
//! **In the registry.** `LibraPlanner` (`--algo libra`) plans a
//! static *base* — contiguous placement, what an engine without a balancer
//! loads, the paper's starting point (it builds on the serving engine's
//! expert-parallel layout) and independent of the loads, so no budget moves
//! it — and serves it per batch through
//! [`crate::planners::Prepared::schedule`]: on whatever
//! workload it serves (Libra is online), the predictor named by
//! [`PREDICTOR`] is built on that workload and [`libra_schedule`] runs on
//! it. Front ends show the base as the plan an engine loads and the
//! schedule's replay as Libra's figures. It needs counts only; the
//! path-table predictor needs token routes and says so when they are
//! missing.
//!
//! Cost: per batch and layer, one prediction and one prefetch (see their
//! files); memory `B` plans of `L · (E + D · N)` slots.

pub(crate) mod predict;
pub(crate) mod prefetch;
pub(crate) mod time_model;

use std::borrow::Cow;

use crate::data::Workload;
use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::error::{Error, Result};
use crate::judge::{Placement, RemoteStart, Rule, Schedule, Strategy};
use crate::planners::registry::{
    Needs, OptionKind, OptionSpec, Planned, Planner, PlannerId, PlannerSpec, Prepared, Settings,
    Value,
};

pub use predict::{
    Accuracy, DEFAULT_DEPTH, Noisy, PathMemoBuild, PathTable, PredictedCounts, Predictor, accuracy,
};
pub use prefetch::{Prefetcher, prefetch};

/// Libra's id.
pub const ID: PlannerId = PlannerId::new("libra");
const NAME: &str = "libra";

/// `N`: copies each GPU may take per layer and batch.
pub const EXTRA_EXPERTS_PER_GPU: OptionSpec = OptionSpec {
    name: "extra_experts_per_gpu",
    about: "Libra's N: experts each GPU may copy per layer and batch (paper: 8)",
    kind: OptionKind::Count,
    default: Value::Count(8),
};

/// `α` in percent: the share of `N` spent on each GPU's own hot experts.
pub(crate) const LOCAL_PERCENT: OptionSpec = OptionSpec {
    name: "local_percent",
    about: "Libra's α in percent: share of N copied for each GPU's own tokens (paper: 50)",
    kind: OptionKind::Count,
    default: Value::Count(50),
};

/// `ε` in percent: the rebalancer's tolerance above the mean.
pub(crate) const TOLERANCE_PERCENT: OptionSpec = OptionSpec {
    name: "tolerance_percent",
    about: "Libra's ε in percent: the rebalancer stops within this of the mean load",
    kind: OptionKind::Count,
    default: Value::Count(crate::judge::DEFAULT_TOLERANCE_PERCENT as usize),
};

/// Where Algorithm 2's remote pairs start (the paper leaves it open).
pub(crate) const REMOTE_START: OptionSpec = OptionSpec {
    name: "remote_start",
    about: "where the rebalancer's remote pairs start: even (split over copies, as engines send them) or primary (all on the expert's home copy)",
    kind: OptionKind::Choice(&RemoteStart::NAMES),
    default: Value::Word(Cow::Borrowed("even")),
};

/// Which predictor feeds the prefetcher.
pub const PREDICTOR: OptionSpec = OptionSpec {
    name: "predictor",
    about: "what predicts the next layer: oracle (upper bound), path-table (tokens), previous-batch, noisy (simulated, 80 %)",
    kind: OptionKind::Choice(&["previous-batch", "path-table", "oracle", "noisy"]),
    default: Value::Word(Cow::Borrowed("previous-batch")),
};

/// Libra's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LibraOptions {
    /// `N`: copies per GPU per layer and batch.
    pub extra_per_gpu: usize,
    /// `α` in 0..=1: the share of `N` for phase 1 (`round(N · α)` copies).
    pub local_fraction: f64,
    /// `ε` in percent for [`Rule::Libra`].
    pub tolerance_percent: u16,
    /// Where [`Rule::Libra`]'s remote pairs start.
    pub start: RemoteStart,
}

impl Default for LibraOptions {
    /// The paper's evaluation setting (§5): `N = 8`, `α = 0.5`; ε = 5 % is
    /// moeplan's choice (the paper gives only ε ∈ (0, 1)), and so is the
    /// even start of remote pairs (the paper does not say where they
    /// start).
    fn default() -> Self {
        LibraOptions {
            extra_per_gpu: 8,
            local_fraction: 0.5,
            tolerance_percent: crate::judge::DEFAULT_TOLERANCE_PERCENT,
            start: RemoteStart::Even,
        }
    }
}

impl LibraOptions {
    /// Phase 1's copies per GPU, `round(N · α)`.
    pub(crate) fn local_copies(&self) -> Result<usize> {
        if !(0.0..=1.0).contains(&self.local_fraction) {
            return Err(Error::planner(
                NAME,
                format!("α = {} is outside 0..=1", self.local_fraction),
            ));
        }
        let l = (self.extra_per_gpu as f64 * self.local_fraction).round() as usize;
        Ok(l.min(self.extra_per_gpu))
    }
}

/// Builds the predictor named `word` (see [`PREDICTOR`]) for `work`: the
/// path table of depth [`DEFAULT_DEPTH`] empty, to grow online as Libra
/// serves (each batch predicted from the batches served before it, never
/// from its own tokens; the first batch, with nothing learnt, uniform), the
/// noisy one at 80 % accuracy (the middle of Table 1's 70–90 %) with
/// seed 0.
///
/// ```
/// use moeplan::planners::build_predictor;
/// use moeplan::{data::Workload, LoadTrace};
/// use ndarray::Array3;
/// let w = Workload::new(LoadTrace::new(Array3::from_elem((2, 2, 4), 1.0), vec![0, 1])?);
/// assert_eq!(build_predictor("oracle", &w)?.name(), "oracle");
/// assert!(build_predictor("path-table", &w).is_err()); // needs token routes
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn build_predictor(word: &str, work: &Workload) -> Result<Predictor> {
    match word {
        "oracle" => Ok(Predictor::Oracle),
        "previous-batch" => Ok(Predictor::PreviousBatch),
        "noisy" => Ok(Predictor::Noisy(Noisy::new(work, 0.8, 0)?)),
        "path-table" => {
            let tokens = work.tokens().ok_or_else(|| {
                Error::planner(NAME, "the path-table predictor needs token routes")
            })?;
            Ok(Predictor::PathTable(PathTable::empty(
                tokens,
                DEFAULT_DEPTH,
            )?))
        }
        other => Err(Error::planner(
            NAME,
            format!("unknown predictor {other:?}: oracle, path-table, previous-batch or noisy"),
        )),
    }
}

/// Libra's per-batch placements and the rule that serves them.
#[derive(Debug, Clone, PartialEq)]
pub struct LibraSchedule {
    /// One plan per batch (`b..b + 1`), each layer the base plus that
    /// batch's copies.
    pub placement: Placement,
    /// [`Rule::Libra`] with the options' ε.
    pub rule: Rule,
    /// Copies made in each batch, over all layers: what Libra transfers
    /// (it refills its copy buffers every layer).
    pub copies: Vec<usize>,
    /// The predictor's [`Predictor::name`] and [`Predictor::label`].
    pub predictor: (&'static str, &'static str),
}

impl LibraSchedule {
    /// The schedule under its rule, for [`crate::judge::simulate`].
    pub fn strategy(&self) -> Strategy {
        Strategy {
            placement: self.placement.clone(),
            rule: self.rule,
        }
    }
}

/// Libra on `work`: for every batch and layer, `predictor`'s counts, then
/// the prefetcher's copies on `base`'s layer.
///
/// ```
/// use moeplan::planners::{libra_schedule, LibraOptions, Predictor};
/// use moeplan::judge::{simulate, CostModel};
/// use moeplan::Workload;
/// use moeplan::{synth::generator, data::model, planners, Topology};
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let base = planners::contiguous(&trace, Topology::new(1, 8)?)?;
/// let work = Workload::new(trace);
/// let s = libra_schedule(&work, &base, &Predictor::Oracle, &LibraOptions::default())?;
/// let libra = simulate(&work, &s.strategy(), &CostModel::default())?;
/// let fixed = simulate(&work, &moeplan::judge::Strategy::fixed(base, moeplan::judge::Rule::Even), &CostModel::default())?;
/// assert!(libra.imbalance_ratio < fixed.imbalance_ratio);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn libra_schedule(
    work: &Workload,
    base: &Plan,
    predictor: &Predictor,
    options: &LibraOptions,
) -> Result<LibraSchedule> {
    let all = 0..work.trace().num_batches();
    libra_schedule_batches(work, base, predictor, options, all)?
        .ok_or_else(|| Error::planner(NAME, "the whole workload could not be scheduled"))
}

/// [`libra_schedule`] for `batches` only (its placement covers just them):
/// a batch's copies depend on that batch's prediction alone, so halves
/// made apart join into the whole ([`crate::judge::Schedule::join`]).
/// `None` for a path table that learns online (batches after the first
/// need every batch before them learnt).
pub(crate) fn libra_schedule_batches(
    work: &Workload,
    base: &Plan,
    predictor: &Predictor,
    options: &LibraOptions,
    batches: std::ops::Range<usize>,
) -> Result<Option<LibraSchedule>> {
    let trace = work.trace();
    base.check_matches(trace)?;
    if batches.start >= batches.end || batches.end > trace.num_batches() {
        return Err(Error::Argument(format!(
            "batches {}..{} of a workload of {}",
            batches.start,
            batches.end,
            trace.num_batches()
        )));
    }
    let local = options.local_copies()?;
    let d = base.topology().num_gpus();
    let mut parts = Vec::with_capacity(batches.len());
    let mut copies = Vec::with_capacity(batches.len());
    // A path table grows online: it learns each batch once served.
    let mut predictor = predictor.clone();
    let (mut prefetcher, mut predicted) = (Prefetcher::default(), PredictedCounts::default());
    // The path table's predictions, made once per workload (they depend on
    // the routes alone); the table then need not learn here.
    // A part after the first never makes them (seconds): only the whole
    // does, or the first part; one that has no table kept cannot start
    // there.
    let memo = match (&predictor, batches.start) {
        (Predictor::PathTable(_), 1..) => match predictor.path_memo_kept(work) {
            Some(memo) => Some(memo),
            None => return Ok(None),
        },
        _ => predictor.path_memo(work)?,
    };
    for b in batches {
        let mut layers = Vec::with_capacity(base.layers().len());
        let mut made = 0;
        for (l, layer) in base.layers().iter().enumerate() {
            match &memo {
                Some(m) if b > 0 => Predictor::fill_from_memo(m, work, (b, l), d, &mut predicted),
                _ => predictor.predict_into(work, b, l, d, &mut predicted)?,
            }
            let next = prefetcher.run(layer, &predicted, options.extra_per_gpu, local)?;
            made += next.total_slots() - layer.total_slots();
            layers.push(next);
        }
        if memo.is_none() {
            predictor.learn_batch(work, b)?;
        }
        copies.push(made);
        let plan = Plan::extending(base, layers, NAME)?;
        parts.push((b..b + 1, plan));
    }
    Ok(Some(LibraSchedule {
        placement: Placement::Schedule(parts),
        rule: Rule::Libra {
            tolerance_percent: options.tolerance_percent,
            start: options.start,
        },
        copies,
        predictor: (predictor.name(), predictor.label()),
    }))
}

const OPTIONS: [OptionSpec; 5] = [
    EXTRA_EXPERTS_PER_GPU,
    LOCAL_PERCENT,
    TOLERANCE_PERCENT,
    PREDICTOR,
    REMOTE_START,
];

impl LibraOptions {
    /// The options as the registry's [`Settings`] hold them (defaults for
    /// those unset).
    pub(crate) fn from_settings(settings: &Settings) -> Result<LibraOptions> {
        let local = settings.count(&LOCAL_PERCENT)?;
        let tolerance = settings.count(&TOLERANCE_PERCENT)?;
        let o = LibraOptions {
            extra_per_gpu: settings.count(&EXTRA_EXPERTS_PER_GPU)?,
            local_fraction: local as f64 / 100.0,
            tolerance_percent: u16::try_from(tolerance)
                .map_err(|_| Error::planner(NAME, format!("ε = {tolerance} % is too large")))?,
            start: RemoteStart::from_name(settings.word(&REMOTE_START)?)?,
        };
        o.local_copies()?;
        Ok(o)
    }
}

/// The registry's Libra.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LibraPlanner;

/// Its registry entry, data only ([`crate::planners::SPECS`] lists it).
pub(crate) const SPEC: PlannerSpec = PlannerSpec {
    id: ID,
    display: "LIBRA",
    about: "Libra: per batch, the predicted hot experts copied onto a contiguous base (N per GPU, \
            Algorithm 1) and remote tokens rebalanced over the copies (libra-rebalance, Algorithm 2); \
            the file holds the base, the copies are made while serving",
    needs: Needs::Counts,
    options: &OPTIONS,
    serves_under: Some(Rule::Libra {
        tolerance_percent: crate::judge::DEFAULT_TOLERANCE_PERCENT,
        start: RemoteStart::Even,
    }),
};

impl Planner for LibraPlanner {
    fn spec(&self) -> &'static PlannerSpec {
        &SPEC
    }
    fn preparing(&self) -> String {
        "prefetching per batch (Libra)".into()
    }
    fn per_batch(&self) -> bool {
        true
    }
    fn prepare(
        &self,
        work: &Workload,
        topology: Topology,
        settings: &Settings,
    ) -> Result<Box<dyn Prepared>> {
        let options = LibraOptions::from_settings(settings)?;
        let predictor = settings.word(&PREDICTOR)?.to_string();
        // Built once here so a predictor the workload cannot feed (the
        // path table on counts) is refused when planning, not when serving.
        let built = build_predictor(&predictor, work)?;
        Ok(Box::new(Libra {
            topology,
            options,
            label: (built.name(), built.label()),
            predictor,
            base: crate::planners::contiguous(work.trace(), topology)?,
        }))
    }
}

/// Libra prepared: its base and how it serves it.
#[derive(Debug, Clone)]
pub(crate) struct Libra {
    topology: Topology,
    options: LibraOptions,
    predictor: String,
    label: (&'static str, &'static str),
    base: Plan,
}

impl Libra {
    /// The static base every batch's copies go onto (contiguous, named
    /// `libra` so a written plan says who made it).
    ///
    /// ```
    /// use moeplan::planners::{self, Settings};
    /// use moeplan::{synth::generator, data::model, data::Workload, Topology};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let p = planners::plan(planners::find("libra")?, &Workload::new(t), Topology::new(1, 8)?, &Settings::new())?;
    /// assert_eq!((p.plan.algorithm(), p.plan.summary().replicas), ("libra", 0));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn base(&self) -> Result<Plan> {
        Plan::new(
            self.topology,
            self.base.num_experts(),
            self.base.layers().to_vec(),
            NAME,
        )
    }
}

impl Prepared for Libra {
    fn plan(&self, _budget: Option<usize>) -> Result<Planned> {
        Ok(Planned {
            plan: self.base()?,
            budget: None,
            predicted: None,
        })
    }

    fn auto_budget(&self) -> Result<Option<usize>> {
        Ok(None)
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "Libra copies up to N = {} experts per GPU every layer of every batch ({} predictor, {}) and serves them under libra-rebalance (ε = {} %, {}); the plan an engine loads is its contiguous base only",
            self.options.extra_per_gpu,
            self.label.0,
            self.label.1,
            self.options.tolerance_percent,
            self.options.start.describe()
        )]
    }

    fn schedule(&self, base: &Plan, served: &Workload) -> Result<Option<Schedule>> {
        self.schedule_batches(base, served, 0..served.trace().num_batches())
    }

    fn schedule_batches(
        &self,
        base: &Plan,
        served: &Workload,
        batches: std::ops::Range<usize>,
    ) -> Result<Option<Schedule>> {
        let predictor = build_predictor(&self.predictor, served)?;
        let Some(s) = libra_schedule_batches(served, base, &predictor, &self.options, batches)?
        else {
            return Ok(None);
        };
        Ok(Some(Schedule {
            about: format!(
                "per batch, {} ({}), {} predictor ({})",
                s.rule.name(),
                self.options.start.describe(),
                s.predictor.0,
                s.predictor.1
            ),
            // moved, not cloned: a plan per batch is most of the schedule
            strategy: Strategy {
                placement: s.placement,
                rule: s.rule,
            },
            copies_per_batch: s.copies,
            extra_slots_per_gpu: self.options.extra_per_gpu,
            resident_slots_per_gpu: 2 * self.options.extra_per_gpu,
        }))
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn local_copies() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::libra::LibraOptions;
        assert_eq!(LibraOptions::default().local_copies()?, 4);
        let bad = LibraOptions {
            local_fraction: 1.5,
            ..LibraOptions::default()
        };
        assert!(bad.local_copies().is_err());
        Ok(())
    }
    #[test]
    fn from_settings() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::libra::LibraOptions;
        use crate::planners::{Settings, Value};
        let s = Settings::new().with("extra_experts_per_gpu", Value::Count(2))?;
        let o = LibraOptions::from_settings(&s)?;
        assert_eq!((o.extra_per_gpu, o.local_fraction), (2, 0.5));
        let bad = Settings::new().with("local_percent", Value::Count(150))?;
        assert!(LibraOptions::from_settings(&bad).is_err());
        Ok(())
    }
}
