//! The replay of one (batch, layer) under a dispatch rule: GPU loads and
//! traffic, with every buffer reused so the batch loop never allocates.
//!
//! Which computation runs depends on the rule and on what the workload
//! knows of sources:
//!
//! | rule | even arrival | per-source counts / token routes |
//! | --- | --- | --- |
//! | `Even`, `Vllm`, `SglangDynamic(SameGpu)` | even-split loads, closed-form traffic | even-split loads; each source's pairs split over the copies |
//! | `Vllm` with token routes | — | exact: pair `p = token·top_k + k` → copy `p mod c` |
//! | `SglangStatic`, `SglangDynamic(Nearest)`, `LocalFirst`, `GraceWeighted`, `GraceTopology` | the per-source routes folded over sources, per GPU | per-source routes |
//! | `Optimal` | min-max split; sources `n_e / D` matched to it | min-max split; recorded sources matched to it |
//! | `Libra` | Algorithm 2 on one row `n_e / D` every GPU sends | Algorithm 2 on the recorded sources |
//!
//! Source: [`super::dispatch`] for the rules, [`super::traffic`] for the
//! accounting. Cost per (batch, layer): O(slots + D) for even-split loads,
//! O(table entries) for folded routes, O(S · E · copies) with sources,
//! O(tokens · top-k) for vLLM's token rule, a few max-flows for `Optimal`,
//! O(S · E · copies) plus the transfers for `Libra`.
//! With token routes, every mode also counts token messages
//! (`super::traffic::MessageTally`) from the same choices: O(tokens ·
//! top-k · copies) more per (batch, layer).
//! GRACE's rules add O(slots) per layer for the predicted GPU loads, from
//! the plan's recorded profile, or (a plan without one) O(B · L · E) once
//! to sum each layer's expert loads over the workload.

use ndarray::{ArrayView2, Axis, s};

use crate::data::plan::LayerPlacement;
use crate::data::topology::Topology;
use crate::judge::eval::balance_of;

use super::dispatch::{EvenArrival, Routes, Rule};
use super::optimal::MinMax;
use super::rebalance::Rebalancer;
use super::slots::SlotTable;
use super::traffic::{Dests, MessageTally, Supply, Tally, match_split, optimal_dests};
use crate::data::workload::{Sources, Workload};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    BlindEven,
    BlindSources,
    RoutedEven,
    RoutedSources,
    VllmTokens,
    OptimalEven,
    OptimalSources,
    Libra,
}

/// What one (batch, layer) gave.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Step {
    pub balancedness: f64,
    pub imbalance: f64,
    pub pairs: f64,
}

#[derive(Debug)]
pub(crate) struct Engine {
    topology: Topology,
    rule: Rule,
    mode: Mode,
    experts: usize,
    /// Source ranks known (`D` under even arrival).
    sources: usize,
    pub view: SlotTable,
    routes: Routes,
    even: EvenArrival,
    solver: MinMax,
    rebalancer: Rebalancer,
    /// Libra's ε (0 for the other rules).
    epsilon: f64,
    pub loads: Vec<f64>,
    pub tally: Tally,
    src: Vec<f64>,
    node_sum: Vec<f64>,
    sent: Vec<f64>,
    row_buf: Vec<f64>,
    token_index: Vec<usize>,
    /// vLLM's per-token rule: rows from source `s` to GPU `g` at `s · D + g`
    /// in the current step, tallied once at its end.
    pair_rows: Vec<u32>,
    /// vLLM's per-token rule: each expert's copies in the prepared layer,
    /// and whether every count fits the division-free remainder's 16 bits.
    vllm: Vec<VllmCopies>,
    vllm_narrow: bool,
    /// GRACE's rules only, when some plan records no profile: each layer's
    /// expert loads over the whole workload, `L × E` row-major (empty
    /// otherwise) — what they predict from for such a plan.
    totals: Vec<f64>,
    /// GRACE's predicted load of each GPU in the prepared layer.
    predicted: Vec<f64>,
    /// Token messages of the last step, counted only with token routes.
    pub messages: MessageTally,
    counts_messages: bool,
    /// Steps are timed (the cost model's timer reads the slot table):
    /// Libra's rule builds its own tables and needs the slot table only then.
    timed: bool,
    /// `Optimal`'s and `Libra`'s per-batch split, per (source, expert).
    dests: Dests,
}

