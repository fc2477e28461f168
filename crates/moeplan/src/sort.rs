//! Sorting with one compiled copy per element type.
//!
//! Each `slice::sort_by` call with its own closure compiles the standard
//! library's sorts (driftsort or ipnsort, several KB of wasm) once more: the
//! page's worker held 31 copies, 266 KB of its 2.4 MB of code. These
//! helpers pass the comparison as `&mut dyn FnMut`, so the sort is compiled
//! once per element type, at the cost of an indirect call per comparison.
//! The planners' per-batch loops (Libra's prefetcher and predictor, the
//! token traffic) keep the standard calls.

use std::cmp::Ordering;

/// `v.sort_by(cmp)` (stable), compiled once per `T`.
pub(crate) fn sort_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    stable(v, &mut cmp);
}

/// `v.sort_by_key(key)` (stable), compiled once per `T`.
pub(crate) fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    stable(v, &mut |a, b| key(a).cmp(&key(b)));
}

/// `v.sort_unstable_by(cmp)`, compiled once per `T`.
#[cfg(test)]
pub(crate) fn sort_unstable_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    unstable(v, &mut cmp);
}

#[inline(never)]
fn stable<T>(v: &mut [T], cmp: &mut dyn FnMut(&T, &T) -> Ordering) {
    v.sort_by(|a, b| cmp(a, b));
}

#[inline(never)]
#[cfg(test)]
fn unstable<T>(v: &mut [T], cmp: &mut dyn FnMut(&T, &T) -> Ordering) {
    v.sort_unstable_by(|a, b| cmp(a, b));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_order_as_the_standard_sorts() {
        let mut checked = 0;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in [0usize, 1, 2, 3, 17, 20, 33, 200, 1000] {
            let v: Vec<(u32, u32)> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ((x % 7) as u32, i as u32)
                })
                .collect();
            let (mut a, mut b) = (v.clone(), v.clone());
            a.sort_by_key(|p| std::cmp::Reverse(p.0));
            sort_by(&mut b, |p, q| q.0.cmp(&p.0));
            assert_eq!(a, b, "stable, n = {n}");
            let (mut a, mut b) = (v.clone(), v.clone());
            a.sort_by_key(|p| p.0);
            sort_by_key(&mut b, |p| p.0);
            assert_eq!(a, b, "by key, n = {n}");
            let (mut a, mut b) = (v.clone(), v);
            a.sort_unstable();
            sort_unstable_by(&mut b, |p, q| p.cmp(q));
            assert_eq!(a, b, "unstable on distinct items, n = {n}");
            checked += 1;
        }
        assert_eq!(checked, 9);
    }
}
