//! How a workspace shows its plans' measures: each plan's replay under the
//! view's rule (balance, traffic, per-batch series), asked of the
//! workspace's [`Judge`](moeplan::judge::Judge), which keeps them; and the
//! load map and placement the view draws.

use super::*;

impl Workspace {
    /// `f` measured under `rule` (not `even`) by the judge's replay, kept
    /// there; the view shows pair traffic, not token messages.
    pub(crate) fn measure(&self, f: &mut PlanFigures, plan: &Plan, rule: Rule) -> Result<()> {
        replayed(f, &*self.judge.replay_pairs(plan, rule)?);
        Ok(())
    }

    /// A plan's series under `even`: kept once made, made when `make`,
    /// else empty.
    pub(crate) fn even_batches(&self, plan: &Plan, make: bool) -> Result<Vec<f64>> {
        Ok(self
            .judge
            .per_batch_even(plan, make)?
            .map(|s| s.as_ref().clone())
            .unwrap_or_default())
    }

    /// A budgeted plan's figures under `rule` (under `even`: its planner's
    /// own figures, and the judge's even traffic).
    pub(crate) fn slider_under(
        &self,
        planner: &dyn Planner,
        planned: &moeplan::planners::Planned,
        rule: Rule,
        batches: bool,
    ) -> Result<PlanFigures> {
        let mut f = slider_figures(planner, planned, &self.judge)?;
        if rule == Rule::Even {
            // Balance under `even` is the evaluator's whatever the
            // sources; the traffic the closed form's, or the one summed
            // batch's with sources.
            f.traffic = self.judge.even_traffic(&planned.plan)?;
            f.per_batch_imbalance = self.even_batches(&planned.plan, batches)?;
        } else {
            self.measure(&mut f, &planned.plan, rule)?;
        }
        Ok(f)
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
