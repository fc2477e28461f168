//! Where (token, expert) pairs travel: served on their source GPU
//! (`local`), on another GPU of the same node (`intra_node`), or on another
//! node (`cross_node`), and how much the busiest GPU sends and receives.
//!
//! Definitions (per batch `b` and layer `l`, pairs counted once each):
//! - ingress of GPU `g`: pairs served on `g` whose source is another GPU;
//!   egress of GPU `s`: pairs from source `s` served on another GPU. Each
//!   layer's dispatch is one all-to-all, bounded by its busiest GPU, so
//!   [`Traffic::max_ingress`] of a batch is `Σ_l max_g ingress(b, l, g)` and
//!   the overall figure is its mean over batches (likewise egress).
//! - `cross_node_bytes` = cross-node pairs × hidden size × bytes per
//!   activation element. Pairs are not deduplicated per destination (DeepEP
//!   sends a token once per destination node even when several of its
//!   experts live there), so this is an upper bound on the dispatch bytes;
//!   [`Messages`] are the deduplicated count.
//!
//! Token messages ([`Traffic::messages`], token routes only): per (token,
//! layer), the distinct GPUs other than the token's source that serve one
//! of its pairs, and the distinct nodes other than the source's node — a
//! token is sent once per destination GPU, and once per destination node
//! before being spread within it (GRACE-MoE §5.1). Which copy serves a
//! pair is the rule's:
//! - exact where the rule names one GPU per pair: every expert with one
//!   copy (all rules), `sglang-static` (both versions), `vllm` (`p mod c`
//!   on the token positions), the own-GPU tier of `local-first`,
//!   `grace-topology` and `sglang-dynamic`'s nearest pin, `libra-rebalance`
//!   for pairs their source hosts;
//! - otherwise (`even`, `sglang-dynamic`'s draw, `grace-weighted`, the
//!   node and global tiers of `local-first` / `grace-topology`, the pairs
//!   `optimal` and `libra-rebalance` split over copies) a pair goes to copy
//!   GPU `g` with the rule's fraction `p(g)`, read as an independent draw
//!   per pair — what SGLang's dynamic and GRACE's weighted round-robin do —
//!   and the count is its expectation, exact per token: GPU `g` receives
//!   the token with probability `1 − Π_k (1 − p_k(g))`, node `ν` with
//!   `1 − Π_k (1 − Σ_{g ∈ ν} p_k(g))`. By the union bound it never exceeds
//!   the pairs the same fractions send. `optimal` fixes per batch how much
//!   of each expert each GPU serves, not who sends it: its per-source
//!   fractions are the proportional token assignment that reproduces the
//!   matching below exactly (`optimal_dests`); `libra-rebalance`'s are
//!   its own per-source routing.
//!
//! Closed forms under even arrival (each of the `D` GPUs sends `n_e / D` of
//! every expert) for a rule blind to sources, with `T` the layer's pairs,
//! `G` GPUs per node and `load_g` the GPU loads: `local = T / D`,
//! `intra = T (G − 1) / D`, `cross = T (D − G) / D`, `ingress_g = load_g
//! (D − 1) / D`, `egress_g = (T − load_g) / D` (source `g` keeps `load_g / D`
//! of its `T / D`). No per-source loop is needed.
//!
//! `Optimal` fixes how much of each expert each GPU serves, not who sends
//! it; its sources are matched to that split locally first, then within
//! each node, then across nodes — the least traffic that split allows
//! (not the least over all optimal splits).
//!
//! Source: moeplan's own traffic definitions (stated above)
//! and GRACE-MoE's metrics (max ingress / egress) and dispatch (§5.1).
//! Cost: O(D) per (batch, layer) for the closed forms, O(pairs routed)
//! otherwise; messages add O(tokens · top-k · c · m) per (batch, layer)
//! for `c` copies per expert and `m ≤ top-k · c` destinations of a token
//! (nothing at all without token routes), plus O(E · S · c) to tabulate
//! `optimal`'s and `libra-rebalance`'s split.

