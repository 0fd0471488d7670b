//! Atomic file replacement: every file kiln writes (`kiln run` outputs, fuzz reproducers,
//! bench JSON and dumps) goes through [`write_atomic`].
//!
//! Scope: the bytes go to a fresh temporary file in the destination's own directory (same
//! file system, so the rename cannot become a copy), which is fsynced and then renamed over
//! the destination; the directory is fsynced last so the rename itself is durable.
//! Exactness: a reader sees either the old file or the complete new one, never a prefix. On
//! any failure (unwritable directory, full disk, file size limit) the temporary file is
//! removed and the destination is left exactly as it was.
//! Limits: POSIX rename semantics (Linux, macOS); a crash between the rename and the
//! directory fsync may lose the new name (the old file then remains). The process must ignore
//! `SIGXFSZ` ([`ignore_file_size_signal`]) for a `ulimit -f` overrun to surface as an error
//! rather than kill it before the cleanup runs.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of concurrent writers in one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The temporary path next to `path`: `.<name>.<pid>.<n>.tmp` (hidden, unique per process
/// and call; `create_new` refuses an existing file, so a stale one is never reused).
fn temp_path(path: &Path) -> std::io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the output path has no file name",
        )
    })?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = format!(".{}.{}.{n}.tmp", name.to_string_lossy(), std::process::id());
    Ok(path.with_file_name(tmp))
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Replaces `path` with `bytes` atomically (see the module docs). On error nothing at `path`
/// has changed and no temporary file is left behind.
pub fn write_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> std::io::Result<()> {
    let path = path.as_ref();
    let tmp = temp_path(path)?;
    let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            std::fs::rename(&tmp, path)
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The data is in place; make the new directory entry durable too. Directories cannot be
    // opened for fsync on every platform, so a failure to open one is not an error.
    if let Ok(dir) = File::open(parent_dir(path)) {
        dir.sync_all()?;
    }
    Ok(())
}

/// Makes the process ignore `SIGXFSZ`, so that writing past a file size limit (`ulimit -f`)
/// fails with `EFBIG` ("File too large") instead of killing the process. Call once at start.
pub fn ignore_file_size_signal() {
    #[cfg(target_os = "linux")]
    // SAFETY: installs the SIG_IGN disposition for SIGXFSZ; no handler code runs, no memory
    // is shared, and `signal` is async-signal-safe. Exercised by `tests/cli_exhaustion.rs`
    // (the CLI under `ulimit -f`) and this module's test.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kiln-atomic-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_and_leaves_no_temporary() {
        let d = scratch("replace");
        let p = d.join("out.bin");
        write_atomic(&p, b"old").unwrap();
        write_atomic(&p, b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        assert_eq!(entries(&d), vec!["out.bin".to_string()]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn missing_directory_fails_cleanly() {
        let d = scratch("missing");
        let p = d.join("no-such-dir").join("out.bin");
        assert!(write_atomic(&p, b"x").is_err());
        assert!(entries(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn failed_write_keeps_the_old_file() {
        // A rename onto a non-empty directory fails after the data was written: the
        // destination keeps its contents and the temporary file is removed.
        let d = scratch("keep");
        let p = d.join("target");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), b"old").unwrap();
        assert!(write_atomic(&p, b"new").is_err());
        assert_eq!(std::fs::read(p.join("inside")).unwrap(), b"old");
        assert_eq!(entries(&d), vec!["target".to_string()]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn file_name_is_required() {
        assert!(write_atomic("/", b"x").is_err());
    }

    #[test]
    fn ignoring_sigxfsz_does_not_disturb_writes() {
        ignore_file_size_signal();
        let d = scratch("sig");
        write_atomic(d.join("a"), b"abc").unwrap();
        assert_eq!(std::fs::read(d.join("a")).unwrap(), b"abc");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
