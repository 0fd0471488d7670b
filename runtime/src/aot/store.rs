//! The cache directory: verified reads, write-once atomic puts, quarantine and LRU pruning.
//!
//! Scope: one flat directory: `<key hex>.kce` entries, `quarantine/` for rejected entries,
//! `.tmp.*` files being written, and `.lock` for pruning.
//!
//! - [`CacheDir::get`] refuses symlinks and non-regular files, opens without following links
//!   and without blocking (a FIFO cannot hang it), reads at most the size limit into private
//!   memory, then checks length, magic, version and checksum ([`Entry::decode`]), that the
//!   stored key is the requested key, that the target is the host's and that the host has
//!   every feature the entry needs. Any failure is a miss: the file is moved to
//!   `quarantine/` and the caller gets one [`Rejection`] to report. A hit refreshes the
//!   file's modification time, the LRU clock.
//! - [`CacheDir::put`] writes a uniquely named temporary file, fsyncs it, then hard-links it
//!   to the entry name, which fails rather than replace an existing entry, removes the
//!   temporary name and fsyncs the directory. Entries never change once written, so readers
//!   racing writers see either no entry or a complete one.
//! - [`CacheDir::prune`] holds an exclusive `flock` on `.lock`, keeps the most recently used
//!   entries whose sizes add up to at most the limit, deletes the rest, the quarantine and
//!   temporary files older than an hour.
//!
//! Exactness: nothing read is used until every check passed; a quarantined file is moved
//! only if it is still the file that was read (same device and inode).
//!
//! Limits: Unix only for symlink-safe opens and locking; mtime granularity is the
//! filesystem's, so entries touched within one tick are ordered by name.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::entry::Entry;
use super::error::CacheError;
use super::host::HostSpec;
use super::key::CacheKey;

/// File extension of cache entries.
pub const ENTRY_EXT: &str = "kce";

/// Largest entry file read or written by default (64 MiB).
pub const DEFAULT_MAX_ENTRY_BYTES: u64 = 64 << 20;

/// Name of the quarantine subdirectory.
pub const QUARANTINE: &str = "quarantine";

/// Temporary files older than this are removed by [`CacheDir::prune`].
const STALE_TMP: Duration = Duration::from_secs(3600);

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// An open cache directory.
#[derive(Clone, Debug)]
pub struct CacheDir {
    root: PathBuf,
    max_entry_bytes: u64,
}

/// Why an entry that was present was not used, and where it went.
#[derive(Debug)]
pub struct Rejection {
    /// The entry's path.
    pub path: PathBuf,
    /// The failed check.
    pub reason: CacheError,
    /// Where the file was moved, when the move succeeded.
    pub quarantined_to: Option<PathBuf>,
}

impl std::fmt::Display for Rejection {
    /// The one warning line for a rejected entry.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kiln cache: ignoring {}: {}",
            self.path.display(),
            self.reason
        )?;
        match &self.quarantined_to {
            Some(q) => write!(f, " (moved to {})", q.display()),
            None => write!(f, " (could not be quarantined)"),
        }
    }
}

/// The result of [`CacheDir::get`].
#[derive(Debug)]
pub enum Lookup {
    /// A verified entry.
    Hit(Entry),
    /// No entry for the key.
    Absent,
    /// An entry was present but failed a check: a miss, with the warning to report.
    Rejected(Rejection),
}

impl Lookup {
    /// The entry on a hit.
    pub fn entry(self) -> Option<Entry> {
        match self {
            Lookup::Hit(e) => Some(e),
            _ => None,
        }
    }
}

/// The result of a successful [`CacheDir::put`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// The entry was written.
    Written,
    /// An entry with this key already existed and was left unchanged.
    AlreadyPresent,
}

/// What [`CacheDir::prune`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Entries kept.
    pub kept: usize,
    /// Bytes of the kept entries.
    pub kept_bytes: u64,
    /// Entries deleted.
    pub removed: usize,
    /// Bytes of the deleted entries.
    pub removed_bytes: u64,
    /// Quarantined and stale temporary files deleted.
    pub cleaned: usize,
}

