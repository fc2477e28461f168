//! What every planner is to the rest of the project: the [`Planner`] trait,
//! its [`PlannerId`], its options ([`OptionSpec`], [`Settings`]) and the
//! prepare / plan split ([`Prepared`]) — the vocabulary of the one list,
//! [`PLANNERS`](super::PLANNERS), that the CLI (`--algo`, planner flags,
//! `compare`'s rows, `moeplan planners`), the JavaScript API (`algorithm`,
//! `planners()`) and the page's workspace (`moeplan-view`) iterate.
//!
//! A planner says what it reads from the workload ([`Needs`]: only the
//! trace's shape, the counts, per-source counts or token routes), which
//! options it takes with their defaults — at most one of them its *budget*,
//! the replica memory a slider moves ([`OptionKind::Budget`]) — and splits its work
//! in two: [`Planner::prepare`] does everything that does not depend on the
//! budget (CRAFT's benefit table: seconds), [`Prepared::plan`] turns a budget
//! into a plan (milliseconds). `None` as the budget is the planner's own
//! choice — the one definition of its default.
//!
//! Names: options are `snake_case` here and in [`Settings`]; the CLI spells
//! them `--kebab-case`, the JavaScript API `camelCase`.
//!
//! Cost: a lookup by name is a scan of the list (a handful of planners).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::data::Workload;
use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::error::{Error, Result};
use crate::judge::cost::Pricing;

mod options;

pub use options::{OptionKind, OptionSpec, Settings, Unit, Value};

/// A planner's name, as `--algo` and the JavaScript API's `algorithm` spell
/// it. Parsing accepts registered names only.
///
/// ```
/// use moeplan::planners::PlannerId;
/// let id: PlannerId = "eplb".parse()?;
/// assert_eq!(id.to_string(), "eplb");
/// assert_eq!(id.planner()?.display(), "EPLB");
/// assert!("nonsense".parse::<PlannerId>().is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlannerId(&'static str);

impl PlannerId {
    /// The id a planner's file declares (lower case, no spaces).
    pub(crate) const fn new(name: &'static str) -> PlannerId {
        PlannerId(name)
    }

    /// The name.
    ///
    /// ```
    /// assert_eq!(moeplan::planners::CRAFT_ID.as_str(), "craft");
    /// ```
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The registered planner of this id.
    ///
    /// ```
    /// let p = moeplan::planners::EPLB_ID.planner()?;
    /// assert_eq!(p.id(), moeplan::planners::EPLB_ID);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn planner(self) -> Result<&'static dyn Planner> {
        find(self.0)
    }
}

impl fmt::Display for PlannerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.0)
    }
}

impl FromStr for PlannerId {
    type Err = Error;
    fn from_str(s: &str) -> Result<PlannerId> {
        Ok(find(s)?.id())
    }
}

impl Serialize for PlannerId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for PlannerId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Every registered planner, in the order reports list them.
///
/// ```
/// let ids: Vec<String> = moeplan::planners::registry().iter().map(|p| p.id().to_string()).collect();
/// assert_eq!(ids, ["contiguous", "base", "eplb", "craft", "grace", "libra"]);
/// ```
pub fn registry() -> &'static [&'static dyn Planner] {
    super::PLANNERS
}

/// The planner named `name`; the error lists the known names.
///
/// ```
/// let err = moeplan::planners::find("typo").unwrap_err().to_string();
/// assert!(err.contains("contiguous, base, eplb, craft, grace or libra"), "{err}");
/// ```
pub fn find(name: &str) -> Result<&'static dyn Planner> {
    registry()
        .iter()
        .copied()
        .find(|p| p.id().as_str() == name)
        .ok_or_else(|| Error::Argument(format!("unknown planner {name:?}: {}", known_names())))
}

fn known_names() -> String {
    let names: Vec<&str> = registry().iter().map(|p| p.id().as_str()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => (*last).to_string(),
        None => "none registered".into(),
    }
}

