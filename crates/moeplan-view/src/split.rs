//! A per-batch planner's re-plan shared by two workers: each schedules and
//! replays its own batches ([`moeplan::planners::Prepared::schedule_batches`],
//! [`moeplan::judge::replay_steps`]), the page's worker joins the parts and
//! keeps the result as the schedule [`Workspace::replan_scheduled`] would
//! have made, to the bit ([`moeplan::judge::judge_pairs_replayed`]). On two
//! cores a Libra option change takes about half as long (docs/speed.md).
//!
//! A part travels as plain numbers ([`SchedulePart::to_numbers`]): the
//! copies each batch adds to the base, layer by layer and GPU by GPU, and
//! the replay's steps; the receiver checks them as it rebuilds the plans.

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use moeplan::Workload;
use moeplan::data::Topology;
use moeplan::data::{LayerPlacement, Plan};
use moeplan::error::{Error, Result};
use moeplan::judge::replay_steps;
use moeplan::judge::{CostModel, ModelChoice, Placement, Schedule, Steps, Strategy};
use moeplan::planners::GROUPS;
use moeplan::planners::{PlannerId, Settings, Value, prepare};

use crate::state::{Scheduled, State, too_large_per_batch};
use crate::{Cluster, KEPT_SCHEDULES, Workspace};

/// A per-batch re-plan to share: which planner, with which options, on
/// which cluster, and the batches a second worker takes (`from..batches`;
/// the asking worker takes `0..from`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitJob {
    /// The per-batch planner (`libra`).
    pub planner: PlannerId,
    /// The cluster planned on.
    pub cluster: Cluster,
    /// The per-batch planners' options as asked (names and values as the
    /// CLI reads them).
    pub options: Vec<(String, String)>,
    /// The first batch of the second worker's part.
    pub from: usize,
    /// The workload's batches.
    pub batches: usize,
    /// The model the workspace judges on ([`Workspace::asked_model`]):
    /// the bytes each part's steps count are that model's.
    pub model: Option<String>,
}

impl SplitJob {
    /// The second worker's batches.
    pub fn theirs(&self) -> Range<usize> {
        self.from..self.batches
    }

    /// The asking worker's batches.
    pub fn mine(&self) -> Range<usize> {
        0..self.from
    }

    /// The planner's settings on this job's cluster, resolved (the key a
    /// workspace keeps a schedule under).
    fn settings(&self) -> Result<(PlannerId, Settings)> {
        let id = self.planner;
        let mut s = Settings::new();
        for (name, value) in &self.options {
            s.set_str(name, value)?;
        }
        let s = s.with(GROUPS.name, Value::Count(self.cluster.groups))?;
        Ok((id, s))
    }
}

/// One worker's part of a [`SplitJob`]: its batches' schedule and replayed
/// steps, and the base the schedule's copies go onto.
#[derive(Debug, Clone)]
pub struct SchedulePart {
    base: Plan,
    schedule: Schedule,
    steps: Steps,
    /// What the planner noted when it prepared (shown in its row).
    notes: Vec<String>,
}

/// Copies a GPU may add to one layer of the base in a part read back (a
/// bound on what is trusted, far above Libra's N).
const MOST_COPIES: usize = 1 << 12;

impl SchedulePart {
    /// The part as numbers: its batches, its copies per batch, then per
    /// batch, layer and GPU the number of slots added to the base and
    /// their experts, then its steps ([`Steps::to_numbers`]).
    pub fn to_numbers(&self) -> Vec<f64> {
        let mut out = Vec::new();
        let Placement::Schedule(parts) = &self.schedule.strategy.placement else {
            return out;
        };
        let range = self.steps.batches();
        out.extend([range.start as f64, range.end as f64]);
        out.extend(self.schedule.copies_per_batch.iter().map(|&c| c as f64));
        for (_, plan) in parts {
            for (layer, base) in plan.layers().iter().zip(self.base.layers()) {
                for (slots, own) in layer.gpus.iter().zip(&base.gpus) {
                    let added = slots.get(own.len()..).unwrap_or(&[]);
                    out.push(added.len() as f64);
                    out.extend(added.iter().map(|&e| f64::from(e)));
                }
            }
        }
        out.extend(self.steps.to_numbers());
        out
    }