impl Engine {
    /// `profiled`: every plan to replay records its profile, so GRACE's
    /// rules never need the workload's own loads (not summed then).
    pub(crate) fn new(topology: Topology, rule: Rule, workload: &Workload, profiled: bool) -> Self {
        let even = matches!(workload.source_kind(), Sources::Even);
        let tokens = matches!(workload.source_kind(), Sources::Tokens { .. });
        let mode = match rule {
            Rule::Optimal if even => Mode::OptimalEven,
            Rule::Optimal => Mode::OptimalSources,
            Rule::Libra { .. } => Mode::Libra,
            Rule::Vllm if tokens => Mode::VllmTokens,
            r if r.is_blind() && even => Mode::BlindEven,
            r if r.is_blind() => Mode::BlindSources,
            _ if even => Mode::RoutedEven,
            _ => Mode::RoutedSources,
        };
        let d = topology.num_gpus();
        let totals = if rule.is_grace() && !profiled {
            workload
                .trace()
                .counts()
                .sum_axis(Axis(0))
                .iter()
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        Engine {
            topology,
            rule,
            mode,
            experts: workload.trace().num_experts(),
            sources: workload.num_sources().unwrap_or(d),
            view: SlotTable::default(),
            routes: Routes::default(),
            even: EvenArrival::default(),
            solver: MinMax::default(),
            rebalancer: Rebalancer::default(),
            epsilon: match rule {
                Rule::Libra {
                    tolerance_percent, ..
                } => f64::from(tolerance_percent) / 100.0,
                _ => 0.0,
            },
            loads: vec![0.0; d],
            tally: Tally::default(),
            src: Vec::new(),
            node_sum: Vec::new(),
            sent: Vec::new(),
            row_buf: Vec::new(),
            token_index: Vec::new(),
            pair_rows: Vec::new(),
            vllm: Vec::new(),
            vllm_narrow: true,
            totals,
            predicted: Vec::new(),
            messages: MessageTally::default(),
            counts_messages: tokens,
            timed: true,
            dests: Dests::default(),
        }
    }

    /// Whether steps count token messages (the workload has token routes,
    /// and they were not left out: [`Engine::without_messages`]).
    pub(crate) fn counts_messages(&self) -> bool {
        self.counts_messages
    }

    /// Whether the caller times steps (it reads [`Engine::view`]); a
    /// replay that does not spares Libra's rule a slot table per layer.
    pub(crate) fn timed(mut self, timed: bool) -> Self {
        self.timed = timed;
        self
    }

    /// Steps that leave token messages out: a replay that needs only loads
    /// and pair traffic skips a pass over every token of the batch.
    pub(crate) fn without_messages(mut self) -> Self {
        self.counts_messages = false;
        self
    }

    /// Loads the placement of layer index `l`; `map` is its SGLang static
    /// map, `profile` the layer's expert loads the plan was planned on
    /// (GRACE's rules predict from them; without them, from the whole
    /// workload's loads).
    pub(crate) fn prepare(
        &mut self,
        layer: &LayerPlacement,
        l: usize,
        map: Option<&[u32]>,
        profile: Option<&[f64]>,
    ) {
        if self.mode != Mode::Libra || self.timed {
            self.view.prepare(layer, self.experts);
        }
        let d = self.topology.num_gpus();
        self.predicted.clear();
        let e_n = self.experts;
        let loads = match profile {
            Some(p) if self.rule.is_grace() => Some(p),
            _ => self.totals.get(l * e_n..(l + 1) * e_n),
        };
        if let Some(row) = loads {
            // Once per layer: Eq. 3's prediction is the even split of the
            // profiled loads.
            self.predicted.resize(d, 0.0);
            self.view.even_loads(row, &mut self.predicted);
        }
        let predicted = self.predicted.as_slice();
        match self.mode {
            Mode::VllmTokens => {
                let starts = &self.view.copy_start;
                self.vllm.clear();
                self.vllm.extend(
                    starts
                        .windows(2)
                        .map(|w| VllmCopies::new(w[0], w[1] - w[0])),
                );
                self.vllm_narrow = self.vllm.iter().all(|c| c.n < 1 << 16);
            }
            Mode::BlindEven => {}
            Mode::BlindSources | Mode::RoutedSources => self.routes.build(
                self.rule,
                &self.view,
                self.topology,
                self.sources,
                map,
                predicted,
            ),
            Mode::RoutedEven => {
                self.routes
                    .build(self.rule, &self.view, self.topology, d, map, predicted);
                self.even.build(&self.routes, self.topology);
            }
            Mode::OptimalEven | Mode::OptimalSources => self.solver.prepare(&self.view),
            Mode::Libra => {
                if let Rule::Libra { start, .. } = self.rule {
                    self.rebalancer.set_start(start);
                }
                self.rebalancer.prepare(layer, self.experts);
            }
        }
    }

    /// Replays batch `b` of layer index `l` against the prepared layer.
    pub(crate) fn step(&mut self, workload: &Workload, b: usize, l: usize) -> Step {
        let counts = workload.trace().counts();
        let row = counts.slice(s![b, l, ..]);
        match row.to_slice() {
            Some(r) => self.step_row(workload, b, l, r),
            None => {
                let mut buf = std::mem::take(&mut self.row_buf);
                buf.clear();
                buf.extend(row.iter().copied());
                let out = self.step_row(workload, b, l, &buf);
                self.row_buf = buf;
                out
            }
        }
    }

    fn step_row(&mut self, workload: &Workload, b: usize, l: usize, row: &[f64]) -> Step {
        let total: f64 = row.iter().sum();
        let d = self.topology.num_gpus();
        self.tally.reset(self.topology);
        if self.counts_messages {
            self.messages.reset(self.topology);
        }
        let mut optimum = None;
        match self.mode {
            Mode::BlindEven => {
                self.view.even_loads(row, &mut self.loads);
                self.tally.blind_even(total, &self.loads);
            }
            Mode::BlindSources => {
                self.view.even_loads(row, &mut self.loads);
                workload.fill_source_counts(b, l, &mut self.src);
                self.route_sources(false);
                self.tally.finish();
            }
            Mode::RoutedSources => {
                workload.fill_source_counts(b, l, &mut self.src);
                self.route_sources(true);
                self.tally.finish();
            }
            Mode::RoutedEven => {
                let per_source = total / d as f64;
                let (mut intra, mut cross) = (0.0, 0.0);
                for g in 0..d {
                    let (mut load, mut local) = (0.0, 0.0);
                    for i in self.even.gpu_start[g]..self.even.gpu_start[g + 1] {
                        let n = row[self.even.expert[i] as usize];
                        let w = self.even.weight[i];
                        load += n * w[0];
                        local += n * w[1];
                        intra += n * w[2];
                        cross += n * w[3];
                    }
                    self.loads[g] = load;
                    self.tally.local += local;
                    self.tally.ingress[g] = load - local;
                    self.tally.egress[g] = per_source - local;
                }
                self.tally.intra = intra;
                self.tally.cross = cross;
                self.tally.finish();
            }
            Mode::VllmTokens => {
                self.vllm_tokens(workload, b, l);
                self.tally.finish();
            }
            Mode::OptimalEven => {
                optimum = Some(self.solver.solve(row));
                self.loads.copy_from_slice(&self.solver.loads);
                match_split(
                    &self.solver,
                    row,
                    &self.loads,
                    &Supply::Even,
                    self.topology,
                    &mut self.tally,
                );
            }
            Mode::OptimalSources => {
                optimum = Some(self.solver.solve(row));
                self.loads.copy_from_slice(&self.solver.loads);
                workload.fill_source_counts(b, l, &mut self.src);
                self.source_sums();
                let supply = Supply::Sources {
                    n: &self.src,
                    node: &self.node_sum,
                    sent: &self.sent,
                };
                match_split(
                    &self.solver,
                    row,
                    &self.loads,
                    &supply,
                    self.topology,
                    &mut self.tally,
                );
            }
            Mode::Libra => {
                if matches!(workload.source_kind(), Sources::Even) {
                    // Even arrival: every GPU sends `n_e / D`, one row.
                    self.src.clear();
                    self.src.extend(row.iter().map(|&n| n / d as f64));
                    self.rebalancer.run_uniform(&self.src, self.epsilon);
                    self.rebalancer
                        .route_uniform(&self.src, self.topology, &mut self.tally);
                } else {
                    workload.fill_source_counts(b, l, &mut self.src);
                    self.rebalancer.run(&self.src, self.epsilon);
                    let tally = &mut self.tally;
                    self.rebalancer
                        .route(&self.src, |s, g, a| tally.pair(s, g, a));
                }
                self.loads.copy_from_slice(self.rebalancer.gpu_loads());
                self.tally.finish();
            }
        }
        if self.counts_messages() && self.mode != Mode::VllmTokens {
            self.count_messages(workload, b, l, row);
        }
        let (balancedness, imbalance) = match optimum {
            // The optimum is a set's exact ratio; the flow's loads only
            // approach it to rounding.
            Some(t) if t > 0.0 => {
                let mean = total / d as f64;
                (mean / t, t / mean)
            }
            Some(_) => (1.0, 1.0),
            None => balance_of(&self.loads),
        };
        Step {
            balancedness,
            imbalance,
            pairs: total,
        }
    }

    /// Sends each source's pairs along the prepared routes.
    fn route_sources(&mut self, with_loads: bool) {
        let e_n = self.experts;
        if with_loads {
            self.loads.iter_mut().for_each(|x| *x = 0.0);
        }
        let sources = self.src.len() / e_n.max(1);
        for s in 0..sources {
            for e in 0..e_n {
                let v = self.src[s * e_n + e];
                if v == 0.0 {
                    continue;
                }
                for i in self.routes.entries(s, e) {
                    let g = self.routes.gpu[i] as usize;
                    let a = v * self.routes.frac[i];
                    if with_loads {
                        self.loads[g] += a;
                    }
                    self.tally.pair(s, g, a);
                }
            }
        }
    }

    /// Per-node sums and per-source totals of the source counts.
    fn source_sums(&mut self) {
        let e_n = self.experts;
        let gpn = self.topology.gpus_per_node();
        let nodes = self.topology.nodes();
        let sources = self.src.len() / e_n.max(1);
        self.node_sum.clear();
        self.node_sum.resize(nodes * e_n, 0.0);
        self.sent.clear();
        self.sent.resize(sources, 0.0);
        for s in 0..sources {
            let nu = s / gpn;
            for e in 0..e_n {
                let v = self.src[s * e_n + e];
                self.node_sum[nu * e_n + e] += v;
                self.sent[s] += v;
            }
        }
    }

    /// vLLM's rule on token routes: the `i`-th token of source `s` in the
    /// batch sends its `k`-th pair to copy `(i · top_k + k) mod c_e`.
    fn vllm_tokens(&mut self, workload: &Workload, b: usize, l: usize) {
        self.loads.iter_mut().for_each(|x| *x = 0.0);
        let Sources::Tokens {
            tokens,
            batch_tokens,
            ranks,
            ..
        } = workload.source_kind()
        else {
            return;
        };
        let d = self.topology.num_gpus();
        let gpn = self.topology.gpus_per_node().max(1);
        let ranks = (*ranks).min(d);
        self.token_index.clear();
        self.token_index.resize(ranks, 0);
        // Each source's row of GPUs padded to 64 when they fit (see
        // `VllmPass::run_with`).
        let stride = if d <= 64 { 64 } else { d };
        self.pair_rows.clear();
        self.pair_rows.resize(ranks * stride, 0);
        let routes = tokens.routes(l);
        let routes = routes.as_standard_layout();
        let Some(flat) = routes.as_slice() else {
            return;
        };
        let rank = tokens.source_rank();
        let top_k = tokens.top_k();
        let messages = self.counts_messages();
        let pass = VllmPass {
            flat,
            rank,
            top_k,
            range: workload.batch_range(b, *batch_tokens),
            d,
            gpn,
            experts: &self.vllm,
            narrow: self.vllm_narrow,
            gpus: &self.view.copy_gpu,
        };
        let (index, rows) = (&mut self.token_index, &mut self.pair_rows);
        // Every pair goes to one GPU: a token's distinct destinations are
        // bits of one word when GPUs and nodes fit in 64 (the stamped
        // tally, for any size, otherwise).
        if !messages {
            pass.run(index, rows, &mut NoMessages);
        } else if self.messages.fits_words() {
            pass.run(index, rows, &mut BitMessages::new(&mut self.messages));
        } else {
            pass.run(index, rows, &mut self.messages);
        }
        // Whole rows, so the sums are exact in any order.
        for s in 0..ranks {
            for g in 0..d {
                let n = self.pair_rows[s * stride + g];
                if n > 0 {
                    self.loads[g] += f64::from(n);
                    self.tally.pair(s, g, f64::from(n));
                }
            }
        }
    }

    /// Token messages of batch `b`, layer index `l`, for the rules whose
    /// pairs follow a (source, expert) → (GPU, fraction) table: the
    /// layer's routes, or the batch's split for `Optimal` and `Libra`.
    fn count_messages(&mut self, workload: &Workload, b: usize, l: usize, row: &[f64]) {
        let Sources::Tokens {
            tokens,
            batch_tokens,
            ..
        } = workload.source_kind()
        else {
            return;
        };
        match self.mode {
            Mode::OptimalSources => {
                optimal_dests(&self.solver, row, &self.src, self.topology, &mut self.dests);
            }
            Mode::Libra => {
                let e_n = self.experts;
                let sources = (self.src.len() / e_n.max(1)).min(self.topology.num_gpus());
                self.dests.clear(sources);
                for e in 0..e_n {
                    for s in 0..sources {
                        let n = self.src[s * e_n + e];
                        let dests = &mut self.dests;
                        self.rebalancer
                            .route_one(s, e, n, |g, x| dests.push(g, x / n));
                        self.dests.close();
                    }
                }
            }
            _ => {}
        }
        let range = workload.batch_range(b, *batch_tokens);
        let (routes, rank) = (tokens.routes(l), tokens.source_rank());
        let msg = &mut self.messages;
        match self.mode {
            Mode::OptimalSources | Mode::Libra => {
                let dests = &self.dests;
                tally_tokens(msg, routes, rank, range, |s, e| dests.entries(s, e));
            }
            Mode::BlindSources | Mode::RoutedSources => {
                let r = &self.routes;
                tally_tokens(msg, routes, rank, range, |s, e| {
                    let i = r.entries(s, e);
                    (&r.gpu[i.clone()], &r.frac[i])
                });
            }
            _ => {}
        }
    }
}

/// One (batch, layer) of vLLM's per-token rule: pair `k` of the `i`-th
/// token from source `s` goes to copy `(i · top_k + k) mod copies`.
struct VllmPass<'a> {
    flat: &'a [u32],
    rank: &'a [u32],
    top_k: usize,
    range: std::ops::Range<usize>,
    d: usize,
    gpn: usize,
    experts: &'a [VllmCopies],
    /// Every copy count is below 2¹⁶ ([`VllmCopies::rem`]).
    narrow: bool,
    gpus: &'a [u32],
}