/// The option named `name` (`snake_case`) of any registered planner.
/// Planners that share an option (`groups`) declare it alike (a test
/// checks).
///
/// ```
/// use moeplan::planners::{option, OptionKind};
/// assert!(matches!(option("replicas_per_gpu").unwrap().kind, OptionKind::Budget(_)));
/// assert!(option("typo").is_none());
/// ```
pub fn option(name: &str) -> Option<&'static OptionSpec> {
    registry()
        .iter()
        .flat_map(|p| p.options())
        .find(|o| o.name == name)
}

/// Every option of every planner once, in registry order.
///
/// ```
/// let names: Vec<&str> = moeplan::planners::all_options().iter().map(|o| o.name).collect();
/// assert!(names.contains(&"groups") && names.contains(&"redundant_experts"));
/// ```
pub fn all_options() -> Vec<&'static OptionSpec> {
    let mut out: Vec<&'static OptionSpec> = Vec::new();
    for o in registry().iter().flat_map(|p| p.options()) {
        if !out.iter().any(|x| x.name == o.name) {
            out.push(o);
        }
    }
    out
}

/// What a planner reads from the workload, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub enum Needs {
    /// Only the shape (experts, layers): it ignores the loads.
    Shape,
    /// The counts per batch, layer and expert.
    Counts,
    /// Counts per source rank as well (where tokens come from).
    Sources,
    /// Token routes (which experts each token went to, and its rank).
    Tokens,
}

impl Needs {
    /// Whether `work` carries what this asks for.
    ///
    /// ```
    /// use moeplan::planners::Needs;
    /// use moeplan::{data::Workload, LoadTrace};
    /// use ndarray::Array3;
    /// let w = Workload::new(LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?);
    /// assert!(Needs::Counts.met_by(&w) && !Needs::Sources.met_by(&w));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn met_by(self, work: &Workload) -> bool {
        match self {
            Needs::Shape | Needs::Counts => true,
            Needs::Sources => work.num_sources().is_some(),
            // `sources()` names the level; a unit test holds it to
            // `Workload::from_tokens`.
            Needs::Tokens => work.sources() == "token routes",
        }
    }

    /// In words, for errors and listings.
    ///
    /// ```
    /// assert_eq!(moeplan::planners::Needs::Tokens.describe(), "token routes");
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            Needs::Shape => "the trace's shape",
            Needs::Counts => "expert counts",
            Needs::Sources => "per-source counts",
            Needs::Tokens => "token routes",
        }
    }
}

/// One point of the replication-factor curve (the CRAFT paper's Figure 5):
/// what a planner with a budget in replicas per GPU predicts at `R`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct CurvePoint {
    /// Replicas per GPU, summed over layers (`R`).
    pub replicas_per_gpu: usize,
    /// Replicas the allocation spends (at most `R · D`).
    pub replicas: usize,
    /// Mean balancedness predicted from the benefit table.
    pub predicted_balancedness: f64,
    /// Upper bound on any plan's balancedness with `R · D` replicas in all
    /// (on the planning batches).
    pub bound: f64,
}

/// Per-layer figures a planner knows about its own plan on the batches it
/// planned on, without a replay (CRAFT measured them in Algorithm 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted {
    /// Balancedness of each layer (mean over batches).
    pub balancedness: Vec<f64>,
    /// Imbalance ratio of each layer (mean over batches).
    pub imbalance: Vec<f64>,
    /// Upper bound of each layer for its replica count.
    pub bound: Vec<f64>,
}

/// A plan and what its planner knows about it.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The plan.
    pub plan: Plan,
    /// The budget used, in the planner's unit (`auto` resolved); `None` for
    /// planners without one.
    pub budget: Option<usize>,
    /// In-sample figures known without a replay, if the planner has them.
    pub predicted: Option<Predicted>,
}

/// A planner with its expensive, budget-independent work done.
pub trait Prepared: fmt::Debug + Send + Sync {
    /// The cheap step: a plan for `budget` in the planner's unit (`None`:
    /// the planner's default — its automatic choice). Planners without a
    /// budget ignore it.
    fn plan(&self, budget: Option<usize>) -> Result<Planned>;

    /// The budget `None` stands for, resolved (`None` for planners without a
    /// budget). The default plans once; planners override it when they can
    /// tell without planning.
    fn auto_budget(&self) -> Result<Option<usize>> {
        Ok(self.plan(None)?.budget)
    }

