//! GRACE-MoE (from the GRACE-MoE paper): affinity grouping
//! (§4.1, Algorithms 1–2), skew-driven replication (§4.2, Eq. 2) and
//! locality-aware routing (§4.3, Algorithms 3–4, as dispatch rules of the
//! simulator, not here).
//!
//! Per MoE layer, [`Grace::prepare`]:
//! 1. [`affinity`](affinity::affinity): `A[i][j]` = tokens that chose both
//!    `i` and `j`, from the workload's token routes. O(T · k²).
//! 2. [`spectral_clusters`](spectral::spectral_clusters) of `A` into the `N`
//!    nodes (fully non-uniform), then, for each node, of its experts into
//!    its `G` GPUs (memoised by the node's members, so the ratios below
//!    share it). O(n³) per clustering.
//! 3. For every ratio of [`RATIOS`]: the
//!    [`hierarchical_grouping`](grouping::hierarchical_grouping) (Algorithm
//!    2 within each node) and its `(S(r), U(r))` point (Eq. 1); `r` at the
//!    curve's [`grouping::knee`], or the one asked for. O(P · n²).
//! 4. [`replication::replicate`] (Eq. 2) on the chosen groups.
//!
//! [`Grace::plan`] assembles the groups, with the replicas when
//! [`REPLICATION`] is on: cheap. GRACE has no replica budget — Eq. 2
//! decides — so its plans have none and the page's slider leaves it be.
//!
//! **Recorded affinity.** Without token routes, a workload may carry the
//! affinity as the engine counted it ([`Workload::with_affinity`]:
//! TensorRT-LLM's co-occurrence counts, the same matrices step 1 counts);
//! step 1 is then skipped and [`Prepared::notes`] says where `A` came from.
//!
//! **Counts only.** Per-batch counts say how many tokens chose each expert,
//! not which experts chose together, so they carry no affinity. With counts
//! only — no token routes, no recorded affinity — (and in a layer with no
//! co-activation at all: top-1 routing, or with fewer experts than GPUs)
//! the grouping falls back to load only —
//! [`grouping::load_grouping`]: heaviest expert first to the
//! lightest GPU with room, `⌊n / D⌋` or `⌈n / D⌉` experts each — and
//! replication still follows Eq. 2. [`Prepared::notes`] says so, for the
//! front ends to show.

pub(crate) mod affinity;
pub(crate) mod analysis;
pub(crate) mod grouping;
pub(crate) mod replication;
pub(crate) mod spectral;

use serde::Serialize;
use std::borrow::Cow;

use self::grouping::{RatioPoint, knee, load_grouping, size_bounds};
use self::replication::{Replication, replicate};
use crate::data::Workload;
use crate::data::plan::{LayerPlacement, Plan};
use crate::data::topology::Topology;
use crate::error::{Error, Result};
use crate::planners::registry::{
    Needs, OptionKind, OptionSpec, Planned, Planner, PlannerId, PlannerSpec, Prepared, Settings,
    Value,
};
use crate::planners::shared::layers::map_layers;

pub use self::analysis::GraceAnalysis;
pub(crate) use self::grouping::RATIOS;

const NAME: &str = "grace";

/// The seed of every spectral clustering (k-means++): plans are
/// reproducible, and no other planner takes a seed.
pub(crate) const SEED: u64 = 0;

/// How the non-uniformity ratio `r` is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Ratio {
    /// Per layer, the knee of the `(S(r), U(r))` curve.
    #[default]
    Auto,
    /// This `r` in every layer.
    Fixed(f64),
}

/// GRACE's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraceOptions {
    /// The non-uniformity ratio.
    pub ratio: Ratio,
    /// Whether plans carry Eq. 2's replicas.
    pub replication: bool,
}

impl Default for GraceOptions {
    fn default() -> Self {
        GraceOptions {
            ratio: Ratio::Auto,
            replication: true,
        }
    }
}