use serde::Serialize;

use crate::data::topology::Topology;

use super::optimal::MinMax;

/// Traffic over the batches a figure covers: pair counts summed, the
/// busiest GPU's ingress and egress summed over layers and averaged over
/// the batches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Traffic {
    /// (token, expert) pairs in all.
    pub pairs: f64,
    /// Pairs served on their source GPU.
    pub local: f64,
    /// Pairs served on another GPU of the source's node.
    pub intra_node: f64,
    /// Pairs served on another node.
    pub cross_node: f64,
    /// `cross_node × hidden × bytes per activation element`.
    pub cross_node_bytes: f64,
    /// Per batch, `Σ over layers of max over GPUs` of pairs received from
    /// other GPUs; averaged over the batches covered.
    pub max_ingress: f64,
    /// The same for pairs sent to other GPUs.
    pub max_egress: f64,
    /// Token messages (a token sent once per destination GPU / node), when
    /// the workload has token routes; `None` otherwise: counts do not say
    /// which pairs share a token.
    pub messages: Option<Messages>,
}

/// Token messages: what a dispatch that sends a token once per destination
/// moves (GRACE-MoE §5.1: "tokens routed to multiple experts on the same
/// device are transmitted only a single copy"; across nodes once per node,
/// then spread within it). Counted per (token, layer). Exact where the
/// rule sends a pair to one GPU (every single-copy expert, `sglang-static`,
/// `vllm` on token positions, the own-GPU tier of `local-first` and
/// `grace-topology`); where it splits an expert's pairs over copies
/// (`even`, `sglang-dynamic`, `grace-weighted`, the other tiers,
/// `optimal`, `libra-rebalance`), each pair is read as an independent
/// draw with the split's fractions and the count is the expected number
/// of distinct destinations, `Σ_g 1 − Π_k (1 − p_k(g))` per token — never
/// above the pairs the same split sends.
///
/// ```
/// use moeplan::judge::{simulate, CostModel, Rule, Strategy};
/// use moeplan::Workload;
/// use moeplan::{planners::contiguous, TokenTrace, Topology};
/// use ndarray::array;
/// // 4 experts on 2 GPUs (one node each): experts 2 and 3 live on GPU 1
/// let t = TokenTrace::new(4, vec![0], vec![array![[2, 3], [0, 2]]], vec![0, 0])?;
/// let work = Workload::from_tokens(t, 2)?;
/// let plan = contiguous(work.trace(), Topology::new(2, 1)?)?;
/// let r = simulate(&work, &Strategy::fixed(plan, Rule::Even), &CostModel::default())?;
/// let m = r.traffic.messages.unwrap_or_default(); // Some with token routes
/// assert_eq!(r.traffic.cross_node, 3.0); // three pairs leave GPU 0
/// assert_eq!((m.cross_gpu, m.cross_node), (2.0, 2.0)); // two tokens do
/// assert_eq!(m.per_token_cross_node, 1.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Messages {
    /// (token, layer) rows replayed: each token once per layer.
    pub token_layers: f64,
    /// Per (token, layer), distinct GPUs other than the token's source that
    /// serve one of its experts, summed.
    pub cross_gpu: f64,
    /// Per (token, layer), distinct nodes other than the source's node that
    /// serve one of its experts, summed.
    pub cross_node: f64,
    /// `cross_gpu × hidden × bytes per activation element`.
    pub cross_gpu_bytes: f64,
    /// `cross_node × hidden × bytes per activation element`.
    pub cross_node_bytes: f64,
    /// `cross_gpu / token_layers` (0 without tokens).
    pub per_token_cross_gpu: f64,
    /// `cross_node / token_layers` (0 without tokens).
    pub per_token_cross_node: f64,
}

