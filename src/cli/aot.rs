//! `kiln aot ls DIR`, `kiln aot verify DIR` and `kiln cache prune --max-size SIZE`: inspect,
//! check and trim a kernel cache directory or `kiln aot` bundle.
//!
//! `verify` checks every entry's length, magic, version, checksum, structure and that its
//! file name is its key; it does not check the host, since a bundle carries entries for other
//! targets. It never moves or changes a file. `kiln aot build` is in `aot_build.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use kiln::runtime::aot::store::{self, default_dir_from, DEFAULT_MAX_ENTRY_BYTES};
use kiln::runtime::aot::{CacheDir, CacheError};

use super::CliError;

/// Arguments of `kiln aot`.
#[derive(Args, Debug)]
pub struct AotArgs {
    #[command(subcommand)]
    command: AotCommand,
}

#[derive(Subcommand, Debug)]
enum AotCommand {
    /// List the entries of a cache directory or bundle: key, size, target, features, symbols.
    Ls {
        /// The directory.
        dir: PathBuf,
    },
    /// Check every entry (length, magic, version, checksum, key = file name); exit 1 if any
    /// is bad.
    Verify {
        /// The directory.
        dir: PathBuf,
        /// Also require a valid signature of the bundle by this public key (a file from
        /// `kiln aot keygen`); exit 1 without it.
        #[arg(long)]
        require_signature: Option<PathBuf>,
    },
    /// Create an ed25519 key pair for signing bundles (`kiln aot build --sign`).
    Keygen(super::aot_sign::KeygenArgs),
    /// Compile the kernels of a manifest for the given targets into a bundle directory.
    Build(super::aot_build::BuildArgs),
}

/// Arguments of `kiln cache`.
#[derive(Args, Debug)]
pub struct CacheArgs {
    #[command(subcommand)]
    command: CacheCommand,
}

#[derive(Subcommand, Debug)]
enum CacheCommand {
    /// Delete least-recently-used entries until the cache takes at most SIZE bytes (also
    /// empties the quarantine).
    Prune {
        /// Size limit: bytes, or with a K, M, G or T suffix (powers of 1024), e.g. 512M.
        #[arg(long)]
        max_size: String,
        /// Cache directory (default: KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln or ~/.cache/kiln).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn cache_err(e: CacheError) -> CliError {
    CliError::Usage(format!("cache: {e}"))
}

/// Runs `kiln aot`.
pub fn run_aot(a: AotArgs) -> Result<ExitCode, CliError> {
    match a.command {
        AotCommand::Ls { dir } => ls(dir),
        AotCommand::Verify {
            dir,
            require_signature,
        } => verify(dir, require_signature),
        AotCommand::Keygen(k) => super::aot_sign::keygen(k),
        AotCommand::Build(b) => super::aot_build::run(b),
    }
}

/// Runs `kiln cache`.
pub fn run_cache(a: CacheArgs) -> Result<ExitCode, CliError> {
    match a.command {
        CacheCommand::Prune { max_size, dir } => prune(&max_size, dir),
    }
}

fn ls(dir: PathBuf) -> Result<ExitCode, CliError> {
    let files = store::list_entry_files(&dir).map_err(cache_err)?;
    for f in &files {
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        let size = std::fs::symlink_metadata(f).map(|m| m.len()).unwrap_or(0);
        match store::verify_file(f, DEFAULT_MAX_ENTRY_BYTES) {
            Ok(e) => println!(
                "{name}  {size:>9}  {}  features={}  symbols={}",
                e.target,
                e.features.join(","),
                e.symbols.len()
            ),
            Err(err) => println!("{name}  {size:>9}  BAD: {err}"),
        }
    }
    println!("{} entries", files.len());
    Ok(ExitCode::SUCCESS)
}

fn verify(dir: PathBuf, require_signature: Option<PathBuf>) -> Result<ExitCode, CliError> {
    let signed = match &require_signature {
        Some(public) => Some(super::aot_sign::verify_signature(&dir, public)?),
        None => None,
    };
    let files = store::list_entry_files(&dir).map_err(cache_err)?;
    let mut bad = 0usize;
    for f in &files {
        if let Err(err) = store::verify_file(f, DEFAULT_MAX_ENTRY_BYTES) {
            bad += 1;
            println!("BAD {}: {err}", f.display());
        }
    }
    println!(
        "{} entries, {} ok, {bad} bad",
        files.len(),
        files.len() - bad
    );
    Ok(if bad == 0 && signed != Some(false) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn prune(max_size: &str, dir: Option<PathBuf>) -> Result<ExitCode, CliError> {
    let limit = parse_size(max_size)?;
    let dir = match dir.or_else(|| default_dir_from(|k| std::env::var_os(k))) {
        Some(d) => d,
        None => {
            return Err(CliError::Usage(
                "no cache directory (KILN_CACHE=off, or none of KILN_CACHE_DIR, XDG_CACHE_HOME, HOME is set); pass --dir".into(),
            ))
        }
    };
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "cache directory {} does not exist",
            dir.display()
        )));
    }
    let rep = CacheDir::open(&dir)
        .and_then(|c| c.prune(limit))
        .map_err(cache_err)?;
    println!(
        "kept {} entries ({} bytes), removed {} ({} bytes), cleaned {} quarantined or stale files",
        rep.kept, rep.kept_bytes, rep.removed, rep.removed_bytes, rep.cleaned
    );
    Ok(ExitCode::SUCCESS)
}

/// Parses `123`, `4K`, `512M`, `2G`, `1T` (optionally followed by `B` or `iB`).
fn parse_size(s: &str) -> Result<u64, CliError> {
    let bad = || CliError::Usage(format!("--max-size '{s}' is not a size like 512M or 2G"));
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1TB").unwrap(), 1 << 40);
        for bad in ["", "M", "1.5G", "-1", "12X", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
