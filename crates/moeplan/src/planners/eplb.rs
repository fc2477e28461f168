//! EPLB — DeepSeek's Expert Parallelism Load Balancer, ported exactly.
//!
//! The reference is `eplb.py` of the public repository deepseek-ai/EPLB (the
//! copy SGLang and vLLM ship). Given per-layer expert loads it returns, for
//! each physical slot, the logical expert it hosts (`phy2log`) and each
//! expert's copy count (`logcnt`); this port produces the same arrays:
//!
//! - [`balanced_packing`] — greedy: items in descending weight order, each to
//!   the lightest pack that still has room (`n / m` items per pack).
//! - [`replicate_experts`] — each redundant slot goes to the expert with the
//!   highest load per copy.
//! - [`rebalance_experts`] — the hierarchical policy when `groups % nodes ==
//!   0`: (1) pack expert groups onto nodes, (2) replicate within each node,
//!   (3) pack the node's physical experts onto its GPUs. Otherwise the global
//!   policy: the same with one group and one node.
//!
//! Matching the reference on ties needs its arithmetic: loads in `f32` as
//! torch's `weight.float()`, load per copy as an `f32` division, pack weights
//! accumulated in `f32`, a stable descending sort, the first index on argmax
//! ties and the lowest pack index on packing ties. One documented departure:
//! group sums are taken in `f64` and rounded once to `f32`; torch's own
//! reduction order is unspecified, and the two agree whenever the sum is
//! exact in `f32` (every group of counts below 2^24 tokens).
//!
//! Physical slot layout: node-major, then GPU-major; GPU `g` owns the
//! contiguous slots `g·S .. (g+1)·S` where `S = (E + redundant) / GPUs`.
//!
//! Complexity per layer, with `P` physical and `E` logical experts on `D`
//! GPUs and `N` nodes: replication O((P − E) · E / N), packing
//! O(P log P + P · D / N).
//!
//! In the registry: `EplbPlanner` (budget: [`REDUNDANT_EXPERTS`], default
//! [`default_redundant_experts`]) and `BasePlanner` (no replicas); both
//! prepare by summing the loads, so a budget change reruns the whole
//! algorithm, which is fast.

use ndarray::{Array2, ArrayView2};

use super::registry::{
    Needs, OptionKind, OptionSpec, Planned, Planner, PlannerId, PlannerSpec, Prepared, Settings,
    Unit, Value,
};
use super::shared::joint::{REPAIR, repair};
use super::shared::packing::{balanced_packing, replicate_experts};
use crate::data::Workload;
use crate::data::plan::{LayerPlacement, Plan};
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

const NAME: &str = "eplb";

/// Settings of EPLB as engines expose them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EplbConfig {
    /// Extra physical slots per layer in total (SGLang's
    /// `--ep-num-redundant-experts`, vLLM's `num_redundant_experts`).
    pub redundant_experts: usize,
    /// Expert groups of the router (DeepSeek-V3: 8). The hierarchical policy
    /// is used when this is a multiple of the node count.
    pub groups: usize,
}

impl Default for EplbConfig {
    fn default() -> Self {
        EplbConfig {
            redundant_experts: 0,
            groups: 1,
        }
    }
}

/// EPLB's output for every layer, as the reference returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EplbOutput {
    /// `phy2log[l][p]`: logical expert hosted by physical slot `p`.
    pub phy2log: Vec<Vec<usize>>,
    /// `phyrank[l][p]`: which copy of its expert slot `p` holds.
    pub phyrank: Vec<Vec<usize>>,
    /// `logcnt[l][e]`: copies of logical expert `e`.
    pub logcnt: Vec<Vec<usize>>,
}

/// Plans a trace with EPLB on its load summed over all batches.
///
/// ```
/// use moeplan::{
///     LoadTrace, Topology,
///     planners::{EplbConfig, eplb},
/// };
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((1, 2, 8), 5.0), vec![0, 1])?;
/// let cfg = EplbConfig {
///     redundant_experts: 4,
///     groups: 1,
/// };
/// let plan = eplb(&trace, Topology::new(1, 4)?, cfg)?;
/// assert_eq!(plan.summary().replicas, 8);
/// assert_eq!(plan.uniform_slots_per_gpu(), Some(3));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn eplb(trace: &LoadTrace, topology: Topology, config: EplbConfig) -> Result<Plan> {
    eplb_summed(trace.summed().view(), trace.layer_ids(), topology, config)
}

