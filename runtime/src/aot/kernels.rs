//! CPU kernels in the on-disk cache: the key of a kernel, its entry (the code image of its
//! final compile) and the verified load of an entry back into a runnable `CpuKernel`.
//!
//! Scope: [`DiskCache`] is what the engine's CPU backend consults on a kernel-cache miss
//! (load, else compile and store) with its counters and the one warning per process. An
//! entry holds one kernel's final code: the general kernel (`base/`: compiled with the
//! engine's options; `upgraded/`: with the tiered background compile's options) and its
//! guarded variants (`clean/`, `nonneg/`, compiled with the background options), each
//! function's name prefixed with its part, all in one relocation-free blob.
//!
//! Exactness: an entry runs only if its key, recomputed here from the kernel form's text,
//! the canonical compile options (every field, plus whether tiering is on, which decides
//! what the entry holds), the target, the CPU features, the Cranelift version and kiln's
//! build id, equals the stored one and its checksum verifies (`store::CacheDir::get`). The
//! loaded kernel's plans and slots are recomputed by `kiln_codegen::cpu::load` exactly as a
//! compile computes them, so it runs the same code on the same arguments as the compile that
//! wrote the entry, and gives the same bits (tested against eager across processes).
//!
//! Limits: kernels compiled with a planted fault are never cached; an image that still
//! needs relocations (a library call) is refused with [`CacheError::NeedsRelocation`] and
//! simply not cached; loading needs Linux (`ExecMem`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kiln_codegen::cpu::{self, CpuKernel, FunctionCode, Guard, GuardedVariant, LoadedCode};
use kiln_codegen::{CompileOptions, Kernel};

use super::exec_mem::ExecMem;
use super::{CacheDir, CacheError, CacheKey, Entry, HostSpec, KeyInputs, Lookup};
use crate::backend::CodeImage;
use crate::fused::Upgrade;

/// The canonical bytes of the compile options of a cache key: every field of `options`
/// (its derived `Debug` form lists each one, by name, in declaration order) and whether
/// the engine tiers compiles (which decides what an entry holds).
pub fn options_bytes(options: &CompileOptions, tiering: bool) -> Vec<u8> {
    format!("{options:?};tiering={tiering}").into_bytes()
}

/// The key of `kernel`'s entry under `options` for `host`.
pub fn kernel_key(
    kernel: &Kernel,
    options: &CompileOptions,
    tiering: bool,
    host: &HostSpec,
) -> CacheKey {
    KeyInputs::for_host(kernel, &options_bytes(options, tiering), host).key()
}

/// Part prefix of the general kernel compiled with the engine's options.
pub const PART_BASE: &str = "base";
/// Part prefix of the general kernel compiled with the background compile's options.
pub const PART_UPGRADED: &str = "upgraded";

/// The part prefix of the variant under `g`.
pub(crate) fn guard_part(g: Guard) -> &'static str {
    match g {
        Guard::CleanInputs => "clean",
        Guard::NonNegative => "nonneg",
    }
}

/// The parts of a kernel's final code: the general kernel (`upgraded` says with which
/// options it was compiled) and its attached variants.
fn parts(kernel: &CpuKernel, upgraded: bool) -> Vec<(&'static str, &CpuKernel)> {
    let mut v = vec![(if upgraded { PART_UPGRADED } else { PART_BASE }, kernel)];
    v.extend(
        kernel
            .variants
            .iter()
            .map(|g| (guard_part(g.guard), &g.kernel)),
    );
    v
}

/// One image of every function of `parts`, each name (and relocation target) prefixed with
/// its part.
pub fn image_of_parts(parts: &[(&str, &CpuKernel)]) -> CodeImage {
    let code: Vec<(&str, &[FunctionCode])> = parts
        .iter()
        .map(|(part, k)| (*part, k.machine_code()))
        .collect();
    image_of_code(&code)
}

/// [`image_of_parts`] over each part's machine code (code compiled for any target).
pub fn image_of_code(parts: &[(&str, &[FunctionCode])]) -> CodeImage {
    let mut funcs = Vec::new();
    for (part, code) in parts {
        for f in code.iter() {
            let mut f = f.clone();
            f.name = format!("{part}/{}", f.name);
            for r in &mut f.relocs {
                if !r.target.starts_with('+') {
                    r.target = format!("{part}/{}", r.target);
                }
            }
            funcs.push(f);
        }
    }
    CodeImage::from_functions(&funcs)
}

