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
        let sign = if ratio > 1.0 { 1.0 } else { -1.0 };
        let per_step = |p: &Prediction| {
            let layers = p.moe_layers.max(1) as f64 / 1e3;
            [
                p.compute_us * layers,
                (p.dispatch_us + p.combine_us) * layers,
                p.copy_exposed_us / 1e3,
                p.dense_us / 1e3,
                p.attention_us / 1e3,
            ]
        };
        let (mine, theirs) = (per_step(self), per_step(base));
        let step = base.step_ms.max(f64::MIN_POSITIVE);
        // Each term's gain as a share of BASE's throughput: the time it
        // saves over BASE's step; last, the tokens a step fits.
        let fits = if base.served_tokens_per_step > 0.0 {
            self.served_tokens_per_step / base.served_tokens_per_step - 1.0
        } else {
            0.0
        };
        let gains = (0..5).map(|i| (theirs[i] - mine[i]) / step).chain([fits]);
        let Some((i, gain)) = gains
            .enumerate()
            .filter(|(_, g)| g * sign > 0.0)
            .max_by(|a, b| (a.1 * sign).total_cmp(&(b.1 * sign)))
        else {
            return format!(
                "{} with no single term ahead: the terms overlap",
                if sign > 0.0 { "wins" } else { "loses" }
            );
        };
        let names = [
            "expert compute",
            "dispatch and combine",
            "copies not hidden",
            "the dense part",
            "attention's KV reads",
            "KV cache",
        ];
        let wins = if sign > 0.0 { "wins" } else { "loses" };
        let more = gain < 0.0;
        let how = if i == 5 {
            let fewer = if more { "fewer" } else { "more" };
            format!(
                "{:.0} % {fewer} tokens a step fit than in BASE's",
                gain.abs() * 1e2
            )
        } else {
            let more = if more { "more" } else { "less" };
            format!(
                "{:.2} ms a step {more} than BASE's",
                (mine[i] - theirs[i]).abs()
            )
        };
        format!("{wins} on {}: {how}", names[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan whose replicas leave a fifth fewer tokens a step loses on the
    /// KV cache though its compute is quicker; one a hair from BASE is even.
    #[test]
    fn the_largest_term_in_the_outcomes_direction() {
        let p = |t: f64, served: f64, compute_us: f64| Prediction {
            tokens_per_s: t,
            served_tokens_per_step: served,
            compute_us,
            moe_layers: 10,
            step_ms: 10.0,
            ..Default::default()
        };
        let base = p(100.0, 100.0, 500.0);
        let mut kv = p(85.0, 80.0, 400.0);
        kv.compare_with(&base);
        assert_eq!(
            kv.reason.as_deref(),
            Some("loses on KV cache: 20 % fewer tokens a step fit than in BASE's")
        );
        let mut even = p(100.2, 100.0, 500.0);
        even.compare_with(&base);
        assert!(even.reason.is_some_and(|r| r.starts_with("even with BASE")));
    }
}
