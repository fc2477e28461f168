//! Libra's re-plan on the page's route default (DeepSeek-V3, 64 batches of
//! 512 tokens with routes, 8 × 8 GPUs), timed natively: alone, then as the
//! page's two workers share it (each half, the helper's half sent as
//! numbers and read back, the halves kept), one thread after the other.
//! docs/speed.md quotes it.
//!
//! `cargo run --release -p moeplan-view --example libra_split`

use moeplan::Workload;
use moeplan::data::model;
use moeplan::planners::Settings;
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan_view::{Cluster, SchedulePart, Workspace, schedule_part};
use std::time::Instant;

fn main() -> Result<(), moeplan::Error> {
    let p = model::preset("deepseek-v3")?;
    let cfg = TokenGenConfig {
        seed: 7u32.into(),
        batch_tokens: 512, // dealt as the page deals them
        ..TokenGenConfig::new(p, 64 * 512)
    };
    let work = Workload::from_tokens(generate_tokens(&cfg)?, 512)?;
    let c = Cluster {
        nodes: 8,
        gpus_per_node: 8,
        groups: 8,
    };
    let mut ws = Workspace::of_workload(work.clone(), c, |_| {})?;
    for n in [3usize, 1, 5, 2, 6] {
        let opts = vec![("extra_experts_per_gpu".to_string(), n.to_string())];
        let mut s = Settings::new();
        s.set_str("extra_experts_per_gpu", &n.to_string())?;
        let mut alone = ws.clone();
        let t = Instant::now();
        alone.replan_scheduled(&s)?;
        let whole = t.elapsed().as_secs_f64() * 1e3;
        let Some(job) = ws.split_job(&opts) else {
            return Err(moeplan::Error::Argument("nothing to share".into()));
        };
        let t = Instant::now();
        let mine = ws
            .schedule_part(&job)?
            .ok_or_else(|| moeplan::Error::Argument("Libra did not split".into()))?;
        let t_mine = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let theirs = schedule_part(&work, &job, job.theirs())?
            .ok_or_else(|| moeplan::Error::Argument("Libra did not split".into()))?;
        let t_theirs = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let nums = theirs.to_numbers();
        let t_enc = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let back = SchedulePart::from_numbers(&nums, &mine)?;
        let t_dec = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        ws.keep_parts(&job, vec![mine, back])?;
        let t_keep = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        ws.replan_scheduled(&s)?;
        let t_replan = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "N = {n}: alone {whole:.1} ms | this worker's half {t_mine:.1} · the helper's {t_theirs:.1} · sent {t_enc:.1} ({} numbers) · read {t_dec:.1} · joined {t_keep:.1} · shown {t_replan:.1} ms",
            nums.len()
        );
    }
    Ok(())
}