/// The entry of `image` under `key` for `host` (the target the code was compiled for: its
/// triple and the features the code needs); refuses an image that needs relocations.
pub fn entry_of(key: CacheKey, image: &CodeImage, host: &HostSpec) -> Result<Entry, CacheError> {
    if !image.is_relocation_free() {
        let first = &image.relocs[0];
        return Err(CacheError::NeedsRelocation {
            count: image.relocs.len(),
            first: format!("{} to {}", first.kind, first.target),
        });
    }
    Ok(Entry {
        key,
        target: host.triple.clone(),
        features: host.features.clone(),
        symbols: image.symbols.clone(),
        payload: image.code.clone(),
    })
}

/// The options the tiered background compile uses for a kernel first compiled with
/// `options`.
pub fn upgrade_options(options: &CompileOptions) -> CompileOptions {
    crate::fused::upgrade_options(options)
}

/// `kernel`'s final code from a verified `entry`: copied into fresh executable memory, its
/// general kernel and variants rebuilt by `cpu::load`.
pub fn kernel_from_entry(
    entry: &Entry,
    kernel: &Kernel,
    options: &CompileOptions,
) -> Result<CpuKernel, CacheError> {
    let mem = Arc::new(ExecMem::load(&entry.payload)?);
    let bad = |what: String| CacheError::Malformed(what);
    let part_code = |part: &str| -> Option<LoadedCode> {
        let prefix = format!("{part}/");
        let functions: Vec<(FunctionCode, *const u8)> = entry
            .symbols
            .iter()
            .filter_map(|s| {
                let name = s.name.strip_prefix(&prefix)?;
                let addr = mem.symbol_ptr(s)?;
                let start = usize::try_from(s.offset).ok()?;
                let bytes = entry
                    .payload
                    .get(start..start + usize::try_from(s.len).ok()?)?;
                Some((
                    FunctionCode {
                        name: name.to_string(),
                        bytes: bytes.to_vec(),
                        relocs: Vec::new(),
                    },
                    addr,
                ))
            })
            .collect();
        (!functions.is_empty()).then(|| LoadedCode {
            memory: Box::new(mem.clone()),
            functions,
        })
    };
    let up = upgrade_options(options);
    let (general, general_options) = match (part_code(PART_BASE), part_code(PART_UPGRADED)) {
        (Some(c), None) => (c, options),
        (None, Some(c)) => (c, &up),
        _ => return Err(bad("not exactly one general kernel".into())),
    };
    // SAFETY: the entry's key (checked by `CacheDir::get` against the key recomputed from
    // this kernel's text, these options and this build's id) says this code is what this
    // build emitted for `kernel` under `general_options` (the part's prefix says which) and,
    // for each variant, under the background options; its checksum says the bytes are
    // unchanged; `mem` holds them executable, laid out as the image resolved their calls,
    // and every `LoadedCode` keeps `mem` alive.
    let mut k = unsafe { cpu::load(kernel, general_options, None, general) }
        .map_err(|e| bad(e.to_string()))?
        .ok_or_else(|| bad("general kernel did not load".into()))?;
    let mut variants = Vec::new();
    for g in Guard::ALL {
        if let Some(code) = part_code(guard_part(g)) {
            // SAFETY: as above, for the variant under `g` compiled with the background
            // options.
            let v = unsafe { cpu::load(kernel, &up, Some(g), code) }
                .map_err(|e| bad(e.to_string()))?
                .ok_or_else(|| bad(format!("variant {g:?} does not apply")))?;
            variants.push(GuardedVariant {
                guard: g,
                kernel: v,
            });
        }
    }
    k.variants = cpu::attachable(variants);
    Ok(k)
}

/// Whether the one warning of this process has been printed.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Prints `msg` on stderr if no cache warning was printed by this process yet.
fn warn_once(msg: &str) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!("{msg} (further cache warnings suppressed)");
    }
}