/// One layer as GRACE grouped it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerGrouping {
    /// The model's layer id.
    pub layer: u32,
    /// `groups[g]`: the experts GPU `g` hosts as primaries (ascending).
    pub groups: Vec<Vec<u32>>,
    /// The ratio used; `None` when grouped by load only.
    pub ratio: Option<f64>,
    /// `(S(r), U(r))` at each of `RATIOS` (and the asked-for ratio if it
    /// is not among them), ascending `r`; empty when grouped by load only.
    pub curve: Vec<RatioPoint>,
    /// `U` of the groups used (0 when there is no affinity).
    pub utilisation: f64,
    /// `S` of the groups used.
    pub size_deviation: f64,
    /// Eq. 2's decision on these groups (applied when replication is on).
    pub replication: Replication,
}

/// GRACE with its grouping done: ready to plan.
#[derive(Debug, Clone)]
pub struct Grace {
    topology: Topology,
    num_experts: usize,
    layers: Vec<LayerGrouping>,
    replication: bool,
    notes: Vec<String>,
}

/// How a layer was grouped, before replication.
enum Grouped {
    Affinity {
        groups: Vec<Vec<usize>>,
        ratio: f64,
        curve: Vec<RatioPoint>,
        utilisation: f64,
    },
    /// No co-activation in this layer.
    NoAffinity,
}

/// The ratio asked for (0 for the knee: it adds nothing to [`RATIOS`]).
fn ratio_asked(ratio: Ratio) -> f64 {
    match ratio {
        Ratio::Auto => 0.0,
        Ratio::Fixed(r) => r,
    }
}

/// Steps 1–3 for layer index `l`, the clusterings through `analysis`.
fn group_layer(
    analysis: &GraceAnalysis,
    l: usize,
    topology: Topology,
    ratio: Ratio,
) -> Result<Grouped> {
    let Some(a) = analysis.affinity(l) else {
        return Ok(Grouped::NoAffinity);
    };
    let n = a.nrows();
    let nodes = topology.nodes();
    let node_labels = if nodes > 1 {
        let all: Vec<usize> = (0..n).collect();
        analysis.clusters(l, &all, &|| a.clone(), nodes)?
    } else {
        Vec::new()
    };
    // Algorithm 2 reads A + Aᵀ only: made once per layer, not per ratio, and
    // only when a grouping is not kept. Eq. 1's denominator is the
    // analysis': both are O(n²).
    let sym = grouping::LazySym::new(a);
    let total = analysis.pair_total(l);
    // A node's GPU-level clustering depends on its members and G only: the
    // analysis keeps it for the other ratios and for later clusters.
    let mut cluster = |members: &[usize], sub: &[f64], k: usize| -> Result<Vec<usize>> {
        // No affinity inside the node: nothing for spectral clustering to
        // find, so even runs of experts (Algorithm 2 then fits the sizes).
        if sub.iter().all(|&v| v <= 0.0) {
            return Ok((0..members.len()).map(|i| i * k / members.len()).collect());
        }
        analysis.clusters(l, members, &|| grouping::gather(a, members), k)
    };
    let mut ratios = RATIOS.to_vec();
    if let Ratio::Fixed(r) = ratio {
        if !ratios.contains(&r) {
            ratios.push(r);
            crate::sort::sort_by(&mut ratios, f64::total_cmp);
        }
    }
    let d = topology.num_gpus();
    // A GPU's expert slots are those of the largest ratio tried, so the
    // node level — fully non-uniform up to those slots, §4.1 — is one
    // grouping for every ratio: r shapes only the groups within a node.
    // The analysis keeps it for later clusters with the same slots, and
    // it holds the same experts after a GPU change whenever N · G divides
    // the experts (the node's slots, G · 2E, stay 2 Ne / N).
    let slots = grouping::gpu_capacity(n, topology, grouping::widest_ratio(ratio_asked(ratio)))?;
    // The analysis' affinity is counts: no check.
    let nodes = analysis.node_grouping(l, topology, slots, || {
        grouping::node_grouping(sym.get(), n, topology, slots, &node_labels)
    })?;
    let mut memo = analysis.node_memo(l);
    let mut curve = Vec::with_capacity(ratios.len());
    let mut candidates = Vec::with_capacity(ratios.len());
    for &r in &ratios {
        let groups =
            grouping::within_nodes(&sym, n, topology, r, slots, &nodes, &mut cluster, &mut memo)?;
        curve.push(RatioPoint {
            ratio: r,
            delta: size_bounds(n, d, r)?.delta,
            size_deviation: grouping::size_deviation(&groups),
            utilisation: grouping::utilisation_of_total(a, &groups, total),
        });
        candidates.push(groups);
    }
    let pick = match ratio {
        Ratio::Auto => knee(&curve).unwrap_or(0),
        Ratio::Fixed(r) => ratios.iter().position(|&x| x == r).unwrap_or(0),
    };
    let groups = candidates
        .into_iter()
        .nth(pick)
        .ok_or_else(|| Error::planner(NAME, "no ratio to choose from"))?;
    let point = curve
        .get(pick)
        .ok_or_else(|| Error::planner(NAME, "no ratio to choose from"))?;
    Ok(Grouped::Affinity {
        groups,
        ratio: point.ratio,
        utilisation: point.utilisation,
        curve,
    })
}