    /// Predicted balancedness at each `R` (budgets in replicas per GPU
    /// only); `None` when the planner has no such curve.
    fn curve(&self) -> Option<Vec<CurvePoint>> {
        None
    }

    /// What a front end should say beside this planner's plans: how it
    /// fell back or what it could not use (GRACE with counts only has no
    /// affinity). Empty for most planners.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// A planner that re-places experts batch by batch (Libra) serves
    /// `served` starting from `base` (its [`Planned::plan`], what an engine
    /// loads) with this [`Schedule`](crate::judge::Schedule); static planners, whose plan is all
    /// they serve, return `None` (the default). `served` need not be the
    /// workload prepared on: an online planner re-plans on whatever batches
    /// it serves (`eval --plan`, a held-out split).
    fn schedule(&self, base: &Plan, served: &Workload) -> Result<Option<crate::judge::Schedule>> {
        let _ = (base, served);
        Ok(None)
    }

    /// [`Prepared::schedule`] for `batches` only, its placement covering
    /// just them, so parts made apart (by two workers) join
    /// ([`crate::judge::Schedule::join`]); `None` where a planner cannot
    /// schedule a part alone (the default: only the whole, through
    /// [`Prepared::schedule`]).
    fn schedule_batches(
        &self,
        base: &Plan,
        served: &Workload,
        batches: std::ops::Range<usize>,
    ) -> Result<Option<crate::judge::Schedule>> {
        if batches == (0..served.trace().num_batches()) {
            self.schedule(base, served)
        } else {
            Ok(None)
        }
    }
}

/// What identifies a planner, as one constant in its file (the registry
/// reads it; the trait's accessors default to it).
#[derive(Debug, Clone, Copy)]
pub struct PlannerSpec {
    /// Its name.
    pub id: PlannerId,
    /// How reports and the page print it (`EPLB`).
    pub display: &'static str,
    /// One line: what it does.
    pub about: &'static str,
    /// What it reads from the workload.
    pub needs: Needs,
    /// The options it takes, its budget among them.
    pub options: &'static [OptionSpec],
    /// The dispatch rule its system serves under, where it has its own
    /// (GRACE-MoE's topology-aware routing, Libra's rebalancer); `None`:
    /// the engine's, whichever the caller judges under. Front ends judge a
    /// row by it unless asked for one rule for all.
    pub serves_under: Option<crate::judge::Rule>,
}

impl PlannerSpec {
    /// Its budget option (its `OptionKind::Budget` option), if it has one.
    pub fn budget(&self) -> Option<&'static OptionSpec> {
        self.options
            .iter()
            .find(|o| matches!(o.kind, OptionKind::Budget(_)))
    }

    /// The unit of its budget, if it has one.
    pub fn budget_unit(&self) -> Option<Unit> {
        match self.budget()?.kind {
            OptionKind::Budget(u) => Some(u),
            _ => None,
        }
    }
}