/// The on-disk cache as the CPU backend uses it: lookups, writes, counters.
pub struct DiskCache {
    dir: CacheDir,
    /// The machine: what an entry's target and features are checked against.
    host: HostSpec,
    /// The compile targets looked up, best first; the first is the one this process
    /// compiles for, under which its entries are written (see `host::lookup_specs`).
    specs: Vec<HostSpec>,
    hits: AtomicUsize,
    misses: AtomicUsize,
    writes: AtomicUsize,
    rejected: AtomicUsize,
    write_errors: AtomicUsize,
    /// Background compiles whose final code is still to be written (the CPU backend waits
    /// for them when it is dropped).
    pending: Mutex<Vec<Arc<Upgrade>>>,
    /// Writes running on threads of their own (see [`DiskCache::store_in_background`]).
    writing: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// A signed bundle ([`DiskCache::open_signed`]): the signed digest of every entry that
    /// may be loaded; nothing is written.
    signed: Option<super::sign::SignedDigests>,
}

/// Counters of a [`DiskCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCounts {
    /// Kernels loaded from verified entries.
    pub hits: usize,
    /// Lookups that found no usable entry (absent or rejected).
    pub misses: usize,
    /// Entries written.
    pub writes: usize,
    /// Entries present but rejected by a check (quarantined).
    pub rejected: usize,
    /// Entries that could not be written (refused image, I/O error).
    pub write_errors: usize,
}

/// How long dropping an engine with a [`DiskCache`] waits for background compiles to
/// write their code.
pub const PENDING_WAIT: Duration = Duration::from_secs(30);

impl DiskCache {
    /// The cache in `dir` (created if needed) for this host.
    pub fn open(dir: impl AsRef<Path>) -> Result<DiskCache, CacheError> {
        Ok(DiskCache::new(
            CacheDir::open(dir.as_ref())?,
            HostSpec::detect(),
        ))
    }

    /// The cache from the environment: `KILN_CACHE=off` none; else `KILN_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`. A directory that cannot be used gives
    /// one warning and no cache.
    pub fn from_env() -> Option<DiskCache> {
        match CacheDir::from_env() {
            Ok(Some(d)) => Some(DiskCache::new(d, HostSpec::detect())),
            Ok(None) => None,
            Err(e) => {
                warn_once(&format!("kiln cache: disabled: {e}"));
                None
            }
        }
    }

    /// The cache in `dir` for `host`: entries compiled for this process's native target or
    /// any feature level of its architecture that `host` has (`host::lookup_specs`); for a
    /// `host` of another triple (tests), for `host` itself.
    pub fn new(dir: CacheDir, host: HostSpec) -> DiskCache {
        let specs: Vec<HostSpec> = super::host::lookup_specs()
            .into_iter()
            .filter(|s| s.triple == host.triple && host.missing(&s.features).is_empty())
            .collect();
        let specs = if specs.is_empty() {
            vec![host.clone()]
        } else {
            specs
        };
        DiskCache {
            dir,
            host,
            specs,
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
            rejected: AtomicUsize::new(0),
            write_errors: AtomicUsize::new(0),
            pending: Mutex::new(Vec::new()),
            writing: Mutex::new(Vec::new()),
            signed: None,
        }
    }

    /// The signed bundle in `dir`, read-only: its signature by `public_key` over the
    /// manifest and every entry is checked now (see [`super::sign`]), and each entry loaded
    /// later must still have its signed digest. Kernels it lacks are compiled, not written.
    pub fn open_signed(
        dir: impl AsRef<Path>,
        public_key: &[u8; 32],
    ) -> Result<DiskCache, super::sign::SignError> {
        let dir = dir.as_ref();
        let signed =
            super::sign::verify_bundle(dir, public_key, super::store::DEFAULT_MAX_ENTRY_BYTES)?;
        let cache_dir = CacheDir::open(dir).map_err(|e| super::sign::SignError::Entry {
            path: dir.display().to_string(),
            source: e,
        })?;
        let mut cache = DiskCache::new(cache_dir, HostSpec::detect());
        cache.signed = Some(signed);
        Ok(cache)
    }

    /// Whether this is a signed, read-only bundle.
    pub fn is_signed(&self) -> bool {
        self.signed.is_some()
    }

    /// The directory.
    pub fn dir(&self) -> &CacheDir {
        &self.dir
    }

    /// The counters.
    pub fn counts(&self) -> DiskCounts {
        DiskCounts {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
        }
    }

    /// The compile targets this cache looks entries up for, best first (the first is the
    /// one it writes entries for).
    pub fn lookup_specs(&self) -> &[HostSpec] {
        &self.specs
    }

