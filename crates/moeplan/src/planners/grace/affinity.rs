//! Expert affinity per layer (GRACE-MoE §3–4.1). Stub: being written.

use ndarray::Array2;

use crate::error::{Error, Result};
use crate::trace::TokenTrace;

/// `A[i][j]`: tokens of MoE layer index `layer` that chose both `i` and `j`
/// (`i ≠ j`); the diagonal is zero. Stub.
pub fn affinity(tokens: &TokenTrace, layer: usize) -> Result<Array2<f64>> {
    let _ = (tokens, layer);
    Err(Error::Argument("affinity: not yet implemented".into()))
}
