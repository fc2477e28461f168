//! How a workspace measures its plans: each plan's replay under the view's
//! rule (balance, traffic, per-batch series) and its prediction on a
//! hardware preset, each kept once made; and the load map and placement
//! the view draws.

use super::*;

impl Workspace {
    /// A static plan priced on the mean batch.
    pub(crate) fn predict(
        &self,
        plan: &Plan,
        rule: Rule,
        pricing: &Pricing,
    ) -> Result<Option<Prediction>> {
        let served = Served::Plan { plan, rule };
        price(&self.mean, served, &self.cost, pricing).map(Some)
    }

    /// A prediction kept for (planner, rule, pricing), else made and kept.
    pub(crate) fn kept_prediction(
        &self,
        id: PlannerId,
        rule: Rule,
        pricing: &Pricing,
        make: impl FnOnce() -> Result<Option<Prediction>>,
    ) -> Result<Option<Prediction>> {
        if let Ok(kept) = self.priced.lock() {
            if let Some((.., p)) = kept
                .iter()
                .find(|(i, r, pr, _)| *i == id && *r == rule && pr == pricing)
            {
                return Ok(Some(p.clone()));
            }
        }
        let made = make()?;
        if let (Some(p), Ok(mut kept)) = (&made, self.priced.lock()) {
            kept.retain(|(i, ..)| *i != id);
            kept.push((id, rule, pricing.clone(), p.clone()));
        }
        Ok(made)
    }

    /// A plan's pair traffic under `even` on a workload with sources: the
    /// replay of every batch summed into one ([`Workspace::one_batch`]);
    /// the sum of the batches' to rounding.
    pub(crate) fn sources_even_traffic(&self, plan: &Plan) -> Result<PairTraffic> {
        let work = self.one_batch.as_deref().unwrap_or(&self.work);
        let r = simulate_pairs(work, &Strategy::fixed(plan.clone(), Rule::Even), &self.cost)?;
        Ok(PairTraffic::from(&r.traffic))
    }

    /// [`Workspace::sources_even_traffic`] of a fixed plan, kept.
    pub(crate) fn fixed_even_traffic(&self, fixed: &Fixed) -> Result<PairTraffic> {
        if let Ok(kept) = fixed.even_traffic.lock() {
            if let Some(t) = *kept {
                return Ok(t);
            }
        }
        let t = self.sources_even_traffic(&fixed.plan)?;
        if let Ok(mut kept) = fixed.even_traffic.lock() {
            *kept = Some(t);
        }
        Ok(t)
    }

    pub(crate) fn measure(&self, plan: &Plan, rule: Rule) -> Result<Measured> {
        // The view shows pair traffic, not token messages: left out.
        let r = simulate_pairs(&self.work, &Strategy::fixed(plan.clone(), rule), &self.cost)?;
        Ok(Measured {
            balancedness: r.balancedness,
            imbalance_ratio: r.imbalance_ratio,
            per_layer: r.per_layer,
            per_batch: r.per_batch_imbalance_ratio,
            traffic: PairTraffic::from(&r.traffic),
        })
    }

    /// A fixed plan under `rule`, replayed once per rule (the page offers
    /// a handful; each kept is a few figures per layer and batch).
    pub(crate) fn fixed_under(&self, fixed: &Fixed, rule: Rule) -> Result<Measured> {
        if let Ok(under) = fixed.under.lock() {
            if let Some((_, m)) = under.iter().find(|(r, _)| *r == rule) {
                return Ok(m.clone());
            }
        }
        let m = self.measure(&fixed.plan, rule)?;
        if let Ok(mut under) = fixed.under.lock() {
            under.push((rule, m.clone()));
        }
        Ok(m)
    }

    /// A budgeted plan's figures under `rule` (under `even`: its planner's
    /// own figures, and the closed form's traffic).
    pub(crate) fn slider_under(
        &self,
        planner: &dyn Planner,
        planned: &moeplan::planners::Planned,
        rule: Rule,
        batches: bool,
    ) -> Result<PlanFigures> {
        let mut f = slider_figures(planner, planned, self.trace())?;
        match (rule, self.even_traffic) {
            (Rule::Even, Some(t)) => {
                f.traffic = t;
                f.per_batch_imbalance = self.slider_batches(planner.id(), planned, batches)?;
            }
            (Rule::Even, None) => {
                // Balance under `even` is the evaluator's whatever the
                // sources; the traffic is the one summed batch's.
                f.traffic = self.sources_even_traffic(&planned.plan)?;
                f.per_batch_imbalance = self.slider_batches(planner.id(), planned, batches)?;
            }
            _ => self.measure(&planned.plan, rule)?.apply(&mut f),
        }
        Ok(f)
    }

    /// A fixed plan's series under `even`: kept once computed, computed when
    /// `compute`, else empty.
    pub(crate) fn fixed_batches(&self, fixed: &Fixed, compute: bool) -> Result<Vec<f64>> {
        if let Ok(kept) = fixed.per_batch.lock() {
            if let Some(v) = kept.as_ref() {
                return Ok(v.clone());
            }
        }
        if !compute {
            return Ok(Vec::new());
        }
        let v = per_batch_imbalance(self.trace(), &fixed.plan)?;
        if let Ok(mut kept) = fixed.per_batch.lock() {
            *kept = Some(v.clone());
        }
        Ok(v)
    }

    /// A budgeted plan's series under `even`: the last one computed for
    /// this planner and budget, else computed when `compute`, else empty.
    pub(crate) fn slider_batches(
        &self,
        id: PlannerId,
        planned: &moeplan::planners::Planned,
        compute: bool,
    ) -> Result<Vec<f64>> {
        if let Ok(kept) = self.batches.lock() {
            if let Some((_, _, v)) = kept
                .iter()
                .find(|(i, b, _)| *i == id && *b == planned.budget)
            {
                return Ok(v.clone());
            }
        }
        if !compute {
            return Ok(Vec::new());
        }
        let v = per_batch_imbalance(self.trace(), &planned.plan)?;
        if let Ok(mut kept) = self.batches.lock() {
            kept.retain(|(i, _, _)| *i != id);
            kept.push((id, planned.budget, v.clone()));
        }
        Ok(v)
    }

    pub(crate) fn heat(&self, plan: &Plan) -> Vec<Vec<f64>> {
        let e = self.trace().num_experts();
        plan.layers()
            .iter()
            .enumerate()
            .map(|(l, lp)| {
                let w = self.summed.row(l);
                let copies = lp.copies(e);
                let loads: Vec<f64> = lp
                    .gpus
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|&x| w[x as usize] / copies[x as usize].max(1) as f64)
                            .sum()
                    })
                    .collect();
                let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
                // Three decimals are all a colour can show; they keep the
                // page's messages small.
                loads
                    .iter()
                    .map(|&x| {
                        if mean > 0.0 {
                            (x / mean * 1e3).round() / 1e3
                        } else {
                            1.0
                        }
                    })
                    .collect()
            })
            .collect()
    }

    pub(crate) fn layer_view(&self, plan: &Plan, layer: usize) -> LayerView {
        let lp = &plan.layers()[layer];
        let e = self.trace().num_experts();
        let w = self.summed.row(layer);
        let total = w.sum();
        let copies = lp.copies(e);
        LayerView {
            layer: lp.layer,
            gpus: lp
                .gpus
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&x| {
                            let c = copies[x as usize].max(1);
                            let share = if total > 0.0 {
                                (w[x as usize] / c as f64 / total * 1e6).round() / 1e6
                            } else {
                                0.0
                            };
                            (x, c, share)
                        })
                        .collect()
                })
                .collect(),
        }
    }
}