    /// `kernel`'s final code from the cache, verified; `None` on any miss (a rejected entry
    /// is quarantined and warned about once per process). The entry of each lookup target
    /// is tried in turn ([`DiskCache::lookup_specs`]); the first verified one is used.
    pub fn load(
        &self,
        kernel: &Kernel,
        options: &CompileOptions,
        tiering: bool,
    ) -> Option<CpuKernel> {
        let mut rejected = false;
        for spec in &self.specs {
            let key = kernel_key(kernel, options, tiering, spec);
            let entry = match self.dir.get(&key, &self.host) {
                Lookup::Hit(e) => e,
                Lookup::Absent => continue,
                Lookup::Rejected(r) => {
                    rejected = true;
                    warn_once(&r.to_string());
                    continue;
                }
            };
            if let Some(signed) = &self.signed {
                let ok =
                    super::sign::entry_digest(&entry).is_ok_and(|d| signed.get(&key) == Some(&d));
                if !ok {
                    rejected = true;
                    warn_once(&format!(
                        "kiln cache: ignoring {}: not signed (changed or added after the bundle was signed)",
                        self.dir.entry_path(&key).display()
                    ));
                    continue;
                }
            }
            match kernel_from_entry(&entry, kernel, options) {
                Ok(k) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    if rejected {
                        self.rejected.fetch_add(1, Ordering::Relaxed);
                    }
                    return Some(k);
                }
                Err(e) => {
                    rejected = true;
                    warn_once(&format!(
                        "kiln cache: ignoring {}: {e}",
                        self.dir.entry_path(&key).display()
                    ));
                }
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        if rejected {
            self.rejected.fetch_add(1, Ordering::Relaxed);
        }
        None
    }

    /// Writes `compiled`'s code (`upgraded`: compiled with the background options) as the
    /// entry of its kernel under `options`. Failures are counted and warned about once.
    pub fn store(
        &self,
        compiled: &CpuKernel,
        options: &CompileOptions,
        tiering: bool,
        upgraded: bool,
    ) {
        if self.signed.is_some() {
            // A signed bundle is read-only: an entry written now would not be signed.
            return;
        }
        let spec = &self.specs[0];
        let key = kernel_key(&compiled.kernel, options, tiering, spec);
        let image = image_of_parts(&parts(compiled, upgraded));
        let written = entry_of(key, &image, spec).and_then(|e| self.dir.put(&e));
        match written {
            Ok(super::PutOutcome::Written) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(super::PutOutcome::AlreadyPresent) => {}
            Err(e) => {
                self.write_errors.fetch_add(1, Ordering::Relaxed);
                warn_once(&format!("kiln cache: not writing a kernel: {e}"));
            }
        }
    }

    /// Remembers a background compile that writes its code when done.
    pub(crate) fn track(&self, up: Arc<Upgrade>) {
        let mut p = crate::executor::lock(&self.pending);
        p.retain(|u| !u.is_finished());
        p.push(up);
    }

    /// Writes `compiled`'s entry (as [`DiskCache::store`]) on a thread of its own, so that
    /// the compile that asked for it does not wait for the file system (an fsync costs
    /// about as much as a small kernel's compile); written inline when no thread starts.
    pub fn store_in_background(
        self: &Arc<Self>,
        compiled: Arc<CpuKernel>,
        options: &CompileOptions,
        tiering: bool,
    ) {
        let (me, theirs, their_options) = (self.clone(), compiled.clone(), options.clone());
        let spawned = std::thread::Builder::new()
            .name("kiln-cache-write".into())
            .spawn(move || me.store(&theirs, &their_options, tiering, false));
        match spawned {
            Ok(h) => {
                let mut w = crate::executor::lock(&self.writing);
                w.retain(|h| !h.is_finished());
                w.push(h);
            }
            Err(_) => self.store(&compiled, options, tiering, false),
        }
    }

    /// Waits up to `timeout` for the tracked background compiles (and their writes), then
    /// for the writes running on threads of their own; returns whether all finished.
    pub fn wait_for_writes(&self, timeout: Duration) -> bool {
        let pending: Vec<_> = crate::executor::lock(&self.pending).clone();
        let deadline = std::time::Instant::now() + timeout;
        let all = pending
            .iter()
            .all(|u| u.wait(deadline.saturating_duration_since(std::time::Instant::now())));
        let writing: Vec<_> = crate::executor::lock(&self.writing).drain(..).collect();
        for h in writing {
            let _ = h.join();
        }
        all
    }
}
