//! Files written whole or not at all — the one atomic writer of tofu (plan
//! and graph files, training checkpoints and weights, saved outputs, SSP
//! checkpoints).
//!
//! A write goes to a temporary file in the destination's directory (named
//! `.NAME.XXXXXX`, by `tempfile`), which is synced to disk (`fsync`), renamed
//! over the destination, and then the directory is synced so the rename
//! survives a crash. A reader sees the old file or the new one, never a torn
//! one. When the write or the rename fails, the old file stays as it was and
//! the temporary file is removed. A new file gets the mode a plain create
//! gives (0666 less the umask). Depends on no other tofu crate.
#![warn(missing_docs)]

use std::io::{self, Write};
use std::path::Path;

/// Write `bytes` to `path` whole or not at all (see the module doc).
///
/// # Errors
/// The I/O error of the create, write, sync or rename (the caller names
/// the path).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Write `path` whole or not at all, its contents written by `write` (see
/// the module doc); an error from `write` leaves the old file.
///
/// # Errors
/// `write`'s error, or the I/O error of the create, sync or rename.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = parent(path);
    let prefix = format!(
        ".{}.",
        path.file_name()
            .map_or("out".into(), |n| n.to_string_lossy())
    );
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    // Dropping `tmp` (on any error below) removes the temporary file.
    let mut tmp = builder.tempfile_in(dir)?;
    write(tmp.as_file_mut())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// `fsync` directory `dir`: its entries (a rename, a new file or directory
/// in it) survive a crash. For a directory committed by a rename (a
/// checkpoint's `step-<S>`), sync its parent.
///
/// # Errors
/// The I/O error of opening or syncing `dir`.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The directory `path` is in (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}
