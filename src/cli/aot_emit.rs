//! `kiln aot build --emit obj,h`: per kernel set (one manifest `[[kernel]]` and dtype) a
//! relocatable object file `<set>.o` with the machine code of every kernel of the set, and a
//! C header `<set>.h` that declares its entry points and describes each kernel (stages, row
//! slots, borders, constants) for the runner in `kiln_aot_runtime.h` (copied into the
//! output directory from `include/`), with a C function per kernel (`kiln_<set>_k<i>_run`,
//! any shape of the rank) and one for the whole operator at its build shape
//! (`kiln_<set>(in0.., out0..)`).
//!
//! Exactness: the code is the engine's own compile of the kernel (`kiln_codegen::cpu::compile`
//! with the engine's default options), put into the object byte for byte
//! (`kiln_codegen::cpu::object`); the header's tables are the compiled stages' slots as the
//! runtime sees them, and the runner resolves them with the runtime's rules. The operator
//! function chains the kernels in the partition's order, as `walk_groups` does.
//!
//! Limits: the host triple only; stencil kernels only (a set with a line or extern kernel is
//! refused before anything is written); the operator function is for the manifest's shape
//! (the kernels themselves are shape-free).

use std::fmt::Write as _;
use std::path::Path;

use kiln::codegen::cpu::object::{is_entry_point, object_file, ObjectKernel};
use kiln::codegen::cpu::{compile, CpuBody, CpuKernel, SlotKind};
use kiln::codegen::kernel::KernelBody;
use kiln::codegen::kernel::Source;
use kiln::codegen::CompileOptions;
use kiln::ir::passes::StageStorage;
use kiln::ir::{Border, DType, Graph, NodeKind, Scalar};
use kiln::runtime::atomic_file::write_atomic;
use kiln::runtime::executor::lower_graph;

use super::CliError;

/// The runner every emitted header includes, written next to the headers.
pub const RUNTIME_HEADER: &str = "kiln_aot_runtime.h";
const RUNTIME_TEXT: &str = include_str!("../../include/kiln_aot_runtime.h");

/// What `--emit` asked for besides the bundle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmitKinds {
    /// Relocatable object files.
    pub obj: bool,
    /// C headers.
    pub h: bool,
}

impl EmitKinds {
    /// Parses the `--emit` values (`obj`, `h`, each at most once).
    pub fn parse(values: &[String]) -> Result<EmitKinds, CliError> {
        let mut k = EmitKinds::default();
        for v in values {
            let slot = match v.trim() {
                "obj" => &mut k.obj,
                "h" => &mut k.h,
                other => {
                    return Err(CliError::Usage(format!(
                        "--emit {other}: unknown kind (supported: obj, h)"
                    )))
                }
            };
            if *slot {
                return Err(CliError::Usage(format!("--emit {v} given twice")));
            }
            *slot = true;
        }
        Ok(k)
    }

    /// Whether anything is to be emitted.
    pub fn any(self) -> bool {
        self.obj || self.h
    }
}

/// One kernel set to emit: its C name, its label (for comments) and its graph.
pub struct EmitSet<'a> {
    /// C identifier part: `kiln_<name>`.
    pub name: String,
    /// `op params dtype rank r`.
    pub label: &'a str,
    /// The operator's graph at its build shape.
    pub graph: &'a Graph,
}

/// A C identifier from `op` and `dtype`, unique among `taken` (`_2`, `_3`... appended).
pub fn set_name(op: &str, dtype: DType, taken: &[String]) -> String {
    let base: String = format!("{op}_{}", dtype.name())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut name = base.clone();
    let mut n = 1;
    while taken.contains(&name) {
        n += 1;
        name = format!("{base}_{n}");
    }
    name
}

fn c_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::U8 | DType::Bool => "uint8_t",
        DType::I8 => "int8_t",
        DType::U16 => "uint16_t",
        DType::I16 => "int16_t",
        DType::I32 => "int32_t",
        DType::U32 => "uint32_t",
    }
}

/// The unsigned C type of `d`'s width, and the scalar's bits in it.
fn c_bits(s: Scalar) -> (&'static str, String) {
    let b = s.to_le_bytes();
    let mut v = 0u64;
    for (i, x) in b.iter().enumerate() {
        v |= u64::from(*x) << (8 * i);
    }
    let t = match b.len() {
        1 => "uint8_t",
        2 => "uint16_t",
        4 => "uint32_t",
        _ => "uint64_t",
    };
    (t, format!("UINT64_C({v:#x})"))
}

fn border_code(b: &Border) -> &'static str {
    match b {
        Border::Constant(_) => "KILN_AOT_BORDER_CONSTANT",
        Border::Reflect => "KILN_AOT_BORDER_REFLECT",
        Border::Mirror => "KILN_AOT_BORDER_MIRROR",
        Border::Nearest => "KILN_AOT_BORDER_NEAREST",
        Border::Wrap => "KILN_AOT_BORDER_WRAP",
    }
}