impl Grace {
    /// Groups every layer (affinity and spectral clustering when `work` has
    /// token routes or a recorded affinity, load only otherwise) and decides its replication.
    /// Re-run when the workload or the cluster changes.
    ///
    /// ```
    /// use moeplan::planners::{Grace, GraceOptions};
    /// use moeplan::{Topology, data::Workload, data::model, synth::generator};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let g = Grace::prepare(
    ///     &Workload::new(t),
    ///     Topology::new(1, 8)?,
    ///     &GraceOptions::default(),
    /// )?;
    /// assert_eq!(g.layers()[0].groups.len(), 8);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn prepare(work: &Workload, topology: Topology, options: &GraceOptions) -> Result<Grace> {
        let trace = work.trace();
        let analysis = if trace.num_experts() >= topology.num_gpus() {
            GraceAnalysis::new(work)?
        } else {
            // Grouped by load only: the affinity would go unread.
            GraceAnalysis::new(&Workload::new(trace.clone()))?
        };
        Grace::prepare_with(work, &analysis, topology, options)
    }

    /// [`Grace::prepare`] with the cluster-independent part done: `analysis`
    /// must be [`GraceAnalysis::new`] of `work` (an error when its shape
    /// differs). It keeps every clustering it computes, so the next cluster
    /// reuses them; the plan is the same as [`Grace::prepare`]'s.
    ///
    /// ```
    /// use moeplan::planners::{GraceAnalysis, Grace, GraceOptions};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload, Topology};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let analysis = GraceAnalysis::new(&work)?;
    /// let o = GraceOptions::default();
    /// for (nodes, gpus) in [(2, 4), (1, 8), (2, 4)] {
    ///     let topology = Topology::new(nodes, gpus)?;
    ///     let reused = Grace::prepare_with(&work, &analysis, topology, &o)?;
    ///     assert_eq!(reused.plan()?, Grace::prepare(&work, topology, &o)?.plan()?);
    /// }
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn prepare_with(
        work: &Workload,
        analysis: &GraceAnalysis,
        topology: Topology,
        options: &GraceOptions,
    ) -> Result<Grace> {
        if let Ratio::Fixed(r) = options.ratio {
            size_bounds(1, 1, r)?;
        }
        let trace = work.trace();
        let (n, d) = (trace.num_experts(), topology.num_gpus());
        if !analysis.fits(trace.num_layers(), n) {
            return Err(Error::planner(
                NAME,
                "the affinity analysis is of another workload (its shape differs)",
            ));
        }
        let summed = trace.summed();
        let has_affinity = work.tokens().is_some() || work.affinity().is_some();
        let grouped_by_affinity = has_affinity && n >= d;
        if grouped_by_affinity && !analysis.has_affinity() {
            return Err(Error::planner(
                NAME,
                "the affinity analysis has no affinity but the workload has",
            ));
        }
        let layer_ids = trace.layer_ids();
        let grouped = map_layers(trace.num_layers(), |l| {
            if grouped_by_affinity {
                group_layer(analysis, l, topology, options.ratio)
            } else {
                Ok(Grouped::NoAffinity)
            }
        })?;
        let mut by_load = Vec::new();
        let mut layers = Vec::with_capacity(grouped.len());
        for (l, g) in grouped.into_iter().enumerate() {
            let loads: Vec<f64> = summed.row(l).to_vec();
            let (groups, ratio, curve, utilisation) = match g {
                Grouped::Affinity {
                    groups,
                    ratio,
                    curve,
                    utilisation,
                } => (groups, Some(ratio), curve, utilisation),
                Grouped::NoAffinity => {
                    by_load.push(layer_ids.get(l).copied().unwrap_or(0));
                    (load_grouping(&loads, d), None, Vec::new(), 0.0)
                }
            };
            layers.push(LayerGrouping {
                layer: layer_ids.get(l).copied().unwrap_or(0),
                replication: replicate(&groups, &loads),
                size_deviation: grouping::size_deviation(&groups),
                groups: groups
                    .iter()
                    .map(|g| g.iter().map(|&e| e as u32).collect())
                    .collect(),
                ratio,
                curve,
                utilisation,
            });
        }
        let mut notes = Vec::new();
        if grouped_by_affinity && work.tokens().is_none() {
            notes.push(
                "GRACE: affinity from co-occurrence counts recorded with the trace \
                 (an engine's pair counts), in place of token routes"
                    .to_string(),
            );
        }
        if !has_affinity {
            notes.push(format!(
                "GRACE: this workload has {}, no token routes, so no expert affinity: \
                 grouped by load only (heaviest expert to the lightest GPU with room); \
                 replication still follows Eq. 2",
                work.sources()
            ));
        } else if n < d {
            notes.push(format!(
                "GRACE: {n} experts on {d} GPUs, fewer experts than GPUs: grouped by load only"
            ));
        } else if !by_load.is_empty() {
            let ids: Vec<String> = by_load.iter().map(u32::to_string).collect();
            notes.push(format!(
                "GRACE: no two experts are ever chosen together in layer(s) {}: grouped by load only",
                ids.join(", ")
            ));
        }
        Ok(Grace {
            topology,
            num_experts: n,
            layers,
            replication: options.replication,
            notes,
        })
    }

    /// Every layer's groups, ratio, `(S, U)` curve and replication.
    ///
    /// ```
    /// use moeplan::planners::{Grace, GraceOptions};
    /// use moeplan::{synth::generator, data::model, data::Workload, Topology};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let g = Grace::prepare(&Workload::new(t.clone()), Topology::new(1, 4)?, &GraceOptions::default())?;
    /// assert_eq!(g.layers().len(), t.num_layers());
    /// assert!(g.layers().iter().all(|l| l.ratio.is_none())); // counts only: by load
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn layers(&self) -> &[LayerGrouping] {
        &self.layers
    }

    /// What front ends should say beside the plan (the load-only fallback).
    #[cfg(test)]
    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The plan: each GPU's group, and the hot experts' copies when
    /// replication is on.
    ///
    /// ```
    /// use moeplan::planners::{Grace, GraceOptions};
    /// use moeplan::{synth::generator, data::model, data::Workload, Topology};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let g = Grace::prepare(&Workload::new(t), Topology::new(2, 4)?, &GraceOptions::default())?;
    /// let plan = g.plan()?;
    /// assert_eq!(plan.summary().same_gpu_duplicates, 0);
    /// let added: usize = g.layers().iter().map(|l| l.replication.added()).sum();
    /// assert_eq!(plan.summary().replicas, added);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn plan(&self) -> Result<Plan> {
        let layers = self
            .layers
            .iter()
            .map(|lg| {
                let groups: Vec<Vec<usize>> = lg
                    .groups
                    .iter()
                    .map(|g| g.iter().map(|&e| e as usize).collect())
                    .collect();
                let gpus = if self.replication {
                    lg.replication.apply(&groups)
                } else {
                    lg.groups.clone()
                };
                LayerPlacement {
                    layer: lg.layer,
                    gpus,
                }
            })
            .collect();
        Plan::new(self.topology, self.num_experts, layers, NAME)
    }
}

