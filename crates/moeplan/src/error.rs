//! The one error type of the core. Every way user input can be wrong is a
//! variant here, so callers (CLI, wasm, app) show one clear message and never
//! see a panic.

use thiserror::Error;

/// Everything that can go wrong while reading a trace, building a topology,
/// planning or evaluating.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// The topology cannot exist (zero nodes, zero GPUs, absurd sizes).
    #[error("invalid topology: {0}")]
    Topology(String),

    /// A trace's shape or numbers are unusable.
    #[error("invalid trace: {0}")]
    Trace(String),

    /// Bytes could not be parsed as any supported format.
    #[error("cannot parse {format}: {message}")]
    Parse {
        /// Which format the bytes were read as.
        format: &'static str,
        /// What was wrong, with the position where known.
        message: String,
    },

    /// A plan breaks one of its invariants.
    #[error("invalid plan: {0}")]
    Plan(String),

    /// A plan was made for another trace (experts or layers differ).
    #[error("plan does not match trace: {0}")]
    Mismatch(String),

    /// A planner's preconditions do not hold for these settings.
    #[error("{algorithm}: {message}")]
    Planner {
        /// The planner that refused.
        algorithm: &'static str,
        /// Why, in words a user can act on.
        message: String,
    },

    /// The plan cannot be written in the requested format.
    #[error("cannot export as {format}: {message}")]
    Export {
        /// The target format.
        format: &'static str,
        /// Why the plan does not fit it.
        message: String,
    },

    /// An input would build more than its reading [`crate::ReadLimits`] allows
    /// (bytes, values or nesting), found before allocating it.
    #[error("too large to read: {0}")]
    Limit(String),

    /// A parameter outside its allowed range (batches, fractions, presets).
    #[error("invalid argument: {0}")]
    Argument(String),
}

/// Shorthand used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn parse(format: &'static str, message: impl Into<String>) -> Self {
        Error::Parse {
            format,
            message: message.into(),
        }
    }

    pub(crate) fn planner(algorithm: &'static str, message: impl Into<String>) -> Self {
        Error::Planner {
            algorithm,
            message: message.into(),
        }
    }
}