impl Messages {
    /// Adds another tally's counts (bytes and means are left to
    /// [`Messages::finish`]).
    pub(crate) fn add(&mut self, other: &Messages) {
        self.token_layers += other.token_layers;
        self.cross_gpu += other.cross_gpu;
        self.cross_node += other.cross_node;
    }

    /// Bytes from the counts at `bytes_per_token`, and the per-token means.
    pub(crate) fn finish(&mut self, bytes_per_token: f64) {
        self.cross_gpu_bytes = self.cross_gpu * bytes_per_token;
        self.cross_node_bytes = self.cross_node * bytes_per_token;
        let per = |x: f64| {
            if self.token_layers > 0.0 {
                x / self.token_layers
            } else {
                0.0
            }
        };
        self.per_token_cross_gpu = per(self.cross_gpu);
        self.per_token_cross_node = per(self.cross_node);
    }
}

/// One (batch, layer)'s traffic as the replay finds it.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub local: f64,
    pub intra: f64,
    pub cross: f64,
    pub max_ingress: f64,
    pub max_egress: f64,
    pub ingress: Vec<f64>,
    pub egress: Vec<f64>,
    /// Pairs a GPU serves from itself (Optimal's matching).
    pub local_at: Vec<f64>,
    /// The part of `ingress` / `egress` that crosses nodes, per GPU, where
    /// the replay sent pairs one by one (`by_pair`); the closed forms
    /// leave them empty and the cost model takes the layer's cross share.
    pub ingress_cross: Vec<f64>,
    pub egress_cross: Vec<f64>,
    pub by_pair: bool,
    gpus_per_node: usize,
}

impl Tally {
    pub(crate) fn reset(&mut self, topology: Topology) {
        let d = topology.num_gpus();
        self.gpus_per_node = topology.gpus_per_node();
        self.local = 0.0;
        self.intra = 0.0;
        self.cross = 0.0;
        self.max_ingress = 0.0;
        self.max_egress = 0.0;
        for v in [
            &mut self.ingress,
            &mut self.egress,
            &mut self.local_at,
            &mut self.ingress_cross,
            &mut self.egress_cross,
        ] {
            v.clear();
            v.resize(d, 0.0);
        }
        self.by_pair = false;
    }

    /// `amount` pairs from source `s` served on GPU `g`.
    #[inline]
    pub(crate) fn pair(&mut self, s: usize, g: usize, amount: f64) {
        if g == s {
            self.local += amount;
        } else {
            self.by_pair = true;
            self.ingress[g] += amount;
            self.egress[s] += amount;
            if g / self.gpus_per_node == s / self.gpus_per_node {
                self.intra += amount;
            } else {
                self.cross += amount;
                self.ingress_cross[g] += amount;
                self.egress_cross[s] += amount;
            }
        }
    }

    /// Takes the busiest GPUs from the per-GPU tallies.
    pub(crate) fn finish(&mut self) {
        self.max_ingress = super::eval::largest(&self.ingress);
        self.max_egress = super::eval::largest(&self.egress);
    }

    /// The closed form of a source-blind rule under even arrival.
    pub(crate) fn blind_even(&mut self, total: f64, loads: &[f64]) {
        let d = loads.len() as f64;
        let g = self.gpus_per_node as f64;
        self.local = total / d;
        self.intra = total * (g - 1.0) / d;
        self.cross = total * (d - g) / d;
        let (min, max) = loads.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
        self.max_ingress = max * (d - 1.0) / d;
        self.max_egress = if loads.is_empty() {
            0.0
        } else {
            (total - min) / d
        };
        for (g, &x) in loads.iter().enumerate() {
            if let (Some(i), Some(e)) = (self.ingress.get_mut(g), self.egress.get_mut(g)) {
                *i = x * (d - 1.0) / d;
                *e = (total - x) / d;
            }
        }
    }
}