/// [`eplb`] on loads already summed over batches (`layers × experts`).
fn eplb_summed(
    summed: ArrayView2<'_, f64>,
    layer_ids: &[u32],
    topology: Topology,
    config: EplbConfig,
) -> Result<Plan> {
    let e = summed.ncols();
    let slots = e
        .checked_add(config.redundant_experts)
        .ok_or_else(|| Error::planner(NAME, "too many redundant experts"))?;
    let out = rebalance_experts(
        summed,
        slots,
        config.groups,
        topology.nodes(),
        topology.num_gpus(),
    )?;
    let name = if config.redundant_experts == 0 {
        "base"
    } else {
        NAME
    };
    to_plan(&out, layer_ids, e, topology, name)
}

/// The papers' BASE: EPLB's placement with no redundant slots.
///
/// ```
/// use moeplan::{planners::base, LoadTrace, Topology};
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((1, 1, 8), 5.0), vec![0])?;
/// let plan = base(&trace, Topology::new(1, 4)?, 1)?;
/// assert_eq!(plan.summary().replicas, 0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn base(trace: &LoadTrace, topology: Topology, groups: usize) -> Result<Plan> {
    eplb(
        trace,
        topology,
        EplbConfig {
            redundant_experts: 0,
            groups,
        },
    )
}

impl crate::judge::Judge {
    /// BASE's prediction under `rule` on every batch the judge holds: what
    /// a priced plan's speed-up is over
    /// ([`crate::judge::cost::Prediction::compare_with`]), the one
    /// definition every front end uses. BASE is [`base`] at the cluster's
    /// expert `groups`, planned on `planning` (the plans' own planning
    /// batches) — the plan the page's BASE row shows. `None` without
    /// `pricing`.
    ///
    /// ```
    /// use moeplan::judge::{Judge, Rule};
    /// use moeplan::{data::{hardware, model}, synth::generator, Topology, Workload};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let judge = Judge::new(Workload::new(t.clone()), None)?;
    /// let p = judge.priced_on(hardware::preset("h100-ib-ndr")?);
    /// let topology = Topology::new(1, 8)?;
    /// let base = judge.base_prediction(&t, topology, 1, Rule::Even, Some(&p))?.unwrap();
    /// assert!(base.tokens_per_s > 0.0);
    /// assert!(judge.base_prediction(&t, topology, 1, Rule::Even, None)?.is_none());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn base_prediction(
        &self,
        planning: &LoadTrace,
        topology: Topology,
        groups: usize,
        rule: crate::judge::Rule,
        pricing: Option<&crate::judge::cost::Pricing>,
    ) -> Result<Option<crate::judge::cost::Prediction>> {
        let Some(pricing) = pricing else {
            return Ok(None);
        };
        let base = base(planning, topology, groups)?;
        let served = crate::judge::Served::Plan { plan: &base, rule };
        crate::judge::price(self.workload(), served, self.cost(), pricing).map(Some)
    }
}

fn to_plan(
    out: &EplbOutput,
    layer_ids: &[u32],
    num_experts: usize,
    topology: Topology,
    name: &str,
) -> Result<Plan> {
    let d = topology.num_gpus();
    let layers = out
        .phy2log
        .iter()
        .zip(layer_ids)
        .map(|(row, &layer)| {
            let per_gpu = row.len() / d;
            LayerPlacement {
                layer,
                gpus: row
                    .chunks(per_gpu)
                    .map(|c| c.iter().map(|&e| e as u32).collect())
                    .collect(),
            }
        })
        .collect();
    Plan::new(topology, num_experts, layers, name)
}