/// A set lowered and compiled: what the object and header are made of.
struct Compiled {
    /// The graph after the pipeline, its partition and kernels.
    lowered: kiln::runtime::executor::Lowered,
    /// Each kernel's compiled code.
    code: Vec<CpuKernel>,
}

fn compile_set(set: &EmitSet, options: &CompileOptions) -> Result<Compiled, CliError> {
    let lowered = lower_graph(set.graph, StageStorage::ScratchRows)?;
    let mut code = Vec::with_capacity(lowered.kernels.len());
    for (i, k) in lowered.kernels.iter().enumerate() {
        let kind = match &k.body {
            KernelBody::Stencil { .. } => None,
            KernelBody::Line(_) => Some("a line kernel (scan, reduction or recurrence)"),
            KernelBody::Extern(_) => Some("an extern line function"),
        };
        if let Some(kind) = kind {
            return Err(CliError::Usage(format!(
                "--emit obj,h: {} kernel {i} is {kind}: not supported yet (stencil kernels only)",
                set.label
            )));
        }
        code.push(compile(k, options)?);
    }
    Ok(Compiled { lowered, code })
}

/// The function name each stage runs (`stageJ`: stages with the same program share the
/// code of the first of them).
fn stage_symbols(k: &CpuKernel) -> Result<Vec<String>, CliError> {
    let CpuBody::Stencil(stages) = &k.body else {
        return Err(CliError::Usage("--emit: not a stencil kernel".into()));
    };
    let mut out = Vec::with_capacity(stages.len());
    for st in stages {
        let j = stages
            .iter()
            .position(|o| o.func as usize == st.func as usize)
            .unwrap_or(0);
        let name = format!("stage{j}");
        if !k.machine_code().iter().any(|f| f.name == name) {
            return Err(CliError::Usage(format!(
                "--emit: the code of {name} is missing"
            )));
        }
        out.push(name);
    }
    Ok(out)
}