/// What each source sends of each expert, for [`match_split`].
pub(crate) enum Supply<'a> {
    /// Every one of the `D` GPUs sends `n_e / D`.
    Even,
    /// `n[s · E + e]` for sources `s < S`, with per-node sums
    /// `node[ν · E + e]` and per-source totals `sent[s]`.
    Sources {
        n: &'a [f64],
        node: &'a [f64],
        sent: &'a [f64],
    },
}

/// Matches sources to the split the solver found (`loads` its GPU loads):
/// each GPU serves its own source first, then sources of its node, then
/// the rest. Fills `tally`.
pub(crate) fn match_split(
    solver: &MinMax,
    row: &[f64],
    loads: &[f64],
    supply: &Supply<'_>,
    topology: Topology,
    tally: &mut Tally,
) {
    let d = topology.num_gpus();
    let gpn = topology.gpus_per_node();
    let e_n = row.len();
    let total: f64 = row.iter().sum();
    let (mut local, mut intra) = (0.0, 0.0);
    for (e, &n_e) in row.iter().enumerate() {
        if n_e <= 0.0 {
            continue;
        }
        let from = |s: usize| match supply {
            Supply::Even => n_e / d as f64,
            Supply::Sources { n, .. } => n.get(s * e_n + e).copied().unwrap_or(0.0),
        };
        let node_supply = |nu: usize| match supply {
            Supply::Even => n_e * gpn as f64 / d as f64,
            Supply::Sources { node, .. } => node[nu * e_n + e],
        };
        // Targets come GPU-ascending, so each node's are consecutive.
        let mut cur: Option<usize> = None;
        let (mut node_local, mut node_demand) = (0.0, 0.0);
        let flush = |nu: Option<usize>, node_local: f64, node_demand: f64, intra: &mut f64| {
            if let Some(nu) = nu {
                *intra += (node_supply(nu) - node_local).min(node_demand).max(0.0);
            }
        };
        solver.targets(e, row, |g, x| {
            let nu = g / gpn;
            if cur != Some(nu) {
                flush(cur, node_local, node_demand, &mut intra);
                cur = Some(nu);
                node_local = 0.0;
                node_demand = 0.0;
            }
            let l = from(g).min(x);
            tally.local_at[g] += l;
            local += l;
            node_local += l;
            node_demand += x - l;
        });
        flush(cur, node_local, node_demand, &mut intra);
    }
    tally.local = local;
    if topology.nodes() == 1 {
        // Everything not local stays in the one node; say so exactly
        // rather than leave rounding dust in `cross`.
        tally.intra = (total - local).max(0.0);
        tally.cross = 0.0;
    } else {
        tally.intra = intra;
        tally.cross = (total - local - intra).max(0.0);
    }
    for (g, &load) in loads.iter().enumerate().take(d) {
        tally.ingress[g] = load - tally.local_at[g];
        let sent = match supply {
            Supply::Even => total / d as f64,
            Supply::Sources { sent, .. } => sent.get(g).copied().unwrap_or(0.0),
        };
        tally.egress[g] = sent - tally.local_at[g];
    }
    tally.finish();
}

/// Counts one (batch, layer)'s token messages. Each pair of a token names
/// its possible destinations with probabilities (one GPU with 1 for a
/// deterministic rule); pairs draw independently, so GPU `g` receives the
/// token with probability `1 − Π_k (1 − p_k(g))` and node `ν` with
/// `1 − Π_k (1 − Σ_{g ∈ ν} p_k(g))` (a pair goes to one copy, so its
/// chances on one node add up). With probabilities 1 and 0 only this is the
/// exact count of distinct destinations.
#[derive(Debug, Default)]
pub(crate) struct MessageTally {
    pub counts: Messages,
    gpus_per_node: usize,
    /// Per GPU and per node: the chance the current token does not reach
    /// it, valid where its stamp is the current token's (dense, so a pair
    /// finds its entry at once; the one-token lists it replaced were
    /// searched for every pair).
    gpu_miss: Vec<f64>,
    node_miss: Vec<f64>,
    gpu_stamp: Vec<u32>,
    node_stamp: Vec<u32>,
    /// GPUs and nodes the current token reaches, in first-reached order.
    gpus: Vec<u32>,
    nodes: Vec<u32>,
    /// The current pair's probability per GPU and per node (0 when
    /// untouched), and which are set.
    pair_gpu: Vec<f64>,
    pair_node: Vec<f64>,
    pair_gpus: Vec<u32>,
    pair_nodes: Vec<u32>,
    stamp: u32,
}