/// Where the cache lives by default, from an environment lookup: `KILN_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/kiln`, else `$HOME/.cache/kiln`. `None` when `KILN_CACHE=off` or nothing
/// is set. Empty values count as unset.
pub fn default_dir_from(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    if get("KILN_CACHE").is_some_and(|v| v == "off") {
        return None;
    }
    if let Some(d) = get("KILN_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(x) = get("XDG_CACHE_HOME") {
        return Some(PathBuf::from(x).join("kiln"));
    }
    get("HOME").map(|h| PathBuf::from(h).join(".cache").join("kiln"))
}

impl CacheDir {
    /// Opens `root`, creating it (and `quarantine/`) if needed.
    pub fn open(root: impl Into<PathBuf>) -> Result<CacheDir, CacheError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| CacheError::io("create", &root, e))?;
        let md = fs::symlink_metadata(&root).map_err(|e| CacheError::io("stat", &root, e))?;
        if !md.is_dir() {
            return Err(CacheError::NotADirectory(root));
        }
        let q = root.join(QUARANTINE);
        fs::create_dir_all(&q).map_err(|e| CacheError::io("create", &q, e))?;
        Ok(CacheDir {
            root,
            max_entry_bytes: DEFAULT_MAX_ENTRY_BYTES,
        })
    }

    /// The cache from the environment (see [`default_dir_from`]); `Ok(None)` when disabled.
    pub fn from_env() -> Result<Option<CacheDir>, CacheError> {
        if std::env::var_os("KILN_CACHE").is_some_and(|v| v == "off") {
            return Ok(None);
        }
        match default_dir_from(|k| std::env::var_os(k)) {
            Some(d) => CacheDir::open(d).map(Some),
            None => Err(CacheError::NoDefaultDir),
        }
    }

    /// Sets the largest entry file accepted.
    pub fn with_max_entry_bytes(mut self, limit: u64) -> Self {
        self.max_entry_bytes = limit;
        self
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file an entry for `key` lives in.
    pub fn entry_path(&self, key: &CacheKey) -> PathBuf {
        self.root.join(format!("{key}.{ENTRY_EXT}"))
    }

    /// Looks `key` up for `host`. Never panics; every failure is a miss.
    pub fn get(&self, key: &CacheKey, host: &HostSpec) -> Lookup {
        let path = self.entry_path(key);
        match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Lookup::Absent,
            _ => {}
        }
        match read_entry_file(&path, self.max_entry_bytes) {
            Ok((bytes, file, id)) => {
                let checked = Entry::decode(&bytes).and_then(|e| check(e, Some(key), Some(host)));
                match checked {
                    Ok(e) => {
                        // The LRU clock; best effort (a read-only cache still serves hits).
                        let _ = file.set_modified(SystemTime::now());
                        Lookup::Hit(e)
                    }
                    Err(reason) => Lookup::Rejected(self.quarantine(path, reason, id)),
                }
            }
            Err(CacheError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Lookup::Absent
            }
            Err(reason) => Lookup::Rejected(self.quarantine(path, reason, None)),
        }
    }

    /// Moves a rejected file into `quarantine/` under a unique name, if it is still the file
    /// that was read (`id`: device and inode; `None` when it could not be opened).
    fn quarantine(&self, path: PathBuf, reason: CacheError, id: Option<FileId>) -> Rejection {
        let still_same = match (id, fs::symlink_metadata(&path)) {
            (Some(id), Ok(md)) => FileId::of(&md) == id,
            (None, Ok(_)) => true,
            (_, Err(_)) => false,
        };
        let mut quarantined_to = None;
        if still_same {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let dest = self.root.join(QUARANTINE).join(format!(
                "{}.{}",
                name.unwrap_or_default(),
                unique_suffix()
            ));
            if fs::rename(&path, &dest).is_ok() {
                quarantined_to = Some(dest);
            }
        }
        Rejection {
            path,
            reason,
            quarantined_to,
        }
    }

    /// Writes `entry` under its key unless an entry for that key exists. Entries are never
    /// replaced.
    pub fn put(&self, entry: &Entry) -> Result<PutOutcome, CacheError> {
        let bytes = entry.encode()?;
        if bytes.len() as u64 > self.max_entry_bytes {
            return Err(CacheError::TooLarge {
                path: self.entry_path(&entry.key),
                len: bytes.len() as u64,
                limit: self.max_entry_bytes,
            });
        }
        let dest = self.entry_path(&entry.key);
        let tmp = self.root.join(format!(".tmp.{}", unique_suffix()));
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| CacheError::io("create", &tmp, e))?;
            f.write_all(&bytes)
                .map_err(|e| CacheError::io("write", &tmp, e))?;
            f.sync_all().map_err(|e| CacheError::io("fsync", &tmp, e))?;
            match fs::hard_link(&tmp, &dest) {
                Ok(()) => Ok(PutOutcome::Written),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    Ok(PutOutcome::AlreadyPresent)
                }
                Err(e) => Err(CacheError::io("link", &dest, e)),
            }
        })();
        let _ = fs::remove_file(&tmp);
        let outcome = written?;
        if outcome == PutOutcome::Written {
            // Make the new name durable; failure only risks losing the entry on a crash.
            if let Ok(d) = File::open(&self.root) {
                let _ = d.sync_all();
            }
        }
        Ok(outcome)
    }

    /// Entry files in the directory (by name: 64 hex digits + `.kce`), sorted by name.
    pub fn entry_files(&self) -> Result<Vec<PathBuf>, CacheError> {
        list_entry_files(&self.root)
    }

    /// Deletes least-recently-used entries until the rest take at most `max_bytes`; also
    /// empties the quarantine and removes temporary files older than an hour. One process
    /// at a time (exclusive lock on `.lock`).
    pub fn prune(&self, max_bytes: u64) -> Result<PruneReport, CacheError> {
        let _lock = lock_exclusive(&self.root.join(".lock"))?;
        let mut entries = Vec::new();
        for p in self.entry_files()? {
            if let Ok(md) = fs::symlink_metadata(&p) {
                if md.is_file() {
                    let t = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    entries.push((t, p, md.len()));
                }
            }
        }
        // Most recently used first; ties by name so the choice is deterministic.
        entries.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut rep = PruneReport::default();
        let mut total = 0u64;
        let mut full = false;
        for (_, p, len) in entries {
            if !full && total.saturating_add(len) <= max_bytes {
                total += len;
                rep.kept += 1;
                rep.kept_bytes += len;
                continue;
            }
            full = true;
            match fs::remove_file(&p) {
                Ok(()) => {
                    rep.removed += 1;
                    rep.removed_bytes += len;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(CacheError::io("remove", &p, e)),
            }
        }
        let q = self.root.join(QUARANTINE);
        if let Ok(rd) = fs::read_dir(&q) {
            for e in rd.flatten() {
                if fs::remove_file(e.path()).is_ok() {
                    rep.cleaned += 1;
                }
            }
        }
        let rd = fs::read_dir(&self.root).map_err(|e| CacheError::io("list", &self.root, e))?;
        for e in rd.flatten() {
            if !e.file_name().to_string_lossy().starts_with(".tmp.") {
                continue;
            }
            let old = e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TMP);
            if old && fs::remove_file(e.path()).is_ok() {
                rep.cleaned += 1;
            }
        }
        Ok(rep)
    }
}