/// The header text of `set` (see the module docs).
fn header(set: &EmitSet, c: &Compiled) -> Result<String, CliError> {
    let name = &set.name;
    let guard = format!("KILN_AOT_{}_H", name.to_ascii_uppercase());
    let g = &c.lowered.optimized;
    let mut h = String::new();
    let _ = writeln!(
        h,
        "/* {name}.h: written by `kiln aot build --emit obj,h` ({}) for {}.\n \
         * Kernel set: {}, built for input shape(s) {}.\n \
         * Link {name}.o; the runner and the kernel ABI are described in {RUNTIME_HEADER}. */",
        kiln::runtime::aot::key::build_id(),
        kiln::runtime::aot::host::host_triple(),
        set.label,
        set.graph
            .inputs
            .iter()
            .map(|t| format!("{:?}", t.shape))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(h, "#ifndef {guard}\n#define {guard}\n");
    let _ = writeln!(h, "#include \"{RUNTIME_HEADER}\"\n");
    let _ = writeln!(h, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    for (ki, (kernel, code)) in c.lowered.kernels.iter().zip(&c.code).enumerate() {
        let p = format!("kiln_{name}_k{ki}");
        let _ = writeln!(
            h,
            "/* Kernel {ki}: rank {}, inputs {}, output {}. */",
            kernel.rank,
            kernel
                .inputs
                .iter()
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", "),
            kernel.output.name()
        );
        for f in code.machine_code() {
            if !is_entry_point(&f.name) {
                continue;
            }
            if f.name.ends_with("_rows") {
                let _ = writeln!(
                    h,
                    "void {p}_{}(const uint8_t *const *rows, const int64_t *row_steps, \
                     const int64_t *strides, uint8_t *out, int64_t out_row_step, \
                     int64_t out_stride, int64_t width, int64_t nrows);",
                    f.name
                );
            } else {
                let _ = writeln!(
                    h,
                    "void {p}_{}(const uint8_t *const *rows, const int64_t *strides, \
                     uint8_t *out, int64_t out_stride, int64_t width);",
                    f.name
                );
            }
        }
        let KernelBody::Stencil { stages } = &kernel.body else {
            return Err(CliError::Usage("--emit: not a stencil kernel".into()));
        };
        let CpuBody::Stencil(cpu) = &code.body else {
            return Err(CliError::Usage("--emit: not a stencil kernel".into()));
        };
        let symbols = stage_symbols(code)?;
        for (si, st) in cpu.iter().enumerate() {
            for (li, slot) in st.slots.iter().enumerate() {
                if let SlotKind::Row {
                    border: Border::Constant(v),
                    ..
                } = &slot.kind
                {
                    let (t, bits) = c_bits(*v);
                    let _ = writeln!(h, "static const {t} {p}_s{si}_c{li} = ({t}){bits};");
                }
            }
            let _ = writeln!(h, "static const kiln_aot_slot {p}_s{si}_slots[] = {{");
            for (li, slot) in st.slots.iter().enumerate() {
                let offs = if slot.outer_offset.is_empty() {
                    "0".to_string()
                } else {
                    slot.outer_offset
                        .iter()
                        .map(|o| o.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let (kind, source, border, cval) = match &slot.kind {
                    SlotKind::OuterInRange => (
                        "KILN_AOT_SLOT_IN_RANGE",
                        0,
                        "KILN_AOT_BORDER_CONSTANT",
                        "NULL".into(),
                    ),
                    SlotKind::Row { source, border } => {
                        let (kind, n) = match source {
                            Source::Input(n) => ("KILN_AOT_SLOT_INPUT", *n),
                            Source::Stage(n) => ("KILN_AOT_SLOT_STAGE", *n),
                        };
                        let cval = match border {
                            Border::Constant(_) => format!("&{p}_s{si}_c{li}"),
                            _ => "NULL".into(),
                        };
                        (kind, n, border_code(border), cval)
                    }
                };
                let _ = writeln!(h, "    {{{kind}, {source}, {border}, {cval}, {{{offs}}}}},");
            }
            let _ = writeln!(h, "}};");
        }
        let _ = writeln!(h, "static const kiln_aot_stage {p}_stages[] = {{");
        for (si, st) in cpu.iter().enumerate() {
            let _ = writeln!(
                h,
                "    {{{p}_{}, {}, {}, {p}_s{si}_slots}},",
                symbols[si],
                stages[si].dtype().size_bytes(),
                st.slots.len()
            );
        }
        let _ = writeln!(h, "}};");
        let _ = writeln!(
            h,
            "static const size_t {p}_input_sizes[] = {{{}}};",
            kernel
                .inputs
                .iter()
                .map(|d| d.size_bytes().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            h,
            "static const kiln_aot_stencil {p} = {{{}, {}, {p}_input_sizes, {}, {p}_stages}};",
            kernel.rank,
            kernel.inputs.len(),
            cpu.len()
        );
        let _ = writeln!(
            h,
            "/* Runs kernel {ki} on contiguous C-order tensors of any shape of rank {}: inputs[i]\n \
             * ({}) and output ({}) all of shape `shape`; returns 0 or a KILN_AOT_E* code. */\n\
             static inline int {p}_run(const int64_t *shape, const void *const *inputs, void *output)\n\
             {{\n    return kiln_aot_run_stencil(&{p}, shape, inputs, output);\n}}\n",
            kernel.rank,
            kernel
                .inputs
                .iter()
                .map(|d| c_type(*d))
                .collect::<Vec<_>>()
                .join(", "),
            c_type(kernel.output)
        );
    }
    // The whole operator at its build shape.
    let mut params = Vec::new();
    let mut docs = Vec::new();
    for (i, t) in set.graph.inputs.iter().enumerate() {
        params.push(format!("const {} *in{i}", c_type(t.dtype)));
        docs.push(format!(" * in{i}: {} {:?}", t.dtype.name(), t.shape));
    }
    for (j, &o) in g.outputs.iter().enumerate() {
        let t = &g.nodes[o.index()].ty;
        params.push(format!("{} *out{j}", c_type(t.dtype)));
        docs.push(format!(" * out{j}: {} {:?}", t.dtype.name(), t.shape));
    }
    let _ = writeln!(
        h,
        "/* The operator ({}) on contiguous C-order tensors at its build shape:\n{}\n \
         * Returns 0 or a KILN_AOT_E* code. */",
        set.label,
        docs.join("\n")
    );
    let _ = writeln!(
        h,
        "static inline int kiln_{name}({})\n{{",
        params.join(", ")
    );
    let _ = writeln!(h, "    int rc = 0;");
    let mut values: Vec<(kiln::ir::NodeId, String)> = Vec::new();
    let value_of = |values: &[(kiln::ir::NodeId, String)], id: kiln::ir::NodeId| {
        if let NodeKind::Input { index } = g.nodes[id.index()].kind {
            return Some(format!("in{index}"));
        }
        values
            .iter()
            .find(|(n, _)| *n == id)
            .map(|(_, v)| v.clone())
    };
    let mut temps = Vec::new();
    let mut body = String::new();
    for (gi, group) in c.lowered.partition.groups.iter().enumerate() {
        let ty = &g.nodes[group.root.index()].ty;
        let dst = match g.outputs.iter().position(|&o| o == group.root) {
            Some(j) => format!("out{j}"),
            None => {
                let t = format!("t{gi}");
                let _ = writeln!(
                    h,
                    "    void *{t} = malloc((size_t){} * {});",
                    ty.numel(),
                    ty.dtype.size_bytes()
                );
                temps.push(t.clone());
                t
            }
        };
        let ins = group
            .inputs
            .iter()
            .map(|&i| value_of(&values, i))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| CliError::Usage("--emit: a kernel input is not computed".into()))?;
        let shape = ty
            .shape
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            body,
            "    if (rc == 0) {{\n        const int64_t shape[] = {{{shape}}};\n        \
             const void *ins[] = {{{}}};\n        rc = kiln_{name}_k{gi}_run(shape, ins, {dst});\n    }}",
            if ins.is_empty() {
                "NULL".to_string()
            } else {
                ins.join(", ")
            }
        );
        values.push((group.root, dst));
    }
    for t in &temps {
        let _ = writeln!(h, "    if (!{t})\n        rc = KILN_AOT_ENOMEM;");
    }
    h.push_str(&body);
    for (j, &o) in g.outputs.iter().enumerate() {
        let v = value_of(&values, o)
            .ok_or_else(|| CliError::Usage("--emit: an output is not computed".into()))?;
        if v != format!("out{j}") {
            let t = &g.nodes[o.index()].ty;
            let _ = writeln!(
                h,
                "    if (rc == 0)\n        memcpy(out{j}, {v}, (size_t){} * {});",
                t.numel(),
                t.dtype.size_bytes()
            );
        }
    }
    for t in &temps {
        let _ = writeln!(h, "    free({t});");
    }
    let _ = writeln!(h, "    return rc;\n}}\n");
    let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
    Ok(h)
}

/// Compiles every set and writes `<set>.o` and/or `<set>.h` (and the runner header) into
/// `out`. Everything is compiled before the first file is written.
pub fn emit(
    out: &Path,
    kinds: EmitKinds,
    sets: &[EmitSet],
    options: &CompileOptions,
) -> Result<(), CliError> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for set in sets {
        let c = compile_set(set, options)?;
        if kinds.obj {
            let ks: Vec<ObjectKernel> = c
                .code
                .iter()
                .enumerate()
                .map(|(ki, k)| ObjectKernel {
                    prefix: format!("kiln_{}_k{ki}_", set.name),
                    functions: k.machine_code(),
                })
                .collect();
            let bytes = object_file(&set.name, &ks)?;
            files.push((format!("{}.o", set.name), bytes));
        }
        if kinds.h {
            files.push((format!("{}.h", set.name), header(set, &c)?.into_bytes()));
        }
        eprintln!(
            "kiln aot: emitted {}{}{} for {} ({} kernel(s))",
            set.name,
            if kinds.obj { " .o" } else { "" },
            if kinds.h { " .h" } else { "" },
            set.label,
            c.code.len()
        );
    }
    if kinds.h {
        files.push((RUNTIME_HEADER.to_string(), RUNTIME_TEXT.as_bytes().to_vec()));
    }
    for (f, bytes) in files {
        let path = out.join(&f);
        // Emitted files are outputs of the build, replaced by a rebuild (unlike entries).
        if path.is_file() {
            std::fs::remove_file(&path)
                .map_err(|e| CliError::Usage(format!("--out: replacing {f}: {e}")))?;
        }
        write_atomic(&path, &bytes)
            .map_err(|e| CliError::Usage(format!("--out: writing {f}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_kinds_parse_or_are_refused() {
        let p = |v: &[&str]| EmitKinds::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(p(&["obj", "h"]).unwrap(), EmitKinds { obj: true, h: true });
        assert_eq!(
            p(&["h"]).unwrap(),
            EmitKinds {
                obj: false,
                h: true
            }
        );
        assert!(!p(&[]).unwrap().any());
        assert!(p(&["asm"])
            .unwrap_err()
            .to_string()
            .contains("unknown kind"));
        assert!(p(&["obj", "obj"])
            .unwrap_err()
            .to_string()
            .contains("twice"));
    }

    #[test]
    fn set_names_are_identifiers_and_unique() {
        let a = set_name("median_blur", DType::F32, &[]);
        assert_eq!(a, "median_blur_f32");
        let b = set_name("median_blur", DType::F32, std::slice::from_ref(&a));
        assert_eq!(b, "median_blur_f32_2");
        assert_eq!(set_name("a-b.c", DType::U8, &[]), "a_b_c_u8");
    }

    #[test]
    fn constants_keep_their_bits() {
        assert_eq!(
            c_bits(Scalar::F32(0x7fc0_0000)),
            ("uint32_t", "UINT64_C(0x7fc00000)".into())
        );
        assert_eq!(
            c_bits(Scalar::U8(255)),
            ("uint8_t", "UINT64_C(0xff)".into())
        );
        assert_eq!(
            c_bits(Scalar::F64(0x8000_0000_0000_0000)),
            ("uint64_t", "UINT64_C(0x8000000000000000)".into())
        );
    }
}
