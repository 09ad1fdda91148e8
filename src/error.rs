//! The crate's one public error type.
//!
//! Every variant that concerns a particular place in a file names it: the file, and where it applies
//! the column (dotted path) and row group, so a user can go straight to the culprit.

use std::path::PathBuf;

/// Where in a Parquet file an error applies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    /// The file.
    pub file: PathBuf,
    /// Dotted column path, where the error concerns one column.
    pub column: Option<String>,
    /// Row group index, where the error concerns one row group.
    pub row_group: Option<usize>,
}

impl Location {
    /// A location naming just a file.
    pub fn file(file: impl Into<PathBuf>) -> Self {
        Self {
            file: file.into(),
            column: None,
            row_group: None,
        }
    }

    /// A location naming a column chunk.
    pub(crate) fn chunk(file: impl Into<PathBuf>, column: impl Into<String>, row_group: usize) -> Self {
        Self {
            file: file.into(),
            column: Some(column.into()),
            row_group: Some(row_group),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(c) = &self.column {
            write!(f, ", column '{c}'")?;
        }
        if let Some(g) = self.row_group {
            write!(f, ", row group {g}")?;
        }
        Ok(())
    }
}

/// Errors from planning, reading and decoding.
///
/// `Debug` prints the same sentence as `Display` (file, column, row group, what went wrong), so that
/// `fn main() -> Result<(), Box<dyn std::error::Error>>` and `unwrap` show it rather than a struct.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened, sized or read.
    #[error("{location}: {what}: {source}")]
    Io {
        /// Where.
        location: Location,
        /// What we were doing.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// A read returned fewer bytes than the plan asked for: the file is shorter than its metadata claims.
    #[error(
        "{location}: short read at offset {offset}: asked for {expected} bytes, got {got} (the file is shorter than its metadata says)"
    )]
    ShortRead {
        /// Where.
        location: Location,
        /// File offset of the read.
        offset: u64,
        /// Bytes asked for.
        expected: u64,
        /// Bytes returned.
        got: u64,
    },

    /// The file changed (was truncated, grew or was rewritten) while it was being read: what was read
    /// may mix two versions, so nothing of it is returned.
    #[error("{location}: {message}")]
    FileChanged {
        /// Where.
        location: Location,
        /// What changed.
        message: String,
    },

    /// The Parquet metadata is not valid for this file (bad offsets, lengths, projection...).
    #[error("{location}: invalid metadata: {message}")]
    InvalidMetadata {
        /// Where.
        location: Location,
        /// What is wrong.
        message: String,
    },

    /// The user asked for something the file does not have.
    #[error("{location}: {message}")]
    InvalidRequest {
        /// Where.
        location: Location,
        /// What is wrong.
        message: String,
    },

    /// The `parquet` or `arrow` crate refused the file.
    #[error("{location}: {source}")]
    Parquet {
        /// Where.
        location: Location,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// A decoder panicked on malformed data; the panic was contained and turned into this error.
    #[error("{location}: malformed data made the decoder fail: {message}")]
    DecoderPanic {
        /// Where.
        location: Location,
        /// The panic message.
        message: String,
    },

    /// A page's bytes are not what its header or the metadata declare (found by the GPU decoder or its
    /// host reference).
    #[error("{location}{}: {message}", page.map(|p| format!(", page {p}")).unwrap_or_default())]
    CorruptPage {
        /// File, column and row group.
        location: Location,
        /// Index of the page in its column chunk (dictionary page included), where known.
        page: Option<usize>,
        /// What is wrong.
        message: String,
    },

    /// A GPU, CUDA or cuFile facility is missing or failed.
    #[error("{context}: {message}")]
    Device {
        /// What we were doing (and where, when it concerns a file).
        context: String,
        /// The reason.
        message: String,
    },

    /// A CUDA driver call failed; the driver's error code is the source.
    #[error("{context}: {source}")]
    Cuda {
        /// What we were doing.
        context: String,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },

    /// A cuFile call failed; cuFile's error code (or the OS error) is the source.
    #[error("{context}: {source}")]
    Cufile {
        /// What we were doing.
        context: String,
        /// cuFile's error.
        #[source]
        source: cudarc::cufile::result::CufileError,
    },

    /// nvCOMP refused a batch (`status` `None`) or one of its calls returned a status other than
    /// success. A library that cannot be loaded is [`Error::Unavailable`] instead.
    #[error("{context}: {message}")]
    Nvcomp {
        /// The call, or what we were doing.
        context: String,
        /// The `nvcompStatus_t` the call returned; `None` when the batch was refused before any call.
        status: Option<i32>,
        /// The status's name and nvCOMP's text for it, or why the batch was refused.
        message: String,
    },

    /// The GPU asked for does not exist on this machine.
    #[error("GPU {ordinal} does not exist ({visible} visible)")]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// CUDA devices visible.
        visible: usize,
    },

    /// A setting (command-line flag or environment variable) has a value we cannot use.
    #[error("{setting}: {message}")]
    Config {
        /// The flag or variable with its value, as the user gave it (`--threads 0x`, `GPU_PARQUET_THREADS=0x`).
        setting: String,
        /// What is wrong and what is allowed.
        message: String,
    },

    /// A backend cannot serve this request (for example compat mode `off` but cuFile refused the file).
    #[error("{backend} backend unavailable: {reason}")]
    Unavailable {
        /// Backend name.
        backend: String,
        /// Why.
        reason: String,
    },
}

impl Error {
    /// An I/O error at a location.
    pub fn io(location: Location, what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            location,
            what: what.into(),
            source,
        }
    }

    /// Invalid metadata at a location.
    pub(crate) fn invalid_metadata(location: Location, message: impl Into<String>) -> Self {
        Error::InvalidMetadata {
            location,
            message: message.into(),
        }
    }

    /// A `parquet`/`arrow` error at a location.
    pub fn parquet(location: Location, source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Error::Parquet {
            location,
            source: source.into(),
        }
    }

    /// A device-side error.
    pub fn device(context: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Error::Device {
            context: context.into(),
            message: message.to_string(),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `main` returning `Box<dyn Error>` prints: the sentence, not the struct.
    #[test]
    fn debug_is_the_sentence_main_prints() {
        let e = Error::InvalidRequest {
            location: Location {
                column: Some("year".into()),
                ..Location::file("/tmp/a.parquet")
            },
            message: "no column named 'year'".into(),
        };
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        let shown = format!("{boxed:?}");
        assert_eq!(shown, boxed.to_string());
        assert!(shown.starts_with("/tmp/a.parquet, column 'year'"), "{shown}");
        assert!(
            !shown.contains("location:") && !shown.contains("InvalidRequest {"),
            "{shown}"
        );
    }
}
