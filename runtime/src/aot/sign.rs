//! Signed bundles: an ed25519 signature (`ed25519-dalek`) over a bundle's manifest and the
//! digest of every entry, for caches shipped to other machines (`kiln aot build --sign`,
//! `kiln aot verify --require-signature`, `Engine::with_signed_bundle`).
//!
//! Scope: key files, the signed message, writing and checking `kiln-bundle.sig`. The signed
//! message is recomputed from the directory, never stored:
//!
//! ```text
//! kiln-bundle-signature v1\n
//! manifest <SHA-256 of kiln-bundle.txt, hex>\n
//! entry <key hex> <SHA-256 of the entry's encoding, hex>\n      (one per entry, by key)
//! ```
//!
//! An entry's digest is the SHA-256 of its canonical encoding (`Entry::encode` of the decoded
//! entry), so the engine can check each entry it loads against the signed digest without
//! hashing the file a second time differently. Every entry must pass the usual checks
//! (`store::verify_file`) to be signed or verified.
//!
//! Exactness: nothing here changes code; a bundle that fails any check (no signature file,
//! another key, a changed, added or removed entry, a changed manifest, a bad signature) is
//! refused as a whole. Limits: key generation reads `/dev/urandom` (Unix); the engine checks
//! each loaded entry's digest, but a bundle is verified as a whole only when opened.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::store::{list_entry_files, verify_file};
use super::{CacheError, CacheKey, Entry};

/// The signature file in a bundle directory.
pub const SIGNATURE_FILE: &str = "kiln-bundle.sig";
/// The bundle's manifest (written by `kiln aot build`).
pub const BUNDLE_MANIFEST: &str = "kiln-bundle.txt";
const MESSAGE_TAG: &str = "kiln-bundle-signature v1";
const SECRET_TAG: &str = "kiln-ed25519-secret-key";
const PUBLIC_TAG: &str = "kiln-ed25519-public-key";
/// Largest key or signature file read.
const SMALL_FILE: u64 = 4096;

/// The signed digest of every entry of a bundle, by key.
pub type SignedDigests = BTreeMap<CacheKey, [u8; 32]>;

/// Why signing or verifying a bundle failed.
#[derive(Debug, Error)]
pub enum SignError {
    /// Reading or writing a file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A key or signature file is not in its format.
    #[error("{path}: {msg}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// The bundle has no signature file.
    #[error("no {SIGNATURE_FILE} in {0}: the bundle is not signed")]
    Unsigned(String),
    /// The bundle was signed with another key than the required one.
    #[error("signed by key {found}, not by the required key {required}")]
    OtherKey {
        /// The key in the signature file.
        found: String,
        /// The required key.
        required: String,
    },
    /// The signature does not match the bundle's current contents.
    #[error("bad signature: the bundle's manifest or entries changed after signing (or the signature was altered)")]
    BadSignature,
    /// An entry fails its own checks.
    #[error("entry {path}: {source}")]
    Entry {
        /// The entry file.
        path: String,
        /// The failed check.
        source: CacheError,
    },
}

fn io(op: &'static str, path: &Path, source: std::io::Error) -> SignError {
    SignError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        let d = |c: u8| (c as char).to_digit(16);
        *o = (d(b[2 * i])? * 16 + d(b[2 * i + 1])?) as u8;
    }
    Some(out)
}

/// Reads a small text file (at most 4 KiB), refusing anything else.
fn read_small(path: &Path) -> Result<String, SignError> {
    let md = std::fs::symlink_metadata(path).map_err(|e| io("reading", path, e))?;
    if !md.is_file() || md.len() > SMALL_FILE {
        return Err(SignError::Format {
            path: path.display().to_string(),
            msg: format!("not a regular file of at most {SMALL_FILE} bytes"),
        });
    }
    std::fs::read_to_string(path).map_err(|e| io("reading", path, e))
}

/// The value of line `tag VALUE` in `text`.
fn field<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(tag).and_then(|r| r.strip_prefix(' ')))
        .map(str::trim)
}

fn read_tagged<const N: usize>(path: &Path, tag: &str) -> Result<[u8; N], SignError> {
    let text = read_small(path)?;
    field(&text, tag)
        .and_then(unhex::<N>)
        .ok_or_else(|| SignError::Format {
            path: path.display().to_string(),
            msg: format!("expected a line `{tag} <{} hex digits>`", 2 * N),
        })
}

/// A new secret key (32 random bytes from `/dev/urandom`).
pub fn generate_secret_key() -> Result<[u8; 32], SignError> {
    let p = Path::new("/dev/urandom");
    let mut f = std::fs::File::open(p).map_err(|e| io("opening", p, e))?;
    let mut k = [0u8; 32];
    std::io::Read::read_exact(&mut f, &mut k).map_err(|e| io("reading", p, e))?;
    Ok(k)
}

/// The public key of `secret`.
pub fn public_key_of(secret: &[u8; 32]) -> [u8; 32] {
    SigningKey::from_bytes(secret).verifying_key().to_bytes()
}

