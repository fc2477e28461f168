//! CPython's `random.Random`, bit for bit, for the parts SGLang's static
//! dispatch uses: seeding with an int, `getrandbits`, `_randbelow`,
//! `sample` and `shuffle`.
//!
//! Source: CPython 3 `Modules/_randommodule.c` (MT19937 with `init_by_array`
//! seeding; an int seed is split into 32-bit words, least significant
//! first; `getrandbits(k ≤ 32)` is one `genrand_uint32() >> (32 − k)`) and
//! `Lib/random.py` (`_randbelow_with_getrandbits`: `k = n.bit_length()`
//! bits, redrawn while `≥ n`; `sample` picks the pool or the set method by
//! its `setsize` rule; `shuffle` is Fisher–Yates from the end). The tests
//! pin the outputs to CPython 3.11.7. Python promises a stable sequence
//! only for `random()`; SGLang's map is as stable as `sample` and
//! `shuffle` are.
//!
//! Cost: one 32-bit draw O(1) amortised (624 words regenerated every 624
//! draws); `sample(n, k)` O(n) (pool) or O(k log k) (set); `shuffle` O(n).

use std::collections::BTreeSet;

use crate::error::{Error, Result};

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// A Mersenne Twister in exactly CPython's state and call sequence.
#[derive(Clone)]
pub(crate) struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl std::fmt::Debug for PyRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyRandom")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl PyRandom {
    /// `random.Random(seed)` for a non-negative int seed.
    pub(crate) fn new(seed: u64) -> Self {
        // CPython keys MT with the seed's 32-bit words, least significant
        // first, and at least one word (seed 0 gives the key [0]).
        let lo = seed as u32;
        let hi = (seed >> 32) as u32;
        let key: &[u32] = if hi == 0 { &[lo] } else { &[lo, hi] };
        let mut r = PyRandom {
            mt: [0; N],
            index: N,
        };
        r.init_by_array(key);
        r
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            let prev = self.mt[i - 1];
            self.mt[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn init_by_array(&mut self, key: &[u32]) {
        self.init_genrand(19_650_218);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = self.mt[i - 1];
            self.mt[i] = (self.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                self.mt[0] = self.mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = self.mt[i - 1];
            self.mt[i] = (self.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                self.mt[0] = self.mt[N - 1];
                i = 1;
            }
        }
        self.mt[0] = 0x8000_0000;
    }

    /// MT19937's next 32-bit output (`genrand_uint32`).
    pub(crate) fn genrand_u32(&mut self) -> u32 {
        if self.index >= N {
            let mag = |y: u32| if y & 1 == 1 { MATRIX_A } else { 0 };
            for kk in 0..N - M {
                let y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK);
                self.mt[kk] = self.mt[kk + M] ^ (y >> 1) ^ mag(y);
            }
            for kk in N - M..N - 1 {
                let y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK);
                self.mt[kk] = self.mt[kk + M - N] ^ (y >> 1) ^ mag(y);
            }
            let y = (self.mt[N - 1] & UPPER_MASK) | (self.mt[0] & LOWER_MASK);
            self.mt[N - 1] = self.mt[M - 1] ^ (y >> 1) ^ mag(y);
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for `k ≤ 64` (larger `k` is clamped to 64): whole
    /// 32-bit words, least significant first, the last one shifted right
    /// to drop its unused low bits; `k = 0` draws nothing.
    pub(crate) fn getrandbits(&mut self, k: u32) -> u64 {
        let mut left = k.min(64);
        let (mut out, mut shift) = (0u64, 0u32);
        while left > 0 {
            let mut r = self.genrand_u32();
            if left < 32 {
                r >>= 32 - left;
            }
            out |= u64::from(r) << shift;
            shift += 32;
            left = left.saturating_sub(32);
        }
        out
    }

    /// `_randbelow_with_getrandbits(n)`: uniform in `0..n` by rejection on
    /// `n.bit_length()` bits (so even `n = 1` draws one word). `n = 0`
    /// returns 0 without drawing.
    pub(crate) fn randbelow(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let k = u64::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random()`: a float in `[0, 1)` with 53 random bits.
    #[cfg(test)]
    pub(crate) fn random(&mut self) -> f64 {
        let a = self.genrand_u32() >> 5;
        let b = self.genrand_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `sample(population, k)`: `k` distinct positions in selection order.
    /// Like CPython, a population of at most `setsize` items (21, plus
    /// `4^⌈log₄(3k)⌉` when `k > 5`) is drawn from a shrinking pool, a larger
    /// one by redrawing positions already taken; the two consume different
    /// random numbers, so the choice matters. `k > len` is an error.
    pub(crate) fn sample<T: Clone>(&mut self, population: &[T], k: usize) -> Result<Vec<T>> {
        let n = population.len();
        if k > n {
            return Err(Error::Argument(format!(
                "sample of {k} from a population of {n}"
            )));
        }
        let mut setsize = 21usize;
        if k > 5 {
            // CPython evaluates log(3k, 4) in floating point; so do we, so
            // the cut-over lands on the same k.
            let exp = ((k as f64 * 3.0).ln() / 4f64.ln()).ceil();
            setsize = setsize.saturating_add(4usize.saturating_pow(exp as u32));
        }
        let mut out = Vec::with_capacity(k);
        if n <= setsize {
            let mut pool: Vec<T> = population.to_vec();
            for i in 0..k {
                let j = self.randbelow((n - i) as u64) as usize;
                out.push(pool[j].clone());
                pool[j] = pool[n - i - 1].clone();
            }
        } else {
            let mut selected = BTreeSet::new();
            for _ in 0..k {
                let mut j = self.randbelow(n as u64) as usize;
                while selected.contains(&j) {
                    j = self.randbelow(n as u64) as usize;
                }
                selected.insert(j);
                out.push(population[j].clone());
            }
        }
        Ok(out)
    }

    /// `shuffle(x)` in place: for `i` from the end down to 1, swap `x[i]`
    /// with `x[randbelow(i + 1)]`. A list of `n` draws `n − 1` numbers even
    /// when all its items are equal, which is why SGLang's map depends on
    /// experts that have a single copy.
    pub(crate) fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow(i as u64 + 1) as usize;
            x.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded with CPython 3.11.7 (/tmp script, not kept):
    //   r = random.Random(42); [r.getrandbits(32) for _ in range(6)]
    const BITS32_SEED42: [u64; 6] = [
        2746317213, 478163327, 107420369, 3184935163, 1181241943, 1051802512,
    ];

    #[test]
    fn getrandbits_32_matches_cpython() {
        let mut r = PyRandom::new(42);
        let got: Vec<u64> = (0..6).map(|_| r.getrandbits(32)).collect();
        assert_eq!(got, BITS32_SEED42);
        // random.Random(0) and random.Random(2**40 + 5): a two-word key
        let mut r = PyRandom::new(0);
        let got: Vec<u64> = (0..3).map(|_| r.getrandbits(32)).collect();
        assert_eq!(got, [3626764237, 1654615998, 3255389356]);
        let mut r = PyRandom::new((1 << 40) + 5);
        let got: Vec<u64> = (0..3).map(|_| r.getrandbits(32)).collect();
        assert_eq!(got, [2166296868, 2220160828, 1153647273]);
    }

    #[test]
    fn getrandbits_mixed_widths_match_cpython() {
        // r = random.Random(42); [r.getrandbits(k) for k in (1,3,7,13,31,32,33,64)]
        let mut r = PyRandom::new(42);
        let got: Vec<u64> = [1, 3, 7, 13, 31, 32, 33, 64]
            .iter()
            .map(|&k| r.getrandbits(k))
            .collect();
        assert_eq!(
            got,
            [
                1,
                0,
                3,
                6074,
                590620971,
                1051802512,
                958682846,
                1890702223848595625
            ]
        );
        assert_eq!(r.getrandbits(0), 0);
    }

    #[test]
    fn sample_shuffle_random_sequence_matches_cpython() {
        // One random.Random(42) through, in this order:
        //   sample(range(n), k) for the (n, k) below, then shuffle(list(range(10))),
        //   shuffle(list(range(30))), [random() for _ in range(3)].
        // (10,3), (5,5), (50,10), (21,2) take the pool method; (100,3),
        // (1000,10), (22,1) the set method.
        let cases: [(usize, usize, &[u32]); 8] = [
            (10, 3, &[1, 0, 4]),
            (5, 5, &[1, 4, 0, 2, 3]),
            (100, 3, &[75, 54, 4]),
            (50, 10, &[1, 5, 13, 14, 32, 38, 49, 35, 12, 34]),
            (1000, 10, &[429, 225, 459, 603, 284, 828, 890, 6, 777, 825]),
            (22, 1, &[5]),
            (21, 2, &[13, 10]),
            (3, 0, &[]),
        ];
        let mut r = PyRandom::new(42);
        for (n, k, want) in cases {
            let pop: Vec<u32> = (0..n as u32).collect();
            assert_eq!(r.sample(&pop, k).unwrap(), want, "sample({n}, {k})");
        }
        let mut x: Vec<u32> = (0..10).collect();
        r.shuffle(&mut x);
        assert_eq!(x, [5, 7, 1, 9, 0, 8, 6, 3, 2, 4]);
        let mut x: Vec<u32> = (0..30).collect();
        r.shuffle(&mut x);
        assert_eq!(
            x,
            [
                25, 18, 5, 22, 10, 7, 6, 26, 4, 13, 0, 24, 15, 20, 16, 28, 9, 21, 2, 12, 3, 17, 14,
                23, 1, 8, 19, 29, 27, 11
            ]
        );
        let got: Vec<f64> = (0..3).map(|_| r.random()).collect();
        assert_eq!(
            got,
            [0.6356844442644002, 0.36483217897008424, 0.37018096711688264]
        );
    }

    #[test]
    fn set_method_redraws_a_taken_position() {
        // random.Random(2).sample(range(22), 5) calls _randbelow 6 times
        // (one redraw), recorded with CPython 3.11.7.
        let pop: Vec<u32> = (0..22).collect();
        assert_eq!(PyRandom::new(2).sample(&pop, 5).unwrap(), [1, 2, 11, 5, 21]);
    }

    #[test]
    fn getrandbits_of_seed_42() {
        // python3 -c "import random; print(random.Random(42).getrandbits(32))"
        assert_eq!(PyRandom::new(42).getrandbits(32), 2746317213);
    }

    #[test]
    fn genrand_of_seed_0() {
        assert_eq!(PyRandom::new(0).genrand_u32(), 3626764237);
    }

    #[test]
    fn getrandbits_in_pieces() {
        let mut r = PyRandom::new(42);
        assert_eq!(
            [r.getrandbits(1), r.getrandbits(3), r.getrandbits(7)],
            [1, 0, 3]
        );
    }

    #[test]
    fn randbelow_stays_below() {
        let mut r = PyRandom::new(42);
        assert!((0..100).all(|_| r.randbelow(7) < 7));
    }

    #[test]
    fn random_of_seed_42() {
        let x = PyRandom::new(42).random();
        assert_eq!(x, 0.6394267984578837); // random.Random(42).random()
    }

    #[test]
    fn sample_of_seed_42() {
        let mut r = PyRandom::new(42);
        let pop: Vec<u32> = (0..10).collect();
        assert_eq!(r.sample(&pop, 3).unwrap(), vec![1, 0, 4]); // random.Random(42).sample(range(10), 3)
        assert!(r.sample(&pop, 11).is_err());
    }

    #[test]
    fn shuffle_keeps_the_items() {
        let mut x: Vec<u32> = (0..10).collect();
        let mut r = PyRandom::new(1);
        r.shuffle(&mut x);
        x.sort();
        assert_eq!(x, (0..10).collect::<Vec<_>>());
    }
}
