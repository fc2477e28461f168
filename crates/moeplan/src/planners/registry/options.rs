//! A planner's options: what each one is ([`OptionSpec`]: name, kind,
//! default), the values they take ([`Value`], in a budget's [`Unit`]) and a
//! set of them checked against the planners that read them ([`Settings`]).

use super::*;

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
pub enum OptionKind {
    /// A whole number.
    Count,
    /// A whole number or `auto`, a count the planner derives from the
    /// workload when not given (EPLB's groups: the model's).
    CountOrAuto,
    /// A whole number or `auto`: the planner's budget (`auto`, the default,
    /// is the planner's own choice).
    Budget(Unit),
    /// One of these words.
    Choice(&'static [&'static str]),
    /// On or off.
    Flag,
}

impl OptionKind {
    pub(super) fn describe(self) -> String {
        match self {
            OptionKind::Count => "a whole number".into(),
            OptionKind::CountOrAuto | OptionKind::Budget(_) => "a whole number or `auto`".into(),
            OptionKind::Choice(words) => format!("one of {}", words.join(", ")),
            OptionKind::Flag => "true or false".into(),
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
    /// use moeplan::planners::{OptionKind, Unit, Value};
    /// assert_eq!(Value::parse(OptionKind::Budget(Unit::ReplicasPerGpu), "auto")?, Value::Auto);
    /// assert_eq!(Value::parse(OptionKind::Count, "3")?, Value::Count(3));
    /// assert!(Value::parse(OptionKind::Choice(&["mean", "paper"]), "median").is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn parse(kind: OptionKind, text: &str) -> Result<Value> {
        let t = text.trim();
        let v = match kind {
            OptionKind::CountOrAuto | OptionKind::Budget(_) if t.eq_ignore_ascii_case("auto") => {
                Some(Value::Auto)
            }
            OptionKind::Count | OptionKind::CountOrAuto | OptionKind::Budget(_) => {
                t.parse().ok().map(Value::Count)
            }
            OptionKind::Choice(words) => words
                .iter()
                .find(|w| **w == t)
                .map(|w| Value::Word(Cow::Borrowed(*w))),
            OptionKind::Flag => t.parse().ok().map(Value::Flag),
        };
        v.ok_or_else(|| Error::Argument(format!("expected {}, got {text:?}", kind.describe())))
    }

    /// Reads a JSON value as a value of `kind` (`null` = unset is the
    /// caller's business).
    pub(crate) fn from_json(kind: OptionKind, v: &serde_json::Value) -> Result<Value> {
        use serde_json::Value as J;
        match (kind, v) {
            (OptionKind::Count | OptionKind::CountOrAuto | OptionKind::Budget(_), J::Number(n)) => {
                n.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .map(Value::Count)
                    .ok_or_else(|| {
                        Error::Argument(format!("expected {}, got {n}", kind.describe()))
                    })
            }
            (OptionKind::Flag, J::Bool(b)) => Ok(Value::Flag(*b)),
            (
                OptionKind::CountOrAuto | OptionKind::Budget(_) | OptionKind::Choice(_),
                J::String(s),
            ) => Value::parse(kind, s),
            _ => Err(Error::Argument(format!(
                "expected {}, got {v}",
                kind.describe()
            ))),
        }
    }

    pub(super) fn fits(&self, kind: OptionKind) -> bool {
        match (self, kind) {
            (
                Value::Count(_),
                OptionKind::Count | OptionKind::CountOrAuto | OptionKind::Budget(_),
            )
            | (Value::Auto, OptionKind::CountOrAuto | OptionKind::Budget(_)) => true,
            (Value::Word(w), OptionKind::Choice(words)) => words.contains(&w.as_ref()),
            (Value::Flag(_), OptionKind::Flag) => true,
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
    pub kind: OptionKind,
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
/// assert!(s.set_str("local_percent", "auto").is_err());
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
    /// planner that plans for time reads (`Settings::pricing`).
    pub fn priced(mut self, pricing: Option<Pricing>) -> Settings {
        self.pricing = pricing.map(Arc::new);
        self
    }

    /// The hardware and model to plan for, when a front end named them.
    pub(crate) fn pricing(&self) -> Option<&Pricing> {
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
    pub(crate) fn to_json(&self) -> serde_json::Value {
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
    pub(crate) fn from_json(v: &serde_json::Value) -> Result<Settings> {
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
    /// use moeplan::planners::{GROUPS, Settings, Value};
    /// assert_eq!(Settings::new().value(&GROUPS), &Value::Auto);
    /// ```
    pub fn value<'a>(&'a self, spec: &'a OptionSpec) -> &'a Value {
        self.values.get(spec.name).unwrap_or(&spec.default)
    }

    /// A count option's value.
    pub(crate) fn count(&self, spec: &OptionSpec) -> Result<usize> {
        match self.value(spec) {
            Value::Count(n) => Ok(*n),
            other => Err(mistyped(spec, other)),
        }
    }

    /// A budget option's value: `None` for `auto`.
    ///
    /// ```
    /// use moeplan::planners::{REPLICAS_PER_GPU, Settings};
    /// assert_eq!(Settings::new().budget(&REPLICAS_PER_GPU)?, None);
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
    pub(crate) fn word<'a>(&'a self, spec: &'a OptionSpec) -> Result<&'a str> {
        match self.value(spec) {
            Value::Word(w) => Ok(w),
            other => Err(mistyped(spec, other)),
        }
    }

    /// A flag option's value.
    pub(crate) fn flag(&self, spec: &OptionSpec) -> Result<bool> {
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

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn count() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::{Settings, Value, libra};
        let s = Settings::new().with("local_percent", Value::Count(40))?;
        assert_eq!(s.count(&libra::LOCAL_PERCENT)?, 40);
        Ok(())
    }
    #[test]
    fn from_json() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::{OptionKind, Unit, Value};
        let k = OptionKind::Budget(Unit::ReplicasPerGpu);
        assert_eq!(Value::from_json(k, &serde_json::json!(4))?, Value::Count(4));
        assert_eq!(
            Value::from_json(k, &serde_json::json!("auto"))?,
            Value::Auto
        );
        assert!(Value::from_json(OptionKind::Flag, &serde_json::json!(1)).is_err());
        Ok(())
    }
    #[test]
    fn to_json() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::{Settings, Value};
        let s = Settings::new().with("predictor", Value::Word("noisy".into()))?;
        assert_eq!(s.to_json(), serde_json::json!({"predictor": "noisy"}));
        assert_eq!(Settings::from_json(&s.to_json())?, s);
        assert!(Settings::from_json(&serde_json::json!({"typo": 1})).is_err());
        Ok(())
    }
    #[test]
    fn word() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::{Settings, craft};
        assert_eq!(Settings::new().word(&craft::OBJECTIVE)?, "mean");
        Ok(())
    }
    #[test]
    fn flag() -> Result<(), Box<dyn std::error::Error>> {
        use crate::planners::{Settings, craft};
        assert!(Settings::new().flag(&craft::REFINE)?);
        Ok(())
    }
    #[test]
    fn priced_example0() -> Result<(), Box<dyn std::error::Error>> {
        use crate::data::{hardware, model};
        use crate::judge::cost::Pricing;
        let p = Pricing::new(
            hardware::preset("h100-ib-ndr")?,
            model::preset("deepseek-v3")?,
        );
        let s = crate::planners::Settings::new().priced(Some(p));
        assert_eq!(
            s.pricing().map(|p| p.hardware.name.as_ref()),
            Some("h100-ib-ndr")
        );
        assert!(s.is_empty()); // no option is set
        Ok(())
    }
}