/// Writes `secret` (readable by its owner only, never replacing a file) and its public key.
pub fn write_key_files(
    secret: &[u8; 32],
    secret_path: &Path,
    public_path: &Path,
) -> Result<(), SignError> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o
        .open(secret_path)
        .map_err(|e| io("creating", secret_path, e))?;
    f.write_all(format!("{SECRET_TAG} {}\n", hex(secret)).as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| io("writing", secret_path, e))?;
    let public = format!("{PUBLIC_TAG} {}\n", hex(&public_key_of(secret)));
    std::fs::write(public_path, public).map_err(|e| io("writing", public_path, e))
}

/// Reads a secret key file written by [`write_key_files`].
pub fn read_secret_key(path: &Path) -> Result<[u8; 32], SignError> {
    read_tagged(path, SECRET_TAG)
}

/// Reads a public key file written by [`write_key_files`].
pub fn read_public_key(path: &Path) -> Result<[u8; 32], SignError> {
    read_tagged(path, PUBLIC_TAG)
}

/// The digest the signature covers for `entry`: SHA-256 of its canonical encoding.
pub fn entry_digest(entry: &Entry) -> Result<[u8; 32], CacheError> {
    Ok(Sha256::digest(entry.encode()?).into())
}

/// The signed message of the bundle in `dir` and the digest of every entry, by key. Every
/// entry must pass its checks.
pub fn bundle_message(
    dir: &Path,
    max_entry_bytes: u64,
) -> Result<(Vec<u8>, SignedDigests), SignError> {
    let manifest = dir.join(BUNDLE_MANIFEST);
    let text = std::fs::read(&manifest).map_err(|e| io("reading", &manifest, e))?;
    let mut msg = format!("{MESSAGE_TAG}\nmanifest {}\n", hex(&Sha256::digest(&text)));
    let mut digests = BTreeMap::new();
    let files = list_entry_files(dir).map_err(|e| SignError::Entry {
        path: dir.display().to_string(),
        source: e,
    })?;
    for p in files {
        let entry_err = |source| SignError::Entry {
            path: p.display().to_string(),
            source,
        };
        let e = verify_file(&p, max_entry_bytes).map_err(entry_err)?;
        let d = entry_digest(&e).map_err(entry_err)?;
        digests.insert(e.key, d);
    }
    for (k, d) in &digests {
        let _ = writeln!(msg, "entry {k} {}", hex(d));
    }
    Ok((msg.into_bytes(), digests))
}

/// Signs the bundle in `dir` with `secret`: writes `kiln-bundle.sig` (replacing an older
/// one). Returns the number of entries signed.
pub fn sign_bundle(
    dir: &Path,
    secret: &[u8; 32],
    max_entry_bytes: u64,
) -> Result<usize, SignError> {
    let (msg, digests) = bundle_message(dir, max_entry_bytes)?;
    let key = SigningKey::from_bytes(secret);
    let sig = key.sign(&msg);
    let text = format!(
        "{MESSAGE_TAG}\npublic-key {}\nsignature {}\n",
        hex(&key.verifying_key().to_bytes()),
        hex(&sig.to_bytes())
    );
    crate::atomic_file::write_atomic(dir.join(SIGNATURE_FILE), text.as_bytes())
        .map_err(|e| io("writing", &dir.join(SIGNATURE_FILE), e))?;
    Ok(digests.len())
}

/// Checks that the bundle in `dir` is signed by `public` and unchanged since; returns the
/// signed digest of every entry, by key.
pub fn verify_bundle(
    dir: &Path,
    public: &[u8; 32],
    max_entry_bytes: u64,
) -> Result<SignedDigests, SignError> {
    let sig_path = dir.join(SIGNATURE_FILE);
    if std::fs::symlink_metadata(&sig_path).is_err() {
        return Err(SignError::Unsigned(dir.display().to_string()));
    }
    let text = read_small(&sig_path)?;
    let bad = |msg: &str| SignError::Format {
        path: sig_path.display().to_string(),
        msg: msg.into(),
    };
    if text.lines().next() != Some(MESSAGE_TAG) {
        return Err(bad("not a kiln bundle signature (first line)"));
    }
    let found = field(&text, "public-key")
        .and_then(unhex::<32>)
        .ok_or_else(|| bad("no `public-key <64 hex digits>` line"))?;
    if found != *public {
        return Err(SignError::OtherKey {
            found: hex(&found),
            required: hex(public),
        });
    }
    let sig = field(&text, "signature")
        .and_then(unhex::<64>)
        .ok_or_else(|| bad("no `signature <128 hex digits>` line"))?;
    let key = VerifyingKey::from_bytes(public)
        .map_err(|_| bad("the public key is not a valid ed25519 key"))?;
    let (msg, digests) = bundle_message(dir, max_entry_bytes)?;
    key.verify_strict(&msg, &Signature::from_bytes(&sig))
        .map_err(|_| SignError::BadSignature)?;
    Ok(digests)
}
