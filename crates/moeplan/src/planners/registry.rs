//! What every planner is to the rest of the project: the [`Planner`] trait,
//! its [`PlannerId`], its options ([`OptionSpec`], [`Settings`]) and the
//! prepare / plan split ([`Prepared`]) — the vocabulary of the one list,
//! [`PLANNERS`](super::PLANNERS), that the CLI (`--algo`, planner flags,
//! `compare`'s rows, `moeplan planners`), the JavaScript API (`algorithm`,
//! `planners()`) and the [`Workspace`](crate::workspace::Workspace) iterate.
//!
//! A planner says what it reads from the workload ([`Needs`]: only the
//! trace's shape, the counts, per-source counts or token routes), which
//! options it takes with their defaults — at most one of them its *budget*,
//! the replica memory a slider moves ([`Kind::Budget`]) — and splits its work
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
    ///
    /// ```
    /// use moeplan::planners::PlannerId;
    /// const MINE: PlannerId = PlannerId::new("mine");
    /// assert_eq!(MINE.as_str(), "mine");
    /// assert!(MINE.planner().is_err()); // not registered
    /// ```
    pub const fn new(name: &'static str) -> PlannerId {
        PlannerId(name)
    }

    /// The name.
    ///
    /// ```
    /// assert_eq!(moeplan::planners::craft::ID.as_str(), "craft");
    /// ```
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// The registered planner of this id.
    ///
    /// ```
    /// let p = moeplan::planners::eplb::ID.planner()?;
    /// assert_eq!(p.id(), moeplan::planners::eplb::ID);
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
/// use moeplan::planners::{option, Kind};
/// assert!(matches!(option("replicas_per_gpu").unwrap().kind, Kind::Budget(_)));
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

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub enum Unit {
    /// Replicas per GPU summed over all layers (`R`; `R · D` in all) — the
    /// unit of the page's slider.
    ReplicasPerGpu,
    /// Redundant experts in every layer (`k`; `k · L` in all).
    RedundantPerLayer,
}

impl Unit {
    /// A budget of `n` in reports: `R = 8`, `+64`.
    ///
    /// ```
    /// use moeplan::planners::Unit;
    /// assert_eq!(Unit::ReplicasPerGpu.label(8), "R = 8");
    /// assert_eq!(Unit::RedundantPerLayer.label(64), "+64");
    /// ```
    pub fn label(self, n: usize) -> String {
        match self {
            Unit::ReplicasPerGpu => format!("R = {n}"),
            Unit::RedundantPerLayer => format!("+{n}"),
        }
    }
}

/// The values an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number.
    Count,
    /// A whole number or `auto`: the planner's budget (`auto`, the default,
    /// is the planner's own choice).
    Budget(Unit),
    /// One of these words.
    Choice(&'static [&'static str]),
    /// On or off.
    Flag,
}

impl Kind {
    fn describe(self) -> String {
        match self {
            Kind::Count => "a whole number".into(),
            Kind::Budget(_) => "a whole number or `auto`".into(),
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::Flag => "true or false".into(),
        }
    }
}

/// An option's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `auto`: a budget the planner chooses.
    Auto,
    /// A whole number.
    Count(usize),
    /// A word of a choice.
    Word(Cow<'static, str>),
    /// On or off.
    Flag(bool),
}