/// GRACE's id in the registry.
pub const ID: PlannerId = PlannerId::new("grace");

/// The words [`NONUNIFORMITY`] takes: `auto` and [`RATIOS`].
const RATIO_WORDS: [&str; 9] = ["auto", "0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.75", "1"];

/// [`GraceOptions::ratio`]: `auto` (the knee) or one of `RATIOS`.
pub const NONUNIFORMITY: OptionSpec = OptionSpec {
    name: "nonuniformity",
    about: "GRACE's non-uniformity ratio r: within a node of m experts, GPU group sizes within \
            m/G ± max(1, round(m/G·r)), at most 2E (E = experts / GPUs); auto: per layer, the \
            knee of the (S(r), U(r)) curve",
    kind: OptionKind::Choice(&RATIO_WORDS),
    default: Value::Word(Cow::Borrowed("auto")),
};

/// [`GraceOptions::replication`].
pub const REPLICATION: OptionSpec = OptionSpec {
    name: "replication",
    about: "Copy GRACE's heaviest group's hot experts to the least-loaded GPUs, as many \
            copies as the load skew says (Eq. 2); off: grouping only",
    kind: OptionKind::Flag,
    default: Value::Flag(true),
};

static OPTIONS: [OptionSpec; 2] = [NONUNIFORMITY, REPLICATION];

