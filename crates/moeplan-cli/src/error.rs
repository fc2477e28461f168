//! The CLI's one error type: every failure prints as one line,
//! `moeplan: error: …`, and exits with code 2.

/// A failure the user can act on: printed as one line, exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Core(#[from] moeplan::Error),
    #[error("{path}: {source}")]
    InFile {
        path: String,
        source: moeplan::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl CliError {
    /// A core error about the file at `path`.
    pub fn in_file(path: &std::path::Path) -> impl Fn(moeplan::Error) -> CliError + '_ {
        move |source| CliError::InFile {
            path: path.display().to_string(),
            source,
        }
    }
}