/// An expert's copies for vLLM's rule: `copy_gpu[first .. first + n]`, and
/// `m = ⌊(2³² − 1) / n⌋ + 1` for a remainder without division (Lemire,
/// Kaser and Kurz, "Faster remainder by direct computation", 2019, with
/// 16-bit positions and 32-bit products, which wasm multiplies natively):
/// the copy count changes from token to token, and the branch or the
/// division per pair cost more than the rest of the pass.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct VllmCopies {
    first: u32,
    n: u32,
    m: u32,
}

impl VllmCopies {
    fn new(first: usize, n: usize) -> Self {
        let n = u32::try_from(n).unwrap_or(0);
        VllmCopies {
            first: u32::try_from(first).unwrap_or(u32::MAX),
            n,
            m: (u32::MAX / n.clamp(1, u16::MAX.into())).wrapping_add(1),
        }
    }

    /// `p mod n` for `p` and `n` below 2¹⁶.
    #[inline]
    fn rem(self, p: u32) -> u32 {
        let low = self.m.wrapping_mul(p);
        ((u64::from(low) * u64::from(self.n)) >> 32) as u32
    }
}

impl VllmPass<'_> {
    /// Counts rows per (source, GPU) into `rows`; `sink` sees each token's
    /// pairs' destinations.
    #[inline]
    fn run(self, index: &mut [usize], rows: &mut [u32], sink: &mut impl TokenSink) {
        // Positions (a rank's tokens × k) and copy counts fit the
        // remainder's 16 bits in any real batch; rows of 64 GPUs index
        // without a bounds check.
        let fast = self.narrow && self.range.len().saturating_mul(self.top_k) < 1 << 16;
        match (fast, self.d <= 64) {
            (true, true) => self.run_with::<64, true>(index, rows, sink),
            (true, false) => self.run_with::<0, true>(index, rows, sink),
            (false, true) => self.run_with::<64, false>(index, rows, sink),
            (false, false) => self.run_with::<0, false>(index, rows, sink),
        }
    }

    /// Rows of source `s` at `s · 64 ..` when `W` is 64 (`g & 63` is `g`),
    /// else at `s · D ..`; the remainder without division when `FAST`,
    /// else by `%`.
    #[inline]
    fn run_with<const W: usize, const FAST: bool>(
        self,
        index: &mut [usize],
        rows: &mut [u32],
        sink: &mut impl TokenSink,
    ) {
        let top_k = self.top_k;
        let stride = if W == 64 { 64 } else { self.d };
        for t in self.range {
            let s = self.rank[t] as usize;
            let Some(i) = index.get_mut(s) else {
                continue;
            };
            let first = *i * top_k;
            *i += 1;
            sink.begin();
            let Some(rows) = rows.get_mut(s * stride..(s + 1) * stride) else {
                continue;
            };
            for (k, &e) in self.flat[t * top_k..(t + 1) * top_k].iter().enumerate() {
                let c = self.experts[e as usize];
                if c.n == 0 {
                    continue;
                }
                let r = if FAST {
                    c.rem((first + k) as u32) as usize
                } else {
                    (first + k) % c.n as usize
                };
                let g = self.gpus[c.first as usize + r] as usize;
                if W == 64 {
                    rows[g & 63] += 1;
                } else {
                    rows[g] += 1;
                }
                sink.pair(g, g / self.gpn);
            }
            sink.end(s);
        }
    }
}