impl GraceOptions {
    /// The options [`Settings`] hold (defaults for those unset).
    ///
    /// ```
    /// use moeplan::planners::{GraceOptions, Ratio};
    /// use moeplan::planners::{Settings, Value};
    /// let s = Settings::new().with("nonuniformity", Value::Word("0.2".into()))?;
    /// assert_eq!(GraceOptions::from_settings(&s)?.ratio, Ratio::Fixed(0.2));
    /// assert!(GraceOptions::from_settings(&s)?.replication);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn from_settings(settings: &Settings) -> Result<GraceOptions> {
        let ratio = match settings.word(&NONUNIFORMITY)? {
            "auto" => Ratio::Auto,
            w => Ratio::Fixed(w.parse::<f64>().map_err(|_| {
                Error::Argument(format!(
                    "nonuniformity: expected auto or a ratio, got {w:?}"
                ))
            })?),
        };
        Ok(GraceOptions {
            ratio,
            replication: settings.flag(&REPLICATION)?,
        })
    }
}

/// The registry's GRACE.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GracePlanner;

/// Its registry entry, data only ([`crate::planners::SPECS`] lists it).
pub(crate) const SPEC: PlannerSpec = PlannerSpec {
    id: ID,
    display: "GRACE",
    about: "GRACE-MoE: experts grouped by co-activation affinity (spectral, fully non-uniform over nodes, \
            within a node sizes within E ± δ), the heaviest group's hot experts replicated by load skew (load-only \
            grouping without token routes)",
    needs: Needs::Counts,
    options: &OPTIONS,
    serves_under: Some(crate::judge::Rule::GraceTopology),
};

impl Planner for GracePlanner {
    fn spec(&self) -> &'static PlannerSpec {
        &SPEC
    }
    fn preparing(&self) -> String {
        "grouping experts by affinity (GRACE)".into()
    }
    fn prepare(
        &self,
        work: &Workload,
        topology: Topology,
        settings: &Settings,
    ) -> Result<Box<dyn Prepared>> {
        let options = GraceOptions::from_settings(settings)?;
        Ok(Box::new(Grace::prepare(work, topology, &options)?))
    }
}

impl Prepared for Grace {
    fn plan(&self, _budget: Option<usize>) -> Result<Planned> {
        Ok(Planned {
            plan: Grace::plan(self)?,
            budget: None,
            predicted: None,
        })
    }

    fn auto_budget(&self) -> Result<Option<usize>> {
        Ok(None)
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn grace_notes_example() {
        let run = || {
            use moeplan::planners::{Grace, GraceOptions};
            use moeplan::{Topology, data::Workload, data::model, synth::generator};
            let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
            let g = Grace::prepare(
                &Workload::new(t),
                Topology::new(1, 4)?,
                &GraceOptions::default(),
            )?;
            assert!(g.notes()[0].contains("grouped by load only"));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