/// Adds `p` to `k`'s entry of a pair's dense probabilities.
#[inline]
fn add(dense: &mut [f64], set: &mut Vec<u32>, k: u32, p: f64) {
    if let Some(x) = dense.get_mut(k as usize) {
        if *x == 0.0 {
            set.push(k);
        }
        *x += p;
    }
}

/// Multiplies `k`'s chance of being missed by `1 − p` (the first time this
/// token, from 1).
#[inline]
fn miss(miss: &mut [f64], stamps: &mut [u32], reached: &mut Vec<u32>, stamp: u32, k: u32, p: f64) {
    let stay = (1.0 - p).max(0.0);
    let (Some(m), Some(st)) = (miss.get_mut(k as usize), stamps.get_mut(k as usize)) else {
        return;
    };
    if *st == stamp {
        *m *= stay;
    } else {
        *st = stamp;
        *m = stay;
        reached.push(k);
    }
}

impl MessageTally {
    pub(crate) fn reset(&mut self, topology: Topology) {
        self.gpus_per_node = topology.gpus_per_node().max(1);
        self.counts = Messages::default();
        let (d, nodes) = (topology.num_gpus(), topology.nodes());
        if self.gpu_miss.len() != d || self.node_miss.len() != nodes {
            self.gpu_miss = vec![1.0; d];
            self.node_miss = vec![1.0; nodes];
            self.gpu_stamp = vec![0; d];
            self.node_stamp = vec![0; nodes];
            self.pair_gpu = vec![0.0; d];
            self.pair_node = vec![0.0; nodes];
            self.stamp = 0;
        }
    }