/// What a per-token pass tells about each token's destinations.
trait TokenSink {
    fn begin(&mut self);
    fn pair(&mut self, g: usize, node: usize);
    fn end(&mut self, s: usize);
}

/// Messages left out.
struct NoMessages;

impl TokenSink for NoMessages {
    #[inline]
    fn begin(&mut self) {}
    #[inline]
    fn pair(&mut self, _: usize, _: usize) {}
    #[inline]
    fn end(&mut self, _: usize) {}
}

/// Messages of deterministic pairs, destinations as bits (GPUs and nodes
/// at most 64).
struct BitMessages<'a> {
    msg: &'a mut MessageTally,
    gpus: u64,
    nodes: u64,
}

impl<'a> BitMessages<'a> {
    fn new(msg: &'a mut MessageTally) -> Self {
        BitMessages {
            msg,
            gpus: 0,
            nodes: 0,
        }
    }
}

impl TokenSink for BitMessages<'_> {
    #[inline]
    fn begin(&mut self) {
        (self.gpus, self.nodes) = (0, 0);
    }
    #[inline]
    fn pair(&mut self, g: usize, node: usize) {
        self.gpus |= 1u64.checked_shl(g as u32).unwrap_or(0);
        self.nodes |= 1u64.checked_shl(node as u32).unwrap_or(0);
    }
    #[inline]
    fn end(&mut self, s: usize) {
        self.msg.end_bits(s, self.gpus, self.nodes);
    }
}

