//! `kiln dump OP`: the graph before and after each pass, the fused groups and the kernels.
//! Output goes through one locked stdout handle; when the reader closes the pipe early
//! (`kiln dump ... | head`) the command stops quietly with exit code 0.

use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use clap::Args;
use kiln::codegen::lower::lower;
use kiln::ir::passes::{fuse, optimize_traced, StageStorage};
use kiln::ir::printer::print;
use kiln::ir::{DType, TensorType};

use super::{parse_params, CliError};

/// Arguments of `kiln dump`.
#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Operator name.
    op: String,
    /// Operator parameter `name=value` (repeatable).
    #[arg(long = "param")]
    params: Vec<String>,
    /// Input shape, comma-separated `B,C,S1..Sd`.
    #[arg(long, default_value = "1,1,64,64")]
    shape: String,
    /// Input dtype: f32, f64, u8 or bool.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Also print the PTX of each kernel.
    #[arg(long)]
    ptx: bool,
    /// PTX target architecture (`sm_XX`), with `--ptx`.
    #[arg(long, default_value_t = 80)]
    sm: u32,
    /// Step code budget of the CPU kernels (default: the first compile's; the background
    /// compile of a tiered kernel uses 3000).
    #[arg(long)]
    step_budget: Option<usize>,
}

/// Runs `kiln dump`.
pub fn run(a: DumpArgs) -> Result<ExitCode, CliError> {
    let mut out = std::io::stdout().lock();
    match dump(a, &mut out).and_then(|()| out.flush().map_err(DumpError::Io)) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(DumpError::Io(e)) if e.kind() == ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(DumpError::Io(e)) => Err(CliError::Stdout(e)),
        Err(DumpError::Cli(e)) => Err(e),
    }
}

/// A dump failure: writing stdout, or anything else.
enum DumpError {
    Io(std::io::Error),
    Cli(CliError),
}

impl<E: Into<CliError>> From<E> for DumpError {
    fn from(e: E) -> Self {
        DumpError::Cli(e.into())
    }
}

/// `writeln!` into the dump's output, with a write error kept as [`DumpError::Io`].
macro_rules! out {
    ($w:expr, $($arg:tt)*) => {
        writeln!($w, $($arg)*).map_err(DumpError::Io)?
    };
}

/// Writes the dump to `w`.
fn dump(a: DumpArgs, w: &mut impl Write) -> Result<(), DumpError> {
    let params = parse_params(&a.params)?;
    let shape = a
        .shape
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            CliError::Usage(format!(
                "--shape '{}' is not a comma-separated list of sizes",
                a.shape
            ))
        })?;
    let dtype = DType::from_name(&a.dtype).ok_or_else(|| {
        CliError::Usage(format!("unknown dtype '{}' (f32, f64, u8, bool)", a.dtype))
    })?;
    let graph = kiln::ops::build_op(&a.op, &params, &TensorType { dtype, shape })?;
    out!(
        w,
        "== graph as built ({} nodes)\n{}",
        graph.len(),
        print(&graph)
    );
    let mut traced = Ok(());
    let optimized = optimize_traced(&graph, StageStorage::ScratchRows, |pass, g| {
        if traced.is_ok() {
            traced = writeln!(w, "== after {pass} ({} nodes)\n{}", g.len(), print(g));
        }
    });
    traced.map_err(DumpError::Io)?;
    let partition = fuse(&optimized);
    out!(
        w,
        "== fused groups ({} kernels)\n{}",
        partition.groups.len(),
        partition.describe(&optimized)
    );
    for (i, group) in partition.groups.iter().enumerate() {
        let kernel = lower(&optimized, group)?;
        out!(w, "== kernel {i}\n{kernel}");
        let options = kiln::codegen::CompileOptions {
            step_code_budget: a.step_budget,
            ..Default::default()
        };
        let cpu = kiln::codegen::cpu::compile(&kernel, &options)?;
        out!(w, "== kernel {i} CPU plan\n{}", cpu.describe());
        let schedules = kiln::codegen::cpu::row_schedules(&kernel, &options)?;
        if !schedules.is_empty() {
            out!(
                w,
                "== kernel {i} CPU row schedule\n{}\n",
                schedules.join("\n")
            );
        }
        if let Some(clean) = kiln::codegen::cpu::compile_clean(&kernel, &options)? {
            out!(
                w,
                "== kernel {i} CPU plan for clean inputs (no NaN, infinity or -0)\n{}",
                clean.describe()
            );
        }
        if let Some(nonneg) = kiln::codegen::cpu::compile_nonneg(&kernel, &options)? {
            out!(
                w,
                "== kernel {i} CPU plan for clean inputs with clear sign bits (integer picks)\n{}",
                nonneg.describe()
            );
        }
        if a.ptx {
            let target = kiln::codegen::ptx::PtxTarget {
                sm: a.sm,
                ..Default::default()
            };
            let module = kiln::codegen::ptx::render(&kernel, &target, &Default::default())?;
            out!(w, "== kernel {i} PTX (sm_{})\n{}", a.sm, module.text);
        }
    }
    Ok(())
}
