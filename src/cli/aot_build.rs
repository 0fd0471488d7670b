//! `kiln aot build --manifest kernels.toml --target T... --out DIR`: compiles every kernel of
//! the manifest's operators for every target into a bundle directory (one cache entry per
//! kernel variant, plus `kiln-bundle.txt` listing them), with a progress line per step on
//! stderr.
//!
//! Targets: CPU targets on any host (`x86_64-unknown-linux-gnu` and
//! `aarch64-unknown-linux-gnu`, each its architecture's baseline level; the feature levels
//! `x86_64+avx`, `x86_64+avx2`, `x86_64+avx512f`; `native`, this machine with every feature
//! Cranelift uses), compiled with Cranelift for that ISA (`aot::cpu_entries`), each entry
//! recording its triple and the CPU features its code needs, keyed as an engine on such a
//! CPU looks it up; and `sm_80` / `sm_90` (PTX text entries; rendering needs no GPU).
//! Exactness: nothing here generates code of its own; the CPU entries are the code the
//! engine's compile emits for that ISA, the PTX ones are the renderer's text. Limits: Linux
//! triples only; the feature levels are a fixed list (`kiln_codegen::cpu::LEVELS`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kiln::codegen::cpu::CpuTarget;
use kiln::codegen::ptx::PtxTarget;
use kiln::codegen::CompileOptions;
use kiln::ir::passes::StageStorage;
use kiln::ir::TensorType;
use kiln::runtime::aot::cpu_entries::cpu_entry;
use kiln::runtime::aot::ptx_entries::ptx_entry;
use kiln::runtime::aot::{CacheDir, CacheKey, PutOutcome};
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
    /// A target: x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu, a feature level
    /// (x86_64+avx, x86_64+avx2, x86_64+avx512f), native, sm_80 or sm_90. Repeat for
    /// several.
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
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// CPU code for a triple and feature level; the name as given on the command line.
    Cpu(String, CpuTarget),
    /// PTX text.
    Ptx(PtxTarget),
}

/// The `--target` names, for error messages.
const TARGET_NAMES: &str = "x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu, x86_64+avx, \
     x86_64+avx2, x86_64+avx512f, native, sm_80, sm_90";

fn parse_target(t: &str) -> Result<Target, CliError> {
    match t {
        "sm_80" => return Ok(Target::Ptx(PtxTarget::sm80())),
        "sm_90" => return Ok(Target::Ptx(PtxTarget::sm90())),
        "native" => return Ok(Target::Cpu(t.to_string(), CpuTarget::native())),
        _ => {}
    }
    if t.starts_with("sm_") {
        return Err(CliError::Usage(format!(
            "--target {t}: no such PTX target (supported: {TARGET_NAMES})"
        )));
    }
    CpuTarget::parse(t)
        .map(|c| Target::Cpu(t.to_string(), c))
        .map_err(|e| CliError::Usage(format!("--target {t}: {e} (supported: {TARGET_NAMES})")))
}

