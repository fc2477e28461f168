//! Why a plan wins or loses against BASE, in one line: each term of its
//! predicted step against BASE's, as the share of BASE's throughput it
//! moves, and the largest in the direction of the outcome
//! ([`Prediction::compare_with`] sets it). Complexity: constant.

use super::Prediction;

impl Prediction {
    /// The largest term that makes `self` win or lose against `base`
    /// ([`Prediction::compare_with`]).
    pub(super) fn reason_against(&self, base: &Prediction) -> String {
        let ratio = self.tokens_per_s / base.tokens_per_s;
        // Within half a percent a plan neither wins nor loses.
        if (ratio - 1.0).abs() < 0.005 {
            return "even with BASE: no term moves its time by more than half a percent".into();
        }
        let wins = ratio > 1.0;
        let per_step = |p: &Prediction| {
            let layers = p.moe_layers.max(1) as f64 / 1e3;
            [
                ("expert compute", p.compute_us * layers),
                (
                    "dispatch and combine",
                    (p.dispatch_us + p.combine_us) * layers,
                ),
                ("copies not hidden", p.copy_exposed_us / 1e3),
                ("the dense part", p.dense_us / 1e3),
                ("attention's KV reads", p.attention_us / 1e3),
            ]
        };
        let step = base.step_ms.max(f64::MIN_POSITIVE);
        // Each term's gain, as a share of BASE's throughput: time saved
        // over BASE's step; the served tokens' own share.
        let mut terms: Vec<(&str, f64, String)> = per_step(self)
            .into_iter()
            .zip(per_step(base))
            .map(|((name, ms), (_, base_ms))| {
                let d = ms - base_ms;
                let how = if d < 0.0 { "less" } else { "more" };
                (
                    name,
                    -d / step,
                    format!("{:.2} ms a step {how} than BASE's", d.abs()),
                )
            })
            .collect();
        if base.served_tokens_per_step > 0.0 {
            let r = self.served_tokens_per_step / base.served_tokens_per_step;
            let how = if r < 1.0 { "fewer" } else { "more" };
            terms.push((
                "KV cache",
                r - 1.0,
                format!(
                    "{:.0} % {how} tokens a step fit than in BASE's",
                    (r - 1.0).abs() * 1e2
                ),
            ));
        }
        let sign = if wins { 1.0 } else { -1.0 };
        let best = terms
            .into_iter()
            .filter(|t| t.1 * sign > 0.0)
            .max_by(|a, b| (a.1 * sign).total_cmp(&(b.1 * sign)));
        match best {
            Some((name, _, how)) => {
                format!("{} on {name}: {how}", if wins { "wins" } else { "loses" })
            }
            None => format!(
                "{} with no single term ahead: the terms overlap",
                if wins { "wins" } else { "loses" }
            ),
        }
    }
}
