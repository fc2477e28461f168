//! Replica selection: which physical copy of its logical expert each
//! (token, k) row goes to.
//!
//! Physical slots are numbered GPU-major as in the plan ([`LayerSlots`]):
//! GPU `g` owns slots `gpu_start[g] .. gpu_start[g + 1]`, so ordering rows by
//! slot orders them by (GPU, slot). The rules are the planner's own
//! ([`moeplan::judge::Rule`]), so the CPU reference here is the model the
//! planner's simulator replays:
//!
//! - **`vllm`** ([`Rule::Vllm`], vLLM's EPLB mapping): the row's flattened
//!   position in its source rank's local batch, `p = local_token · top_k +
//!   k`, picks copy `p mod copies(e)`, copies listed in physical-slot order
//!   (vLLM's `logical_to_physical_map`). The core replays the same rule on
//!   token routes but exposes no per-pair function, so the definition is
//!   shared through `tests/cpu.rs`, which checks this selection against
//!   [`moeplan::judge::simulate`] integer for integer.
//! - **`sglang-static`** ([`Rule::SglangStatic`] with
//!   [`SglangVersion::Nearest`]) and **`sglang-static-v0`**
//!   ([`SglangVersion::SameGpu`], SGLang before `_find_nearest_expert`):
//!   one fixed copy per (source rank, logical expert), the table taken from
//!   [`moeplan::judge::sglang_dispatch_map`] — the core's port of SGLang's
//!   `compute_logical_to_rank_dispatch_physical_map`, with CPython's
//!   `random.Random(42)` walked over every layer of the model. The table of
//!   a layer therefore depends on the plan's layers before it:
//!   [`Selector::for_plan`] and [`Selector::from_plan`] take the whole plan.
//!
//! - **`grace-weighted`** ([`Rule::GraceWeighted`], GRACE-MoE's Algorithm 3)
//!   and **`grace-topology`** ([`Rule::GraceTopology`], its Algorithm 4):
//!   each (source rank, expert) splits its rows over copies in fixed
//!   fractions, weighted by `1 / predicted load` of the copy's GPU, within
//!   locality tiers for the second. The fractions are the core's own
//!   ([`moeplan::judge::RouteShares`]), from each layer's expert loads over
//!   the whole workload, as the simulator takes them.
//! - **`libra`** ([`Rule::Libra`], Libra's Algorithm 2): per batch, the
//!   core's [`moeplan::judge::Rebalancer`] on this batch's (source rank,
//!   expert) counts; a rank's rows of an expert it hosts stay home, the
//!   others split over the GPUs serving the expert's remote rows in
//!   proportion to what each serves
//!   ([`moeplan::judge::Rebalancer::route_one`]).
//!
//! The simulator replays GRACE's and Libra's rules by their expectation,
//! in fractions of a pair; an engine sends whole rows. [`select_cpu`]
//! realises each (source rank, expert)'s `n` rows by **largest remainder**:
//! the entry with share `x_i` gets `⌊x_i⌋` rows, and the `n − Σ⌊x_i⌋` rows
//! left go one each to the largest remainders (ties to the earlier entry);
//! the group's rows then fill the entries in token order. So every entry is
//! within one row of the simulator's share, and a GPU within one row per
//! (source, expert, copy) it serves. A GPU listed twice for a group (two
//! copies there) fills its copies in slot order. These selections are
//! computed on the host and uploaded ([`Selector::on_host`]): Libra's
//! depends on the whole batch's counts, as in the paper's design, where
//! the rebalancer runs beside the router before the all-to-all.
//!
//! Source ranks are the GPUs: token `t` of `n` comes from rank `⌊t·D/n⌋`.

use moeplan::judge::{
    Rebalancer, RemoteStart, RouteShares, Rule, SglangVersion, sglang_dispatch_map,
};
use moeplan::{LayerPlacement, LoadTrace, Plan, Topology};

use crate::error::{Error, Result};
use crate::routing::{Routing, rank_first_token, source_rank};

