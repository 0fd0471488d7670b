//! Extern line functions: the runtime's half of `NodeKind::Extern` (see
//! `kiln_ir::extern_call`), kiln's escape hatch for line algorithms that no line program
//! expresses, on the model of Halide's `define_extern`.
//!
//! Scope: [`LineExtern`] (a name, the function the fused CPU path calls, its eager twin and
//! its output dtype rule), the views a function sees ([`LineIn`], a strided read-only
//! [`LineView`]; [`LineOut`], a contiguous `&mut` slice), the process-wide registry
//! ([`register_line_extern`], [`line_extern`]; duplicate names are an error) and
//! [`call_line`], the one checked call both executors make. Built-in externs used by tests
//! and the fuzzer are in `line_extern/builtins.rs` and registered on first use.
//!
//! Exactness: the registered function is the semantics. Both executors hand it every line
//! in its walking order (index 0 of the view is the first element walked: the last one of
//! the line for a backward call), with the same parameters, and store element `k` of its
//! output at the position of element `k` of its input. The eager executor calls the twin on
//! a contiguous copy of each line, the fused one calls the function on a strided view of the
//! input tensor; tests compare them bit for bit. Lines may run in any order and on any
//! thread, so a function must be pure per line.
//!
//! Limits: one input, the output has the input's shape; a bool output must hold 0 or 1 in
//! every byte (checked after each call); a function that panics is reported as an error,
//! not unwound through the caller.

mod builtins;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, RwLock};

use kiln_ir::extern_call::check_extern_name;
use kiln_ir::{DType, ExternCall, Scalar};

use crate::{RuntimeError, Storage};

pub use builtins::BUILTIN_NAMES;

/// A read-only view of one line: `len` elements of a slice from `start` at a signed `step`
/// (in elements). Element 0 is the first element in walking order.
#[derive(Clone, Copy, Debug)]
pub struct LineView<'a, T> {
    data: &'a [T],
    start: usize,
    step: isize,
    len: usize,
}

impl<'a, T: Copy> LineView<'a, T> {
    /// The view of `len` elements of `data` from `start` at `step`, or why it would leave
    /// `data`.
    pub fn new(data: &'a [T], start: usize, step: isize, len: usize) -> Result<Self, String> {
        if len > 0 {
            let last = (len - 1) as i128 * step as i128 + start as i128;
            if start >= data.len() || last < 0 || last >= data.len() as i128 {
                return Err(format!(
                    "line view of {len} elements from {start} at step {step} leaves a slice of {}",
                    data.len()
                ));
            }
        }
        Ok(LineView {
            data,
            start,
            step,
            len,
        })
    }

