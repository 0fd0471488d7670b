//! `kiln aot build --manifest kernels.toml --target T... --out DIR`: compiles every kernel of
//! the manifest's operators for every target into a bundle directory (one cache entry per
//! kernel variant, plus `kiln-bundle.txt` listing them), with a progress line per step on
//! stderr.
//!
//! Targets: the host triple (CPU code through the engine's own compile path into the bundle
//! as its cache directory, so the entries are exactly what a run-time engine looks up: its
//! key, its tiered final code), and `sm_80` / `sm_90` (PTX text entries; rendering needs no
//! GPU). Exactness: nothing here generates code of its own; the CPU entries are written and
//! verified by the engine's cache, the PTX ones are the renderer's text. Limits: other
//! triples (aarch64) and CPU feature levels (`+avx2`) are refused with a clear error: the
//! Cranelift backend compiles only for the host and with all of its features.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kiln::codegen::ptx::PtxTarget;
use kiln::codegen::CompileOptions;
use kiln::ir::passes::StageStorage;
use kiln::ir::TensorType;
use kiln::runtime::aot::host::host_triple;
use kiln::runtime::aot::kernels::kernel_key;
use kiln::runtime::aot::ptx_entries::ptx_entry;
use kiln::runtime::aot::{CacheDir, CacheKey, HostSpec, PutOutcome};
use kiln::runtime::executor::lower_graph;
use kiln::Engine;

use super::CliError;
use super::{aot_emit, aot_sign, manifest};

/// The bundle's list of entries.
pub const BUNDLE_MANIFEST: &str = "kiln-bundle.txt";

/// Arguments of `kiln aot build`.
#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The manifest (format: docs/AOT.md; example: examples/aot/kernels.toml).
    #[arg(long)]
    manifest: PathBuf,
    /// A target: the host triple (e.g. x86_64-unknown-linux-gnu), sm_80 or sm_90. Repeat
    /// for several.
    #[arg(long = "target", required = true)]
    targets: Vec<String>,
    /// The bundle directory (created if needed; entries already there are kept).
    #[arg(long)]
    out: PathBuf,
    /// Also write, per kernel set, a relocatable object (`obj`) and/or a C header (`h`) into
    /// the bundle directory (host target only; docs/AOT.md), e.g. `--emit obj,h`.
    #[arg(long, value_delimiter = ',')]
    emit: Vec<String>,
    /// Sign the finished bundle with this secret key (from `kiln aot keygen`): writes
    /// `kiln-bundle.sig` over the manifest and every entry (docs/AOT.md).
    #[arg(long)]
    sign: Option<PathBuf>,
}

/// A target the build can produce code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// CPU code for this machine.
    Host,
    /// PTX text.
    Ptx(PtxTarget),
}

fn parse_target(t: &str) -> Result<Target, CliError> {
    let host = host_triple();
    let arch = host.split('-').next().unwrap_or(host);
    match t {
        "sm_80" => return Ok(Target::Ptx(PtxTarget::sm80())),
        "sm_90" => return Ok(Target::Ptx(PtxTarget::sm90())),
        _ => {}
    }
    if t == host {
        return Ok(Target::Host);
    }
    if let Some((base, feats)) = t.split_once('+') {
        if base == host || base == arch {
            return Err(CliError::Usage(format!(
                "--target {t}: CPU feature levels (+{feats}) are not supported yet: kiln \
                 compiles with every feature of the host, so build with --target {host} on \
                 the oldest machine the bundle is for"
            )));
        }
    }
    Err(CliError::Usage(format!(
        "--target {t}: cannot build for it on this {host} host (supported: {host}, sm_80, sm_90)"
    )))
}