/// One layer's placement, flattened GPU-major, with each logical expert's
/// copies in physical-slot order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerSlots {
    /// Logical experts.
    pub num_experts: usize,
    /// GPUs per node (for `sglang-static`'s same-node step).
    pub gpus_per_node: usize,
    /// GPU `g` owns slots `gpu_start[g] .. gpu_start[g + 1]` (`D + 1` entries).
    pub gpu_start: Vec<u32>,
    /// Logical expert of every slot.
    pub slot_expert: Vec<u32>,
    /// GPU of every slot.
    pub slot_gpu: Vec<u32>,
    /// Copies of expert `e` are `copy_slots[copy_start[e] .. copy_start[e + 1]]`
    /// (`E + 1` entries).
    pub copy_start: Vec<u32>,
    /// Slots of every expert's copies, ascending within an expert.
    pub copy_slots: Vec<u32>,
}

impl LayerSlots {
    /// Flattens `gpus[g]` (the experts GPU `g` hosts, in slot order).
    ///
    /// ```
    /// use moeplan_cuda::select::LayerSlots;
    /// let s = LayerSlots::new(&[vec![0, 1], vec![2, 0]], 3, 2)?;
    /// assert_eq!(s.copies(0), &[0, 3]);
    /// assert!(LayerSlots::new(&[vec![0], vec![0]], 2, 1).is_err()); // expert 1 has no copy
    /// # Ok::<(), moeplan_cuda::Error>(())
    /// ```
    pub fn new(gpus: &[Vec<u32>], num_experts: usize, gpus_per_node: usize) -> Result<Self> {
        if gpus.is_empty() || gpus_per_node == 0 || num_experts == 0 {
            return Err(Error::Argument(
                "a layer needs GPUs, GPUs per node and experts".into(),
            ));
        }
        let total: usize = gpus.iter().map(Vec::len).sum();
        if total > u32::MAX as usize / 2 {
            return Err(Error::Argument(format!("{total} slots is too many")));
        }
        let mut gpu_start = Vec::with_capacity(gpus.len() + 1);
        let mut slot_expert = Vec::with_capacity(total);
        let mut slot_gpu = Vec::with_capacity(total);
        gpu_start.push(0u32);
        for (g, list) in gpus.iter().enumerate() {
            for &e in list {
                if e as usize >= num_experts {
                    return Err(Error::Argument(format!(
                        "GPU {g} hosts expert {e}, out of range (0..{num_experts})"
                    )));
                }
                slot_expert.push(e);
                slot_gpu.push(g as u32);
            }
            gpu_start.push(slot_expert.len() as u32);
        }
        let mut copy_start = vec![0u32; num_experts + 1];
        for &e in &slot_expert {
            copy_start[e as usize + 1] += 1;
        }
        if let Some(e) = (0..num_experts).find(|&e| copy_start[e + 1] == 0) {
            return Err(Error::Argument(format!(
                "expert {e} has no copy on any GPU"
            )));
        }
        for e in 0..num_experts {
            copy_start[e + 1] += copy_start[e];
        }
        let mut cursor = copy_start.clone();
        let mut copy_slots = vec![0u32; total];
        for (s, &e) in slot_expert.iter().enumerate() {
            copy_slots[cursor[e as usize] as usize] = s as u32;
            cursor[e as usize] += 1;
        }
        Ok(LayerSlots {
            num_experts,
            gpus_per_node,
            gpu_start,
            slot_expert,
            slot_gpu,
            copy_start,
            copy_slots,
        })
    }

    /// Layer index `layer` of `plan`.
    pub fn from_plan(plan: &moeplan::Plan, layer: usize) -> Result<Self> {
        let lp = plan.layers().get(layer).ok_or_else(|| {
            Error::Argument(format!(
                "layer index {layer} is outside the plan's {} layers",
                plan.layers().len()
            ))
        })?;
        LayerSlots::new(
            &lp.gpus,
            plan.num_experts(),
            plan.topology().gpus_per_node(),
        )
    }

    /// This layer as a one-layer core [`Plan`] (layer id 0) on `D / G`
    /// nodes of `G = gpus_per_node` GPUs; `D` must be a multiple of `G`.
    ///
    /// ```
    /// use moeplan_cuda::select::LayerSlots;
    /// let s = LayerSlots::new(&[vec![0, 1], vec![2, 0]], 3, 1)?;
    /// let p = s.to_plan()?;
    /// assert_eq!((p.topology().nodes(), p.layers()[0].gpus[1].clone()), (2, vec![2, 0]));
    /// assert_eq!(LayerSlots::from_plan(&p, 0)?, s);
    /// # Ok::<(), moeplan_cuda::Error>(())
    /// ```
    pub fn to_plan(&self) -> Result<Plan> {
        let (d, gpn) = (self.num_gpus(), self.gpus_per_node);
        if d % gpn != 0 {
            return Err(Error::Argument(format!(
                "{d} GPUs do not make whole nodes of {gpn}"
            )));
        }
        let gpus = (0..d)
            .map(|g| self.slot_expert[self.gpu_slots(g)].to_vec())
            .collect();
        Ok(Plan::new(
            Topology::new(d / gpn, gpn)?,
            self.num_experts,
            vec![LayerPlacement { layer: 0, gpus }],
            "layer",
        )?)
    }