/// Messages of any cluster size: the stamped tally.
impl TokenSink for MessageTally {
    #[inline]
    fn begin(&mut self) {
        MessageTally::begin(self);
    }
    #[inline]
    fn pair(&mut self, g: usize, _: usize) {
        self.pair_to(g as u32);
    }
    #[inline]
    fn end(&mut self, s: usize) {
        MessageTally::end(self, s);
    }
}

/// Feeds each token of `range` to `msg`, its pairs' destinations from
/// `lookup(source, expert)`.
fn tally_tokens<'a>(
    msg: &mut MessageTally,
    routes: ArrayView2<'_, u32>,
    rank: &[u32],
    range: std::ops::Range<usize>,
    lookup: impl Fn(usize, usize) -> (&'a [u32], &'a [f64]),
) {
    for t in range {
        let s = rank.get(t).map_or(0, |&r| r as usize);
        msg.begin();
        for &e in routes.row(t) {
            let (g, f) = lookup(s, e as usize);
            msg.pair(g, f);
        }
        msg.end(s);
    }
}

#[cfg(test)]
mod tests {
    use super::VllmCopies;

    /// The division-free remainder equals `%` for every 16-bit position,
    /// over copy counts 1..=64 and a few wide ones.
    #[test]
    fn vllm_remainder_is_p_mod_n() {
        let mut checked = 0usize;
        for n in (1..=64).chain([255, 1000, 4097, 65_535]) {
            let c = VllmCopies::new(0, n);
            for p in 0..1u32 << 16 {
                assert_eq!(c.rem(p), p % n as u32, "{p} mod {n}");
                checked += 1;
            }
        }
        assert_eq!(checked, 68 << 16);
    }
}