/// One way of planning. Implemented by a unit struct in the planner's file
/// and listed once in `PLANNERS`.
pub trait Planner: Sync {
    /// Who it is: name, titles, needs and options, in one constant.
    fn spec(&self) -> &'static PlannerSpec;
    /// Its name.
    fn id(&self) -> PlannerId {
        self.spec().id
    }
    /// How reports and the page print it (`EPLB`).
    fn display(&self) -> &'static str {
        self.spec().display
    }
    /// One line: what it does (the CLI's `--algo` help).
    fn about(&self) -> &'static str {
        self.spec().about
    }
    /// What it reads from the workload.
    fn needs(&self) -> Needs {
        self.spec().needs
    }
    /// The options it takes, its budget among them.
    fn options(&self) -> &'static [OptionSpec] {
        self.spec().options
    }
    /// The expensive step: everything that does not depend on the budget.
    /// Call it through [`prepare`], which checks [`Planner::needs`] first.
    fn prepare(
        &self,
        work: &Workload,
        topology: Topology,
        settings: &Settings,
    ) -> Result<Box<dyn Prepared>>;

    /// Whether it re-places experts batch by batch: its prepared form
    /// gives a [`Schedule`](crate::judge::Schedule) ([`Prepared::schedule`]), front ends replay
    /// that instead of its plan, and `eval --plan` re-plans it on the
    /// evaluated batches. `false` (the default) for static planners.
    fn per_batch(&self) -> bool {
        false
    }

    /// What a progress line says while it prepares.
    fn preparing(&self) -> String {
        format!("planning {}", self.display())
    }

    /// Its budget option, if it has one.
    fn budget(&self) -> Option<&'static OptionSpec> {
        self.spec().budget()
    }

    /// The unit of its budget, if it has one.
    fn budget_unit(&self) -> Option<Unit> {
        self.spec().budget_unit()
    }

    /// A plan's name in reports: `eplb (+64)`, `craft (R = 8)`, `base`.
    fn label(&self, budget: Option<usize>) -> String {
        match (self.budget_unit(), budget) {
            (Some(u), Some(n)) => format!("{} ({})", self.id(), u.label(n)),
            _ => self.id().to_string(),
        }
    }

    /// A plan's title on the page: `EPLB +64`, `CRAFT R = 8`, `BASE`.
    fn title(&self, budget: Option<usize>) -> String {
        match (self.budget_unit(), budget) {
            (Some(u), Some(n)) => format!("{} {}", self.display(), u.label(n)),
            _ => self.display().to_string(),
        }
    }
}

impl fmt::Debug for dyn Planner + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Planner({})", self.id())
    }
}

/// Prepares `planner` on `work`, refusing a workload that lacks what it
/// needs.
///
/// ```
/// use moeplan::planners::{self, Settings};
/// use moeplan::{synth::generator, data::model, data::Workload, Topology};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let eplb = planners::find("eplb")?;
/// let ready = planners::prepare(eplb, &Workload::new(t), Topology::new(1, 6)?, &Settings::new())?;
/// let p = ready.plan(None)?; // the default: one slot per GPU more than 64 experts need
/// assert_eq!(p.budget, Some(8));
/// assert_eq!(p.plan.uniform_slots_per_gpu(), Some(12));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn prepare(
    planner: &dyn Planner,
    work: &Workload,
    topology: Topology,
    settings: &Settings,
) -> Result<Box<dyn Prepared>> {
    prepare_by(planner, work, || planner.prepare(work, topology, settings))
}

/// [`prepare`] with the planner's own preparation made by the caller: for
/// a front end that keeps the prepared state's own type (the page keeps
/// GRACE's, whose groups its views draw). The workload's `needs` are
/// checked before `own` runs and the plans record their profile, as
/// [`prepare`]'s do.
///
/// ```
/// use moeplan::planners::{self, Planner, Settings};
/// use moeplan::{synth::generator, data::model, data::Workload, Topology};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
/// let (work, c) = (Workload::new(t), Topology::new(1, 8)?);
/// let craft = planners::find("craft")?;
/// let ready = planners::prepare_by(craft, &work, || craft.prepare(&work, c, &Settings::new()))?;
/// assert!(ready.plan(None)?.plan.profile().is_some());
/// let refused = planners::prepare_by(craft, &work, || Err(moeplan::Error::Argument("no".into())));
/// assert!(refused.is_err()); // the caller's own error, as it was
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn prepare_by(
    planner: &dyn Planner,
    work: &Workload,
    own: impl FnOnce() -> Result<Box<dyn Prepared>>,
) -> Result<Box<dyn Prepared>> {
    let needs = planner.needs();
    if !needs.met_by(work) {
        return Err(Error::Argument(format!(
            "{} needs {}; this workload has {}",
            planner.display(),
            needs.describe(),
            work.sources()
        )));
    }
    let inner = own()?;
    let profile = work.trace().summed();
    Ok(Box::new(Profiled { inner, profile }))
}

/// A prepared planner whose plans record the loads they were planned on
/// ([`Plan::with_profile`]): one place, so every front end's plans carry
/// the profile GRACE's routing rules predict from, and judging them on
/// other batches cannot read those batches' loads.
#[derive(Debug)]
struct Profiled {
    inner: Box<dyn Prepared>,
    profile: ndarray::Array2<f64>,
}

