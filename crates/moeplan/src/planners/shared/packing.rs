//! EPLB's two building steps, ported from DeepSeek's `eplb.py`
//! (`replicate_experts`, `balanced_packing`): replicas to the highest load
//! per copy, then heaviest-first packing into equal-sized packs. EPLB
//! composes them hierarchically; the joint search starts from them.
//! O(R · E) and O(n log n + n · packs).

/// Packs `weight.len()` items into `num_packs` packs of exactly
/// `weight.len() / num_packs` items each, heaviest first into the lightest
/// pack with room. Returns each item's pack and its rank inside the pack.
pub(crate) fn balanced_packing(weight: &[f32], num_packs: usize) -> (Vec<usize>, Vec<usize>) {
    let n = weight.len();
    let per_pack = n / num_packs.max(1);
    if per_pack <= 1 {
        return ((0..n).collect(), vec![0; n]);
    }
    let mut order: Vec<usize> = (0..n).collect();
    // Stable: equal weights keep index order, as the reference's sort does.
    crate::sort::sort_by(&mut order, |&a, &b| weight[b].total_cmp(&weight[a]));
    let mut pack_weight = vec![0f32; num_packs];
    let mut pack_items = vec![0usize; num_packs];
    let mut pack_index = vec![0usize; n];
    let mut rank_in_pack = vec![0usize; n];
    for item in order {
        let mut best = usize::MAX;
        for p in 0..num_packs {
            if pack_items[p] < per_pack
                && (best == usize::MAX || pack_weight[p] < pack_weight[best])
            {
                best = p;
            }
        }
        pack_index[item] = best;
        rank_in_pack[item] = pack_items[best];
        pack_weight[best] += weight[item];
        pack_items[best] += 1;
    }
    (pack_index, rank_in_pack)
}

/// Grows `weight.len()` logical experts to `num_phy` physical ones, each
/// extra slot going to the expert with the highest load per copy. Returns
/// `(phy2log, rank, logcnt)`; the first `weight.len()` slots are the experts
/// themselves in order.
pub(crate) fn replicate_experts(
    weight: &[f32],
    num_phy: usize,
) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let num_log = weight.len();
    let mut phy2log: Vec<usize> = (0..num_log).collect();
    let mut rank = vec![0usize; num_log];
    let mut logcnt = vec![1usize; num_log];
    for _ in num_log..num_phy {
        let mut best = 0;
        let mut best_val = f32::NEG_INFINITY;
        for (j, (&w, &c)) in weight.iter().zip(&logcnt).enumerate() {
            let v = w / c as f32;
            if v > best_val {
                best_val = v;
                best = j;
            }
        }
        phy2log.push(best);
        rank.push(logcnt[best]);
        logcnt[best] += 1;
    }
    (phy2log, rank, logcnt)
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn packing_balanced_packing_example() {
        use moeplan::planners::shared::packing::balanced_packing;
        let (pack, rank) = balanced_packing(&[5.0, 1.0, 4.0, 2.0], 2);
        assert_eq!(pack, vec![0, 0, 1, 1]);
        assert_eq!(rank, vec![0, 1, 0, 1]);
    }

    #[test]
    fn packing_replicate_experts_example() {
        use moeplan::planners::shared::packing::replicate_experts;
        let (phy2log, rank, logcnt) = replicate_experts(&[9.0, 2.0, 5.0], 5);
        assert_eq!(phy2log, vec![0, 1, 2, 0, 2]);
        assert_eq!(rank, vec![0, 0, 0, 1, 1]);
        assert_eq!(logcnt, vec![2, 1, 2]);
    }
}
