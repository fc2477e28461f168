//! One layer at a time, on all cores with the `parallel` feature: the map
//! every per-layer planner and generator runs. Each layer's work depends on
//! that layer alone, so the result is the same either way.

use crate::error::Result;

/// `f(0), f(1), …, f(layers − 1)`, in order; the first error stops it.
pub(crate) fn map_layers<T: Send>(
    layers: usize,
    f: impl Fn(usize) -> Result<T> + Sync + Send,
) -> Result<Vec<T>> {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        (0..layers).into_par_iter().map(f).collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        (0..layers).map(f).collect()
    }
}
