//! What the page and the JavaScript API draw, serialised: a [`View`] of
//! every plan's figures ([`PlanFigures`]), one layer's placement
//! ([`LayerView`]), an exported file ([`Export`]) and the planners' notes;
//! and how a workspace makes them.

use serde::{Deserialize, Serialize};

use moeplan::data::Topology;
use moeplan::judge::cost::Prediction;
use moeplan::planners::CurvePoint;

use crate::grace::GroupingView;
#[allow(clippy::wildcard_imports)]
use crate::*;

/// An exported plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The file's text.
    pub text: String,
    /// What had to change to fit the format, if anything.
    pub note: Option<String>,
}

/// Headline figures of one plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct PlanFigures {
    /// The planner's id: `base`, `eplb` or `craft`.
    pub name: String,
    /// Its title with its budget: `BASE`, `EPLB +64`, `CRAFT R = 8`.
    #[serde(default)]
    pub label: String,
    /// The budget used in the planner's unit (EPLB: redundant experts per
    /// layer, CRAFT: replicas per GPU); absent for planners without one.
    #[serde(default)]
    pub budget: Option<usize>,
    /// Mean over batches, then layers, of mean / max GPU load.
    pub balancedness: f64,
    /// Mean of max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Replicas in all.
    pub replicas: usize,
    /// Replica slots on the fullest GPU (its replica memory in experts).
    pub replica_slots_per_gpu: usize,
    /// Upper bound for these replica counts.
    pub bound: f64,
    /// Per-layer balancedness.
    pub per_layer: Vec<f64>,
    /// Replicas in each layer.
    pub replicas_per_layer: Vec<usize>,
    /// Where its (token, expert) pairs are served under the view's rule.
    #[serde(default)]
    pub traffic: PairTraffic,
    /// Imbalance ratio of each batch (mean over layers) under the view's
    /// rule — a per-batch planner's under its own.
    #[serde(default)]
    pub per_batch_imbalance: Vec<f64>,
    /// Expert bytes a per-batch planner copies in each batch; empty for a
    /// static plan (it moves nothing while serving).
    #[serde(default)]
    pub per_batch_bytes: Vec<f64>,
    /// How a per-batch planner serves (`per batch, libra-rebalance,
    /// previous-batch predictor (measured)`); `None` for a static plan.
    #[serde(default)]
    pub schedule: Option<String>,
    /// The rule these figures are measured under when it is not the
    /// view's: a per-batch plan's own (`libra-rebalance`).
    #[serde(default)]
    pub own_rule: Option<String>,
    /// Time, memory and throughput on the hardware a priced view names
    /// ([`crate::Workspace::view_priced`]): a static plan priced on the
    /// workload's mean batch, a per-batch plan on every batch; `None`
    /// unpriced.
    #[serde(default)]
    pub predicted: Option<Prediction>,
}

/// What one planner says beside its plans ([`Prepared::notes`]): how it
/// fell back or what the workload lacks (GRACE with counts only groups by
/// load, having no affinity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct PlannerNote {
    /// The planner's id (`grace`).
    pub name: String,
    /// What it says, one line.
    pub text: String,
}

/// One layer's placement: every GPU's experts, replicas marked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct LayerView {
    /// The model's layer id.
    pub layer: u32,
    /// Per GPU: (expert, copies of that expert in the layer, share of the
    /// layer's tokens this copy receives).
    pub gpus: Vec<Vec<(u32, u32, f64)>>,
}

/// Everything the page draws for one budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct View {
    /// The cluster.
    pub topology: Topology,
    /// The MoE layers' model ids.
    pub layer_ids: Vec<u32>,
    /// Batches replayed.
    pub batches: usize,
    /// The dispatch rule the plans' balance and traffic are measured under
    /// ([`Rule::name`]); the curve and the load map are always `even`.
    #[serde(default)]
    pub rule: String,
    /// Every registered planner that reads the loads, in registry order
    /// (BASE, EPLB at its default — one slot per GPU more than the experts
    /// need —, CRAFT); a planner that cannot run on this cluster is absent
    /// and explained in `notes`.
    pub plans: Vec<PlanFigures>,
    /// Why a planner is missing.
    pub notes: Vec<String>,
    /// What the planners shown say beside their plans, in their order
    /// (they change with the trace and the cluster only).
    #[serde(default)]
    pub planner_notes: Vec<PlannerNote>,
    /// The id of the focus planner (`craft`): the one the budget moves,
    /// whose curve, load map and layer view these are.
    #[serde(default)]
    pub focus: String,
    /// CRAFT's replication factor used.
    pub replicas_per_gpu: usize,
    /// CRAFT's automatic choice.
    pub auto_replicas_per_gpu: usize,
    /// The model every figure is judged on (asked, else the trace's, else
    /// DeepSeek-V3): its sizes price the traffic's bytes, the copies,
    /// replica memory and the time.
    #[serde(default)]
    pub model: String,
    /// CRAFT's balancedness-vs-R curve.
    pub curve: Vec<CurvePoint>,
    /// CRAFT's load per GPU and layer over all batches, relative to the
    /// layer's mean GPU load (1.0 = average): `heat[layer][gpu]`.
    pub heat: Vec<Vec<f64>>,
    /// The chosen layer under CRAFT.
    pub layer: LayerView,
    /// The chosen layer as GRACE grouped it, when the workload has token
    /// routes (without them there is no affinity to draw).
    #[serde(default)]
    pub grouping: Option<GroupingView>,
}

