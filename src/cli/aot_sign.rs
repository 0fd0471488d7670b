//! Signed bundles on the command line: `kiln aot keygen --secret FILE --public FILE`,
//! `kiln aot build ... --sign SECRET` and `kiln aot verify DIR --require-signature PUBLIC`.
//!
//! Scope: argument handling around `kiln::runtime::aot::sign` (ed25519 over the bundle's
//! manifest and entry digests; format in docs/AOT.md). Exactness: nothing here touches code.
//! Limits: key generation reads `/dev/urandom`; a secret key file is never replaced.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use kiln::runtime::aot::sign;
use kiln::runtime::aot::store::DEFAULT_MAX_ENTRY_BYTES;

use super::CliError;

/// Arguments of `kiln aot keygen`.
#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the new secret key (created, never replaced; mode 0600).
    #[arg(long)]
    secret: PathBuf,
    /// Where to write its public key (what `--require-signature` takes).
    #[arg(long)]
    public: PathBuf,
}

fn sign_err(e: sign::SignError) -> CliError {
    CliError::Usage(format!("signature: {e}"))
}

/// Runs `kiln aot keygen`.
pub fn keygen(a: KeygenArgs) -> Result<ExitCode, CliError> {
    let secret = sign::generate_secret_key().map_err(sign_err)?;
    sign::write_key_files(&secret, &a.secret, &a.public).map_err(sign_err)?;
    println!(
        "kiln aot: secret key in {}, public key in {}",
        a.secret.display(),
        a.public.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Reads the secret key of `--sign` (before a build writes anything).
pub fn read_secret(path: &Path) -> Result<[u8; 32], CliError> {
    sign::read_secret_key(path).map_err(|e| CliError::Usage(format!("--sign: {e}")))
}

/// Signs the finished bundle in `dir` (writes `kiln-bundle.sig`).
pub fn sign_bundle(dir: &Path, secret: &[u8; 32]) -> Result<(), CliError> {
    let n = sign::sign_bundle(dir, secret, DEFAULT_MAX_ENTRY_BYTES).map_err(sign_err)?;
    println!(
        "kiln aot: signed {n} entries and the manifest ({})",
        sign::SIGNATURE_FILE
    );
    Ok(())
}

/// Checks the bundle's signature against the public key in `public`; prints the verdict
/// and returns whether it holds.
pub fn verify_signature(dir: &Path, public: &Path) -> Result<bool, CliError> {
    let key = sign::read_public_key(public)
        .map_err(|e| CliError::Usage(format!("--require-signature: {e}")))?;
    match sign::verify_bundle(dir, &key, DEFAULT_MAX_ENTRY_BYTES) {
        Ok(d) => {
            println!("signature ok: {} entries and the manifest", d.len());
            Ok(true)
        }
        Err(e) => {
            println!("BAD signature: {e}");
            Ok(false)
        }
    }
}