/// Verifies a decoded entry against the requested key and the host (each check optional, for
/// `kiln aot verify`, which checks bundles for other targets).
pub fn check(
    entry: Entry,
    key: Option<&CacheKey>,
    host: Option<&HostSpec>,
) -> Result<Entry, CacheError> {
    if let Some(k) = key {
        if entry.key != *k {
            return Err(CacheError::KeyMismatch {
                stored: entry.key.to_string(),
                requested: k.to_string(),
            });
        }
    }
    if let Some(h) = host {
        if entry.target != h.triple {
            return Err(CacheError::WrongTarget {
                entry: entry.target.clone(),
                host: h.triple.clone(),
            });
        }
        let missing = h.missing(&entry.features);
        if !missing.is_empty() {
            return Err(CacheError::MissingFeatures(missing));
        }
    }
    Ok(entry)
}

/// Reads and decodes the entry at `path` and checks that its file name is its key; no host
/// check, no quarantine (what `kiln aot verify` does for each file).
pub fn verify_file(path: &Path, max_bytes: u64) -> Result<Entry, CacheError> {
    let (bytes, _, _) = read_entry_file(path, max_bytes)?;
    let e = Entry::decode(&bytes)?;
    let named = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(CacheKey::from_hex);
    match named {
        Some(k) => check(e, Some(&k), None),
        None => Err(CacheError::Malformed(format!(
            "file name {} is not <key>.{ENTRY_EXT}",
            path.display()
        ))),
    }
}