/// How a workspace makes its views and exports.
impl Workspace {
    /// The figures for one budget and the placement of layer index `layer`,
    /// under the evaluator's even split.
    pub fn view(&self, replicas_per_gpu: Option<usize>, layer: usize) -> Result<View> {
        self.view_under(replicas_per_gpu, layer, Rule::Even)
    }

    /// [`Workspace::view`] with every plan's balance and traffic measured by
    /// [`simulate`](moeplan::judge::simulate) under `rule`. Under [`Rule::Even`] the figures are
    /// exactly [`Workspace::view`]'s (CRAFT's from its preparation, the
    /// others' from [`evaluate`](moeplan::evaluate)) and the traffic is the closed form of even
    /// arrival (no replay: a budget change stays as cheap as before). A plan the
    /// budget does not move is replayed once per rule asked for in a row.
    ///
    /// ```
    /// use moeplan::judge::Rule;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 2, gpus_per_node: 4, groups: 1 })?;
    /// let v = ws.view_under(Some(2), 0, Rule::Optimal)?;
    /// assert_eq!(v.rule, "optimal");
    /// let t = &v.plans[2].traffic;
    /// assert!((t.local + t.intra_node + t.cross_node - t.pairs).abs() < 1e-6 * t.pairs);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn view_under(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
    ) -> Result<View> {
        self.view_inner(replicas_per_gpu, layer, rule, false, None, false)
    }

    /// [`Workspace::view_under`] (with the per-batch series when
    /// `batches`) with every plan priced on `pricing`'s hardware
    /// ([`PlanFigures::predicted`]), each speedup over BASE's. A static
    /// plan is priced on the workload's mean batch — one batch, so a
    /// budget change stays within a few milliseconds; `moeplan eval
    /// --hardware` prices every batch — and a per-batch plan (Libra) on
    /// every batch, since its copies change from batch to batch, by pair
    /// traffic (as the mean batch prices the static plans) and only with
    /// the series (`batches`) or when kept from before: its price is a
    /// replay of every batch. The plans the budget does not move are priced
    /// once per rule and pricing.
    ///
    /// ```
    /// use moeplan::judge::{Rule, cost::Pricing};
    /// use moeplan::{data::{hardware, model}, synth::generator};
    /// use moeplan_view::{Cluster, Workspace};
    /// let m = model::preset("olmoe")?;
    /// let ws = Workspace::new(generator::generate(&generator::GenConfig::new(m, 4))?, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let p = Pricing::new(hardware::preset("h100-ib-ndr")?, m);
    /// let v = ws.view_priced(Some(2), 0, Rule::Even, false, Some(&p))?;
    /// let base = v.plans[0].predicted.as_ref().unwrap();
    /// assert_eq!((v.plans[0].name.as_str(), base.speedup), ("base", Some(1.0)));
    /// assert!(v.plans[2].predicted.as_ref().unwrap().step_ms > 0.0);
    /// assert!(ws.view(Some(2), 0)?.plans[2].predicted.is_none());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn view_priced(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
        batches: bool,
        pricing: Option<&Pricing>,
    ) -> Result<View> {
        self.view_inner(replicas_per_gpu, layer, rule, batches, pricing, false)
    }

    /// [`Workspace::view_priced`] with each planner judged under the rule
    /// its system serves under where it has one
    /// ([`PlannerSpec::serves_under`](moeplan::planners::PlannerSpec):
    /// GRACE under its topology-aware routing), the others under `rule`,
    /// the engine's; a row judged apart says so in
    /// [`PlanFigures::own_rule`]. The page's default: no row is judged by a
    /// rule its authors would not use without saying so.
    ///
    /// ```
    /// use moeplan::judge::Rule;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 2, gpus_per_node: 4, groups: 1 })?;
    /// let v = ws.view_own_rules(Some(2), 0, Rule::Vllm, false, None)?;
    /// let rule = |name: &str| v.plans.iter().find(|p| p.name == name).map(|p| p.own_rule.clone());
    /// assert_eq!(rule("grace"), Some(Some("grace-topology".to_string())));
    /// assert_eq!(rule("craft"), Some(None)); // the view's, vllm
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn view_own_rules(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
        batches: bool,
        pricing: Option<&Pricing>,
    ) -> Result<View> {
        self.view_inner(replicas_per_gpu, layer, rule, batches, pricing, true)
    }

    /// [`Workspace::view_under`] with every plan's imbalance per batch
    /// ([`PlanFigures::per_batch_imbalance`]). A view without it leaves a
    /// plan's series out under `even` unless it was computed before (the
    /// planners' own figures are per layer, and a series takes a replay:
    /// about 7 ms natively for DeepSeek-V3's 64 batches on 64 GPUs, most of
    /// a budget change), so the page asks for them after a new trace or
    /// cluster and once the slider rests.
    ///
    /// ```
    /// use moeplan::judge::Rule;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let craft = |v: moeplan_view::View| v.plans.into_iter().find(|p| p.name == "craft").unwrap();
    /// assert!(craft(ws.view(Some(3), 0)?).per_batch_imbalance.is_empty());
    /// assert_eq!(craft(ws.view_with_batches(Some(3), 0, Rule::Even)?).per_batch_imbalance.len(), 4);
    /// assert_eq!(craft(ws.view(Some(3), 0)?).per_batch_imbalance.len(), 4); // kept
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn view_with_batches(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
    ) -> Result<View> {
        self.view_inner(replicas_per_gpu, layer, rule, true, None, false)
    }

    pub(crate) fn view_inner(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
        batches: bool,
        pricing: Option<&Pricing>,
        own_rules: bool,
    ) -> Result<View> {
        let focus = self.focus()?.plan(replicas_per_gpu)?;
        let l = self.trace().num_layers();
        if layer >= l {
            return Err(Error::Argument(format!(
                "layer index {layer} is outside 0..{l}"
            )));
        }
        let mut plans = Vec::new();
        let mut notes = Vec::new();
        if let Some(s) = self.whole.as_ref().and_then(Workload::num_sources) {
            let d = self.topology.num_gpus();
            notes.push(format!(
                "the trace's {s} source ranks on {d} GPUs: rank r sends from GPU r mod {d}, as if {} ranks shared a GPU",
                s.div_ceil(d)
            ));
        }
        for (i, entry) in self.entries.iter().enumerate() {
            let planner = entry.id.planner()?;
            // The row's rule: its system's own where asked for, else the view's.
            let own = planner
                .spec()
                .serves_under
                .filter(|r| own_rules && *r != rule);
            let rule = own.unwrap_or(rule);
            let own_rule = own.map(|r| r.name().to_string());
            match &entry.state {
                State::Failed(e) => notes.push(format!("{}: {e}", entry.display)),
                State::Pending if planner.per_batch() => notes.push(format!(
                    "{}: re-placing every batch for this cluster, shown next",
                    entry.display
                )),
                State::Pending => notes.push(format!(
                    "{}: grouping experts by co-activation for this cluster, shown next",
                    entry.display
                )),
                State::Fixed(fixed) => {
                    let mut f = figures(planner, fixed.budget, &fixed.report);
                    f.per_batch_imbalance = self.even_batches(&fixed.plan, batches)?;
                    if rule == Rule::Even {
                        f.traffic = self.judge.even_traffic(&fixed.plan)?;
                    } else {
                        self.measure(&mut f, &fixed.plan, rule)?;
                    }
                    if let Some(p) = pricing {
                        f.predicted = Some(self.judge.price_mean(&fixed.plan, rule, p)?);
                    }
                    f.own_rule = own_rule;
                    plans.push(f);
                }
                State::Scheduled(s) => {
                    let mut f = s.figures(planner);
                    if let Some(p) = pricing {
                        // Under its own rule, whatever the view's. Pricing
                        // replays every batch: only in the follow-up with
                        // the series (`batches`), or kept from before, so
                        // a Libra or cluster change answers first.
                        f.predicted = self.judge.price_schedule(&s.judged, p, batches)?;
                    }
                    plans.push(f);
                }
                State::Slider(ready) => {
                    // The focus is planned once above, for the charts too.
                    let other;
                    let planned = if i == self.focus {
                        &focus
                    } else {
                        other = ready.plan(replicas_per_gpu)?;
                        &other
                    };
                    let mut f = self.slider_under(planner, planned, rule, batches)?;
                    if let Some(p) = pricing {
                        f.predicted = Some(self.judge.price_mean(&planned.plan, rule, p)?);
                    }
                    f.own_rule = own_rule;
                    plans.push(f);
                }
            }
        }
        // Every speedup over BASE's throughput, when BASE is shown.
        let base = plans
            .iter()
            .find(|f| f.name == "base")
            .and_then(|f| f.predicted.clone());
        if let Some(base) = base {
            for p in plans.iter_mut().filter_map(|f| f.predicted.as_mut()) {
                p.compare_with(&base);
            }
        }
        Ok(View {
            topology: self.topology,
            layer_ids: self.trace().layer_ids().to_vec(),
            batches: self.trace().num_batches(),
            rule: rule.name().to_string(),
            plans,
            notes,
            planner_notes: self.planner_notes(),
            focus: self
                .entries
                .get(self.focus)
                .map(|e| e.id.to_string())
                .unwrap_or_default(),
            replicas_per_gpu: focus.budget.unwrap_or(0),
            auto_replicas_per_gpu: self.auto_r,
            model: self.judge.model().preset.name.to_string(),
            curve: self.curve.clone(),
            heat: self.heat(&focus.plan),
            layer: self.layer_view(&focus.plan, layer),
            grouping: self.grouping_view(layer)?,
        })
    }

    /// The focus planner's (CRAFT's) plan for a budget in the project's JSON
    /// or SGLang's `--init-expert-location` JSON (`format`: `moeplan` or
    /// `sglang`).
    /// SGLang needs the same slot count on every GPU in every layer; a CRAFT
    /// plan that varies is padded to the closest such plan
    /// ([`Plan::padded_to_uniform`]) and the export says so.
    pub fn export(&self, replicas_per_gpu: Option<usize>, format: &str) -> Result<Export> {
        let Some(file) = export_formats().find(|f| f.name() == format) else {
            let names: Vec<&str> = export_formats().map(PlanFormat::name).collect();
            return Err(Error::Argument(format!(
                "unknown export format {format:?}: {}",
                names.join(" or ")
            )));
        };
        let plan = self.focus_plan(replicas_per_gpu)?;
        let (plan, meta, note) = match file {
            PlanFormat::Sglang if plan.uniform_slots_per_gpu().is_none() => {
                let padded = plan.padded_to_uniform(self.summed.view())?;
                let added = padded.summary().replicas - plan.summary().replicas;
                let per_gpu = padded.uniform_slots_per_gpu().unwrap_or(0);
                let note = format!(
                    "SGLang needs the same slot count on every GPU in every layer: padded to {per_gpu} slots per GPU with {added} more replicas (the hottest experts per copy)"
                );
                (padded, self.export_meta(file, replicas_per_gpu), Some(note))
            }
            _ => (plan, self.export_meta(file, replicas_per_gpu), None),
        };
        Ok(Export {
            text: file.write(&plan, &meta)?,
            note,
        })
    }

    /// What an exported file records: moeplan's JSON the model's layers
    /// and the focus planner's options; SGLang's rows only a layer count
    /// the trace knows (an assumed one could place MoE positions wrongly).
    pub(crate) fn export_meta(
        &self,
        file: PlanFormat,
        replicas_per_gpu: Option<usize>,
    ) -> PlanMeta {
        match file {
            PlanFormat::Moeplan => PlanMeta {
                model_layers: Some(self.trace().model_layers()),
                model: self.trace().model().map(str::to_string),
                holdout: None,
                options: self.focus_options(replicas_per_gpu),
            },
            _ => PlanMeta {
                model_layers: self.trace().known_model_layers(),
                ..PlanMeta::default()
            },
        }
    }

    /// The focus planner's options for a budget (the rest at their
    /// defaults, as the workspace plans it), as a plan file records them.
    pub(crate) fn focus_options(&self, replicas_per_gpu: Option<usize>) -> Option<Settings> {
        let spec = focus_planner()?.spec();
        let budget = spec
            .options
            .iter()
            .find(|o| matches!(o.kind, moeplan::planners::OptionKind::Budget(_)))?;
        let value = replicas_per_gpu.map_or(Value::Auto, Value::Count);
        let set = Settings::new().with(budget.name, value).ok()?;
        Some(set.resolved_for(spec))
    }
}