    /// GPUs (also the number of source ranks).
    pub fn num_gpus(&self) -> usize {
        self.gpu_start.len() - 1
    }

    /// Physical slots in all.
    pub fn num_slots(&self) -> usize {
        self.slot_expert.len()
    }

    /// Slots of GPU `g`.
    pub fn gpu_slots(&self, g: usize) -> std::ops::Range<usize> {
        self.gpu_start[g] as usize..self.gpu_start[g + 1] as usize
    }

    /// Slots holding expert `e`, ascending.
    pub fn copies(&self, e: usize) -> &[u32] {
        &self.copy_slots[self.copy_start[e] as usize..self.copy_start[e + 1] as usize]
    }

    /// Node of GPU `g`.
    pub fn node_of(&self, g: usize) -> usize {
        g / self.gpus_per_node
    }
}

/// Whether the GPU runtime realises `rule` as an engine would, row by row:
/// vLLM's rule, SGLang's static rules, GRACE-MoE's two and Libra's
/// rebalancer (remote pairs starting on the engines' even split). The
/// others of the judge's list are not one engine's per-row choice (the even
/// split, local-first, SGLang's dynamic rule, the optimum).
pub fn runs_on_gpu(rule: &Rule) -> bool {
    matches!(
        rule,
        Rule::Vllm
            | Rule::SglangStatic(_)
            | Rule::GraceWeighted
            | Rule::GraceTopology
            | Rule::Libra {
                start: RemoteStart::Even,
                ..
            }
    )
}

/// The rules this crate runs: the judge's one list ([`Rule::ALL`]) filtered
/// by [`runs_on_gpu`], in its order, Libra at the core's default ε.
///
/// ```
/// let names: Vec<String> = moeplan_cuda::select::gpu_rules().map(moeplan_cuda::select::label).collect();
/// assert_eq!(names, ["vllm", "sglang-static", "sglang-static-v0", "grace-weighted", "grace-topology", "libra:5"]);
/// ```
pub fn gpu_rules() -> impl Iterator<Item = Rule> {
    Rule::ALL.into_iter().filter(runs_on_gpu)
}

/// Libra's rebalancer with ε = `tolerance_percent` percent, from the
/// engines' even split.
pub const fn libra(tolerance_percent: u16) -> Rule {
    Rule::Libra {
        tolerance_percent,
        start: RemoteStart::Even,
    }
}

/// Whether the rule weighs copies by the workload's predicted GPU loads
/// (a [`Selector`] for it needs each layer's expert loads).
pub fn needs_loads(rule: Rule) -> bool {
    matches!(rule, Rule::GraceWeighted | Rule::GraceTopology)
}

/// A rule of [`gpu_rules`] by name: the core's name or alias
/// (`sglang-static-v0` for `sglang-static-same-gpu`), `libra` for
/// `libra-rebalance` at the default ε, or `libra:P` with ε = P percent.
///
/// ```
/// use moeplan_cuda::select::{libra, parse_rule};
/// assert_eq!(parse_rule("libra:10")?, libra(10));
/// assert!(parse_rule("libra:x").is_err());
/// assert!(parse_rule("optimal").is_err()); // judged, not run
/// # Ok::<(), moeplan_cuda::Error>(())
/// ```
pub fn parse_rule(s: &str) -> Result<Rule> {
    let unknown = || {
        let names: Vec<String> = gpu_rules().map(label).collect();
        Error::Argument(format!(
            "unknown dispatch rule {s:?}; known: {}, libra:P (ε = P percent, 0..=1000)",
            names.join(", ")
        ))
    };
    if let Some(p) = s.strip_prefix("libra:") {
        let tolerance_percent: u16 = p.parse().map_err(|_| unknown())?;
        if tolerance_percent > 1000 {
            return Err(unknown());
        }
        return Ok(libra(tolerance_percent));
    }
    let name = if s == "libra" { "libra-rebalance" } else { s };
    Rule::from_name(name)
        .ok()
        .filter(runs_on_gpu)
        .ok_or_else(unknown)
}

