//! Files written whole or not at all: a temporary file in the same
//! directory, written, flushed to disk (`fsync`), then renamed over the
//! destination, and the directory synced so the rename survives a crash.
//! A reader never sees a torn file: it sees the old one or the new one.

use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` atomically (see the module doc).
///
/// Errors: the I/O error, with the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or("out".into(), |n| n.to_string_lossy());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let io = |e: std::io::Error, p: &Path| format!("{}: {e}", p.display());
    let write = || -> Result<(), String> {
        let mut f = std::fs::File::create(&tmp).map_err(|e| io(e, &tmp))?;
        f.write_all(bytes).map_err(|e| io(e, &tmp))?;
        f.sync_all().map_err(|e| io(e, &tmp))?;
        std::fs::rename(&tmp, path).map_err(|e| io(e, path))?;
        sync_dir(dir)
    };
    let r = write();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// `fsync` a directory (its entries: a rename or a new file in it).
///
/// Errors: the I/O error, with the path.
pub fn sync_dir(dir: &Path) -> Result<(), String> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("tofu-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.bin");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let missing = write_atomic(&dir.join("no/such/dir/x"), b"x").unwrap_err();
        assert!(missing.contains("no/such/dir"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