/// Runs `kiln aot build`.
pub fn run(a: BuildArgs) -> Result<ExitCode, CliError> {
    let text = std::fs::read_to_string(&a.manifest)
        .map_err(|e| CliError::Usage(format!("--manifest {}: {e}", a.manifest.display())))?;
    let specs = manifest::parse(&text)
        .map_err(|e| CliError::Usage(format!("{}: {e}", a.manifest.display())))?;
    let mut targets = Vec::new();
    for t in &a.targets {
        let t = parse_target(t)?;
        if !targets.contains(&t) {
            targets.push(t);
        }
    }
    let emit = aot_emit::EmitKinds::parse(&a.emit)?;
    let secret = a.sign.as_deref().map(aot_sign::read_secret).transpose()?;
    if emit.any() && !targets.contains(&Target::Host) {
        return Err(CliError::Usage(format!(
            "--emit obj,h writes host code: add --target {}",
            host_triple()
        )));
    }
    // Every graph first: a bad operator or parameter fails before anything is written.
    let mut jobs = Vec::new();
    let mut set_names: Vec<String> = Vec::new();
    for s in &specs {
        for &dtype in &s.dtypes {
            let ty = TensorType {
                dtype,
                shape: s.shape.clone(),
            };
            let graph = kiln::ops::build_op(&s.op, &s.params, &ty).map_err(|e| {
                CliError::Usage(format!("manifest [[kernel]] at line {}: {e}", s.line))
            })?;
            let params: Vec<String> = s.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let label = format!(
                "{} {} {} rank {}",
                s.op,
                params.join(","),
                dtype.name(),
                s.rank
            );
            jobs.push((label, graph));
            set_names.push(aot_emit::set_name(&s.op, dtype, &set_names));
        }
    }
    let dir = CacheDir::open(&a.out).map_err(|e| CliError::Usage(format!("--out: {e}")))?;
    if emit.any() {
        let sets: Vec<aot_emit::EmitSet> = jobs
            .iter()
            .zip(&set_names)
            .map(|((label, graph), name)| aot_emit::EmitSet {
                name: name.clone(),
                label,
                graph,
            })
            .collect();
        aot_emit::emit(&a.out, emit, &sets, Engine::new().options())?;
    }
    let engine = targets
        .contains(&Target::Host)
        .then(|| Engine::new().with_cache_dir(&a.out));
    let host = HostSpec::detect();
    let total = jobs.len() * targets.len();
    let mut listed: Vec<(CacheKey, String, String)> = Vec::new();
    let mut step = 0;
    for (label, graph) in &jobs {
        for t in &targets {
            step += 1;
            match (t, &engine) {
                (Target::Host, Some(engine)) => {
                    let before = engine.stats();
                    engine.compile(graph)?;
                    let after = engine.stats();
                    let kernels = lower_graph(graph, StageStorage::ScratchRows)?.kernels;
                    eprintln!(
                        "kiln aot: [{step}/{total}] {label} -> {}: {} kernel(s), {} compiled, {} already in the bundle",
                        host.triple,
                        kernels.len(),
                        after.kernels_compiled - before.kernels_compiled,
                        after.disk_hits - before.disk_hits,
                    );
                    for k in &kernels {
                        let key = kernel_key(k, engine.options(), engine.tuning().tiering, &host);
                        listed.push((key, host.triple.clone(), label.clone()));
                    }
                }
                (Target::Ptx(p), _) => {
                    let kernels = lower_graph(graph, StageStorage::DevicePasses)?.kernels;
                    let mut written = 0;
                    for k in &kernels {
                        let entry = ptx_entry(k, p, &CompileOptions::default())?;
                        let out = dir
                            .put(&entry)
                            .map_err(|e| CliError::Usage(format!("--out: {e}")))?;
                        written += usize::from(out == PutOutcome::Written);
                        listed.push((entry.key, format!("sm_{}", p.sm), label.clone()));
                    }
                    eprintln!(
                        "kiln aot: [{step}/{total}] {label} -> sm_{} (PTX ISA {}.{}): {} kernel(s), {written} written",
                        p.sm,
                        p.ptx_version.0,
                        p.ptx_version.1,
                        kernels.len()
                    );
                }
                (Target::Host, None) => unreachable!("an engine exists when the host is a target"),
            }
        }
    }
    // Dropping the engine waits for the background compiles to write their final code.
    drop(engine);
    let mut missing = 0;
    let mut body = format!(
        "# kiln aot bundle: one line per entry: key, target, operator instance\n# built by kiln {}\n",
        kiln::runtime::aot::key::build_id()
    );
    listed.sort();
    listed.dedup();
    for (key, target, label) in &listed {
        if !dir.entry_path(key).is_file() {
            missing += 1;
            eprintln!(
                "kiln aot: no entry for {label} on {target} (not cacheable, see the warning above)"
            );
            continue;
        }
        body.push_str(&format!("{key}  {target}  {label}\n"));
    }
    kiln::runtime::atomic_file::write_atomic(a.out.join(BUNDLE_MANIFEST), body.as_bytes())
        .map_err(|e| CliError::Usage(format!("--out: writing {BUNDLE_MANIFEST}: {e}")))?;
    if let Some(secret) = &secret {
        aot_sign::sign_bundle(&a.out, secret)?;
    }
    println!(
        "kiln aot: {} entries in {} ({} targets, {} operator instances)",
        listed.len() - missing,
        a.out.display(),
        targets.len(),
        jobs.len()
    );
    Ok(if missing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_or_are_refused_clearly() {
        assert_eq!(parse_target(host_triple()).unwrap(), Target::Host);
        assert_eq!(
            parse_target("sm_90").unwrap(),
            Target::Ptx(PtxTarget::sm90())
        );
        let e = parse_target(&format!("{}+avx2", host_triple())).unwrap_err();
        assert!(e.to_string().contains("feature levels"), "{e}");
        let other = if host_triple().starts_with("x86_64") {
            "aarch64-unknown-linux-gnu"
        } else {
            "x86_64-unknown-linux-gnu"
        };
        let e = parse_target(other).unwrap_err();
        assert!(e.to_string().contains("cannot build for it"), "{e}");
        assert!(parse_target("sm_75").is_err());
    }
}
