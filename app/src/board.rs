//! What the page shows, one signal per part an answer may change
//! ([`Update`]): the frame (a new trace or cluster), the plans' figures,
//! CRAFT's R, the load map and the layer's placement. A budget change sets
//! CRAFT's figures, R, the load map and the placement; whatever reads only
//! the frame or BASE's and EPLB's figures is not touched.

use leptos::prelude::*;

use moeplan_view::{ServingView, SweepPoint};

use moeplan_view::page::{CrossTable, Figures, Frame, Grouping, Heat, PlacedLayer};

/// The page's figures, as signals (a `Copy` handle).
#[derive(Clone, Copy)]
pub struct Board {
    /// What only a new trace or cluster changes (`None` until the first view).
    pub frame: RwSignal<Option<Frame>>,
    /// Every plan's figures, in the frame's order.
    pub plans: RwSignal<Vec<Figures>>,
    /// CRAFT's R.
    pub replicas_per_gpu: RwSignal<usize>,
    /// The dispatch rule the plans' figures are measured under.
    pub rule: RwSignal<String>,
    /// CRAFT's load map.
    pub heat: RwSignal<Heat>,
    /// The chosen layer under CRAFT.
    pub placement: RwSignal<PlacedLayer>,
    /// The chosen layer as GRACE grouped it (`None`: no token routes).
    pub grouping: RwSignal<Option<Grouping>>,
    /// Plans across several loaded traces (`None`: fewer than two loaded).
    pub cross: RwSignal<Option<CrossTable>>,
    /// Serving with re-planning, the last replay (`None`: not asked for,
    /// or refused).
    pub serving: RwSignal<Option<ServingView>>,
    /// The curve over re-plan intervals at the last window asked for.
    pub serving_sweep: RwSignal<Option<Vec<SweepPoint>>>,
}

impl Default for Board {
    fn default() -> Self {
        Self::new()
    }
}

impl Board {
    /// An empty board.
    pub fn new() -> Self {
        Board {
            frame: RwSignal::new(None),
            plans: RwSignal::new(Vec::new()),
            replicas_per_gpu: RwSignal::new(0),
            rule: RwSignal::new(String::new()),
            heat: RwSignal::new(Heat::default()),
            placement: RwSignal::new(PlacedLayer::default()),
            grouping: RwSignal::new(None),
            cross: RwSignal::new(None),
            serving: RwSignal::new(None),
            serving_sweep: RwSignal::new(None),
        }
    }

    /// Takes one answer: sets the signals of the parts it carries, and only
    /// those (the worker sent only what changed).
    pub fn apply(self, u: moeplan_view::page::Update) {
        let new_frame = u.frame.is_some();
        if let Some(frame) = u.frame {
            self.frame.set(Some(frame));
            self.plans.set(u.plans);
        } else if !u.plans.is_empty() {
            self.plans.update(|plans| {
                for new in u.plans {
                    match plans.iter_mut().find(|p| p.name == new.name) {
                        Some(old) => *old = new,
                        None => plans.push(new),
                    }
                }
            });
        }
        if self.replicas_per_gpu.get_untracked() != u.replicas_per_gpu {
            self.replicas_per_gpu.set(u.replicas_per_gpu);
        }
        if self.rule.with_untracked(|r| *r != u.rule) {
            self.rule.set(u.rule);
        }
        if let Some(h) = u.heat {
            self.heat.set(h);
        }
        if let Some(p) = u.placement {
            self.placement.set(p);
        }
        // A new trace or cluster carries its grouping, or none (no token
        // routes); otherwise a grouping is sent only when it changed.
        if new_frame || u.grouping.is_some() {
            self.grouping.set(u.grouping);
        }
    }

    /// One plan's figures, by name: changes only when that plan's do.
    pub fn plan(self, name: &str) -> Memo<Option<Figures>> {
        let plans = self.plans;
        let name = name.to_string();
        Memo::new(move |_| plans.with(|ps| ps.iter().find(|p| p.name == name).cloned()))
    }

    /// The focus plan's name (the one the budget moves): the frame's, else
    /// the registry's choice until the first answer.
    pub fn focus(self) -> Memo<String> {
        let frame = self.frame;
        Memo::new(move |_| {
            frame
                .with(|f| f.as_ref().map(|f| f.focus.clone()))
                .filter(|f| !f.is_empty())
                .or_else(|| moeplan_view::focus_spec().map(|p| p.id.to_string()))
                .unwrap_or_default()
        })
    }

    /// The focus plan's figures: changes when they do.
    pub fn focus_plan(self) -> Memo<Option<Figures>> {
        let (plans, focus) = (self.plans, self.focus());
        Memo::new(move |_| {
            focus.with(|f| plans.with(|ps| ps.iter().find(|p| &p.name == f).cloned()))
        })
    }

    /// The other plans that replicate (EPLB), drawn for reference beside
    /// the focus: a budget change, which moves only the focus, leaves this
    /// memo's value, and so what reads it, alone.
    pub fn references(self) -> Memo<Vec<Figures>> {
        let (plans, focus) = (self.plans, self.focus());
        Memo::new(move |_| {
            focus.with(|f| {
                plans.with(|ps| {
                    ps.iter()
                        .filter(|p| &p.name != f && p.replicas > 0)
                        .cloned()
                        .collect()
                })
            })
        })
    }

    /// The model ids of the frame's layers (changes with the frame only).
    pub fn layer_ids(self) -> Memo<Vec<u32>> {
        let frame = self.frame;
        Memo::new(move |_| {
            frame.with(|f| f.as_ref().map(|f| f.layer_ids.clone()).unwrap_or_default())
        })
    }
}
