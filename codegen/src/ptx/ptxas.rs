//! Assembling PTX with NVIDIA's `ptxas` (no GPU needed), for tests and CI.
//!
//! `ptxas` is found through `$KILN_PTXAS`, then `PATH`, then the pip wheel
//! `nvidia-cuda-nvcc-cu12` (`scripts/install-ptxas.sh` installs the pinned version).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where `ptxas` is, or `None` when it cannot be found.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KILN_PTXAS") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("ptxas");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let mut candidates = Vec::new();
    if let Some(home) = std::env::var_os("HOME") {
        // the private venv of scripts/install-ptxas.sh
        candidates.push(PathBuf::from(home).join(".cache/kiln/ptxas-venv/bin/python"));
    }
    if let Some(v) = std::env::var_os("KILN_PTXAS_VENV") {
        candidates.insert(0, PathBuf::from(v).join("bin/python"));
    }
    candidates.push(PathBuf::from("python3"));
    for py in candidates {
        if let Some(p) = ptxas_from_wheel(&py) {
            return Some(p);
        }
    }
    None
}

fn ptxas_from_wheel(python: &Path) -> Option<PathBuf> {
    let out = Command::new(python)
        .args([
            "-c",
            "import nvidia.cuda_nvcc as m, os; print(os.path.join(list(m.__path__)[0], 'bin', 'ptxas'))",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.is_file().then_some(p)
}

/// For tests: ptxas, or `None` after printing a visible `SKIP: ...` line (written past the
/// test harness's output capture) when it is missing. Panics instead when `CI` is set (not
/// empty, not `false`) or `KILN_PTXAS` is set but points nowhere: there a missing ptxas is a
/// failure, never a silent pass.
pub fn ptxas_or_skip() -> Option<PathBuf> {
    if let Some(p) = find_ptxas() {
        return Some(p);
    }
    let msg =
        "ptxas not found (set KILN_PTXAS, put ptxas on PATH, or run scripts/install-ptxas.sh)";
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
        || std::env::var_os("KILN_PTXAS").is_some()
    {
        panic!("{msg}; CI or KILN_PTXAS requires it");
    }
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("SKIP: {msg}\n").as_bytes());
    None
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Assembles `ptx` for `sm_{sm}` with ptxas. `Ok` only when ptxas exits 0 and prints
/// nothing on stderr (no warnings). `Err` carries ptxas's messages (or says that ptxas is
/// missing, see [`find_ptxas`]).
pub fn assemble_check(ptx: &str, sm: u32) -> Result<(), String> {
    let ptxas = find_ptxas().ok_or_else(|| {
        "ptxas not found: set KILN_PTXAS, put ptxas on PATH, or run scripts/install-ptxas.sh"
            .to_string()
    })?;
    assemble_with(&ptxas, ptx, sm)
}

/// [`assemble_check`] with an explicit ptxas binary.
pub fn assemble_with(ptxas: &Path, ptx: &str, sm: u32) -> Result<(), String> {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kiln-ptxas-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("temp dir {}: {e}", dir.display()))?;
    let src = dir.join("kernel.ptx");
    let obj = dir.join("kernel.cubin");
    let result = (|| {
        std::fs::write(&src, ptx).map_err(|e| format!("write {}: {e}", src.display()))?;
        let out = Command::new(ptxas)
            .arg(format!("-arch=sm_{sm}"))
            .arg("-o")
            .arg(&obj)
            .arg(&src)
            .output()
            .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || !stderr.trim().is_empty() {
            return Err(format!(
                "ptxas -arch=sm_{sm} exited with {}:\n{}{}",
                out.status,
                stderr,
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