impl Value {
    /// Reads `text` as a value of `kind` (`auto`, a number, a word,
    /// `true` / `false`).
    ///
    /// ```
    /// use moeplan::planners::{Kind, Unit, Value};
    /// assert_eq!(Value::parse(Kind::Budget(Unit::ReplicasPerGpu), "auto")?, Value::Auto);
    /// assert_eq!(Value::parse(Kind::Count, "3")?, Value::Count(3));
    /// assert!(Value::parse(Kind::Choice(&["mean", "paper"]), "median").is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn parse(kind: Kind, text: &str) -> Result<Value> {
        let t = text.trim();
        let v = match kind {
            Kind::Budget(_) if t.eq_ignore_ascii_case("auto") => Some(Value::Auto),
            Kind::Count | Kind::Budget(_) => t.parse().ok().map(Value::Count),
            Kind::Choice(words) => words
                .iter()
                .find(|w| **w == t)
                .map(|w| Value::Word(Cow::Borrowed(*w))),
            Kind::Flag => t.parse().ok().map(Value::Flag),
        };
        v.ok_or_else(|| Error::Argument(format!("expected {}, got {text:?}", kind.describe())))
    }

    /// Reads a JSON value as a value of `kind` (`null` = unset is the
    /// caller's business).
    ///
    /// ```
    /// use moeplan::planners::{Kind, Unit, Value};
    /// let k = Kind::Budget(Unit::ReplicasPerGpu);
    /// assert_eq!(Value::from_json(k, &serde_json::json!(4))?, Value::Count(4));
    /// assert_eq!(Value::from_json(k, &serde_json::json!("auto"))?, Value::Auto);
    /// assert!(Value::from_json(Kind::Flag, &serde_json::json!(1)).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn from_json(kind: Kind, v: &serde_json::Value) -> Result<Value> {
        use serde_json::Value as J;
        match (kind, v) {
            (Kind::Count | Kind::Budget(_), J::Number(n)) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map(Value::Count)
                .ok_or_else(|| Error::Argument(format!("expected {}, got {n}", kind.describe()))),
            (Kind::Flag, J::Bool(b)) => Ok(Value::Flag(*b)),
            (Kind::Budget(_) | Kind::Choice(_), J::String(s)) => Value::parse(kind, s),
            _ => Err(Error::Argument(format!(
                "expected {}, got {v}",
                kind.describe()
            ))),
        }
    }

    fn fits(&self, kind: Kind) -> bool {
        match (self, kind) {
            (Value::Count(_), Kind::Count | Kind::Budget(_)) | (Value::Auto, Kind::Budget(_)) => {
                true
            }
            (Value::Word(w), Kind::Choice(words)) => words.contains(&w.as_ref()),
            (Value::Flag(_), Kind::Flag) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Auto => f.write_str("auto"),
            Value::Count(n) => write!(f, "{n}"),
            Value::Word(w) => f.write_str(w),
            Value::Flag(b) => write!(f, "{b}"),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Value::Auto => s.serialize_str("auto"),
            Value::Count(n) => s.serialize_u64(*n as u64),
            Value::Word(w) => s.serialize_str(w),
            Value::Flag(b) => s.serialize_bool(*b),
        }
    }
}

/// One option a planner takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionSpec {
    /// `snake_case` name (the CLI's `--kebab-case`, JavaScript's `camelCase`).
    pub name: &'static str,
    /// One line of help (for a budget: what `auto` picks).
    pub about: &'static str,
    /// The values it takes.
    pub kind: Kind,
    /// Its value when not given — the one definition of the default.
    pub default: Value,
}

/// Option values by name — for any registered planner's options; each
/// planner reads its own and ignores the rest (so one `Settings` serves
/// `compare`'s every row). A name no planner takes, or a value of the wrong
/// kind, is refused when set.
///
/// ```
/// use moeplan::planners::{Settings, Value};
/// let mut s = Settings::new();
/// s.set_str("redundant_experts", "8")?;
/// s.set_json("objective", &serde_json::json!("paper"))?;
/// assert_eq!(s.get("redundant_experts"), Some(&Value::Count(8)));
/// assert!(s.set_str("typo", "1").is_err());
/// assert!(s.set_str("groups", "auto").is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    values: BTreeMap<&'static str, Value>,
    /// The hardware and model a planner that plans for time prices with
    /// (CRAFT's `objective = time`): the command's, not an option of the
    /// registry, so it is neither listed nor written into a plan file.
    pricing: Option<Arc<Pricing>>,
}

impl Settings {
    /// No option set: every planner at its defaults.
    ///
    /// ```
    /// assert!(moeplan::planners::Settings::new().is_empty());
    /// ```
    pub fn new() -> Settings {
        Settings::default()
    }

