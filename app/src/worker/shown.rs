//! The figures last shown, and what an answer sends of a new view: only
//! what differs from them.

use moeplan_view::View;

use super::{predicted, shares};
use crate::protocol::{CurvePoint, Figures, Frame, Grouping, Heat, Placement, Slot, Update};

/// Every figure of one view, in the page's form ([`Update`] with every part).
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// What only a new trace or cluster changes.
    pub frame: Frame,
    /// Every plan's figures, in the frame's order.
    pub plans: Vec<Figures>,
    /// CRAFT's R.
    pub replicas_per_gpu: usize,
    /// The dispatch rule of the plans' figures.
    pub rule: String,
    /// CRAFT's load map.
    pub heat: Heat,
    /// The chosen layer under CRAFT.
    pub placement: Placement,
    /// The chosen layer as GRACE grouped it (token routes only).
    pub grouping: Option<Grouping>,
}

impl Shown {
    /// The page's form of a core [`View`].
    pub fn of(v: &View) -> Result<Shown, String> {
        Ok(Shown {
            frame: Frame {
                topology: v.topology.to_string(),
                layer_ids: v.layer_ids.clone(),
                batches: v.batches,
                plans: v.plans.iter().map(|p| p.name.clone()).collect(),
                notes: v.notes.clone(),
                planner_notes: v.planner_notes.clone(),
                focus: v.focus.clone(),
                auto_replicas_per_gpu: v.auto_replicas_per_gpu,
                model: v.model.clone(),
                curve: v
                    .curve
                    .iter()
                    .map(|p| CurvePoint {
                        replicas_per_gpu: p.replicas_per_gpu,
                        replicas: p.replicas,
                        predicted_balancedness: p.predicted_balancedness,
                        bound: p.bound,
                    })
                    .collect(),
            },
            plans: v
                .plans
                .iter()
                .map(|p| Figures {
                    name: p.name.clone(),
                    label: p.label.clone(),
                    balancedness: p.balancedness,
                    imbalance_ratio: p.imbalance_ratio,
                    replicas: p.replicas,
                    replica_slots_per_gpu: p.replica_slots_per_gpu,
                    bound: p.bound,
                    rule: p.own_rule.clone().unwrap_or_else(|| v.rule.clone()),
                    traffic: shares(&p.traffic),
                    cross_node_gb: p.traffic.cross_node_bytes / 1e9,
                    per_layer: p.per_layer.clone(),
                    replicas_per_layer: p.replicas_per_layer.clone(),
                    per_batch_imbalance: p.per_batch_imbalance.clone(),
                    per_batch_bytes: p.per_batch_bytes.clone(),
                    schedule: p.schedule.clone(),
                    predicted: p.predicted.as_ref().map(predicted),
                })
                .collect(),
            replicas_per_gpu: v.replicas_per_gpu,
            rule: v.rule.clone(),
            heat: Heat::from_rows(&v.heat).ok_or("the load map's layers differ in GPUs")?,
            placement: Placement {
                layer: v.layer.layer,
                gpus: v
                    .layer
                    .gpus
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|&(expert, copies, share)| Slot {
                                expert,
                                copies,
                                share,
                            })
                            .collect()
                    })
                    .collect(),
            },
            grouping: v.grouping.as_ref().map(|g| Grouping {
                layer: g.layer,
                ratio: g.ratio,
                curve: g
                    .curve
                    .iter()
                    .map(|p| (p.ratio, p.size_deviation, p.utilisation))
                    .collect(),
                order: g.order.clone(),
                sizes: g.sizes.clone(),
                affinity: g.affinity.clone(),
            }),
        })
    }

    /// What the page, showing `before` (or nothing), needs to show `self`.
    ///
    /// ```
    /// use moeplan_app::worker::Shown;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let a = Shown::of(&ws.view(Some(2), 0)?)?;
    /// let b = Shown::of(&ws.view(Some(4), 0)?)?;
    /// let full = a.update_from(None);
    /// assert!(full.frame.is_some() && full.plans.len() == a.plans.len() && full.heat.is_some());
    /// let budget = b.update_from(Some(&a));
    /// assert!(budget.frame.is_none() && budget.heat.is_some());
    /// let names: Vec<_> = budget.plans.iter().map(|p| p.name.as_str()).collect();
    /// assert_eq!(names, ["craft"]); // BASE and EPLB stay as they are
    /// assert_eq!(b.update_from(Some(&b)).plans.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update_from(&self, before: Option<&Shown>) -> Update {
        let before = before.filter(|b| b.frame == self.frame);
        let changed = |old: Option<&Figures>, new: &Figures| old != Some(new);
        Update {
            frame: before.is_none().then(|| self.frame.clone()),
            plans: self
                .plans
                .iter()
                .filter(|p| {
                    changed(
                        before.and_then(|b| b.plans.iter().find(|o| o.name == p.name)),
                        p,
                    )
                })
                .cloned()
                .collect(),
            replicas_per_gpu: self.replicas_per_gpu,
            rule: self.rule.clone(),
            heat: (before.map(|b| &b.heat) != Some(&self.heat)).then(|| self.heat.clone()),
            placement: (before.map(|b| &b.placement) != Some(&self.placement))
                .then(|| self.placement.clone()),
            grouping: match before {
                Some(b) if b.grouping == self.grouping => None,
                _ => self.grouping.clone(),
            },
        }
    }
}
