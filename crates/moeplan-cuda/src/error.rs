//! The one error type. Every CUDA failure becomes a message naming the step
//! that failed; nothing here panics.

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable GPU: the driver library is missing, it finds no device, or
    /// a CUDA library the crate loads (NVRTC, cuBLAS) is missing.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A CUDA call failed; the message names the call and what it did.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// A bad argument or input.
    #[error("{0}")]
    Argument(String),
    /// The planning core refused something (trace, plan, topology).
    #[error(transparent)]
    Core(#[from] moeplan::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps any CUDA-side error with what was being done.
pub(crate) fn cuda<E: std::fmt::Debug>(what: impl std::fmt::Display) -> impl FnOnce(E) -> Error {
    move |e| Error::Cuda(format!("{what}: {e:?}"))
}