    /// Whether nothing is set.
    ///
    /// ```
    /// assert!(moeplan::planners::Settings::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The same settings pricing with `pricing` (`None`: none): what a
    /// planner that plans for time reads ([`Settings::pricing`]).
    ///
    /// ```
    /// use moeplan::data::{hardware, model};
    /// use moeplan::judge::cost::Pricing;
    /// let p = Pricing::new(hardware::preset("h100-ib-ndr")?, model::preset("deepseek-v3")?);
    /// let s = moeplan::planners::Settings::new().priced(Some(p));
    /// assert_eq!(s.pricing().map(|p| p.hardware.name.as_ref()), Some("h100-ib-ndr"));
    /// assert!(s.is_empty()); // no option is set
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn priced(mut self, pricing: Option<Pricing>) -> Settings {
        self.pricing = pricing.map(Arc::new);
        self
    }

    /// The hardware and model to plan for, when a front end named them.
    pub fn pricing(&self) -> Option<&Pricing> {
        self.pricing.as_deref()
    }

    /// Sets option `name` to `value`, checked against the registry.
    ///
    /// ```
    /// use moeplan::planners::{Settings, Value};
    /// let mut s = Settings::new();
    /// s.set("groups", Value::Count(8))?;
    /// assert!(s.set("groups", Value::Flag(true)).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn set(&mut self, name: &str, value: Value) -> Result<()> {
        let spec = option(name).ok_or_else(|| unknown_option(name))?;
        if !value.fits(spec.kind) {
            return Err(Error::Argument(format!(
                "{name}: expected {}, got {value}",
                spec.kind.describe()
            )));
        }
        self.values.insert(spec.name, value);
        Ok(())
    }

    /// [`Settings::set`] by value, for building in one expression.
    ///
    /// ```
    /// use moeplan::planners::{Settings, Value};
    /// let s = Settings::new().with("replicas_per_gpu", Value::Count(4))?;
    /// assert_eq!(s.get("replicas_per_gpu"), Some(&Value::Count(4)));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn with(mut self, name: &str, value: Value) -> Result<Settings> {
        self.set(name, value)?;
        Ok(self)
    }

    /// Sets option `name` from text (the CLI's flags).
    ///
    /// ```
    /// let mut s = moeplan::planners::Settings::new();
    /// s.set_str("replicas_per_gpu", "auto")?;
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn set_str(&mut self, name: &str, text: &str) -> Result<()> {
        let spec = option(name).ok_or_else(|| unknown_option(name))?;
        let v = Value::parse(spec.kind, text).map_err(|e| prefixed(name, e))?;
        self.set(name, v)
    }

    /// Sets option `name` from JSON (the JavaScript API); `null` unsets it.
    ///
    /// ```
    /// let mut s = moeplan::planners::Settings::new();
    /// s.set_json("refine", &serde_json::json!(false))?;
    /// s.set_json("refine", &serde_json::Value::Null)?;
    /// assert!(s.is_empty());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn set_json(&mut self, name: &str, v: &serde_json::Value) -> Result<()> {
        let spec = option(name).ok_or_else(|| unknown_option(name))?;
        if v.is_null() {
            self.values.remove(spec.name);
            return Ok(());
        }
        let v = Value::from_json(spec.kind, v).map_err(|e| prefixed(name, e))?;
        self.set(name, v)
    }

    /// Every option of `planner`, each at its value here or its default:
    /// what a plan file records, so the planner can be run again as it ran.
    ///
    /// ```
    /// use moeplan::planners::{self, Settings, Value};
    /// let libra = planners::find("libra")?.spec();
    /// let s = Settings::new().with("extra_experts_per_gpu", Value::Count(4))?;
    /// let all = s.resolved_for(libra);
    /// assert_eq!(all.get("extra_experts_per_gpu"), Some(&Value::Count(4)));
    /// assert_eq!(all.get("predictor"), Some(&Value::Word("previous-batch".into())));
    /// assert_eq!(all.get("groups"), None); // not Libra's
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn resolved_for(&self, planner: &PlannerSpec) -> Settings {
        Settings {
            values: planner
                .options
                .iter()
                .map(|o| (o.name, self.value(o).clone()))
                .collect(),
            pricing: self.pricing.clone(),
        }
    }

    /// The settings as a JSON object (what a plan file's `options` holds).
    ///
    /// ```
    /// use moeplan::planners::{Settings, Value};
    /// let s = Settings::new().with("predictor", Value::Word("noisy".into()))?;
    /// assert_eq!(s.to_json(), serde_json::json!({"predictor": "noisy"}));
    /// assert_eq!(Settings::from_json(&s.to_json())?, s);
    /// assert!(Settings::from_json(&serde_json::json!({"typo": 1})).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.values
                .iter()
                .map(|(k, v)| {
                    let v = serde_json::to_value(v).unwrap_or(serde_json::Value::Null);
                    ((*k).to_string(), v)
                })
                .collect(),
        )
    }

    /// Reads [`Settings::to_json`]'s object back, every option checked
    /// against the registry.
    pub fn from_json(v: &serde_json::Value) -> Result<Settings> {
        let object = v
            .as_object()
            .ok_or_else(|| Error::Argument(format!("options must be an object, not {v}")))?;
        let mut s = Settings::new();
        for (name, value) in object {
            s.set_json(name, value)?;
        }
        Ok(s)
    }

    /// The value set for `name`, if any.
    ///
    /// ```
    /// assert_eq!(moeplan::planners::Settings::new().get("groups"), None);
    /// ```
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// The value of `spec`: the one set, else its default.
    ///
    /// ```
    /// use moeplan::planners::{eplb, Settings, Value};
    /// assert_eq!(Settings::new().value(&eplb::GROUPS), &Value::Count(1));
    /// ```
    pub fn value<'a>(&'a self, spec: &'a OptionSpec) -> &'a Value {
        self.values.get(spec.name).unwrap_or(&spec.default)
    }

    /// A count option's value.
    ///
    /// ```
    /// use moeplan::planners::{eplb, Settings, Value};
    /// let s = Settings::new().with("groups", Value::Count(8))?;
    /// assert_eq!(s.count(&eplb::GROUPS)?, 8);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn count(&self, spec: &OptionSpec) -> Result<usize> {
        match self.value(spec) {
            Value::Count(n) => Ok(*n),
            other => Err(mistyped(spec, other)),
        }
    }

    /// A budget option's value: `None` for `auto`.
    ///
    /// ```
    /// use moeplan::planners::{craft, Settings};
    /// assert_eq!(Settings::new().budget(&craft::REPLICAS_PER_GPU)?, None);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn budget(&self, spec: &OptionSpec) -> Result<Option<usize>> {
        match self.value(spec) {
            Value::Count(n) => Ok(Some(*n)),
            Value::Auto => Ok(None),
            other => Err(mistyped(spec, other)),
        }
    }

    /// A choice option's word.
    ///
    /// ```
    /// use moeplan::planners::{craft, Settings};
    /// assert_eq!(Settings::new().word(&craft::OBJECTIVE)?, "mean");
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn word<'a>(&'a self, spec: &'a OptionSpec) -> Result<&'a str> {
        match self.value(spec) {
            Value::Word(w) => Ok(w),
            other => Err(mistyped(spec, other)),
        }
    }

    /// A flag option's value.
    ///
    /// ```
    /// use moeplan::planners::{craft, Settings};
    /// assert!(Settings::new().flag(&craft::REFINE)?);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn flag(&self, spec: &OptionSpec) -> Result<bool> {
        match self.value(spec) {
            Value::Flag(b) => Ok(*b),
            other => Err(mistyped(spec, other)),
        }
    }
}