/// DeepSeek's `rebalance_experts`: `weight` is `layers × logical experts`,
/// `num_replicas` the physical slots per layer (a multiple of `num_gpus`).
///
/// ```
/// use moeplan::planners::rebalance_experts;
/// use ndarray::array;
/// let w = array![[10.0, 1.0, 1.0, 1.0]];
/// let out = rebalance_experts(w.view(), 6, 1, 1, 2)?;
/// assert_eq!(out.logcnt[0], vec![3, 1, 1, 1]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn rebalance_experts(
    weight: ArrayView2<'_, f64>,
    num_replicas: usize,
    num_groups: usize,
    num_nodes: usize,
    num_gpus: usize,
) -> Result<EplbOutput> {
    let (_, e) = weight.dim();
    if num_groups == 0 {
        return Err(Error::planner(
            NAME,
            "the number of expert groups must be at least 1",
        ));
    }
    if num_nodes == 0 || num_gpus == 0 || num_gpus % num_nodes != 0 {
        return Err(Error::planner(
            NAME,
            format!("{num_gpus} GPUs cannot be split over {num_nodes} nodes"),
        ));
    }
    if num_replicas < e {
        return Err(Error::planner(
            NAME,
            format!("{num_replicas} physical slots cannot hold {e} experts"),
        ));
    }
    if num_replicas % num_gpus != 0 {
        let below = (num_replicas / num_gpus * num_gpus).checked_sub(e);
        let above = num_replicas.next_multiple_of(num_gpus) - e;
        let hint = match below {
            Some(b) => format!("{b} or {above}"),
            None => above.to_string(),
        };
        return Err(Error::planner(
            NAME,
            format!(
                "experts + redundant experts ({num_replicas}) must be a multiple of the GPU count \
                 ({num_gpus}); try {hint} redundant experts"
            ),
        ));
    }
    let (groups, nodes) = if num_groups % num_nodes == 0 {
        if e % num_groups != 0 {
            return Err(Error::planner(
                NAME,
                format!("{e} experts cannot be split into {num_groups} equal groups"),
            ));
        }
        (num_groups, num_nodes)
    } else {
        (1, 1)
    };
    let mut out = EplbOutput {
        phy2log: Vec::new(),
        phyrank: Vec::new(),
        logcnt: Vec::new(),
    };
    // torch's weight.float(): every count rounded once to f32.
    let mut w32 = vec![0f32; e];
    for row in weight.outer_iter() {
        for (dst, &src) in w32.iter_mut().zip(row) {
            *dst = src as f32;
        }
        let (p2l, rank, cnt) = hierarchical_layer(&w32, row, num_replicas, groups, nodes, num_gpus);
        out.phy2log.push(p2l);
        out.phyrank.push(rank);
        out.logcnt.push(cnt);
    }
    Ok(out)
}

/// One layer of `rebalance_experts_hierarchical`; preconditions checked by
/// the caller.
fn hierarchical_layer(
    w: &[f32],
    w64: ndarray::ArrayView1<'_, f64>,
    num_phy: usize,
    groups: usize,
    nodes: usize,
    gpus: usize,
) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let e = w.len();
    let group_size = e / groups;
    let groups_per_node = groups / nodes;
    let phy_per_gpu = num_phy / gpus;
    let log_per_node = e / nodes;
    let phy_per_node = num_phy / nodes;

    // Step 1: pack groups onto nodes.
    let tokens_per_group: Vec<f32> = (0..groups)
        .map(|g| {
            w64.iter()
                .skip(g * group_size)
                .take(group_size)
                .sum::<f64>() as f32
        })
        .collect();
    let (gpack, grank) = balanced_packing(&tokens_per_group, nodes);
    let log2mlog: Vec<usize> = (0..e)
        .map(|x| {
            let g = x / group_size;
            (gpack[g] * groups_per_node + grank[g]) * group_size + x % group_size
        })
        .collect();
    let mlog2log = inverse(&log2mlog);

    let mut pphy2log = Vec::with_capacity(num_phy);
    let mut pphyrank = Vec::with_capacity(num_phy);
    let mut mlogcnt_all = Vec::with_capacity(e);
    for n in 0..nodes {
        // Step 2: replicate within the node.
        let tokens_per_mlog: Vec<f32> = (0..log_per_node)
            .map(|k| w[mlog2log[n * log_per_node + k]])
            .collect();
        let (phy2mlog, phyrank, mlogcnt) = replicate_experts(&tokens_per_mlog, phy_per_node);
        // Step 3: pack the node's physical experts onto its GPUs.
        let tokens_per_phy: Vec<f32> = phy2mlog
            .iter()
            .map(|&m| tokens_per_mlog[m] / mlogcnt[m] as f32)
            .collect();
        let (pack, rank) = balanced_packing(&tokens_per_phy, gpus / nodes);
        let phy2pphy: Vec<usize> = pack
            .iter()
            .zip(&rank)
            .map(|(&p, &r)| p * phy_per_gpu + r)
            .collect();
        for &phy in &inverse(&phy2pphy) {
            pphy2log.push(mlog2log[phy2mlog[phy] + n * log_per_node]);
            pphyrank.push(phyrank[phy]);
        }
        mlogcnt_all.extend(mlogcnt);
    }
    let logcnt = log2mlog.iter().map(|&m| mlogcnt_all[m]).collect();
    (pphy2log, pphyrank, logcnt)
}

