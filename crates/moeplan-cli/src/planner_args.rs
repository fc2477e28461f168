//! The planners' options as flags: every option of the registry a command
//! reads (`--redundant-experts`, `--replicas-per-gpu`, `--groups`,
//! `--objective`, `--no-refine`, …), made from the one list, so a planner
//! added to the registry brings its flags.

use std::sync::OnceLock;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches};
use moeplan::planners::{self, OptionKind, OptionSpec, Settings, Value};

/// Every registered planner's options as flags — `--redundant-experts`,
/// `--replicas-per-gpu`, `--groups`, `--objective`, `--no-refine`, … —
/// read into [`Settings`]: a planner added to the registry brings its flags.
/// A flag left out is the planner's default (the registry's, the same the
/// JavaScript API and the page use). `USES` says which planners' options a
/// command offers, and whether their budgets (bits of [`uses`]): a command
/// shows only the options it reads.
#[derive(Clone, Debug, Default)]
pub struct PlannerArgs<const USES: u8> {
    pub settings: Settings,
    /// `--objective robust`: a word of the command line, not of CRAFT's
    /// options — the worst case over several traces (`plan` with several
    /// `--trace`); on one trace it is CRAFT's mean.
    pub robust: bool,
}

/// Words the command line adds to a planner option's choices, handled by
/// the commands themselves (not passed to the planner).
fn extra_words(name: &str) -> &'static [&'static str] {
    match name {
        "objective" => &[ROBUST],
        _ => &[],
    }
}

/// `--objective robust`.
pub const ROBUST: &str = "robust";

/// Which planners' options a command's [`PlannerArgs`] offers.
pub mod uses {
    /// Their budgets too (`sweep` walks them itself; `eval` plans none).
    pub const BUDGETS: u8 = 1;
    /// EPLB's and BASE's.
    pub const EPLB: u8 = 2;
    /// CRAFT's.
    pub const CRAFT: u8 = 4;
    /// GRACE-MoE's.
    pub const GRACE: u8 = 8;
    /// Libra's.
    pub const LIBRA: u8 = 16;
    /// Every planner's with budgets: a command that runs any planner.
    pub const ALL: u8 = 31;
}

/// The planner ids of each [`uses`] bit.
const USED_BY: [(u8, &[&str]); 4] = [
    (uses::EPLB, &["eplb", "base"]),
    (uses::CRAFT, &["craft"]),
    (uses::GRACE, &["grace"]),
    (uses::LIBRA, &["libra"]),
];

fn specs(uses_: u8) -> impl Iterator<Item = &'static OptionSpec> {
    let ids: Vec<&str> = USED_BY
        .iter()
        .filter(|(bit, _)| uses_ & bit != 0)
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    let registry = planners::registry();
    planners::all_options().into_iter().filter(move |o| {
        (uses_ & uses::BUDGETS != 0 || !matches!(o.kind, OptionKind::Budget(_)))
            && registry.iter().any(|p| {
                ids.contains(&p.id().as_str()) && p.options().iter().any(|x| x.name == o.name)
            })
    })
}

/// The flag of the planner option `name` (`redundant_experts` →
/// `redundant-experts`, `refine` → `no-refine`).
pub fn flag_for(name: &str) -> &'static str {
    planners::option(name).map_or("?", flag_of)
}

/// An option's flag: `--kebab-case`, `--no-…` for a flag that is on by
/// default. clap wants `'static` names: made once per run, a few bytes.
fn flag_of(o: &OptionSpec) -> &'static str {
    static FLAGS: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    let flags = FLAGS.get_or_init(|| {
        planners::all_options()
            .into_iter()
            .map(|o| {
                let kebab = o.name.replace('_', "-");
                let flag = match (o.kind, &o.default) {
                    (OptionKind::Flag, Value::Flag(true)) => format!("no-{kebab}"),
                    _ => kebab,
                };
                (o.name, &*Box::leak(flag.into_boxed_str()))
            })
            .collect()
    });
    flags
        .iter()
        .find(|(name, _)| *name == o.name)
        .map_or(o.name, |(_, flag)| flag)
}

fn arg_of(o: &'static OptionSpec) -> Arg {
    let takers: Vec<&str> = planners::registry()
        .iter()
        .filter(|p| p.options().iter().any(|x| x.name == o.name))
        .map(|p| p.id().as_str())
        .collect();
    let takers = takers.join(", ");
    let arg = Arg::new(o.name)
        .long(flag_of(o))
        .help_heading("Planner options");
    let kind = o.kind;
    match kind {
        OptionKind::Flag if o.default == Value::Flag(true) => arg
            .action(ArgAction::SetTrue)
            .help(format!(
                "Do not {} [{takers}; on by default]",
                lower_first(o.about)
            ))
            .long_help(format!("Turn off (on by default): {} [{takers}]", o.about)),
        OptionKind::Flag => arg
            .action(ArgAction::SetTrue)
            .help(format!("{} [{takers}; off by default]", o.about)),
        OptionKind::Choice(words) => {
            let extra = extra_words(o.name);
            let about = if extra.is_empty() {
                o.about.to_string()
            } else {
                format!(
                    "{}; robust (plan with several --trace): the worst case over the traces",
                    o.about
                )
            };
            arg.value_name("WORD")
                .help(format!("{about} [{takers}]"))
                .long_help(format!("{about} [{takers}; default: {}]", o.default))
                .value_parser(
                    PossibleValuesParser::new(words.iter().chain(extra).copied()).try_map(
                        move |s| {
                            if extra.contains(&s.as_str()) {
                                Ok(Value::Word(s.into()))
                            } else {
                                Value::parse(kind, &s)
                            }
                        },
                    ),
                )
        }
        OptionKind::Budget(_) | OptionKind::Count | OptionKind::CountOrAuto => arg
            .value_name(if kind == OptionKind::Count {
                "N"
            } else {
                "N|auto"
            })
            .help(format!("{} [{takers}; default: {}]", o.about, o.default))
            .long_help(format!("{} [{takers}; default: {}]", o.about, o.default))
            .value_parser(move |s: &str| Value::parse(kind, s)),
    }
}

impl<const USES: u8> Args for PlannerArgs<USES> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        specs(USES).fold(cmd, |cmd, o| cmd.arg(arg_of(o)))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl<const USES: u8> FromArgMatches for PlannerArgs<USES> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let invalid =
            |e: moeplan::Error| clap::Error::raw(clap::error::ErrorKind::ValueValidation, e);
        let mut settings = Settings::new();
        let mut robust = false;
        for o in specs(USES) {
            let value = match o.kind {
                OptionKind::Flag => match m.try_get_one::<bool>(o.name) {
                    Ok(Some(true)) => Some(Value::Flag(o.default != Value::Flag(true))),
                    _ => None,
                },
                _ => m.try_get_one::<Value>(o.name).ok().flatten().cloned(),
            };
            if let Some(Value::Word(w)) = &value
                && extra_words(o.name).contains(&w.as_ref())
            {
                robust |= w == ROBUST;
                continue;
            }
            if let Some(v) = value {
                settings.set(o.name, v).map_err(invalid)?;
            }
        }
        Ok(PlannerArgs { settings, robust })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// `text` with its first letter in lower case ("Refine …" → "refine …").
fn lower_first(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}
