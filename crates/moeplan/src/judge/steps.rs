//! The replay split in two: every (batch, layer) step's figures recorded
//! ([`Steps`]), then folded into a [`Replay`] in one fixed order (layers,
//! then batches in order). Steps of disjoint batch ranges, made apart —
//! the page's second worker replays half of a per-batch schedule — join
//! into the very report one replay of every batch makes, to the bit: the
//! engine carries nothing from one step to the next, and the sums run in
//! the same order whoever made the steps.
//!
//! Cost: the steps are the replay's ([`super::simulate`]); a fold is
//! O(B · L) additions, a record 12 numbers per (batch, layer).

use std::ops::Range;

use super::{
    CostModel, Messages, Move, PREDICTED_FROM_PROFILE, PREDICTED_IN_SAMPLE, Placement, Replay,
    Rule, Schedule, Traffic, cost, mean, moves, replay, sglang_dispatch_map,
};
use crate::data::plan::Plan;
use crate::data::workload::Workload;
use crate::error::{Error, Result};

/// One (batch, layer) step's figures: balancedness, imbalance ratio, pairs,
/// local / intra-node / cross-node pairs, the busiest GPU's ingress and
/// egress, and (timed replays) compute, dispatch, combine and layer µs.
type Record = [f64; RECORD];

/// Numbers in a [`Record`].
const RECORD: usize = 12;

/// Numbers before the records in [`Steps::to_numbers`]: first batch, end
/// batch, layers, timed (0 or 1), moves, whether each batch's bound and
/// copies follow (0 or 1), plans.
const HEADER: usize = 7;

/// A replay's figures, step by step, for a range of batches: what
/// [`replay_steps`] records and [`super::judge_pairs_replayed`] folds.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    batches: Range<usize>,
    layers: usize,
    timed: bool,
    /// `records[(b - start) · layers + l]`.
    records: Vec<Record>,
    /// Per batch of the range: its token messages, summed over layers
    /// (replays that count them; never in [`Steps::to_numbers`]).
    messages: Vec<Option<Messages>>,
    /// The re-placements between the plans replayed here, in order.
    moves: Vec<Move>,
    /// Where each part joined here starts (its first batch) and how many
    /// of `moves` come before it: the re-placements across those
    /// boundaries are the fold's.
    starts: Vec<(usize, usize)>,
    /// A schedule's per-batch figures ([`replay_steps`]): each step's
    /// bound at its plan's replicas, and per layer the replicas summed
    /// over the plans with the number of plans.
    per_batch: Option<PerBatch>,
}

/// [`Steps::per_batch`]'s figures.
#[derive(Debug, Clone, PartialEq)]
struct PerBatch {
    bounds: Vec<f64>,
    copies: Vec<usize>,
    plans: usize,
}

impl Steps {
    /// The batches these steps replayed.
    pub fn batches(&self) -> Range<usize> {
        self.batches.clone()
    }

