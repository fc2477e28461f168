//! Spectral clustering of an affinity matrix (GRACE-MoE §4.1). Stub: being written.

use ndarray::Array2;

use crate::error::{Error, Result};

/// Cluster label (`0..k`) of every row of the symmetric, non-negative
/// `affinity`, by normalised spectral clustering with seeded k-means++. Stub.
pub fn spectral_clusters(affinity: &Array2<f64>, k: usize, seed: u64) -> Result<Vec<usize>> {
    let _ = (affinity, k, seed);
    Err(Error::Argument("spectral clustering: not yet implemented".into()))
}