/// Whether `a` and `b` build the same entries.
fn same_target(a: &Target, b: &Target) -> bool {
    match (a, b) {
        (Target::Cpu(_, x), Target::Cpu(_, y)) => x == y,
        (Target::Ptx(x), Target::Ptx(y)) => x == y,
        _ => false,
    }
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
        if !targets.iter().any(|u| same_target(u, &t)) {
            targets.push(t);
        }
    }
    let emit = aot_emit::EmitKinds::parse(&a.emit)?;
    let secret = a.sign.as_deref().map(aot_sign::read_secret).transpose()?;
    let native = CpuTarget::native();
    let has_host = targets
        .iter()
        .any(|t| matches!(t, Target::Cpu(_, c) if c.triple() == native.triple()));
    if emit.any() && !has_host {
        return Err(CliError::Usage(format!(
            "--emit obj,h writes host code: add --target {}",
            native.triple()
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
    // The options and tiering of a default engine: what an engine on the target looks up.
    let (options, tiering) = {
        let engine = Engine::new();
        (engine.options().clone(), engine.tuning().tiering)
    };
    let mut missing = 0;
    let total = jobs.len() * targets.len();
    let mut listed: Vec<(CacheKey, String, String)> = Vec::new();
    let mut step = 0;
    for (label, graph) in &jobs {
        for t in &targets {
            step += 1;
            match t {
                Target::Cpu(name, cpu) => {
                    let kernels = lower_graph(graph, StageStorage::ScratchRows)?.kernels;
                    let (mut written, mut present) = (0, 0);
                    for k in &kernels {
                        match cpu_entry(k, &options, tiering, cpu) {
                            Ok(Some(entry)) => {
                                let out = dir
                                    .put(&entry)
                                    .map_err(|e| CliError::Usage(format!("--out: {e}")))?;
                                written += usize::from(out == PutOutcome::Written);
                                present += usize::from(out == PutOutcome::AlreadyPresent);
                                listed.push((entry.key, name.clone(), label.clone()));
                            }
                            Ok(None) => {}
                            Err(e) => {
                                missing += 1;
                                eprintln!("kiln aot: {label} on {name}: not stored: {e}");
                            }
                        }
                    }
                    eprintln!(
                        "kiln aot: [{step}/{total}] {label} -> {name} ({}, features: {}): {} kernel(s), {written} written, {present} already in the bundle",
                        cpu.triple(),
                        if cpu.features().is_empty() {
                            "baseline".to_string()
                        } else {
                            cpu.features().join(",")
                        },
                        kernels.len(),
                    );
                }
                Target::Ptx(p) => {
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
            }
        }
    }
    let mut body = format!(
        "# kiln aot bundle: one line per entry: key, target, operator instance\n# built by kiln {}\n",
        kiln::runtime::aot::key::build_id()
    );
    listed.sort();
    listed.dedup();
    let mut stored = 0;
    for (key, target, label) in &listed {
        if !dir.entry_path(key).is_file() {
            missing += 1;
            eprintln!("kiln aot: no entry for {label} on {target}");
            continue;
        }
        body.push_str(&format!("{key}  {target}  {label}\n"));
        stored += 1;
    }
    kiln::runtime::atomic_file::write_atomic(a.out.join(BUNDLE_MANIFEST), body.as_bytes())
        .map_err(|e| CliError::Usage(format!("--out: writing {BUNDLE_MANIFEST}: {e}")))?;
    if let Some(secret) = &secret {
        aot_sign::sign_bundle(&a.out, secret)?;
    }
    println!(
        "kiln aot: {stored} entries in {} ({} targets, {} operator instances)",
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
        let cpu = |t: &str| match parse_target(t).unwrap() {
            Target::Cpu(name, c) => {
                assert_eq!(name, t);
                c
            }
            other => panic!("{t}: {other:?}"),
        };
        assert_eq!(cpu("x86_64-unknown-linux-gnu"), cpu("x86_64"));
        let a64 = cpu("aarch64-unknown-linux-gnu");
        assert_eq!(a64.triple(), "aarch64-unknown-linux-gnu");
        assert!(cpu("x86_64+avx2").features().iter().any(|f| f == "avx2"));
        assert!(cpu("native").is_native());
        assert_eq!(
            parse_target("sm_90").unwrap(),
            Target::Ptx(PtxTarget::sm90())
        );
        for bad in [
            "sm_75",
            "riscv64gc-unknown-linux-gnu",
            "x86_64+sse9",
            "aarch64+avx2",
        ] {
            let e = parse_target(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--target {bad}")) && e.contains("supported"),
                "{e}"
            );
        }
        assert!(same_target(
            &parse_target("x86_64").unwrap(),
            &parse_target("x86_64-unknown-linux-gnu").unwrap()
        ));
    }
}