    /// A part another worker sent ([`SchedulePart::to_numbers`]), read
    /// with `mine`'s base and schedule settings (the same job's): every
    /// plan rebuilt and checked ([`Plan::extending`]).
    pub fn from_numbers(numbers: &[f64], mine: &SchedulePart) -> Result<SchedulePart> {
        let bad = |why: String| Error::Argument(format!("a schedule part: {why}"));
        let mut at = 0usize;
        let mut next = |what: &str, most: usize| -> Result<usize> {
            let x = *numbers
                .get(at)
                .ok_or_else(|| bad(format!("ends before its {what}")))?;
            at += 1;
            if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x <= most as f64 {
                Ok(x as usize)
            } else {
                Err(bad(format!("its {what} {x} is not a count up to {most}")))
            }
        };
        let base = &mine.base;
        let most_batches = numbers.len();
        let start = next("first batch", most_batches)?;
        let end = next("end batch", most_batches)?;
        if end <= start {
            return Err(bad(format!("batches {start}..{end}")));
        }
        let copies = (start..end)
            .map(|_| next("copies", usize::MAX >> 12))
            .collect::<Result<Vec<usize>>>()?;
        let e_n = base.num_experts();
        let algorithm = match &mine.schedule.strategy.placement {
            Placement::Schedule(p) => p.first().map_or("", |(_, plan)| plan.algorithm()),
            Placement::Static(p) => p.algorithm(),
        }
        .to_string();
        let mut plans = Vec::with_capacity(end - start);
        for b in start..end {
            let layers = base
                .layers()
                .iter()
                .map(|bl| {
                    let gpus = bl
                        .gpus
                        .iter()
                        .map(|own| {
                            let k = next("slots", MOST_COPIES)?;
                            let mut slots = Vec::with_capacity(own.len() + k);
                            slots.extend_from_slice(own);
                            for _ in 0..k {
                                slots.push(next("expert", e_n.saturating_sub(1))? as u32);
                            }
                            Ok(slots)
                        })
                        .collect::<Result<Vec<Vec<u32>>>>()?;
                    Ok(LayerPlacement {
                        layer: bl.layer,
                        gpus,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            plans.push((b..b + 1, Plan::extending(base, layers, algorithm.clone())?));
        }
        let steps = Steps::from_numbers(numbers.get(at..).unwrap_or(&[]))?;
        if steps.batches() != (start..end) {
            return Err(bad(format!(
                "its steps are of batches {:?}, its plans of {start}..{end}",
                steps.batches()
            )));
        }
        let schedule = Schedule {
            strategy: Strategy {
                placement: Placement::Schedule(plans),
                rule: mine.schedule.strategy.rule,
            },
            copies_per_batch: copies,
            extra_slots_per_gpu: mine.schedule.extra_slots_per_gpu,
            resident_slots_per_gpu: mine.schedule.resident_slots_per_gpu,
            about: mine.schedule.about.clone(),
        };
        Ok(SchedulePart {
            base: base.clone(),
            schedule,
            steps,
            notes: mine.notes.clone(),
        })
    }
}

/// `job`'s part for `batches` on `work` as given (a workload with more
/// source ranks than the cluster has GPUs is folded onto them, as a
/// workspace folds it): what the second worker runs. `None` where the
/// planner cannot schedule those batches alone.
///
/// ```
/// use moeplan_view::{schedule_part, Cluster, SplitJob};
/// use moeplan::{synth::generator, data::model, Workload};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let job = SplitJob { planner: "libra".parse()?, cluster: Cluster { nodes: 1, gpus_per_node: 8, groups: 1 }, options: vec![], from: 2, batches: 4, model: None };
/// let part = schedule_part(&Workload::new(t), &job, job.theirs())?.expect("Libra schedules a part alone");
/// assert!(!part.to_numbers().is_empty());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn schedule_part(
    work: &Workload,
    job: &SplitJob,
    batches: Range<usize>,
) -> Result<Option<SchedulePart>> {
    let topology = Topology::new(job.cluster.nodes, job.cluster.gpus_per_node)?;
    let folded;
    let work = match work.num_sources() {
        Some(s) if s > topology.num_gpus() => {
            folded = work.with_sources_on(topology.num_gpus())?;
            &folded
        }
        _ => work,
    };
    let cost = ModelChoice::choose(job.model.as_deref(), work.trace())?.cost();
    part_on(work, topology, &cost, job, batches)
}

/// `job`'s part for `batches` on a workload already on the job's cluster.
fn part_on(
    work: &Workload,
    topology: Topology,
    cost: &CostModel,
    job: &SplitJob,
    batches: Range<usize>,
) -> Result<Option<SchedulePart>> {
    if job.batches != work.trace().num_batches() {
        return Err(Error::Mismatch(format!(
            "a job for {} batches, the workload has {}",
            job.batches,
            work.trace().num_batches()
        )));
    }
    let (id, settings) = job.settings()?;
    let ready = prepare(id.planner()?, work, topology, &settings)?;
    let base = ready.plan(None)?.plan;
    let Some(schedule) = ready.schedule_batches(&base, work, batches.clone())? else {
        return Ok(None);
    };
    let steps = replay_steps(work, &schedule, cost, batches)?;
    Ok(Some(SchedulePart {
        base,
        schedule,
        steps,
        notes: ready.notes(),
    }))
}

impl Workspace {
    /// The share-able part of a per-batch re-plan with `options`: the
    /// first per-batch planner shown whose schedule at these options is
    /// not kept, its batches split in two (the second worker's half from
    /// the middle). `None` when nothing would be replayed, or the workload
    /// is too small to split (one batch) or too large to replay here.
    pub fn split_job(&self, options: &[(String, String)]) -> Option<SplitJob> {
        let batches = self.trace().num_batches();
        let entry = self.split_entry()?;
        let job = SplitJob {
            planner: entry.id,
            cluster: self.cluster,
            options: options.to_vec(),
            from: batches.div_ceil(2),
            batches,
            model: self.asked.clone(),
        };
        let (id, settings) = job.settings().ok()?;
        let key = settings.resolved_for(id.planner().ok()?.spec());
        let kept = self
            .schedules
            .iter()
            .any(|(i, k, ..)| *i == id && *k == key);
        (!kept).then_some(job)
    }

    /// Whether a per-batch planner's re-plans here can be shared
    /// ([`Workspace::split_job`]): one is shown and replayed, on two
    /// batches or more. A helper needs the trace only then.
    pub fn shares_per_batch(&self) -> bool {
        self.split_entry().is_some()
    }

    /// The first per-batch planner shown whose re-plans can be shared.
    fn split_entry(&self) -> Option<&crate::state::Entry> {
        if self.trace().num_batches() < 2
            || too_large_per_batch(self.work(), self.topology).is_some()
        {
            return None;
        }
        self.entries.iter().find(|e| {
            e.id.planner().is_ok_and(|p| p.per_batch()) && !matches!(e.state, State::Failed(_))
        })
    }

    /// This workspace's part of `job` (its first batches).
    pub fn schedule_part(&self, job: &SplitJob) -> Result<Option<SchedulePart>> {
        if job.cluster != self.cluster {
            return Err(Error::Mismatch(
                "a job for another cluster than the workspace's".into(),
            ));
        }
        if job.model != self.asked {
            return Err(Error::Mismatch(
                "a job for another model than the workspace's".into(),
            ));
        }
        part_on(
            self.work(),
            self.topology,
            self.judge.cost(),
            job,
            job.mine(),
        )
    }

    /// Keeps `job`'s parts, joined, as the schedule a re-plan with its
    /// options makes ([`Workspace::replan_scheduled`] then finds it kept).
    pub fn keep_parts(&mut self, job: &SplitJob, parts: Vec<SchedulePart>) -> Result<()> {
        let (id, settings) = job.settings()?;
        let key = settings.resolved_for(id.planner()?.spec());
        // The first part is this workspace's own (its base and notes); the
        // others were read against it (`SchedulePart::from_numbers`).
        let first = parts
            .first()
            .ok_or_else(|| Error::Argument("no parts to keep".into()))?;
        let (base, notes) = (first.base.clone(), first.notes.clone());
        if base.topology() != self.topology || parts.iter().any(|p| p.base != base) {
            return Err(Error::Mismatch(
                "a part's base is not the workspace's".into(),
            ));
        }
        let (schedules, steps): (Vec<Schedule>, Vec<Steps>) =
            parts.into_iter().map(|p| (p.schedule, p.steps)).unzip();
        let schedule = Schedule::join(schedules)?;
        let steps = Steps::join(steps)?;
        let s = Arc::new(Scheduled {
            judged: self.judge.schedule_joined(&base, schedule, &steps)?,
        });
        self.schedules.retain(|(i, k, ..)| !(*i == id && *k == key));
        self.schedules.push((id, key, s, notes));
        if self.schedules.len() > KEPT_SCHEDULES {
            self.schedules.remove(0);
        }
        Ok(())
    }
}