    /// As plain numbers, to send to another worker: a header, then every
    /// record (token messages are not recorded: [`replay_steps`] counts
    /// none).
    ///
    /// ```
    /// use moeplan::judge::{replay_steps, CostModel, Steps};
    /// use moeplan::planners::{self, Settings};
    /// use moeplan::{synth::generator, data::model, Topology, Workload};
    /// let work = Workload::new(generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?);
    /// let ready = planners::prepare(planners::find("libra")?, &work, Topology::new(1, 8)?, &Settings::new())?;
    /// let base = ready.plan(None)?.plan;
    /// let s = ready.schedule_batches(&base, &work, 1..3)?.unwrap();
    /// let steps = replay_steps(&work, &s, &CostModel::default(), 1..3)?;
    /// assert_eq!(steps.batches(), 1..3);
    /// assert_eq!(Steps::from_numbers(&steps.to_numbers())?, steps);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn to_numbers(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(HEADER + self.records.len() * (RECORD + 1));
        let plans = self.per_batch.as_ref().map_or(0, |p| p.plans);
        out.extend([
            self.batches.start as f64,
            self.batches.end as f64,
            self.layers as f64,
            f64::from(u8::from(self.timed)),
            self.moves.len() as f64,
            f64::from(u8::from(self.per_batch.is_some())),
            plans as f64,
        ]);
        for r in &self.records {
            out.extend_from_slice(r);
        }
        for m in &self.moves {
            out.extend([m.at_batch as f64, m.slots as f64, m.bytes as f64]);
        }
        if let Some(p) = &self.per_batch {
            out.extend_from_slice(&p.bounds);
            out.extend(p.copies.iter().map(|&c| c as f64));
        }
        out
    }

    /// Steps read back from [`Steps::to_numbers`], checked: a header of
    /// whole numbers and exactly what it announces, every figure finite.
    pub fn from_numbers(numbers: &[f64]) -> Result<Steps> {
        let bad = |why: &str| Error::Argument(format!("replayed steps: {why}"));
        if numbers.iter().any(|x| !x.is_finite()) {
            return Err(bad("a figure is not finite"));
        }
        let (head, rest) = numbers
            .split_at_checked(HEADER)
            .ok_or_else(|| bad("no header"))?;
        let whole = |x: f64| (x >= 0.0 && x.fract() == 0.0 && x < 9.0e15).then_some(x as usize);
        let mut header = [0usize; HEADER];
        for (h, &x) in header.iter_mut().zip(head) {
            *h = whole(x).ok_or_else(|| bad("the header is not whole numbers"))?;
        }
        let [start, end, layers, timed, moves, per_batch, plans] = header;
        if end < start || timed > 1 || per_batch > 1 {
            return Err(bad("the header is out of range"));
        }
        let n = end - start;
        let cells = n.checked_mul(layers).ok_or_else(|| bad("too many steps"))?;
        let want = [
            cells.checked_mul(RECORD),
            moves.checked_mul(3),
            Some(if per_batch == 1 { cells + layers } else { 0 }),
        ]
        .into_iter()
        .try_fold(0usize, |a, x| x.and_then(|x| a.checked_add(x)))
        .ok_or_else(|| bad("too many steps"))?;
        if rest.len() != want {
            return Err(bad(&format!(
                "{} numbers for {n} batches × {layers} layers and {moves} moves, {want} expected",
                rest.len()
            )));
        }
        let (recs, rest) = rest.split_at(cells * RECORD);
        let (mvs, rest) = rest.split_at(moves * 3);
        let records = recs
            .chunks_exact(RECORD)
            .map(|c| {
                let mut r = [0.0; RECORD];
                r.copy_from_slice(c);
                r
            })
            .collect();
        let moves = mvs
            .chunks_exact(3)
            .map(|m| match [m[0], m[1], m[2]].map(whole) {
                [Some(at_batch), Some(slots), Some(bytes)] => Ok(Move {
                    at_batch,
                    slots,
                    bytes: bytes as u64,
                }),
                _ => Err(bad("a move is not whole numbers")),
            })
            .collect::<Result<Vec<Move>>>()?;
        let per_batch = match per_batch {
            1 => {
                let (bounds, copies) = rest.split_at(cells);
                let copies = copies
                    .iter()
                    .map(|&c| whole(c).ok_or_else(|| bad("a copy count is not whole")))
                    .collect::<Result<Vec<usize>>>()?;
                Some(PerBatch {
                    bounds: bounds.to_vec(),
                    copies,
                    plans,
                })
            }
            _ => None,
        };
        Ok(Steps {
            batches: start..end,
            layers,
            timed: timed == 1,
            records,
            messages: vec![None; n],
            moves,
            starts: vec![(start, 0)],
            per_batch,
        })
    }

    /// Steps of consecutive batch ranges, in order, as one.
    pub fn join(parts: Vec<Steps>) -> Result<Steps> {
        let mut parts = parts.into_iter();
        let mut all = parts
            .next()
            .ok_or_else(|| Error::Argument("no replayed steps to join".into()))?;
        for p in parts {
            if p.batches.start != all.batches.end
                || p.layers != all.layers
                || p.timed != all.timed
                || p.per_batch.is_some() != all.per_batch.is_some()
            {
                return Err(Error::Argument(format!(
                    "replayed steps of batches {:?} do not follow {:?} ({} layers, timed {})",
                    p.batches, all.batches, all.layers, all.timed
                )));
            }
            all.batches.end = p.batches.end;
            all.records.extend(p.records);
            all.messages.extend(p.messages);
            let before = all.moves.len();
            all.starts
                .extend(p.starts.iter().map(|&(s, m)| (s, m + before)));
            all.moves.extend(p.moves);
            if let (Some(a), Some(b)) = (&mut all.per_batch, p.per_batch) {
                a.bounds.extend(b.bounds);
                for (x, y) in a.copies.iter_mut().zip(b.copies) {
                    *x += y;
                }
                a.plans += b.plans;
            }
        }
        Ok(all)
    }

    /// A schedule's bound per layer (each batch's at its plan's replicas,
    /// on the mean over `batches`) and mean replicas per plan in each
    /// layer, as [`super::bound::per_batch_bound`] and the verdict count
    /// them from the plans.
    pub(crate) fn per_batch(&self, batches: usize) -> Result<(Vec<f64>, Vec<usize>)> {
        let p = self.per_batch.as_ref().ok_or_else(|| {
            Error::Argument("replayed steps without each batch's bound and copies".into())
        })?;
        let l_n = self.layers;
        let bound = (0..l_n)
            .map(|l| {
                let sum: f64 = (0..self.batches.len())
                    .map(|b| p.bounds.get(b * l_n + l).copied().unwrap_or(0.0))
                    .sum();
                sum / batches.max(1) as f64
            })
            .collect();
        let copies = p
            .copies
            .iter()
            .map(|&c| (c as f64 / p.plans.max(1) as f64).round() as usize)
            .collect();
        Ok((bound, copies))
    }
}

