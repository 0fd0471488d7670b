//! Reproducer files: a text header (kind, seed, fault, detail), the graph in the IR text form,
//! and per input its dtype, shape, memory order and values as hex bits (run-length encoded).
//! The format is documented in docs/FUZZING.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kiln_codegen::Fault;
use kiln_ir::{DType, Scalar};

use super::data::InputData;
use super::gen::Case;
use super::harness::FindingKind;
use super::FuzzError;

/// File extension of reproducers.
pub const EXTENSION: &str = "repro";

/// A saved finding.
#[derive(Clone, Debug, PartialEq)]
pub struct Reproducer {
    /// What was found.
    pub kind: FindingKind,
    /// Seed of the generated case it came from.
    pub seed: u64,
    /// The fault planted when it was found (`None`: a real bug).
    pub fault: Option<Fault>,
    /// One-line description of the difference.
    pub detail: String,
    /// The (shrunk) case.
    pub case: Case,
}

/// Name of a fault as written in headers (its Rust variant name).
pub fn fault_name(f: Option<Fault>) -> String {
    f.map_or_else(|| "none".to_string(), |f| format!("{f:?}"))
}

/// Parses [`fault_name`].
pub fn parse_fault(s: &str) -> Option<Option<Fault>> {
    if s == "none" {
        return Some(None);
    }
    Fault::ALL
        .iter()
        .find(|f| format!("{f:?}") == s)
        .map(|&f| Some(f))
}

fn scalar_hex(s: Scalar) -> String {
    match s {
        Scalar::F32(b) => format!("{b:08x}"),
        Scalar::F64(b) => format!("{b:016x}"),
        Scalar::U8(v) => format!("{v:02x}"),
        Scalar::Bool(v) => format!("{}", v as u8),
        Scalar::I8(v) => format!("{:02x}", v as u8),
        Scalar::U16(v) => format!("{v:04x}"),
        Scalar::I16(v) => format!("{:04x}", v as u16),
        Scalar::I32(v) => format!("{:08x}", v as u32),
        Scalar::U32(v) => format!("{v:08x}"),
    }
}

fn parse_scalar(d: DType, tok: &str) -> Option<Scalar> {
    Some(match d {
        DType::F32 => Scalar::F32(u32::from_str_radix(tok, 16).ok()?),
        DType::F64 => Scalar::F64(u64::from_str_radix(tok, 16).ok()?),
        DType::U8 => Scalar::U8(u8::from_str_radix(tok, 16).ok()?),
        DType::Bool => match tok {
            "0" => Scalar::Bool(false),
            "1" => Scalar::Bool(true),
            _ => return None,
        },
        DType::I8 => Scalar::I8(u8::from_str_radix(tok, 16).ok()? as i8),
        DType::U16 => Scalar::U16(u16::from_str_radix(tok, 16).ok()?),
        DType::I16 => Scalar::I16(u16::from_str_radix(tok, 16).ok()? as i16),
        DType::I32 => Scalar::I32(u32::from_str_radix(tok, 16).ok()? as i32),
        DType::U32 => Scalar::U32(u32::from_str_radix(tok, 16).ok()?),
    })
}