impl Prepared for Profiled {
    fn plan(&self, budget: Option<usize>) -> Result<Planned> {
        let mut p = self.inner.plan(budget)?;
        p.plan = p.plan.with_profile(Some(self.profile.clone()))?;
        Ok(p)
    }
    fn auto_budget(&self) -> Result<Option<usize>> {
        self.inner.auto_budget()
    }
    fn curve(&self) -> Option<Vec<CurvePoint>> {
        self.inner.curve()
    }
    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }
    fn schedule(&self, base: &Plan, served: &Workload) -> Result<Option<crate::judge::Schedule>> {
        self.inner.schedule(base, served)
    }
    fn schedule_batches(
        &self,
        base: &Plan,
        served: &Workload,
        batches: std::ops::Range<usize>,
    ) -> Result<Option<crate::judge::Schedule>> {
        self.inner.schedule_batches(base, served, batches)
    }
}

/// Prepares and plans in one call, the budget taken from `settings` (its
/// default when unset).
///
/// ```
/// use moeplan::planners::{self, Settings, Value};
/// use moeplan::{synth::generator, data::model, data::Workload, Topology};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let s = Settings::new().with("replicas_per_gpu", Value::Count(2))?;
/// let p = planners::plan(planners::find("craft")?, &Workload::new(t), Topology::new(1, 8)?, &s)?;
/// assert_eq!(p.budget, Some(2));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn plan(
    planner: &dyn Planner,
    work: &Workload,
    topology: Topology,
    settings: &Settings,
) -> Result<Planned> {
    let budget = match planner.budget() {
        Some(spec) => settings.budget(spec)?,
        None => None,
    };
    prepare(planner, work, topology, settings)?.plan(budget)
}

/// A planner described for listings (`moeplan planners`, the JavaScript
/// API's `planners()`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct PlannerInfo {
    /// Its name.
    pub id: PlannerId,
    /// How it is printed.
    pub display: &'static str,
    /// What it does.
    pub about: &'static str,
    /// What it reads from the workload.
    pub needs: Needs,
    /// Its options.
    pub options: Vec<OptionInfo>,
}

/// An option described for listings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct OptionInfo {
    /// `snake_case` name.
    pub name: &'static str,
    /// What it sets.
    pub about: &'static str,
    /// `count`, `budget`, `choice` or `flag`.
    pub kind: &'static str,
    /// A budget's unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// A choice's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choices: Option<&'static [&'static str]>,
    /// The default.
    pub default: Value,
}

/// Every registered planner with its options, in registry order.
///
/// ```
/// let list = moeplan::planners::describe();
/// let eplb = list.iter().find(|p| p.id.as_str() == "eplb").unwrap();
/// assert_eq!(eplb.options[0].name, "redundant_experts");
/// assert_eq!(serde_json::to_value(&eplb.options[0].default)?, "auto");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn describe() -> Vec<PlannerInfo> {
    registry()
        .iter()
        .map(|p| PlannerInfo {
            id: p.id(),
            display: p.display(),
            about: p.about(),
            needs: p.needs(),
            options: p
                .options()
                .iter()
                .map(|o| OptionInfo {
                    name: o.name,
                    about: o.about,
                    kind: match o.kind {
                        OptionKind::Count => "count",
                        OptionKind::CountOrAuto => "count_or_auto",
                        OptionKind::Budget(_) => "budget",
                        OptionKind::Choice(_) => "choice",
                        OptionKind::Flag => "flag",
                    },
                    unit: match o.kind {
                        OptionKind::Budget(u) => Some(u),
                        _ => None,
                    },
                    choices: match o.kind {
                        OptionKind::Choice(w) => Some(w),
                        _ => None,
                    },
                    default: o.default.clone(),
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests;

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn planner_id_new() {
        use crate::planners::PlannerId;
        const MINE: PlannerId = PlannerId::new("mine");
        assert_eq!(MINE.as_str(), "mine");
        assert!(MINE.planner().is_err()); // not registered
    }
}