/// The placement's (batch range, plan) pieces covering exactly `batches`
/// in order (a schedule may hold only those batches' plans).
pub(crate) fn segments_in(
    placement: &Placement,
    batches: Range<usize>,
) -> Result<Vec<(Range<usize>, &Plan)>> {
    match placement {
        Placement::Static(plan) => Ok(vec![(batches, plan)]),
        Placement::Schedule(parts) => {
            let mut next = batches.start;
            for (range, _) in parts {
                if range.start != next || range.end <= range.start {
                    return Err(Error::Argument(format!(
                        "schedule range {}..{} should start at batch {next} and not be empty",
                        range.start, range.end
                    )));
                }
                next = range.end;
            }
            if next != batches.end {
                return Err(Error::Argument(format!(
                    "the schedule covers batches {}..{next}, the replay {}..{}",
                    batches.start, batches.start, batches.end
                )));
            }
            Ok(parts.iter().map(|(r, p)| (r.clone(), p)).collect())
        }
    }
}

/// [`super::simulate_pairs`]'s steps for `batches` only, of a schedule
/// holding (at least) those batches' plans ([`Schedule::join`] puts such
/// parts together): another worker's half of a replay.
pub fn replay_steps(
    work: &Workload,
    schedule: &Schedule,
    cost: &CostModel,
    batches: Range<usize>,
) -> Result<Steps> {
    let b_n = work.trace().num_batches();
    if batches.start >= batches.end || batches.end > b_n {
        return Err(Error::Argument(format!(
            "batches {}..{} of a workload of {b_n}",
            batches.start, batches.end
        )));
    }
    let segments = segments_in(&schedule.strategy.placement, batches.clone())?;
    let mut steps = steps_of(
        work,
        &segments,
        schedule.strategy.rule,
        cost,
        false,
        batches,
    )?;
    // Each batch's bound and copies, as the verdict counts them from the
    // whole schedule's plans.
    let trace = work.trace();
    let l_n = trace.num_layers();
    let mut p = PerBatch {
        bounds: Vec::with_capacity(steps.records.len()),
        copies: vec![0; l_n],
        plans: segments.len(),
    };
    let mut heap = std::collections::BinaryHeap::new();
    for (range, plan) in &segments {
        let d = plan.topology().num_gpus();
        let replicas = super::bound::replicas_per_layer(plan);
        for (c, &r) in p.copies.iter_mut().zip(&replicas) {
            *c += r;
        }
        for b in range.clone() {
            for (l, &r) in replicas.iter().enumerate() {
                p.bounds
                    .push(super::bound::batch_bound(trace, (b, l), d, r, &mut heap));
            }
        }
    }
    steps.per_batch = Some(p);
    Ok(steps)
}