/// How this crate's reports name `rule`: the core's name, except
/// `sglang-static-v0` for SGLang's older static rule and `libra:P` with
/// Libra's ε, as [`parse_rule`] reads them back.
pub fn label(rule: Rule) -> String {
    match rule {
        Rule::SglangStatic(SglangVersion::SameGpu) => "sglang-static-v0".into(),
        Rule::Libra {
            tolerance_percent, ..
        } => format!("libra:{tolerance_percent}"),
        other => other.name().into(),
    }
}

/// The error for a rule [`runs_on_gpu`] refuses.
fn not_run(rule: Rule) -> Error {
    Error::Argument(format!(
        "dispatch rule {} is judged by the simulator, not run on the GPU",
        rule.name()
    ))
}

/// Each layer's expert loads over the whole workload, `[layer][expert]`:
/// the trace's counts summed over its batches, in batch order — what the
/// simulator gives GRACE's rules to predict GPU loads from
/// ([`moeplan::judge::predicted_loads`]).
///
/// ```
/// use moeplan::{synth::generator, data::model};
/// use moeplan_cuda::select::workload_loads;
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 3))?;
/// let loads = workload_loads(&trace);
/// assert_eq!((loads.len(), loads[0].len()), (trace.num_layers(), trace.num_experts()));
/// let sum: f64 = (0..3).map(|b| trace.counts()[[b, 0, 5]]).sum();
/// assert_eq!(loads[0][5], sum);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn workload_loads(trace: &LoadTrace) -> Vec<Vec<f64>> {
    // The simulator's own sum (`sum_axis` over batches), so GRACE's
    // weights here are its weights to the bit.
    trace
        .summed()
        .outer_iter()
        .map(|row| row.to_vec())
        .collect()
}

/// What the simulator gives GRACE's rules for `plan` replaying `trace`:
/// the loads the plan was planned on ([`Plan::profile`]) when it records
/// them, else the trace's own ([`workload_loads`]).
pub fn plan_loads(plan: &Plan, trace: &LoadTrace) -> Vec<Vec<f64>> {
    match plan.profile() {
        Some(p) => p.outer_iter().map(|row| row.to_vec()).collect(),
        None => workload_loads(trace),
    }
}

/// A rule made ready for one layer: what the selection kernels read.
#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    /// vLLM's rule needs only the copies ([`LayerSlots::copies`]).
    Vllm,
    /// A physical slot per (source rank, logical expert), `D × E` row-major.
    Table(Vec<u32>),
    /// GRACE's rules: the core's fixed fractions per (source rank,
    /// expert), realised per batch in whole rows.
    Shares(RouteShares),
    /// Libra's rebalancer, solved per batch on the layer's placement.
    Libra {
        /// The layer's placement.
        layer: LayerPlacement,
        /// ε in percent of the mean load.
        tolerance_percent: u16,
    },
}

