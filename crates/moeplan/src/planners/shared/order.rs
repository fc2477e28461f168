//! The order in which replicas are spent: the highest load per copy first,
//! as EPLB and CRAFT's Step 5 count copies. O(r_max · E).

/// The experts that receive replicas 1, 2, …, `r_max` in turn: the highest
/// load per copy first (first index on ties, as EPLB), never more copies
/// than GPUs. Shorter than `r_max` when every expert is on every GPU.
///
/// ```
/// use moeplan::planners::replication_order;
/// assert_eq!(replication_order(&[9.0, 2.0, 5.0], 3, 4), vec![0, 2, 0]);
/// assert_eq!(replication_order(&[9.0, 2.0], 5, 2), vec![0, 1]); // capped at 2 copies each
/// ```
pub fn replication_order(loads: &[f64], r_max: usize, d: usize) -> Vec<u32> {
    let mut copies = vec![1usize; loads.len()];
    let mut order = Vec::with_capacity(r_max);
    for _ in 0..r_max {
        let mut best: Option<usize> = None;
        for (e, (&w, &c)) in loads.iter().zip(&copies).enumerate() {
            if c < d && best.is_none_or(|b| w / c as f64 > loads[b] / copies[b] as f64) {
                best = Some(e);
            }
        }
        let Some(b) = best else { break };
        copies[b] += 1;
        order.push(b as u32);
    }
    order
}