fn join_usizes(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_usizes(s: &str) -> Option<Vec<usize>> {
    let s = s.trim().strip_prefix('[')?.strip_suffix(']')?;
    if s.trim().is_empty() {
        return Some(Vec::new());
    }
    s.split(',').map(|t| t.trim().parse().ok()).collect()
}

impl Reproducer {
    /// The file text.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        out.push_str("# kiln fuzz reproducer (docs/FUZZING.md); replay: kiln fuzz --replay FILE\n");
        let _ = writeln!(out, "kind: {}", self.kind.name());
        let _ = writeln!(out, "seed: {:#018x}", self.seed);
        let _ = writeln!(out, "fault: {}", fault_name(self.fault));
        let _ = writeln!(out, "detail: {}", self.detail.replace('\n', " "));
        out.push_str("graph:\n");
        out.push_str(&kiln_ir::printer::print(&self.case.graph));
        out.push_str("end graph\n");
        for (i, inp) in self.case.inputs.iter().enumerate() {
            let _ = writeln!(
                out,
                "input {i}: {} [{}] order [{}]",
                inp.dtype,
                join_usizes(&inp.shape),
                join_usizes(&inp.order)
            );
            out.push_str("data:");
            let mut tokens = 0;
            let mut j = 0;
            while j < inp.data.len() {
                let mut run = 1;
                while j + run < inp.data.len() && inp.data[j + run] == inp.data[j] {
                    run += 1;
                }
                if tokens % 12 == 0 {
                    out.push_str("\n ");
                }
                out.push(' ');
                out.push_str(&scalar_hex(inp.data[j]));
                if run > 1 {
                    let _ = write!(out, "*{run}");
                }
                tokens += 1;
                j += run;
            }
            out.push('\n');
        }
        out.push_str("end\n");
        out
    }

    /// Parses a file's text; errors name the line.
    pub fn from_text(text: &str) -> Result<Reproducer, FuzzError> {
        let lines: Vec<&str> = text.lines().collect();
        let err = |ln: usize, msg: &str| FuzzError::Format(format!("line {}: {msg}", ln + 1));
        let mut kind = None;
        let mut seed = 0u64;
        let mut fault = None;
        let mut detail = String::new();
        let mut i = 0;
        // Header.
        while i < lines.len() {
            let l = lines[i].trim();
            i += 1;
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            if l == "graph:" {
                break;
            }
            let (key, val) = l
                .split_once(':')
                .ok_or_else(|| err(i - 1, "expected `key: value`"))?;
            let val = val.trim();
            match key.trim() {
                "kind" => {
                    kind = Some(
                        FindingKind::from_name(val).ok_or_else(|| err(i - 1, "unknown kind"))?,
                    )
                }
                "seed" => {
                    let v = val
                        .strip_prefix("0x")
                        .map_or_else(|| val.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
                    seed = v.ok_or_else(|| err(i - 1, "bad seed"))?;
                }
                "fault" => fault = parse_fault(val).ok_or_else(|| err(i - 1, "unknown fault"))?,
                "detail" => detail = val.to_string(),
                _ => return Err(err(i - 1, "unknown header key")),
            }
        }
        let kind = kind.ok_or_else(|| FuzzError::Format("missing `kind:` header".into()))?;
        // Graph text.
        let gstart = i;
        while i < lines.len() && lines[i].trim() != "end graph" {
            i += 1;
        }
        if i == lines.len() {
            return Err(FuzzError::Format("missing `end graph`".into()));
        }
        let gtext = lines[gstart..i].join("\n");
        let graph = kiln_ir::parser::parse(&gtext)
            .map_err(|e| FuzzError::Format(format!("graph (from line {}): {e}", gstart + 1)))?;
        i += 1;
        // Inputs.
        let mut inputs = Vec::new();
        loop {
            while i < lines.len() && lines[i].trim().is_empty() {
                i += 1;
            }
            if i == lines.len() {
                return Err(FuzzError::Format("missing `end`".into()));
            }
            let l = lines[i].trim();
            if l == "end" {
                break;
            }
            let rest = l
                .strip_prefix("input ")
                .ok_or_else(|| err(i, "expected `input N: ...` or `end`"))?;
            let (num, rest) = rest
                .split_once(':')
                .ok_or_else(|| err(i, "expected `input N:`"))?;
            if num.trim().parse::<usize>().ok() != Some(inputs.len()) {
                return Err(err(i, "inputs must be numbered 0, 1, ... in order"));
            }
            let rest = rest.trim();
            let (dt, rest) = rest
                .split_once(' ')
                .ok_or_else(|| err(i, "expected dtype"))?;
            let dtype = DType::from_name(dt).ok_or_else(|| err(i, "unknown dtype"))?;
            let (shape_s, order_s) = rest
                .split_once("order")
                .ok_or_else(|| err(i, "expected `order [..]`"))?;
            let shape = parse_usizes(shape_s).ok_or_else(|| err(i, "bad shape"))?;
            let order = parse_usizes(order_s).ok_or_else(|| err(i, "bad order"))?;
            let mut sorted = order.clone();
            sorted.sort_unstable();
            if sorted != (0..shape.len()).collect::<Vec<_>>() {
                return Err(err(i, "order must be a permutation of the axes"));
            }
            i += 1;
            if lines.get(i).map(|l| l.trim()) != Some("data:") {
                return Err(err(i, "expected `data:`"));
            }
            i += 1;
            let mut data = Vec::new();
            let limit: usize = shape.iter().product();
            while i < lines.len() && lines[i].starts_with(' ') {
                for tok in lines[i].split_whitespace() {
                    let (v, count) = match tok.split_once('*') {
                        Some((v, c)) => {
                            (v, c.parse::<usize>().map_err(|_| err(i, "bad run length"))?)
                        }
                        None => (tok, 1),
                    };
                    let s = parse_scalar(dtype, v).ok_or_else(|| err(i, "bad value"))?;
                    if data.len() + count > limit {
                        return Err(err(i, "more values than the shape holds"));
                    }
                    data.extend(std::iter::repeat_n(s, count));
                }
                i += 1;
            }
            if data.len() != limit {
                return Err(FuzzError::Format(format!(
                    "input {}: shape {shape:?} needs {limit} values, got {}",
                    inputs.len(),
                    data.len()
                )));
            }
            inputs.push(InputData {
                dtype,
                shape,
                order,
                data,
            });
        }
        if inputs.len() != graph.inputs.len() {
            return Err(FuzzError::Format(format!(
                "graph has {} inputs, file gives {}",
                graph.inputs.len(),
                inputs.len()
            )));
        }
        for (k, (t, inp)) in graph.inputs.iter().zip(&inputs).enumerate() {
            if t.dtype != inp.dtype || t.shape != inp.shape {
                return Err(FuzzError::Format(format!(
                    "input {k}: graph declares {t}, data is {}{:?}",
                    inp.dtype, inp.shape
                )));
            }
        }
        Ok(Reproducer {
            kind,
            seed,
            fault,
            detail,
            case: Case {
                seed,
                graph,
                inputs,
            },
        })
    }

    /// Writes the reproducer into directory `dir` (created if needed) under a name made of
    /// its kind, fault and seed; returns the path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, FuzzError> {
        std::fs::create_dir_all(dir).map_err(|e| FuzzError::io(dir, e))?;
        let fault = match self.fault {
            None => "real".to_string(),
            Some(f) => format!("{f:?}"),
        };
        let path = dir.join(format!(
            "{}-{fault}-{:016x}.{EXTENSION}",
            self.kind.name(),
            self.seed
        ));
        kiln_runtime::atomic_file::write_atomic(&path, self.to_text().as_bytes())
            .map_err(|e| FuzzError::io(&path, e))?;
        Ok(path)
    }

    /// Reads a reproducer file.
    pub fn load(path: &Path) -> Result<Reproducer, FuzzError> {
        let text = std::fs::read_to_string(path).map_err(|e| FuzzError::io(path, e))?;
        Reproducer::from_text(&text).map_err(|e| match e {
            FuzzError::Format(m) => FuzzError::Format(format!("{}: {m}", path.display())),
            other => other,
        })
    }
}

/// The reproducer files of `path`: the file itself, or the `*.repro` files of a directory,
/// sorted by name.
pub fn reproducer_files(path: &Path) -> Result<Vec<PathBuf>, FuzzError> {
    if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| FuzzError::io(path, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == EXTENSION))
            .collect();
        v.sort();
        Ok(v)
    } else if path.is_file() {
        Ok(vec![path.to_path_buf()])
    } else {
        Err(FuzzError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"),
        ))
    }
}