impl Selector {
    /// `rule` for every layer of `plan`, in the plan's layer order. For the
    /// SGLang rules this is the core's [`sglang_dispatch_map`], computed
    /// once for the whole plan (cost: one walk of SGLang's loop over the
    /// model's layers). GRACE's rules need `loads[l]`, layer index `l`'s
    /// expert loads over the workload ([`workload_loads`]); the other rules
    /// ignore `loads` (pass `&[]`).
    ///
    /// ```
    /// use moeplan::{LayerPlacement, Plan, Topology};
    /// use moeplan::judge::{Rule, SglangVersion};
    /// use moeplan_cuda::select::Selector;
    /// // 2 nodes × 2 GPUs; expert 0 on GPUs 0 and 3, expert 1 on GPU 1
    /// let layer = LayerPlacement { layer: 0, gpus: vec![vec![0], vec![1], vec![], vec![0]] };
    /// let plan = Plan::new(Topology::new(2, 2)?, 2, vec![layer], "by-hand")?;
    /// let Selector::Table(t) = &Selector::for_plan(Rule::SglangStatic(SglangVersion::Nearest), &plan, &[])?[0] else { panic!() };
    /// let e0: Vec<u32> = (0..4).map(|r| t[r * 2]).collect();
    /// assert_eq!(e0, [0, 0, 2, 2]); // own GPU (slots 0 and 2), else same node
    /// assert!(Selector::for_plan(Rule::GraceTopology, &plan, &[]).is_err()); // no loads
    /// assert!(Selector::for_plan(Rule::GraceTopology, &plan, &[vec![3.0, 1.0]]).is_ok());
    /// # Ok::<(), moeplan_cuda::Error>(())
    /// ```
    pub fn for_plan(rule: Rule, plan: &Plan, loads: &[Vec<f64>]) -> Result<Vec<Selector>> {
        let layers = plan.layers();
        check_loads(rule, layers.len(), loads)?;
        Ok(match rule {
            Rule::Vllm => vec![Selector::Vllm; layers.len()],
            Rule::SglangStatic(v) => sglang_dispatch_map(plan, v)?
                .into_iter()
                .map(Selector::Table)
                .collect(),
            Rule::GraceWeighted | Rule::GraceTopology => layers
                .iter()
                .zip(loads)
                .map(|(lp, l)| grace_shares(rule, lp, plan, l))
                .collect::<Result<_>>()?,
            Rule::Libra {
                tolerance_percent,
                start: RemoteStart::Even,
            } => layers
                .iter()
                .map(|lp| Selector::Libra {
                    layer: lp.clone(),
                    tolerance_percent,
                })
                .collect(),
            other => return Err(not_run(other)),
        })
    }

    /// `rule` for layer index `layer` of `plan` (the SGLang table depends
    /// on the layers before it, so the whole plan is needed); `loads` as
    /// in [`Selector::for_plan`].
    pub fn from_plan(
        rule: Rule,
        plan: &Plan,
        layer: usize,
        loads: &[Vec<f64>],
    ) -> Result<Selector> {
        let n = plan.layers().len();
        if layer >= n {
            return Err(Error::Argument(format!(
                "layer index {layer} is outside the plan's {n} layers"
            )));
        }
        Ok(match rule {
            Rule::Vllm => Selector::Vllm,
            Rule::SglangStatic(_) => Selector::for_plan(rule, plan, loads)?.swap_remove(layer),
            Rule::GraceWeighted | Rule::GraceTopology => {
                check_loads(rule, n, loads)?;
                grace_shares(rule, &plan.layers()[layer], plan, &loads[layer])?
            }
            Rule::Libra {
                tolerance_percent,
                start: RemoteStart::Even,
            } => Selector::Libra {
                layer: plan.layers()[layer].clone(),
                tolerance_percent,
            },
            other => return Err(not_run(other)),
        })
    }

    /// `rule` for `slots` taken as the only layer of a model (layer id 0,
    /// no layers before it): what [`Selector::from_plan`] gives for
    /// [`LayerSlots::to_plan`]. `loads`: the layer's expert loads, for
    /// GRACE's rules (ignored by the others).
    pub fn single_layer(rule: Rule, slots: &LayerSlots, loads: &[f64]) -> Result<Selector> {
        match rule {
            Rule::Vllm => Ok(Selector::Vllm),
            _ => Selector::from_plan(rule, &slots.to_plan()?, 0, &[loads.to_vec()]),
        }
    }

    /// Whether the selection is realised on the host and uploaded
    /// (GRACE's and Libra's: whole-row realisations of per-group
    /// fractions), rather than computed by a selection kernel.
    pub fn on_host(&self) -> bool {
        matches!(self, Selector::Shares(_) | Selector::Libra { .. })
    }
}

/// GRACE's rules need one row of expert loads per layer of the plan.
fn check_loads(rule: Rule, layers: usize, loads: &[Vec<f64>]) -> Result<()> {
    if needs_loads(rule) && loads.len() != layers {
        return Err(Error::Argument(format!(
            "dispatch rule {} needs the expert loads of each of the plan's {layers} layers, got {}",
            label(rule),
            loads.len()
        )));
    }
    Ok(())
}

fn grace_shares(
    rule: Rule,
    layer: &LayerPlacement,
    plan: &Plan,
    loads: &[f64],
) -> Result<Selector> {
    if loads.len() != plan.num_experts() {
        return Err(Error::Argument(format!(
            "layer {}: {} expert loads for a plan of {} experts",
            layer.layer,
            loads.len(),
            plan.num_experts()
        )));
    }
    Ok(Selector::Shares(RouteShares::new(
        rule,
        layer,
        plan.topology(),
        loads,
    )?))
}