/// EPLB's id in the registry.
pub const ID: PlannerId = PlannerId::new("eplb");

/// BASE's id in the registry.
pub(crate) const BASE_ID: PlannerId = PlannerId::new("base");

/// EPLB's budget: redundant experts per layer, `auto` =
/// [`default_redundant_experts`].
pub const REDUNDANT_EXPERTS: OptionSpec = OptionSpec {
    name: "redundant_experts",
    about: "EPLB's extra slots per layer in total (SGLang's --ep-num-redundant-experts); \
            auto: one slot per GPU more than the experts need (the smallest k >= GPUs with \
            experts + k a multiple of the GPU count)",
    kind: OptionKind::Budget(Unit::RedundantPerLayer),
    default: Value::Auto,
};

/// The router's expert groups, for the hierarchical policy (BASE and EPLB).
pub const GROUPS: OptionSpec = OptionSpec {
    name: "groups",
    about: "Router expert groups for EPLB's hierarchical policy, used when a multiple of the \
            node count; auto: the model's, as SGLang and vLLM pass it (DeepSeek-V3 / R1: 8, \
            else 1)",
    kind: OptionKind::CountOrAuto,
    default: Value::Auto,
};

/// EPLB's expert groups under `settings` for `trace`: the count given, or
/// for `auto` (the default) the model's: the preset the trace names, else
/// the one group count of the presets of its shape (an SGLang dump of
/// DeepSeek-V3: 8), else 1.
///
/// ```
/// use moeplan::LoadTrace;
/// use moeplan::planners::{Settings, Value, groups};
/// use ndarray::Array3;
/// let t = LoadTrace::new(Array3::from_elem((1, 1, 256), 1.0), vec![0])?
///     .with_model("deepseek-v3");
/// assert_eq!(groups(&Settings::new(), &t)?, 8);
/// let one = Settings::new().with("groups", Value::Count(1))?;
/// assert_eq!(groups(&one, &t)?, 1);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn groups(settings: &Settings, trace: &LoadTrace) -> Result<usize> {
    Ok(settings
        .budget(&GROUPS)?
        .unwrap_or_else(|| crate::data::model::groups_of(trace)))
}

static EPLB_OPTIONS: [OptionSpec; 3] = [REDUNDANT_EXPERTS, GROUPS, REPAIR];
static BASE_OPTIONS: [OptionSpec; 1] = [GROUPS];

/// EPLB's default redundant experts for `experts` on `gpus` GPUs: the
/// smallest `k ≥ gpus` that makes `experts + k` a multiple of `gpus` — every
/// GPU holds one slot more than the experts need (`⌈E / D⌉ + 1`), so at
/// least one replica per GPU per layer. `k = D` when `D` divides `E`. The
/// one definition every front end uses (through [`Prepared::plan`]`(None)`).
///
/// ```
/// use moeplan::planners::default_redundant_experts;
/// assert_eq!(default_redundant_experts(256, 64), 64);
/// assert_eq!(default_redundant_experts(64, 6), 8); // 72 = 6 × 12
/// assert_eq!(default_redundant_experts(60, 8), 12); // 72 = 8 × 9
/// ```
pub fn default_redundant_experts(experts: usize, gpus: usize) -> usize {
    redundant_steps(experts, gpus)
        .find(|&k| k >= gpus)
        .unwrap_or(gpus)
}