    /// The whole of `data`, in order.
    pub fn contiguous(data: &'a [T]) -> Self {
        LineView {
            data,
            start: 0,
            step: 1,
            len: data.len(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty line.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i` (walking order). Panics when `i >= len` (a bug in the extern, which
    /// [`call_line`] reports as an error).
    pub fn get(&self, i: usize) -> T {
        assert!(i < self.len, "line index {i} out of range for {}", self.len);
        // In range: `new` checked the first and last positions, and `i` is between them.
        self.data[(self.start as isize + i as isize * self.step) as usize]
    }

    /// The elements in walking order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        (0..self.len).map(|i| self.get(i))
    }
}

/// One input line, by dtype (bool elements are bytes holding 0 or 1).
#[derive(Clone, Copy, Debug)]
pub enum LineIn<'a> {
    /// f32 elements.
    F32(LineView<'a, f32>),
    /// f64 elements.
    F64(LineView<'a, f64>),
    /// u8 elements.
    U8(LineView<'a, u8>),
    /// bool elements as 0/1 bytes.
    Bool(LineView<'a, u8>),
}

impl LineIn<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            LineIn::F32(v) => v.len(),
            LineIn::F64(v) => v.len(),
            LineIn::U8(v) | LineIn::Bool(v) => v.len(),
        }
    }

    /// True for an empty line.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            LineIn::F32(_) => DType::F32,
            LineIn::F64(_) => DType::F64,
            LineIn::U8(_) => DType::U8,
            LineIn::Bool(_) => DType::Bool,
        }
    }
}

/// One output line, contiguous in walking order, as long as the input line.
#[derive(Debug)]
pub enum LineOut<'a> {
    /// f32 elements.
    F32(&'a mut [f32]),
    /// f64 elements.
    F64(&'a mut [f64]),
    /// u8 elements.
    U8(&'a mut [u8]),
    /// bool elements: each byte must be 0 or 1.
    Bool(&'a mut [u8]),
}

/// A line function: reads one line, writes its output, given the call's parameters; an
/// `Err` message fails the run with [`RuntimeError::Extern`].
pub type LineFunc =
    Arc<dyn Fn(LineIn<'_>, LineOut<'_>, &[Scalar]) -> Result<(), String> + Send + Sync>;

/// The output dtype for an input dtype and parameters, or why the call is not accepted.
pub type DTypeRule = Arc<dyn Fn(DType, &[Scalar]) -> Result<DType, String> + Send + Sync>;

/// A registered extern: its name, the function the fused CPU path calls, its eager twin
/// (the same function, or a deliberately naive one) and its output dtype rule.
#[derive(Clone)]
pub struct LineExtern {
    /// The name nodes call it by.
    pub name: String,
    /// Called by the fused CPU path, on strided views of the input tensor.
    pub func: LineFunc,
    /// Called by the eager executor, on contiguous copies of each line.
    pub eager: LineFunc,
    /// The output dtype rule (also checks the parameters).
    pub out_dtype: DTypeRule,
}

impl std::fmt::Debug for LineExtern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LineExtern({})", self.name)
    }
}

impl LineExtern {
    /// An extern from plain functions.
    pub fn new(
        name: &str,
        func: impl Fn(LineIn<'_>, LineOut<'_>, &[Scalar]) -> Result<(), String> + Send + Sync + 'static,
        eager: impl Fn(LineIn<'_>, LineOut<'_>, &[Scalar]) -> Result<(), String> + Send + Sync + 'static,
        out_dtype: impl Fn(DType, &[Scalar]) -> Result<DType, String> + Send + Sync + 'static,
    ) -> LineExtern {
        LineExtern {
            name: name.to_string(),
            func: Arc::new(func),
            eager: Arc::new(eager),
            out_dtype: Arc::new(out_dtype),
        }
    }
}

fn extern_err(name: &str, message: impl Into<String>) -> RuntimeError {
    RuntimeError::Extern {
        name: name.to_string(),
        message: message.into(),
    }
}

type Registry = RwLock<HashMap<String, Arc<LineExtern>>>;

fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let map = builtins::all()
            .into_iter()
            .map(|e| (e.name.clone(), Arc::new(e)))
            .collect();
        RwLock::new(map)
    })
}

/// Registers `ext` process-wide. Errors: a name the IR cannot spell, or a name already
/// registered (built-ins included).
pub fn register_line_extern(ext: LineExtern) -> Result<(), RuntimeError> {
    check_extern_name(&ext.name).map_err(|m| extern_err(&ext.name, m))?;
    let mut map = registry().write().unwrap_or_else(|e| e.into_inner());
    if map.contains_key(&ext.name) {
        return Err(extern_err(&ext.name, "is already registered"));
    }
    map.insert(ext.name.clone(), Arc::new(ext));
    Ok(())
}

/// The extern registered as `name`.
pub fn line_extern(name: &str) -> Result<Arc<LineExtern>, RuntimeError> {
    let map = registry().read().unwrap_or_else(|e| e.into_inner());
    map.get(name)
        .cloned()
        .ok_or_else(|| extern_err(name, "is not registered"))
}

/// The registered names, sorted.
pub fn registered_line_externs() -> Vec<String> {
    let map = registry().read().unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<String> = map.keys().cloned().collect();
    v.sort();
    v
}

/// The extern `call` names, checked to accept input elements of `x` and the call's
/// parameters with the call's output dtype.
pub fn resolve(call: &ExternCall, x: DType) -> Result<Arc<LineExtern>, RuntimeError> {
    let ext = line_extern(&call.name)?;
    for d in [x, call.out] {
        if !matches!(d, DType::F32 | DType::F64 | DType::U8 | DType::Bool) {
            return Err(extern_err(
                &call.name,
                format!("extern line functions take f32, f64, u8 or bool lines, not {d}"),
            ));
        }
    }
    let out = (ext.out_dtype)(x, &call.params).map_err(|m| extern_err(&call.name, m))?;
    if out != call.out {
        return Err(extern_err(
            &call.name,
            format!(
                "gives {out} for {x} input and these parameters, the node declares {}",
                call.out
            ),
        ));
    }
    Ok(ext)
}

/// Calls `f` (of extern `name`) on one line: `input`, writing `out` (storage of the
/// output's dtype and the line's length). Errors, panics and bool bytes other than 0 or 1
/// become [`RuntimeError::Extern`].
pub fn call_line(
    name: &str,
    f: &LineFunc,
    input: LineIn<'_>,
    out: &mut Storage,
    params: &[Scalar],
) -> Result<(), RuntimeError> {
    if out.len() != input.len() {
        return Err(extern_err(
            name,
            format!(
                "output line of {} for an input line of {}",
                out.len(),
                input.len()
            ),
        ));
    }
    let line_out = match out {
        Storage::F32(v) => LineOut::F32(v),
        Storage::F64(v) => LineOut::F64(v),
        Storage::U8(v) => LineOut::U8(v),
        Storage::Bool(v) => LineOut::Bool(v),
        other => {
            return Err(extern_err(
                name,
                format!(
                    "extern line functions take f32, f64, u8 or bool lines, not {}",
                    other.dtype()
                ),
            ))
        }
    };
    match catch_unwind(AssertUnwindSafe(|| f(input, line_out, params))) {
        Ok(Ok(())) => {}
        Ok(Err(m)) => return Err(extern_err(name, m)),
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            return Err(extern_err(name, format!("panicked: {what}")));
        }
    }
    if let Storage::Bool(v) = out {
        if let Some(b) = v.iter().find(|&&b| b > 1) {
            return Err(extern_err(name, format!("wrote the bool byte {b}")));
        }
    }
    Ok(())
}

/// The view of a line of `s`: `len` elements from `start` at `step`.
pub(crate) fn line_in(
    s: &Storage,
    start: usize,
    step: isize,
    len: usize,
) -> Result<LineIn<'_>, String> {
    Ok(match s {
        Storage::F32(v) => LineIn::F32(LineView::new(v, start, step, len)?),
        Storage::F64(v) => LineIn::F64(LineView::new(v, start, step, len)?),
        Storage::U8(v) => LineIn::U8(LineView::new(v, start, step, len)?),
        Storage::Bool(v) => LineIn::Bool(LineView::new(v, start, step, len)?),
        other => {
            return Err(format!(
                "extern line functions take f32, f64, u8 or bool lines, not {}",
                other.dtype()
            ))
        }
    })
}