/// The physical slot of every (token, k) row: the CPU reference of the
/// selection kernels, and for GRACE's and Libra's rules the host-side
/// selection itself (see the module doc for the whole-row realisation).
///
/// ```
/// use moeplan_cuda::routing::Routing;
/// use moeplan_cuda::select::{select_cpu, LayerSlots, Selector};
/// // expert 0 has copies in slots 0 and 2; one rank, top-2
/// let s = LayerSlots::new(&[vec![0, 1, 0]], 2, 1)?;
/// let r = Routing::new(2, 2, vec![0, 1, 1, 0], vec![0.5; 4])?;
/// // positions 0..4: expert 0 at p = 0 → copy 0 (slot 0), at p = 3 → copy 1 (slot 2)
/// assert_eq!(select_cpu(&r, &s, &Selector::Vllm)?, [0, 1, 1, 2]);
/// # Ok::<(), moeplan_cuda::Error>(())
/// ```
pub fn select_cpu(routing: &Routing, slots: &LayerSlots, selector: &Selector) -> Result<Vec<u32>> {
    let (n, k) = (routing.tokens, routing.top_k);
    let d = slots.num_gpus();
    let e_n = slots.num_experts;
    if let Some(&bad) = routing.ids.iter().find(|&&e| e as usize >= e_n) {
        return Err(Error::Argument(format!(
            "routing names expert {bad}, the layer has {e_n}"
        )));
    }
    match selector {
        Selector::Vllm | Selector::Table(_) => {}
        Selector::Shares(sh) => {
            if sh.num_experts() != e_n || sh.num_sources() != d {
                return Err(Error::Argument(format!(
                    "GRACE shares for {} ranks × {} experts, the layer has {d} × {e_n}",
                    sh.num_sources(),
                    sh.num_experts()
                )));
            }
            return realise(routing, slots, |r, e, count, out| {
                out.extend(sh.shares(r, e).map(|(g, f)| (g, count as f64 * f)));
            });
        }
        Selector::Libra {
            layer,
            tolerance_percent,
        } => {
            let same = layer.gpus.len() == d
                && (0..d).all(|g| layer.gpus[g][..] == slots.slot_expert[slots.gpu_slots(g)]);
            if !same {
                return Err(Error::Argument(format!(
                    "Libra's selector is for layer {}, not this placement",
                    layer.layer
                )));
            }
            let mut rebalancer = Rebalancer::new(layer, e_n)?;
            let mut src = vec![0.0f64; d * e_n];
            for (i, &e) in routing.ids.iter().enumerate() {
                src[source_rank(i / k, n, d) * e_n + e as usize] += 1.0;
            }
            rebalancer.solve(&src, f64::from(*tolerance_percent) / 100.0)?;
            return realise(routing, slots, |r, e, count, out| {
                rebalancer.route_one(r, e, count as f64, |g, x| out.push((g as u32, x)));
            });
        }
    }
    if let Selector::Table(t) = selector {
        if t.len() != d * e_n {
            return Err(Error::Argument(format!(
                "dispatch table has {} entries, {d} ranks × {e_n} experts need {}",
                t.len(),
                d * e_n
            )));
        }
    }
    let mut phys = Vec::with_capacity(n * k);
    for t in 0..n {
        let r = source_rank(t, n, d);
        let local = t - rank_first_token(r, n, d);
        for kk in 0..k {
            let e = routing.ids[t * k + kk] as usize;
            let s = match selector {
                Selector::Table(table) => table[r * e_n + e],
                _ => {
                    let c = slots.copies(e);
                    c[(local * k + kk) % c.len()]
                }
            };
            phys.push(s);
        }
    }
    Ok(phys)
}