fn unknown_option(name: &str) -> Error {
    let known: Vec<&str> = all_options().iter().map(|o| o.name).collect();
    Error::Argument(format!(
        "unknown planner option {name:?}; known: {}",
        known.join(", ")
    ))
}

fn prefixed(name: &str, e: Error) -> Error {
    match e {
        Error::Argument(m) => Error::Argument(format!("{name}: {m}")),
        other => other,
    }
}

fn mistyped(spec: &OptionSpec, v: &Value) -> Error {
    Error::Argument(format!(
        "{}: expected {}, got {v}",
        spec.name,
        spec.kind.describe()
    ))
}

/// One point of the replication-factor curve (the CRAFT paper's Figure 5):
/// what a planner with a budget in replicas per GPU predicts at `R`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// loads) with this [`Schedule`]; static planners, whose plan is all
    /// they serve, return `None` (the default). `served` need not be the
    /// workload prepared on: an online planner re-plans on whatever batches
    /// it serves (`eval --plan`, a held-out split).
    fn schedule(&self, base: &Plan, served: &Workload) -> Result<Option<crate::judge::Schedule>> {
        let _ = (base, served);
        Ok(None)
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
}

impl PlannerSpec {
    /// Its budget option (its `Kind::Budget` option), if it has one.
    pub fn budget(&self) -> Option<&'static OptionSpec> {
        self.options
            .iter()
            .find(|o| matches!(o.kind, Kind::Budget(_)))
    }

    /// The unit of its budget, if it has one.
    pub fn budget_unit(&self) -> Option<Unit> {
        match self.budget()?.kind {
            Kind::Budget(u) => Some(u),
            _ => None,
        }
    }
}