/// Entry files (`<64 hex>.kce`) directly in `dir`, sorted.
pub fn list_entry_files(dir: &Path) -> Result<Vec<PathBuf>, CacheError> {
    let rd = fs::read_dir(dir).map_err(|e| CacheError::io("list", dir, e))?;
    let mut v = Vec::new();
    for e in rd {
        let e = e.map_err(|e| CacheError::io("list", dir, e))?;
        let p = e.path();
        let is_entry = p.extension().is_some_and(|x| x == ENTRY_EXT)
            && p.file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|s| s.len() == 64);
        if is_entry {
            v.push(p);
        }
    }
    v.sort();
    Ok(v)
}

/// Device and inode of a file, to tell whether a path still names the file that was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId(u64, u64);

impl FileId {
    #[cfg(unix)]
    fn of(md: &fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId(md.dev(), md.ino())
    }
    #[cfg(not(unix))]
    fn of(_md: &fs::Metadata) -> FileId {
        FileId(0, 0)
    }
}

/// Opens `path` safely and reads it whole into private memory: refuses symlinks (also at
/// open, against a swap between the check and the open), non-regular files (opened
/// non-blocking, so a FIFO cannot hang), and files over `limit` (also if it grows while
/// read).
fn read_entry_file(path: &Path, limit: u64) -> Result<(Vec<u8>, File, Option<FileId>), CacheError> {
    let md = fs::symlink_metadata(path).map_err(|e| CacheError::io("stat", path, e))?;
    if md.file_type().is_symlink() {
        return Err(CacheError::Symlink(path.to_path_buf()));
    }
    if !md.is_file() {
        return Err(CacheError::NotRegularFile(path.to_path_buf()));
    }
    let mut opts = OpenOptions::new();
    opts.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = opts.open(path).map_err(|e| {
        if is_symlink_loop(&e) {
            CacheError::Symlink(path.to_path_buf())
        } else {
            CacheError::io("open", path, e)
        }
    })?;
    let fmd = file
        .metadata()
        .map_err(|e| CacheError::io("stat", path, e))?;
    if !fmd.is_file() {
        return Err(CacheError::NotRegularFile(path.to_path_buf()));
    }
    if fmd.len() > limit {
        return Err(CacheError::TooLarge {
            path: path.to_path_buf(),
            len: fmd.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(fmd.len() as usize);
    (&file)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| CacheError::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(CacheError::TooLarge {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
            limit,
        });
    }
    let id = FileId::of(&fmd);
    Ok((bytes, file, Some(id)))
}

/// Whether an open failed because `O_NOFOLLOW` met a symlink.
fn is_symlink_loop(e: &io::Error) -> bool {
    #[cfg(target_os = "linux")]
    return e.raw_os_error() == Some(libc::ELOOP);
    #[cfg(not(target_os = "linux"))]
    return false;
}

/// A name part no other writer in any process uses: pid, time and a process-wide counter.
fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}.{nanos}.{n}", std::process::id())
}

/// An exclusive `flock` on `path`, released when the returned file is dropped.
#[cfg(target_os = "linux")]
fn lock_exclusive(path: &Path) -> Result<File, CacheError> {
    use std::os::unix::io::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| CacheError::io("open lock", path, e))?;
    loop {
        // SAFETY: `f` is an open file descriptor owned by this function; flock only takes
        // an advisory lock on it.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(f);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(CacheError::io("lock", path, e));
        }
    }
}

/// Pruning needs `flock`; not available here.
#[cfg(not(target_os = "linux"))]
fn lock_exclusive(_path: &Path) -> Result<File, CacheError> {
    Err(CacheError::Unsupported("locking the cache for pruning"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn default_dir_follows_the_documented_order() {
        let d = |p| default_dir_from(env(p));
        assert_eq!(d(&[("KILN_CACHE", "off"), ("KILN_CACHE_DIR", "/a")]), None);
        assert_eq!(
            d(&[("KILN_CACHE_DIR", "/a"), ("XDG_CACHE_HOME", "/x")]),
            Some("/a".into())
        );
        assert_eq!(
            d(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]),
            Some("/x/kiln".into())
        );
        assert_eq!(
            d(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]),
            Some("/h/.cache/kiln".into())
        );
        assert_eq!(d(&[]), None);
    }
}