    /// Starts a token.
    #[inline]
    pub(crate) fn begin(&mut self) {
        self.gpus.clear();
        self.nodes.clear();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Wrapped: no stamp may look current.
            self.gpu_stamp.fill(0);
            self.node_stamp.fill(0);
            self.stamp = 1;
        }
    }

    /// One pair of the current token going to GPU `gpu[i]` with
    /// probability `frac[i]`.
    pub(crate) fn pair(&mut self, gpu: &[u32], frac: &[f64]) {
        let gpn = self.gpus_per_node as u32;
        // One destination (an expert with one copy, a pinned rule): no
        // chances to add up.
        if let ([g], [p]) = (gpu, frac) {
            if *p > 0.0 {
                let st = self.stamp;
                miss(
                    &mut self.gpu_miss,
                    &mut self.gpu_stamp,
                    &mut self.gpus,
                    st,
                    *g,
                    *p,
                );
                miss(
                    &mut self.node_miss,
                    &mut self.node_stamp,
                    &mut self.nodes,
                    st,
                    *g / gpn,
                    *p,
                );
            }
            return;
        }
        // A pair goes to one copy: its chances on one GPU (two copies
        // there) or one node add up before the token's pairs multiply.
        for (&g, &p) in gpu.iter().zip(frac) {
            if p > 0.0 {
                add(&mut self.pair_gpu, &mut self.pair_gpus, g, p);
                add(&mut self.pair_node, &mut self.pair_nodes, g / gpn, p);
            }
        }
        for &g in &self.pair_gpus {
            let p = std::mem::take(&mut self.pair_gpu[g as usize]);
            miss(
                &mut self.gpu_miss,
                &mut self.gpu_stamp,
                &mut self.gpus,
                self.stamp,
                g,
                p,
            );
        }
        for &nu in &self.pair_nodes {
            let p = std::mem::take(&mut self.pair_node[nu as usize]);
            miss(
                &mut self.node_miss,
                &mut self.node_stamp,
                &mut self.nodes,
                self.stamp,
                nu,
                p,
            );
        }
        self.pair_gpus.clear();
        self.pair_nodes.clear();
    }

    /// GPUs and nodes both fit in one 64-bit word ([`MessageTally::end_bits`]).
    pub(crate) fn fits_words(&self) -> bool {
        self.gpu_miss.len() <= 64 && self.node_miss.len() <= 64
    }

    /// Ends a token whose pairs all went to one GPU each, its destinations
    /// given as bits (`gpu_bits` bit `g`, `node_bits` bit `ν`): the same
    /// counts as [`MessageTally::end`] after one [`MessageTally::pair_to`]
    /// per pair, without the per-GPU chances.
    #[inline]
    pub(crate) fn end_bits(&mut self, s: usize, gpu_bits: u64, node_bits: u64) {
        let node = s / self.gpus_per_node;
        self.counts.token_layers += 1.0;
        let own = |i: usize| if i < 64 { 1u64 << i } else { 0 };
        self.counts.cross_gpu += f64::from((gpu_bits & !own(s)).count_ones());
        self.counts.cross_node += f64::from((node_bits & !own(node)).count_ones());
    }

    /// A pair that goes to GPU `g` for sure.
    #[inline]
    pub(crate) fn pair_to(&mut self, g: u32) {
        self.pair(&[g], &[1.0]);
    }

    /// Ends the current token, whose source is GPU `s`.
    pub(crate) fn end(&mut self, s: usize) {
        let node = s / self.gpus_per_node;
        self.counts.token_layers += 1.0;
        for &g in &self.gpus {
            if g as usize != s {
                self.counts.cross_gpu += 1.0 - self.gpu_miss[g as usize];
            }
        }
        for &nu in &self.nodes {
            if nu as usize != node {
                self.counts.cross_node += 1.0 - self.node_miss[nu as usize];
            }
        }
    }
}

/// Per (source, expert), the (GPU, fraction) destinations of a split a
/// rule fixed for one batch (`Optimal`, `Libra`), expert-major.
#[derive(Debug, Default)]
pub(crate) struct Dests {
    sources: usize,
    start: Vec<usize>,
    pub gpu: Vec<u32>,
    pub frac: Vec<f64>,
    /// Scratch: target pairs per GPU, and per node surplus and demand.
    x: Vec<f64>,
    node_surplus: Vec<f64>,
    node_demand: Vec<f64>,
    targets: Vec<(usize, f64)>,
}

impl Dests {
    pub(crate) fn clear(&mut self, sources: usize) {
        self.sources = sources;
        self.start.clear();
        self.start.push(0);
        self.gpu.clear();
        self.frac.clear();
    }

    #[inline]
    pub(crate) fn push(&mut self, g: usize, f: f64) {
        self.gpu.push(g as u32);
        self.frac.push(f);
    }

    /// Closes the current (source, expert) entry; entries are closed
    /// expert-major, source-minor.
    #[inline]
    pub(crate) fn close(&mut self) {
        self.start.push(self.gpu.len());
    }

    /// The destinations of (source `s`, expert `e`) (empty when not built).
    pub(crate) fn entries(&self, s: usize, e: usize) -> (&[u32], &[f64]) {
        let i = e * self.sources + s;
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => (
                self.gpu.get(a..b).unwrap_or(&[]),
                self.frac.get(a..b).unwrap_or(&[]),
            ),
            _ => (&[], &[]),
        }
    }
}

