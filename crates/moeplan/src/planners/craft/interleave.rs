//! CRAFT's Algorithm 3 — interleaved slot assignment (CRAFT paper, §4.2
//! Step 4 and appendix A, Algorithm 3).
//!
//! How many slots each GPU gets in each layer, given each layer's slot
//! count (experts + its replicas): every layer as even as possible, the
//! remainder to the GPUs with the fewest slots so far over all layers, ties
//! spread evenly over GPU ids (so across nodes, ids being node-major). Every
//! GPU ends within one slot of every other over all layers — equal when the
//! total divides — so the KV cache is the same size everywhere.
//!
//! Complexity: O(L · D log D) for `L` layers on `D` GPUs.

/// Algorithm 3: slots per GPU for every layer (`A[ℓ][g]`), given each layer's
/// slot count (experts + replicas). Each layer's slots are spread evenly; the
/// remainder goes to the GPUs with the fewest slots so far over all layers,
/// ties broken by picking evenly spaced GPUs (so across nodes, since GPU ids
/// are node-major). Every GPU ends within one slot of every other, and equal
/// when the total divides.
pub(crate) fn interleaved_assignment(slots_per_layer: &[usize], d: usize) -> Vec<Vec<usize>> {
    let d = d.max(1);
    let mut totals: Vec<usize> = vec![0; d];
    let mut out: Vec<Vec<usize>> = slots_per_layer
        .iter()
        .map(|&s| {
            totals.iter_mut().for_each(|t| *t += s / d);
            vec![s / d; d]
        })
        .collect();
    let mut sorted = Vec::with_capacity(d);
    for (l, &s) in slots_per_layer.iter().enumerate() {
        let rem = s % d;
        if rem == 0 {
            continue;
        }
        sorted.clear();
        sorted.extend_from_slice(&totals);
        sorted.sort_unstable();
        let cutoff = sorted[rem - 1];
        let below: Vec<usize> = (0..d).filter(|&g| totals[g] < cutoff).collect();
        let tied: Vec<usize> = (0..d).filter(|&g| totals[g] == cutoff).collect();
        let chosen = below
            .into_iter()
            .chain(interleave_select(&tied, rem - below_count(&totals, cutoff)));
        for g in chosen.collect::<Vec<_>>() {
            out[l][g] += 1;
            totals[g] += 1;
        }
    }
    out
}

fn below_count(totals: &[usize], cutoff: usize) -> usize {
    totals.iter().filter(|&&t| t < cutoff).count()
}

/// `q` entries of `k` as evenly spaced as possible, both ends included when
/// `q > 1`.
fn interleave_select(k: &[usize], q: usize) -> Vec<usize> {
    let n = k.len();
    match q {
        0 => Vec::new(),
        _ if q >= n => k.to_vec(),
        1 => vec![k[0]],
        _ => (0..q)
            .map(|i| k[(2 * i * (n - 1) + (q - 1)) / (2 * (q - 1))])
            .collect(),
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn interleave_interleaved_assignment_example() {
        use super::interleaved_assignment;
        let a = interleaved_assignment(&[6, 6], 4);
        assert_eq!(a, vec![vec![2, 1, 1, 2], vec![1, 2, 2, 1]]);
    }
}