/// The redundant-expert counts that keep every GPU's slot count equal, in
/// increasing order: `k_j = j · D − E mod D` for `j = 1, 2, …` — each step
/// one more slot per GPU, the first also rounding the slot count up to a
/// multiple of `D` (the sweep's EPLB points).
///
/// ```
/// use moeplan::planners::redundant_steps;
/// assert_eq!(redundant_steps(64, 6).take(3).collect::<Vec<_>>(), vec![2, 8, 14]);
/// assert_eq!(redundant_steps(256, 64).take(2).collect::<Vec<_>>(), vec![64, 128]);
/// ```
pub fn redundant_steps(experts: usize, gpus: usize) -> impl Iterator<Item = usize> {
    let d = gpus.max(1);
    let rem = experts % d;
    (1usize..).map_while(move |j| j.checked_mul(d).map(|x| x - rem))
}

/// The registry's EPLB.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EplbPlanner;

/// The registry's BASE: EPLB's placement, no replicas.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BasePlanner;

/// Its registry entry, data only ([`crate::planners::SPECS`] lists it).
pub(crate) const SPEC: PlannerSpec = PlannerSpec {
    id: ID,
    display: "EPLB",
    about: "DeepSeek's EPLB (exact port): redundant slots in every layer to the highest load per copy, balanced packing, hierarchical over nodes",
    needs: Needs::Counts,
    options: &EPLB_OPTIONS,
    serves_under: None,
};

impl Planner for EplbPlanner {
    fn spec(&self) -> &'static PlannerSpec {
        &SPEC
    }
    fn prepare(
        &self,
        work: &Workload,
        topology: Topology,
        settings: &Settings,
    ) -> Result<Box<dyn Prepared>> {
        Ok(Box::new(PreparedEplb::new(
            work, topology, settings, false,
        )?))
    }
}

/// BASE's registry entry, data only ([`crate::planners::SPECS`] lists it).
pub(crate) const BASE_SPEC: PlannerSpec = PlannerSpec {
    id: BASE_ID,
    display: "BASE",
    about: "EPLB's placement with no replicas (the papers' BASE)",
    needs: Needs::Counts,
    options: &BASE_OPTIONS,
    serves_under: None,
};

impl Planner for BasePlanner {
    fn spec(&self) -> &'static PlannerSpec {
        &BASE_SPEC
    }
    fn prepare(
        &self,
        work: &Workload,
        topology: Topology,
        settings: &Settings,
    ) -> Result<Box<dyn Prepared>> {
        Ok(Box::new(PreparedEplb::new(work, topology, settings, true)?))
    }
}

/// EPLB or BASE with the loads summed: planning a budget is the whole
/// (fast) algorithm.
#[derive(Debug, Clone)]
struct PreparedEplb {
    summed: Array2<f64>,
    layer_ids: Vec<u32>,
    topology: Topology,
    groups: usize,
    base: bool,
    /// [`REPAIR`]: the joint search on the port's plan (the port itself
    /// stays exact).
    repair: bool,
}

impl PreparedEplb {
    fn new(
        work: &Workload,
        topology: Topology,
        settings: &Settings,
        base: bool,
    ) -> Result<PreparedEplb> {
        let trace = work.trace();
        Ok(PreparedEplb {
            summed: trace.summed(),
            layer_ids: trace.layer_ids().to_vec(),
            topology,
            groups: groups(settings, trace)?,
            base,
            repair: !base && settings.flag(&REPAIR)?,
        })
    }

    fn default_budget(&self) -> usize {
        default_redundant_experts(self.summed.ncols(), self.topology.num_gpus())
    }
}

impl Prepared for PreparedEplb {
    fn plan(&self, budget: Option<usize>) -> Result<Planned> {
        let k = match self.base {
            true => None,
            false => Some(budget.unwrap_or_else(|| self.default_budget())),
        };
        let config = EplbConfig {
            redundant_experts: k.unwrap_or(0),
            groups: self.groups,
        };
        let mut plan = eplb_summed(self.summed.view(), &self.layer_ids, self.topology, config)?;
        if self.repair {
            plan = repair(&plan, self.summed.view())?;
        }
        Ok(Planned {
            plan,
            budget: k,
            predicted: None,
        })
    }

    fn auto_budget(&self) -> Result<Option<usize>> {
        Ok((!self.base).then(|| self.default_budget()))
    }
}

fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}