/// `Optimal`'s split as per-(source, expert) destinations that reproduce
/// [`match_split`]'s pair totals exactly: a source keeps what its own GPU
/// serves of the expert (up to what it sends); of its surplus, its node
/// serves the share `M_ν / R_ν` (`M_ν` the pairs the node's GPUs take from
/// the node, `R_ν` the node's surplus), spread over the node's GPUs by
/// their unmet demand; the rest goes to the GPUs whose demand the node
/// left unmet, in proportion to it. The matching moves counts, not named
/// tokens; this proportional choice is one of the token assignments that
/// give its totals.
pub(crate) fn optimal_dests(
    solver: &MinMax,
    row: &[f64],
    src: &[f64],
    topology: Topology,
    dests: &mut Dests,
) {
    let d = topology.num_gpus();
    let gpn = topology.gpus_per_node().max(1);
    let nodes = topology.nodes();
    let e_n = row.len();
    let s_n = (src.len() / e_n.max(1)).min(d);
    dests.clear(s_n);
    let mut x = std::mem::take(&mut dests.x);
    let mut surplus = std::mem::take(&mut dests.node_surplus);
    let mut demand = std::mem::take(&mut dests.node_demand);
    let mut targets = std::mem::take(&mut dests.targets);
    x.clear();
    x.resize(d, 0.0);
    let from = |s: usize, e: usize| {
        if s < s_n {
            src.get(s * e_n + e).copied().unwrap_or(0.0)
        } else {
            0.0
        }
    };
    for e in 0..e_n {
        targets.clear();
        if row[e] > 0.0 {
            solver.targets(e, row, |g, t| targets.push((g, t)));
            // two copies on one GPU: one target
            targets.sort_unstable_by_key(|t| t.0);
            targets.dedup_by(|b, a| {
                if a.0 == b.0 {
                    a.1 += b.1;
                }
                a.0 == b.0
            });
        }
        surplus.clear();
        surplus.resize(nodes, 0.0);
        demand.clear();
        demand.resize(nodes, 0.0);
        for &(g, t) in &targets {
            if let Some(v) = x.get_mut(g) {
                *v = t;
            }
        }
        for s in 0..s_n {
            let f = from(s, e);
            surplus[s / gpn] += f - f.min(x[s]);
        }
        // unmet demand of each target after its own source: (x − local)
        for t in &mut targets {
            let local = from(t.0, e).min(x[t.0]);
            t.1 = (t.1 - local).max(0.0);
            demand[t.0 / gpn] += t.1;
        }
        // the share of each node's demand left for other nodes
        let mut rest = 0.0;
        for &(g, u) in &targets {
            let nu = g / gpn;
            let (r, dd) = (surplus[nu], demand[nu]);
            if dd > 0.0 {
                rest += u * (1.0 - r.min(dd) / dd);
            }
        }
        for (s, &xs) in x.iter().enumerate().take(s_n) {
            let f = from(s, e);
            if f > 0.0 {
                let local = f.min(xs);
                if local > 0.0 {
                    dests.push(s, local / f);
                }
                let nu = s / gpn;
                let (r, dd) = (surplus[nu], demand[nu]);
                let over = f - local;
                let inside = if r > 0.0 { over * r.min(dd) / r } else { 0.0 };
                if inside > 0.0 && dd > 0.0 {
                    for &(g, u) in targets.iter().filter(|t| t.0 / gpn == nu) {
                        if u > 0.0 {
                            dests.push(g, inside * u / dd / f);
                        }
                    }
                }
                let out = over - inside;
                if out > 0.0 && rest > 0.0 {
                    for &(g, u) in &targets {
                        let (r2, d2) = (surplus[g / gpn], demand[g / gpn]);
                        let left = if d2 > 0.0 {
                            u * (1.0 - r2.min(d2) / d2)
                        } else {
                            0.0
                        };
                        if left > 0.0 {
                            dests.push(g, out * left / rest / f);
                        }
                    }
                }
            }
            dests.close();
        }
        for &(g, _) in &targets {
            if let Some(v) = x.get_mut(g) {
                *v = 0.0;
            }
        }
    }
    dests.x = x;
    dests.node_surplus = surplus;
    dests.node_demand = demand;
    dests.targets = targets;
}