/// One way of planning. Implemented by a unit struct in the planner's file
/// and listed once in [`PLANNERS`](super::PLANNERS).
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
    /// gives a [`Schedule`] ([`Prepared::schedule`]), front ends replay
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
    let needs = planner.needs();
    if !needs.met_by(work) {
        return Err(Error::Argument(format!(
            "{} needs {}; this workload has {}",
            planner.display(),
            needs.describe(),
            work.sources()
        )));
    }
    let inner = planner.prepare(work, topology, settings)?;
    let profile = work.trace().counts().sum_axis(ndarray::Axis(0));
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
                        Kind::Count => "count",
                        Kind::Budget(_) => "budget",
                        Kind::Choice(_) => "choice",
                        Kind::Flag => "flag",
                    },
                    unit: match o.kind {
                        Kind::Budget(u) => Some(u),
                        _ => None,
                    },
                    choices: match o.kind {
                        Kind::Choice(w) => Some(w),
                        _ => None,
                    },
                    default: o.default.clone(),
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LoadTrace, TokenTrace};
    use ndarray::{Array3, array};

    #[test]
    fn ids_are_unique_and_parse_back() {
        let mut seen = std::collections::HashSet::new();
        for p in registry() {
            assert!(seen.insert(p.id()), "{} registered twice", p.id());
            assert_eq!(p.id().as_str().parse::<PlannerId>().unwrap(), p.id());
            assert_eq!(p.id().planner().unwrap().id(), p.id());
            let json = serde_json::to_string(&p.id()).unwrap();
            assert_eq!(serde_json::from_str::<PlannerId>(&json).unwrap(), p.id());
        }
        assert!(serde_json::from_str::<PlannerId>("\"typo\"").is_err());
    }

    #[test]
    fn shared_options_are_declared_alike_and_defaults_fit() {
        for p in registry() {
            assert!(
                p.options()
                    .iter()
                    .filter(|o| matches!(o.kind, Kind::Budget(_)))
                    .count()
                    <= 1,
                "{}: one budget at most",
                p.id()
            );
            for o in p.options() {
                assert_eq!(option(o.name), Some(o), "{}: {}", p.id(), o.name);
                assert!(o.default.fits(o.kind), "{}: {}", p.id(), o.name);
                assert!(
                    o.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "{} is not snake_case",
                    o.name
                );
            }
        }
    }

    #[test]
    fn needs_read_the_workload_level() {
        let t = TokenTrace::new(4, vec![0], vec![array![[0, 1], [2, 3]]], vec![0, 1]).unwrap();
        let tokens = Workload::from_tokens(t, 2).unwrap();
        assert!(Needs::Tokens.met_by(&tokens) && Needs::Sources.met_by(&tokens));
        let counts =
            Workload::new(LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0]).unwrap());
        assert!(!Needs::Tokens.met_by(&counts) && Needs::Shape.met_by(&counts));
    }
}
