//! Why a program file cannot be read.

/// A program file that is not a program of this format or version.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProgramError {
    /// A program file that is not a program of this format.
    #[error("{file}: not a tofu program file: {message}")]
    ProgramFile {
        /// The file.
        file: String,
        /// What is wrong (serde's words with line and column).
        message: String,
    },
    /// A program file of another format version.
    #[error(
        "{file}: program format version {version}, but this tofu reads versions {} to {} (older versions carry no operator specs, shapes or fills; newer ones instructions this tofu does not know); regenerate it with `{}`",
        crate::program::OLDEST_READ,
        crate::program::VERSION,
        crate::program::REGENERATE
    )]
    ProgramVersion {
        /// The file.
        file: String,
        /// Its version.
        version: u32,
    },
}