/// Whole rows for shares `x_i` of `n` rows: `⌊x_i⌋` each, then one more to
/// each of the `n − Σ⌊x_i⌋` largest remainders (ties to the earlier
/// entry). Always sums to `n`, whatever the shares (non-finite or negative
/// ones count as 0; a deficit beyond one per entry goes round again).
///
/// ```
/// use moeplan_cuda::select::largest_remainder;
/// assert_eq!(largest_remainder(&[2.5, 1.25, 1.25], 5), [3, 1, 1]);
/// assert_eq!(largest_remainder(&[1.5, 1.5], 3), [2, 1]); // tie: the earlier entry
/// assert_eq!(largest_remainder(&[0.999_999_999_999_999_9, 2.000_000_000_000_000_4], 3), [1, 2]);
/// ```
pub fn largest_remainder(shares: &[f64], n: u64) -> Vec<u64> {
    let clean = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    let mut rows: Vec<u64> = shares.iter().map(|&x| clean(x).floor() as u64).collect();
    let mut total: u64 = rows.iter().fold(0u64, |a, &r| a.saturating_add(r));
    // Only rounding far beyond f64's can overshoot; take from the end.
    for r in rows.iter_mut().rev() {
        if total <= n {
            break;
        }
        let cut = (*r).min(total - n);
        *r -= cut;
        total -= cut;
    }
    if rows.is_empty() || total == n {
        return rows;
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let rem = |i: usize| clean(shares[i]) - clean(shares[i]).floor();
    order.sort_by(|&a, &b| rem(b).total_cmp(&rem(a)).then(a.cmp(&b)));
    let left = n - total;
    let len = rows.len() as u64;
    for (j, &i) in order.iter().enumerate() {
        let j = j as u64;
        rows[i] += left / len + u64::from(j < left % len);
    }
    rows
}

/// Realises per-(source rank, expert) shares in whole rows:
/// `shares_of(r, e, rows, out)` lists (GPU, share of `rows`) for the
/// group's `rows` rows; entries become slots (a GPU listed again takes its
/// next copy of the expert, in slot order), [`largest_remainder`] sizes
/// them, and the group's rows fill them in token order.
fn realise(
    routing: &Routing,
    slots: &LayerSlots,
    mut shares_of: impl FnMut(usize, usize, u64, &mut Vec<(u32, f64)>),
) -> Result<Vec<u32>> {
    let (n, k) = (routing.tokens, routing.top_k);
    let (d, e_n) = (slots.num_gpus(), slots.num_experts);
    let group = |i: usize| source_rank(i / k, n, d) * e_n + routing.ids[i] as usize;
    let mut count = vec![0u64; d * e_n];
    for i in 0..routing.ids.len() {
        count[group(i)] += 1;
    }
    let mut q_start = Vec::with_capacity(d * e_n + 1);
    let (mut q_slot, mut q_rows) = (Vec::new(), Vec::new());
    let mut entries = Vec::new();
    let mut on_gpu: Vec<u32> = Vec::new();
    q_start.push(0usize);
    for (gi, &c) in count.iter().enumerate() {
        if c > 0 {
            let (r, e) = (gi / e_n, gi % e_n);
            entries.clear();
            shares_of(r, e, c, &mut entries);
            if entries.is_empty() {
                return Err(Error::Argument(format!(
                    "rank {r}'s rows of expert {e} have nowhere to go"
                )));
            }
            let shares: Vec<f64> = entries.iter().map(|&(_, x)| x).collect();
            let rows = largest_remainder(&shares, c);
            for (j, &(g, _)) in entries.iter().enumerate() {
                let nth = entries[..j].iter().filter(|&&(h, _)| h == g).count();
                on_gpu.clear();
                on_gpu.extend(
                    slots
                        .copies(e)
                        .iter()
                        .copied()
                        .filter(|&s| slots.slot_gpu[s as usize] == g),
                );
                if on_gpu.is_empty() {
                    return Err(Error::Argument(format!(
                        "rank {r}'s rows of expert {e} are sent to GPU {g}, which holds no copy"
                    )));
                }
                q_slot.push(on_gpu[nth % on_gpu.len()]);
                q_rows.push(rows[j]);
            }
        }
        q_start.push(q_slot.len());
    }
    // Per group: the entry being filled and the rows it has.
    let mut cursor = vec![(0usize, 0u64); d * e_n];
    let mut phys = Vec::with_capacity(routing.ids.len());
    for i in 0..routing.ids.len() {
        let gi = group(i);
        let (entry, used) = &mut cursor[gi];
        loop {
            let at = q_start[gi] + *entry;
            if at >= q_start[gi + 1] {
                return Err(Error::Argument(format!(
                    "the whole-row split of group {gi} ran out of rows (an internal error)"
                )));
            }
            if *used < q_rows[at] {
                *used += 1;
                phys.push(q_slot[at]);
                break;
            }
            *entry += 1;
            *used = 0;
        }
    }
    Ok(phys)
}