/// Replays `segments` (covering `batches` in order) step by step. Never
/// inlined: its callers (the whole replay, a part's) share one copy of the
/// engine in the page's wasm.
#[inline(never)]
pub(crate) fn steps_of(
    workload: &Workload,
    segments: &[(Range<usize>, &Plan)],
    rule: Rule,
    cost: &CostModel,
    messages: bool,
    batches: Range<usize>,
) -> Result<Steps> {
    let trace = workload.trace();
    let l_n = trace.num_layers();
    let Some(&(_, first)) = segments.first() else {
        return Err(Error::Argument("a schedule needs at least one plan".into()));
    };
    let topology = first.topology();
    for (_, plan) in segments {
        plan.check_matches(trace)?;
        if plan.topology() != topology {
            return Err(Error::Mismatch(format!(
                "a schedule's plans must share one cluster: {} and {}",
                topology,
                plan.topology()
            )));
        }
    }
    if let Some(s) = workload.num_sources() {
        if s > topology.num_gpus() {
            return Err(Error::Mismatch(format!(
                "the workload has {s} source ranks, the cluster {} GPUs: each rank sends from a GPU of its own, so choose at least as many GPUs as ranks",
                topology.num_gpus()
            )));
        }
    }
    let maps = segments
        .iter()
        .map(|(_, plan)| match rule {
            Rule::SglangStatic(v) => sglang_dispatch_map(plan, v).map(Some),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>>>()?;
    // GRACE's rules predict from each plan's profile; only a plan without
    // one falls back to the workload's own loads.
    let profiled = segments.iter().all(|(_, p)| p.profile().is_some());
    let mut engine =
        replay::Engine::new(topology, rule, workload, profiled).timed(cost.time.is_some());
    if !messages {
        engine = engine.without_messages();
    }
    let n = batches.len();
    let mut steps = Steps {
        batches: batches.clone(),
        layers: l_n,
        timed: cost.time.is_some(),
        records: vec![[0.0; RECORD]; n * l_n],
        messages: vec![None; n],
        moves: moves(segments, cost),
        starts: vec![(batches.start, 0)],
        per_batch: None,
    };
    let mut timer = cost::Timer::default();
    let time = cost.time.map(|t| (t, cost::batch_tokens(trace, t.top_k)));
    for l in 0..l_n {
        for ((range, plan), map) in segments.iter().zip(&maps) {
            let map = map.as_ref().and_then(|m| m.get(l)).map(Vec::as_slice);
            let profile = plan
                .profile()
                .map(|p| p.index_axis_move(ndarray::Axis(0), l))
                .and_then(|r| r.to_slice());
            engine.prepare(&plan.layers()[l], l, map, profile);
            for b in range.clone() {
                let step = engine.step(workload, b, l);
                let tally = &engine.tally;
                let mut r = [
                    step.balancedness,
                    step.imbalance,
                    step.pairs,
                    tally.local,
                    tally.intra,
                    tally.cross,
                    tally.max_ingress,
                    tally.max_egress,
                    0.0,
                    0.0,
                    0.0,
                    0.0,
                ];
                if let Some((t, tokens)) = &time {
                    let counts = trace.counts();
                    let row = counts.slice(ndarray::s![b, l, ..]);
                    let owned: Vec<f64>;
                    let row = match row.as_slice() {
                        Some(r) => r,
                        None => {
                            owned = row.to_vec();
                            &owned
                        }
                    };
                    let share = match tokens.get(b) {
                        Some(&n) if n > t.max_tokens_per_step => t.max_tokens_per_step / n,
                        _ => 1.0,
                    };
                    let counted = engine.counts_messages().then_some(&engine.messages.counts);
                    let st = timer.step(
                        t,
                        topology,
                        &engine.view,
                        row,
                        &engine.loads,
                        &engine.tally,
                        counted,
                        share,
                    );
                    r[8..].copy_from_slice(&[
                        st.compute_us,
                        st.dispatch_us,
                        st.combine_us,
                        st.layer_us(t.tbo),
                    ]);
                }
                let at = b - batches.start;
                steps.records[at * l_n + l] = r;
                if engine.counts_messages() {
                    steps.messages[at]
                        .get_or_insert_with(Messages::default)
                        .add(&engine.messages.counts);
                }
            }
        }
    }
    Ok(steps)
}

/// The report of `segments` (covering every batch) from their replayed
/// `steps` (every batch too), summed in one order: layers, then batches.
#[inline(never)]
pub(crate) fn fold(
    workload: &Workload,
    segments: &[(Range<usize>, &Plan)],
    rule: Rule,
    cost: &CostModel,
    steps: &Steps,
) -> Result<Replay> {
    let trace = workload.trace();
    let (b_n, l_n) = (trace.num_batches(), trace.num_layers());
    if steps.batches != (0..b_n) || steps.layers != l_n || steps.timed != cost.time.is_some() {
        return Err(Error::Mismatch(format!(
            "replayed steps of batches {:?} × {} layers (timed {}) for a workload of {b_n} × {l_n} (timed {})",
            steps.batches,
            steps.layers,
            steps.timed,
            cost.time.is_some()
        )));
    }
    let mut per_layer = Vec::with_capacity(l_n);
    let mut per_layer_ir = Vec::with_capacity(l_n);
    let mut per_batch = vec![0.0; b_n];
    let mut per_batch_ir = vec![0.0; b_n];
    let mut per_batch_traffic = vec![Traffic::default(); b_n];
    let mut time = cost.time.map(|t| {
        let share = cost::batch_tokens(trace, t.top_k)
            .into_iter()
            .map(|tokens| {
                if tokens > t.max_tokens_per_step {
                    t.max_tokens_per_step / tokens
                } else {
                    1.0
                }
            })
            .collect::<Vec<f64>>();
        (
            t,
            share,
            cost::TimeReport {
                per_batch_moe_us: vec![0.0; b_n],
                per_layer_us: vec![0.0; l_n],
                per_layer_compute_us: vec![0.0; l_n],
                ..Default::default()
            },
        )
    });
    for l in 0..l_n {
        // Summed in batch order, as `evaluate` does, so `Even` matches it
        // to the bit.
        let (mut bal, mut ir) = (0.0, 0.0);
        for b in 0..b_n {
            let r = &steps.records[b * l_n + l];
            if let Some((_, _, rep)) = &mut time {
                rep.compute_us += r[8];
                rep.dispatch_us += r[9];
                rep.combine_us += r[10];
                rep.per_batch_moe_us[b] += r[11];
                rep.per_layer_us[l] += r[11];
                rep.moe_layer_us += r[11];
                rep.per_layer_compute_us[l] += r[8];
            }
            bal += r[0];
            ir += r[1];
            per_batch[b] += r[0];
            per_batch_ir[b] += r[1];
            let t = &mut per_batch_traffic[b];
            t.pairs += r[2];
            t.local += r[3];
            t.intra_node += r[4];
            t.cross_node += r[5];
            t.max_ingress += r[6];
            t.max_egress += r[7];
        }
        per_layer.push(bal / b_n as f64);
        per_layer_ir.push(ir / b_n as f64);
    }
    let bytes_per_pair = (cost.hidden as f64) * (cost.bytes_per_activation as f64);
    let mut traffic = Traffic::default();
    for b in 0..b_n {
        per_batch[b] /= l_n as f64;
        per_batch_ir[b] /= l_n as f64;
        let t = &mut per_batch_traffic[b];
        t.messages = steps.messages[b];
        t.cross_node_bytes = t.cross_node * bytes_per_pair;
        traffic.pairs += t.pairs;
        traffic.local += t.local;
        traffic.intra_node += t.intra_node;
        traffic.cross_node += t.cross_node;
        traffic.max_ingress += t.max_ingress;
        traffic.max_egress += t.max_egress;
        if let Some(m) = &mut t.messages {
            m.finish(bytes_per_pair);
            traffic
                .messages
                .get_or_insert_with(Messages::default)
                .add(m);
        }
    }
    if let Some(m) = &mut traffic.messages {
        m.finish(bytes_per_pair);
    }
    traffic.cross_node_bytes = traffic.cross_node * bytes_per_pair;
    traffic.max_ingress /= b_n as f64;
    traffic.max_egress /= b_n as f64;
    let mut algorithm: Vec<&str> = Vec::new();
    for (_, plan) in segments {
        if algorithm.last() != Some(&plan.algorithm()) {
            algorithm.push(plan.algorithm());
        }
    }
    let time = time.map(|(t, share, mut rep)| {
        let steps = (b_n * l_n).max(1) as f64;
        rep.compute_us /= steps;
        rep.dispatch_us /= steps;
        rep.combine_us /= steps;
        // Under two-batch overlap the layers' own times, less than the
        // terms' sum; otherwise that sum (summed as it always was).
        rep.moe_layer_us = if t.tbo {
            rep.moe_layer_us / steps
        } else {
            rep.compute_us + rep.dispatch_us + rep.combine_us
        };
        for x in rep
            .per_layer_us
            .iter_mut()
            .chain(&mut rep.per_layer_compute_us)
        {
            *x /= b_n.max(1) as f64;
        }
        rep.per_batch_share = share;
        rep
    });
    let profiled = segments.iter().all(|(_, p)| p.profile().is_some());
    let predictions = rule.is_grace().then(|| {
        if profiled {
            PREDICTED_FROM_PROFILE
        } else {
            PREDICTED_IN_SAMPLE
        }
        .to_string()
    });
    // The re-placements within each part, and across the parts' joins
    // (each before its part's own), in batch order.
    let mut moves = Vec::with_capacity(steps.moves.len() + steps.starts.len());
    let mut from = 0;
    for &(start, before) in steps.starts.iter().skip(1) {
        moves.extend_from_slice(steps.moves.get(from..before).unwrap_or(&[]));
        from = before;
        if let Some(i) = segments.iter().position(|(r, _)| r.start == start) {
            moves.extend(super::moves(&segments[i.saturating_sub(1)..=i], cost));
        }
    }
    moves.extend_from_slice(steps.moves.get(from..).unwrap_or(&[]));
    Ok(Replay {
        rule: rule.name().to_string(),
        sources: workload.sources().to_string(),
        predictions,
        algorithm: algorithm.join(" → "),
        batches: b_n,
        layer_ids: trace.layer_ids().to_vec(),
        balancedness: mean(&per_layer),
        imbalance_ratio: mean(&per_layer_ir),
        per_layer,
        per_layer_imbalance_ratio: per_layer_ir,
        per_batch,
        per_batch_imbalance_ratio: per_batch_ir,
        traffic,
        per_batch_traffic,
        bytes_moved: moves.iter().map(|m| m.bytes).fold(0, u64::saturating_add),
        moves,
        time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{hardware, model};
    use crate::judge::cost::Pricing;
    use crate::judge::{Served, judge_pairs, judge_pairs_replayed};
    use crate::planners::{self, Settings};
    use crate::synth::generator::{GenConfig, generate};
    use crate::synth::token_generator::{TokenGenConfig, generate_tokens};
    use crate::{Topology, Workload};

    /// Libra's schedule made and replayed in three parts, joined, against
    /// one replay of the whole: every figure equal to the bit, on counts
    /// and on token routes, with and without the time model.
    #[test]
    fn parts_made_apart_join_into_the_whole_replay() {
        let p = model::preset("deepseek-v2-lite").unwrap();
        let routes = Workload::from_tokens(
            generate_tokens(&TokenGenConfig::new(p, 6 * 128)).unwrap(),
            128,
        )
        .unwrap();
        let counts = Workload::new(generate(&GenConfig::new(p, 6)).unwrap());
        let topology = Topology::new(2, 4).unwrap();
        let mut checked = 0;
        for work in [&routes, &counts] {
            let mut settings = Settings::new();
            settings.set_str("extra_experts_per_gpu", "3").unwrap();
            let ready =
                planners::prepare(planners::find("libra").unwrap(), work, topology, &settings)
                    .unwrap();
            let base = ready.plan(None).unwrap().plan;
            let whole = ready.schedule(&base, work).unwrap().unwrap();
            let plain = crate::judge::CostModel::for_model(p);
            let pricing = Pricing::new(hardware::preset("h100-ib-ndr").unwrap(), p);
            let (timed, _) = crate::judge::cost::prepare(&pricing, &base, 6, &plain).unwrap();
            for cost in [plain, timed] {
                let ranges = [0..1, 1..4, 4..6];
                let parts: Vec<Schedule> = ranges
                    .iter()
                    .map(|r| {
                        ready
                            .schedule_batches(&base, work, r.clone())
                            .unwrap()
                            .unwrap()
                    })
                    .collect();
                let steps: Vec<Steps> = parts
                    .iter()
                    .zip(&ranges)
                    .map(|(s, r)| {
                        let st = replay_steps(work, s, &cost, r.clone()).unwrap();
                        // Sent as numbers, as between workers.
                        Steps::from_numbers(&st.to_numbers()).unwrap()
                    })
                    .collect();
                let joined = Schedule::join(parts).unwrap();
                assert_eq!(joined, whole);
                let steps = Steps::join(steps).unwrap();
                let a = judge_pairs(
                    work,
                    Served::Schedule {
                        base: &base,
                        schedule: &whole,
                    },
                    &cost,
                )
                .unwrap();
                let b = judge_pairs_replayed(work, &base, &joined, &cost, &steps).unwrap();
                let json = |v: &crate::judge::Verdict| {
                    serde_json::to_string(&(
                        &v.report,
                        &v.replay,
                        &v.replicas_per_layer,
                        &v.per_batch_bytes_copied,
                    ))
                    .unwrap()
                };
                assert_eq!(json(&a), json(&b));
                assert_eq!(a.replay.time.is_some(), cost.time.is_some());
                checked += 1;
            }
        }
        assert_eq!(checked, 4);
    }

    /// Numbers that are not steps are refused, not trusted.
    #[test]
    fn steps_from_bad_numbers_are_refused() {
        let head = |moves: f64, per_batch: f64, plans: f64| {
            vec![0.0, 1.0, 1.0, 0.0, moves, per_batch, plans]
        };
        for bad in [
            vec![],
            vec![0.0, 1.0, 1.0],
            head(0.0, 0.0, 0.0),
            vec![1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            vec![0.0, 1.0, 1.0, 2.0, 0.0, 0.0, 0.0],
            vec![0.5, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            [head(0.0, 0.0, 0.0), vec![f64::NAN; RECORD]].concat(),
            [head(1.0, 0.0, 0.0), vec![0.5; RECORD], vec![0.5, 1.0, 2.0]].concat(),
            [head(0.0, 1.0, 1.0), vec![0.5; RECORD], vec![0.5]].concat(),
        ] {
            assert!(Steps::from_numbers(&bad).is_err(), "{bad:?}");
        }
        let good = [
            head(1.0, 1.0, 1.0),
            vec![0.5; RECORD],
            vec![0.0, 1.0, 2.0],
            vec![0.5, 3.0],
        ]
        .concat();
        let steps = Steps::from_numbers(&good).unwrap();
        assert_eq!(steps.batches(), 0..1);
        assert_eq!(steps.per_batch(1).unwrap(), (vec![0.5], vec![3]));
        assert_eq!(Steps::from_numbers(&steps.to_numbers()).unwrap(), steps);
    }
}
