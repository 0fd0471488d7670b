//! PTX text emission: registers, stage programs, border remapping and the schedules.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

use super::{err, PtxModule, PtxTarget, Schedule, BLOCK_1D, BLOCK_2D, MAX_SHARED_BYTES};
use crate::kernel::{Kernel, KernelBody, Op, Source, Stage};
use crate::{CodegenError, CompileOptions, Fault};

const CANON_F32: &str = "0x7FC00000";
const CANON_F64: &str = "0x7FF8000000000000";

macro_rules! e {
    ($em:expr, $($arg:tt)*) => { $em.line(format!($($arg)*)) };
}

/// Line bodies (a child module: it uses this module's private emitter).
#[path = "line.rs"]
mod line;

/// The Sinkhorn lane passes (a child module: it uses this module's private emitter).
#[path = "sinkhorn.rs"]
pub(super) mod sinkhorn;

/// Integer dtypes other than u8 (a child module: it uses this module's private emitter).
#[path = "int.rs"]
mod int;
/// exp and log (a child module: it uses this module's private emitter).
mod math;

/// Which version of a stage program to emit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// Every offset is known to be in range: no remapping.
    Interior,
    /// Offsets may leave the shape: remap under the border mode.
    Border,
}

/// A shared-memory tile holding stage `stage` read under `border`, indexed by virtual
/// (un-remapped) coordinates around the block's output tile.
#[derive(Clone)]
struct Tile {
    stage: u32,
    border: Border,
    /// Halo below / above along x (innermost axis).
    hx: (i64, i64),
    /// Halo below / above along y (second-innermost axis; zero for one spatial axis).
    hy: (i64, i64),
    width: i64,
    height: i64,
    dtype: DType,
    sym: String,
}

impl Tile {
    fn elems(&self) -> i64 {
        self.width * self.height
    }
}

/// The point a stage program is evaluated at.
struct Point {
    /// One s64 register per axis of the full shape.
    coords: Vec<String>,
    /// When set, stage loads read these tiles at the thread's own position
    /// (`tid.x`, `tid.y` as s64 registers).
    tiles: Option<(Vec<Tile>, String, String)>,
}

struct Em<'k> {
    kernel: &'k Kernel,
    fault: Option<Fault>,
    body: String,
    prologue: Vec<String>,
    n_r: u32,
    n_rd: u32,
    n_f: u32,
    n_fd: u32,
    n_p: u32,
    n_label: u32,
    words: BTreeMap<usize, String>,
    stage_base: BTreeMap<u32, String>,
    tile_base: BTreeMap<String, String>,
    args: String,
    out: String,
    scratch: String,
    ins: Vec<String>,
    p_true: String,
    p_false: String,
}

impl<'k> Em<'k> {
    fn new(kernel: &'k Kernel, options: &CompileOptions) -> Em<'k> {
        let mut em = Em {
            kernel,
            fault: options.fault,
            body: String::new(),
            prologue: Vec::new(),
            n_r: 0,
            n_rd: 0,
            n_f: 0,
            n_fd: 0,
            n_p: 0,
            n_label: 0,
            words: BTreeMap::new(),
            stage_base: BTreeMap::new(),
            tile_base: BTreeMap::new(),
            args: String::new(),
            out: String::new(),
            scratch: String::new(),
            ins: Vec::new(),
            p_true: String::new(),
            p_false: String::new(),
        };
        em.args = em.rd();
        em.out = em.rd();
        em.scratch = em.rd();
        em.ins = (0..kernel.inputs.len()).map(|_| em.rd()).collect();
        em.p_true = em.p();
        em.p_false = em.p();
        let one = em.r();
        em.prologue.push(format!("mov.u32 {one}, 1"));
        em.prologue
            .push(format!("setp.ne.u32 {}, {one}, 0", em.p_true));
        em.prologue
            .push(format!("setp.eq.u32 {}, {one}, 0", em.p_false));
        em
    }

    fn r(&mut self) -> String {
        self.n_r += 1;
        format!("%r{}", self.n_r)
    }
    fn rd(&mut self) -> String {
        self.n_rd += 1;
        format!("%rd{}", self.n_rd)
    }
    fn f(&mut self) -> String {
        self.n_f += 1;
        format!("%f{}", self.n_f)
    }
    fn fd(&mut self) -> String {
        self.n_fd += 1;
        format!("%fd{}", self.n_fd)
    }
    fn p(&mut self) -> String {
        self.n_p += 1;
        format!("%p{}", self.n_p)
    }
    fn reg(&mut self, d: DType) -> String {
        match d {
            DType::F32 => self.f(),
            DType::F64 => self.fd(),
            DType::U8 => self.r(),
            DType::Bool => self.p(),
            DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32 => self.r(),
        }
    }
    fn label(&mut self, hint: &str) -> String {
        self.n_label += 1;
        format!("$L_{hint}_{}", self.n_label)
    }
    fn line(&mut self, s: String) {
        self.body.push('\t');
        self.body.push_str(&s);
        self.body.push_str(";\n");
    }
    fn put_label(&mut self, l: &str) {
        let _ = writeln!(self.body, "{l}:");
    }

    /// Register holding word `w` of the parameter block (loaded once, in the prologue).
    fn word(&mut self, w: usize) -> String {
        if let Some(r) = self.words.get(&w) {
            return r.clone();
        }
        let r = self.rd();
        self.prologue
            .push(format!("ld.global.nc.u64 {r}, [{}+{}]", self.args, 8 * w));
        self.words.insert(w, r.clone());
        r
    }

    fn rank(&self) -> usize {
        self.kernel.rank
    }
    fn dim(&mut self, axis: usize) -> String {
        self.word(axis)
    }
    fn in_stride(&mut self, input: usize, axis: usize) -> String {
        let r = self.rank();
        self.word(r + input * r + axis)
    }
    fn out_stride(&mut self, axis: usize) -> String {
        let r = self.rank();
        let n = self.kernel.inputs.len();
        self.word(r + n * r + axis)
    }
    fn scratch_stride(&mut self, axis: usize) -> String {
        let r = self.rank();
        let n = self.kernel.inputs.len();
        self.word(r + (n + 1) * r + axis)
    }
    fn scratch_base(&mut self, stage: u32) -> String {
        if let Some(r) = self.stage_base.get(&stage) {
            return r.clone();
        }
        // The parameter block (`Module::param_block`): dims, each input's strides, the
        // output's strides, the scratch strides, then one byte offset per stored stage.
        let r = self.rank();
        let n = self.kernel.inputs.len();
        let off = self.word(r * (n + 3) + stage as usize);
        let b = self.rd();
        self.prologue
            .push(format!("add.s64 {b}, {}, {off}", self.scratch));
        self.stage_base.insert(stage, b.clone());
        b
    }
    fn tile_addr(&mut self, sym: &str) -> String {
        if let Some(r) = self.tile_base.get(sym) {
            return r.clone();
        }
        let b = self.rd();
        self.prologue.push(format!("mov.u64 {b}, {sym}"));
        self.tile_base.insert(sym.to_string(), b.clone());
        b
    }

    // ----- scalar helpers ---------------------------------------------------------------

    fn mov(&mut self, d: DType, dst: &str, src: &str) {
        let t = match d {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::U8 => "u32",
            DType::Bool => "pred",
            DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32 => "b32",
        };
        e!(self, "mov.{t} {dst}, {src}");
    }

    fn constant(&mut self, c: Scalar) -> String {
        match c {
            Scalar::F32(b) => {
                let i = self.r();
                let f = self.f();
                e!(self, "mov.b32 {i}, 0x{b:08X}");
                e!(self, "mov.b32 {f}, {i}");
                f
            }
            Scalar::F64(b) => {
                let i = self.rd();
                let f = self.fd();
                e!(self, "mov.b64 {i}, 0x{b:016X}");
                e!(self, "mov.b64 {f}, {i}");
                f
            }
            Scalar::U8(v) => {
                let r = self.r();
                e!(self, "mov.u32 {r}, {v}");
                r
            }
            Scalar::I8(_) | Scalar::U16(_) | Scalar::I16(_) | Scalar::I32(_) | Scalar::U32(_) => {
                // The normalised 32-bit form (sign- or zero-extended), as its bits.
                let v = c.to_i64().expect("integer scalar") as i32 as u32;
                let r = self.r();
                e!(self, "mov.b32 {r}, 0x{v:08X}");
                r
            }
            Scalar::Bool(v) => {
                let p = self.p();
                let s = if v {
                    self.p_true.clone()
                } else {
                    self.p_false.clone()
                };
                e!(self, "mov.pred {p}, {s}");
                p
            }
        }
    }

    /// Replaces a NaN in float register `v` by the canonical NaN, bit by bit.
    fn canon(&mut self, d: DType, v: &str) -> String {
        let p = self.p();
        match d {
            DType::F32 => {
                let (i, j, o) = (self.r(), self.r(), self.f());
                e!(self, "testp.notanumber.f32 {p}, {v}");
                e!(self, "mov.b32 {i}, {v}");
                e!(self, "selp.b32 {j}, {CANON_F32}, {i}, {p}");
                e!(self, "mov.b32 {o}, {j}");
                o
            }
            DType::F64 => {
                let (i, j, o) = (self.rd(), self.rd(), self.fd());
                e!(self, "testp.notanumber.f64 {p}, {v}");
                e!(self, "mov.b64 {i}, {v}");
                e!(self, "selp.b64 {j}, {CANON_F64}, {i}, {p}");
                e!(self, "mov.b64 {o}, {j}");
                o
            }
            _ => v.to_string(),
        }
    }

    fn unary(&mut self, op: UnaryOp, d: DType, x: &str) -> String {
        match (op, d) {
            (UnaryOp::Neg | UnaryOp::Abs, DType::F32) => {
                let (i, j, f) = (self.r(), self.r(), self.f());
                e!(self, "mov.b32 {i}, {x}");
                if op == UnaryOp::Neg {
                    e!(self, "xor.b32 {j}, {i}, 0x80000000");
                } else {
                    e!(self, "and.b32 {j}, {i}, 0x7FFFFFFF");
                }
                e!(self, "mov.b32 {f}, {j}");
                self.canon(d, &f)
            }
            (UnaryOp::Neg | UnaryOp::Abs, DType::F64) => {
                let (i, j, f) = (self.rd(), self.rd(), self.fd());
                e!(self, "mov.b64 {i}, {x}");
                if op == UnaryOp::Neg {
                    e!(self, "xor.b64 {j}, {i}, 0x8000000000000000");
                } else {
                    e!(self, "and.b64 {j}, {i}, 0x7FFFFFFFFFFFFFFF");
                }
                e!(self, "mov.b64 {f}, {j}");
                self.canon(d, &f)
            }
            (UnaryOp::Neg | UnaryOp::Abs, _) if d.is_int() && d != DType::U8 => {
                self.int_unary(op, d, x)
            }
            (UnaryOp::Neg, _) => {
                let (t, o) = (self.r(), self.r());
                e!(self, "neg.s32 {t}, {x}");
                e!(self, "and.b32 {o}, {t}, 255");
                o
            }
            (UnaryOp::Abs, _) => x.to_string(),
            (UnaryOp::Sqrt, _) => {
                let o = self.reg(d);
                e!(self, "sqrt.rn.{} {o}, {x}", ft(d));
                self.canon(d, &o)
            }
            (UnaryOp::IsNan, _) => {
                let p = self.p();
                e!(self, "testp.notanumber.{} {p}, {x}", ft(d));
                p
            }
            (UnaryOp::IsFinite, _) => {
                let p = self.p();
                e!(self, "testp.finite.{} {p}, {x}", ft(d));
                p
            }
            (UnaryOp::Not, _) => {
                let p = self.p();
                e!(self, "not.pred {p}, {x}");
                p
            }
            (UnaryOp::Exp, _) => self.exp(d, x),
            (UnaryOp::Log, _) => self.log(d, x),
        }
    }

    /// Total-order key of a float register (as an integer register).
    fn key(&mut self, d: DType, x: &str) -> (String, String) {
        if d == DType::F32 {
            let (b, s, t, k) = (self.r(), self.r(), self.r(), self.r());
            e!(self, "mov.b32 {b}, {x}");
            e!(self, "shr.s32 {s}, {b}, 31");
            e!(self, "shr.u32 {t}, {s}, 1");
            e!(self, "xor.b32 {k}, {b}, {t}");
            (b, k)
        } else {
            let (b, s, t, k) = (self.rd(), self.rd(), self.rd(), self.rd());
            e!(self, "mov.b64 {b}, {x}");
            e!(self, "shr.s64 {s}, {b}, 63");
            e!(self, "shr.u64 {t}, {s}, 1");
            e!(self, "xor.b64 {k}, {b}, {t}");
            (b, k)
        }
    }

    fn float_minmax(&mut self, min: bool, d: DType, a: &str, b: &str) -> String {
        let w = if d == DType::F32 { 32 } else { 64 };
        if self.fault == Some(Fault::FminSemantics) {
            let o = self.reg(d);
            e!(
                self,
                "{}.{} {o}, {a}, {b}",
                if min { "min" } else { "max" },
                ft(d)
            );
            return o;
        }
        let (ba, ka) = self.key(d, a);
        let (bb, kb) = self.key(d, b);
        let p = self.p();
        e!(
            self,
            "setp.{}.s{w} {p}, {ka}, {kb}",
            if min { "le" } else { "ge" }
        );
        let sel = if w == 32 { self.r() } else { self.rd() };
        e!(self, "selp.b{w} {sel}, {ba}, {bb}, {p}");
        let bits = if self.fault == Some(Fault::DropNanMask) {
            sel
        } else {
            let (pa, pb, pn) = (self.p(), self.p(), self.p());
            e!(self, "testp.notanumber.{} {pa}, {a}", ft(d));
            e!(self, "testp.notanumber.{} {pb}, {b}", ft(d));
            e!(self, "or.pred {pn}, {pa}, {pb}");
            let o = if w == 32 { self.r() } else { self.rd() };
            let canon = if w == 32 { CANON_F32 } else { CANON_F64 };
            e!(self, "selp.b{w} {o}, {canon}, {sel}, {pn}");
            o
        };
        let o = self.reg(d);
        e!(self, "mov.b{w} {o}, {bits}");
        o
    }

    fn binary(&mut self, op: BinaryOp, d: DType, a: &str, b: &str) -> String {
        use BinaryOp as B;
        if op.is_comparison() {
            let p = self.p();
            match d {
                DType::F32 | DType::F64 => {
                    let c = match op {
                        B::Lt => "lt",
                        B::Le => "le",
                        B::Gt => "gt",
                        B::Ge => "ge",
                        B::Eq => "eq",
                        _ => "neu",
                    };
                    e!(self, "setp.{c}.{} {p}, {a}, {b}", ft(d));
                }
                DType::U8 => {
                    let c = match op {
                        B::Lt => "lt",
                        B::Le => "le",
                        B::Gt => "gt",
                        B::Ge => "ge",
                        B::Eq => "eq",
                        _ => "ne",
                    };
                    e!(self, "setp.{c}.u32 {p}, {a}, {b}");
                }
                DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32 => {
                    return self.int_compare(op, d, a, b);
                }
                DType::Bool => {
                    // false < true
                    let n = self.p();
                    match op {
                        B::Lt => {
                            e!(self, "not.pred {n}, {a}");
                            e!(self, "and.pred {p}, {n}, {b}");
                        }
                        B::Le => {
                            e!(self, "not.pred {n}, {a}");
                            e!(self, "or.pred {p}, {n}, {b}");
                        }
                        B::Gt => {
                            e!(self, "not.pred {n}, {b}");
                            e!(self, "and.pred {p}, {a}, {n}");
                        }
                        B::Ge => {
                            e!(self, "not.pred {n}, {b}");
                            e!(self, "or.pred {p}, {a}, {n}");
                        }
                        B::Eq => {
                            e!(self, "xor.pred {n}, {a}, {b}");
                            e!(self, "not.pred {p}, {n}");
                        }
                        _ => {
                            e!(self, "xor.pred {p}, {a}, {b}");
                        }
                    }
                }
            }
            return p;
        }
        match d {
            DType::F32 | DType::F64 => match op {
                B::Add | B::Sub | B::Mul | B::Div => {
                    let o = self.reg(d);
                    let m = match op {
                        B::Add => "add",
                        B::Sub => "sub",
                        B::Mul => "mul",
                        _ => "div",
                    };
                    e!(self, "{m}.rn.{} {o}, {a}, {b}", ft(d));
                    self.canon(d, &o)
                }
                B::Min => self.float_minmax(true, d, a, b),
                _ => self.float_minmax(false, d, a, b),
            },
            DType::U8 => match op {
                B::Add | B::Sub | B::Mul => {
                    let (t, o) = (self.r(), self.r());
                    let m = match op {
                        B::Add => "add.u32",
                        B::Sub => "sub.u32",
                        _ => "mul.lo.u32",
                    };
                    e!(self, "{m} {t}, {a}, {b}");
                    e!(self, "and.b32 {o}, {t}, 255");
                    o
                }
                B::Div => {
                    let (p, q, o) = (self.p(), self.r(), self.r());
                    e!(self, "setp.eq.u32 {p}, {b}, 0");
                    e!(self, "div.u32 {q}, {a}, {b}");
                    e!(self, "selp.u32 {o}, 0, {q}, {p}");
                    o
                }
                B::Min => {
                    let o = self.r();
                    e!(self, "min.u32 {o}, {a}, {b}");
                    o
                }
                _ => {
                    let o = self.r();
                    e!(self, "max.u32 {o}, {a}, {b}");
                    o
                }
            },
            DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32 => {
                self.int_binary(op, d, a, b)
            }
            DType::Bool => {
                let o = self.p();
                let m = if matches!(op, B::And | B::Min) {
                    "and"
                } else {
                    "or"
                };
                e!(self, "{m}.pred {o}, {a}, {b}");
                o
            }
        }
    }

    fn select(&mut self, d: DType, c: &str, a: &str, b: &str) -> String {
        if d == DType::Bool {
            let (t1, nc, t2, o) = (self.p(), self.p(), self.p(), self.p());
            e!(self, "and.pred {t1}, {c}, {a}");
            e!(self, "not.pred {nc}, {c}");
            e!(self, "and.pred {t2}, {nc}, {b}");
            e!(self, "or.pred {o}, {t1}, {t2}");
            return o;
        }
        let o = self.reg(d);
        let t = match d {
            DType::F32 => "b32",
            DType::F64 => "b64",
            _ => "u32",
        };
        if d.is_float() {
            // Move the bits through integer registers: select never touches a NaN payload.
            let w = if d == DType::F32 { 32 } else { 64 };
            let (ia, ib, io) = if w == 32 {
                (self.r(), self.r(), self.r())
            } else {
                (self.rd(), self.rd(), self.rd())
            };
            e!(self, "mov.b{w} {ia}, {a}");
            e!(self, "mov.b{w} {ib}, {b}");
            e!(self, "selp.{t} {io}, {ia}, {ib}, {c}");
            e!(self, "mov.b{w} {o}, {io}");
        } else {
            e!(self, "selp.{t} {o}, {a}, {b}, {c}");
        }
        o
    }

    fn cast(&mut self, from: DType, to: DType, x: &str) -> String {
        use DType::*;
        if from == to {
            return x.to_string();
        }
        let new_int = |d: DType| d.is_int() && d != U8;
        if new_int(from) || new_int(to) {
            return self.int_cast(from, to, x);
        }
        match (from, to) {
            (F32, F64) => {
                let o = self.fd();
                e!(self, "cvt.f64.f32 {o}, {x}");
                self.canon(F64, &o)
            }
            (F64, F32) => {
                let o = self.f();
                e!(self, "cvt.rn.f32.f64 {o}, {x}");
                self.canon(F32, &o)
            }
            (F32 | F64, U8) => {
                // Truncate toward zero; float-to-integer cvt clamps to [0, 2^32-1]; then
                // saturate to 255; NaN gives 0 (explicitly, not relying on cvt).
                let (t, m, p, o) = (self.r(), self.r(), self.p(), self.r());
                e!(self, "cvt.rzi.u32.{} {t}, {x}", ft(from));
                e!(self, "min.u32 {m}, {t}, 255");
                e!(self, "testp.notanumber.{} {p}, {x}", ft(from));
                e!(self, "selp.u32 {o}, 0, {m}, {p}");
                o
            }
            (F32, Bool) => {
                let p = self.p();
                e!(self, "setp.neu.f32 {p}, {x}, 0f00000000");
                p
            }
            (F64, Bool) => {
                let p = self.p();
                e!(self, "setp.neu.f64 {p}, {x}, 0d0000000000000000");
                p
            }
            (U8, F32 | F64) => {
                let o = self.reg(to);
                e!(self, "cvt.rn.{}.u32 {o}, {x}", ft(to));
                o
            }
            (U8, Bool) => {
                let p = self.p();
                e!(self, "setp.ne.u32 {p}, {x}, 0");
                p
            }
            (Bool, F32) => {
                let (i, o) = (self.r(), self.f());
                e!(self, "selp.b32 {i}, 0x3F800000, 0, {x}");
                e!(self, "mov.b32 {o}, {i}");
                o
            }
            (Bool, F64) => {
                let (i, o) = (self.rd(), self.fd());
                e!(self, "selp.b64 {i}, 0x3FF0000000000000, 0, {x}");
                e!(self, "mov.b64 {o}, {i}");
                o
            }
            (Bool, U8) => {
                let o = self.r();
                e!(self, "selp.u32 {o}, 1, 0, {x}");
                o
            }
            _ => unreachable!("same-dtype casts return early"),
        }
    }

    // ----- memory ------------------------------------------------------------------------

    /// Loads a `d` from byte address `addr` in state space `space` (`global`/`shared`).
    fn load(&mut self, space: &str, d: DType, addr: &str, guard: Option<(&str, Scalar)>) -> String {
        let nc = if space == "global" { ".nc" } else { "" };
        let pre = |g: Option<(&str, Scalar)>| g.map_or(String::new(), |(p, _)| format!("@{p} "));
        match d {
            DType::Bool => {
                let r = self.r();
                let init = match guard {
                    Some((_, Scalar::Bool(v))) => v as u32,
                    _ => 0,
                };
                if guard.is_some() {
                    e!(self, "mov.u32 {r}, {init}");
                }
                e!(self, "{}ld.{space}{nc}.u8 {r}, [{addr}]", pre(guard));
                let p = self.p();
                e!(self, "setp.ne.u32 {p}, {r}, 0");
                p
            }
            _ => {
                let o = match guard {
                    Some((_, c)) => {
                        let c = self.constant(c);
                        let o = self.reg(d);
                        self.mov(d, &o, &c);
                        o
                    }
                    None => self.reg(d),
                };
                let t = int::mem_ty(d);
                e!(self, "{}ld.{space}{nc}.{t} {o}, [{addr}]", pre(guard));
                o
            }
        }
    }

    fn store(&mut self, space: &str, d: DType, addr: &str, v: &str) {
        match d {
            DType::F32 => e!(self, "st.{space}.f32 [{addr}], {v}"),
            DType::F64 => e!(self, "st.{space}.f64 [{addr}], {v}"),
            DType::U8 => e!(self, "st.{space}.u8 [{addr}], {v}"),
            DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32 => {
                let t = int::mem_ty(d);
                e!(self, "st.{space}.{t} [{addr}], {v}")
            }
            DType::Bool => {
                let r = self.r();
                e!(self, "selp.u32 {r}, 1, 0, {v}");
                e!(self, "st.{space}.u8 [{addr}], {r}");
            }
        }
    }

    /// `base + (sum_k idx[k] * stride[k]) * size`.
    fn address(&mut self, base: &str, idx: &[String], strides: &[String], size: usize) -> String {
        let mut acc: Option<String> = None;
        for (i, s) in idx.iter().zip(strides) {
            let t = self.rd();
            match &acc {
                None => e!(self, "mul.lo.s64 {t}, {i}, {s}"),
                Some(a) => e!(self, "mad.lo.s64 {t}, {i}, {s}, {a}"),
            }
            acc = Some(t);
        }
        let a = self.rd();
        match acc {
            Some(off) => e!(self, "mad.lo.s64 {a}, {off}, {size}, {base}"),
            None => e!(self, "mov.u64 {a}, {base}"),
        }
        a
    }

    /// Remaps index `j` along `axis` (length register `n`) under a non-constant border.
    fn remap(&mut self, j: &str, n: &str, border: &Border, axis: usize) -> String {
        let m = match border {
            Border::Nearest => self.clamp(j, n),
            Border::Wrap => self.rem_euclid(j, n),
            Border::Reflect => {
                let (n2, n2m1, u, m, p) = (self.rd(), self.rd(), self.rd(), self.rd(), self.p());
                e!(self, "shl.b64 {n2}, {n}, 1");
                let t = self.rem_euclid(j, &n2);
                e!(self, "setp.ge.s64 {p}, {t}, {n}");
                e!(self, "sub.s64 {n2m1}, {n2}, 1");
                e!(self, "sub.s64 {u}, {n2m1}, {t}");
                e!(self, "selp.b64 {m}, {u}, {t}, {p}");
                m
            }
            Border::Mirror => {
                let (a, per, u, m, p) = (self.rd(), self.rd(), self.rd(), self.rd(), self.p());
                // period 2n-2, at least 1 (n == 1 then maps everything to 0)
                e!(self, "mad.lo.s64 {a}, {n}, 2, -2");
                e!(self, "max.s64 {per}, {a}, 1");
                let t = self.rem_euclid(j, &per);
                e!(self, "setp.ge.s64 {p}, {t}, {n}");
                e!(self, "sub.s64 {u}, {per}, {t}");
                e!(self, "selp.b64 {m}, {u}, {t}, {p}");
                m
            }
            Border::Constant(_) => j.to_string(),
        };
        if self.fault == Some(Fault::WrongBorderRightEdge) && axis == self.rank() - 1 {
            if let Border::Nearest | Border::Constant(_) = border {
                return m;
            }
            let c = self.clamp(j, n);
            let (p, o) = (self.p(), self.rd());
            e!(self, "setp.ge.s64 {p}, {j}, {n}");
            e!(self, "selp.b64 {o}, {c}, {m}, {p}");
            return o;
        }
        m
    }

    fn clamp(&mut self, j: &str, n: &str) -> String {
        let (t, nm1, m) = (self.rd(), self.rd(), self.rd());
        e!(self, "max.s64 {t}, {j}, 0");
        e!(self, "sub.s64 {nm1}, {n}, 1");
        e!(self, "min.s64 {m}, {t}, {nm1}");
        m
    }

    fn rem_euclid(&mut self, j: &str, n: &str) -> String {
        let (t, u, m, p) = (self.rd(), self.rd(), self.rd(), self.p());
        e!(self, "rem.s64 {t}, {j}, {n}");
        e!(self, "setp.lt.s64 {p}, {t}, 0");
        e!(self, "add.s64 {u}, {t}, {n}");
        e!(self, "selp.b64 {m}, {u}, {t}, {p}");
        m
    }

    /// Predicate `0 <= j < n`.
    fn in_range(&mut self, j: &str, n: &str) -> String {
        let (a, b, o) = (self.p(), self.p(), self.p());
        e!(self, "setp.ge.s64 {a}, {j}, 0");
        e!(self, "setp.lt.s64 {b}, {j}, {n}");
        e!(self, "and.pred {o}, {a}, {b}");
        o
    }

    fn and_opt(&mut self, acc: Option<String>, p: String) -> Option<String> {
        Some(match acc {
            None => p,
            Some(a) => {
                let o = self.p();
                e!(self, "and.pred {o}, {a}, {p}");
                o
            }
        })
    }

    // ----- stage programs ----------------------------------------------------------------

    fn is_tiled(pt: &Point, source: Source) -> bool {
        matches!(source, Source::Stage(_)) && pt.tiles.is_some()
    }

    /// Smallest and largest offset per spatial axis among the loads and in-range tests that
    /// need bounds handling at `pt`.
    fn margins(&self, st: &Stage, pt: &Point) -> Vec<(i64, i64)> {
        let d = self.rank() - 2;
        let mut m = vec![(0i64, 0i64); d];
        for inst in &st.insts {
            let off = match &inst.op {
                Op::Load { source, offset, .. } if !Self::is_tiled(pt, *source) => offset,
                Op::InRange(o) => o,
                _ => continue,
            };
            for (k, &o) in off.iter().enumerate() {
                m[k].0 = m[k].0.min(o);
                m[k].1 = m[k].1.max(o);
            }
        }
        m
    }

    /// Evaluates stage `si` at `pt`, with an interior fast path and a border path.
    fn point(&mut self, stages: &[Stage], si: usize, pt: &Point) -> Result<String, CodegenError> {
        let st = &stages[si];
        let margins = self.margins(st, pt);
        if margins.iter().all(|&(lo, hi)| lo == 0 && hi == 0) {
            return self.program(stages, si, pt, Path::Interior);
        }
        let mut inside: Option<String> = None;
        for (k, &(lo, hi)) in margins.iter().enumerate() {
            let c = pt.coords[2 + k].clone();
            if lo < 0 {
                let p = self.p();
                e!(self, "setp.ge.s64 {p}, {c}, {}", -lo);
                inside = self.and_opt(inside, p);
            }
            if hi > 0 {
                let n = self.dim(2 + k);
                let (t, p) = (self.rd(), self.p());
                e!(self, "sub.s64 {t}, {n}, {hi}");
                e!(self, "setp.lt.s64 {p}, {c}, {t}");
                inside = self.and_opt(inside, p);
            }
        }
        let inside = inside.expect("some margin is non-zero");
        let d = st.dtype();
        let res = self.reg(d);
        let (lb, ld) = (self.label("border"), self.label("done"));
        e!(self, "@!{inside} bra {lb}");
        let v = self.program(stages, si, pt, Path::Interior)?;
        self.mov(d, &res, &v);
        e!(self, "bra {ld}");
        self.put_label(&lb);
        let v = self.program(stages, si, pt, Path::Border)?;
        self.mov(d, &res, &v);
        self.put_label(&ld);
        Ok(res)
    }

    fn program(
        &mut self,
        stages: &[Stage],
        si: usize,
        pt: &Point,
        path: Path,
    ) -> Result<String, CodegenError> {
        let st = &stages[si];
        let mut vals: Vec<String> = Vec::with_capacity(st.insts.len());
        for inst in &st.insts {
            let v = |id: crate::kernel::ValueId| vals[id.0 as usize].clone();
            let d = inst.dtype;
            let r = match &inst.op {
                Op::Load {
                    source,
                    offset,
                    border,
                } => self.emit_load(*source, offset, border, d, pt, path)?,
                Op::InRange(off) => {
                    if path == Path::Interior {
                        self.p_true.clone()
                    } else {
                        let mut acc: Option<String> = None;
                        for (k, &o) in off.iter().enumerate() {
                            if o == 0 {
                                continue;
                            }
                            let (c, n) = (pt.coords[2 + k].clone(), self.dim(2 + k));
                            let j = self.rd();
                            e!(self, "add.s64 {j}, {c}, {o}");
                            let p = self.in_range(&j, &n);
                            acc = self.and_opt(acc, p);
                        }
                        acc.unwrap_or_else(|| self.p_true.clone())
                    }
                }
                Op::Const(c) => self.constant(*c),
                Op::Unary(op, x) => {
                    let xd = st.insts[x.0 as usize].dtype;
                    self.unary(*op, xd, &v(*x))
                }
                Op::Binary(op, a, b) => {
                    let ad = st.insts[a.0 as usize].dtype;
                    self.binary(*op, ad, &v(*a), &v(*b))
                }
                Op::Select(c, a, b) => self.select(d, &v(*c), &v(*a), &v(*b)),
                Op::Cast(x) => {
                    let xd = st.insts[x.0 as usize].dtype;
                    self.cast(xd, d, &v(*x))
                }
            };
            vals.push(r);
        }
        Ok(vals[st.result.0 as usize].clone())
    }

    fn emit_load(
        &mut self,
        source: Source,
        offset: &[i64],
        border: &Border,
        d: DType,
        pt: &Point,
        path: Path,
    ) -> Result<String, CodegenError> {
        let r = self.rank();
        if let (Source::Stage(s), Some((tiles, tx, ty))) = (source, &pt.tiles) {
            let t = tiles
                .iter()
                .find(|t| t.stage == s && t.border == *border)
                .ok_or_else(|| err(format!("no tile for stage {s} under {border}")))?
                .clone();
            let ox = offset[r - 3];
            let oy = if r - 2 >= 2 { offset[r - 4] } else { 0 };
            let konst = (t.hy.0 + oy) * t.width + t.hx.0 + ox;
            let (a, b, addr) = (self.rd(), self.rd(), self.rd());
            e!(self, "mad.lo.s64 {a}, {ty}, {}, {tx}", t.width);
            e!(self, "add.s64 {b}, {a}, {konst}");
            let base = self.tile_addr(&t.sym);
            e!(self, "mad.lo.s64 {addr}, {b}, {}, {base}", d.size_bytes());
            return Ok(self.load("shared", d, &addr, None));
        }
        let (base, strides): (String, Vec<String>) = match source {
            Source::Input(i) => (
                self.ins[i as usize].clone(),
                (0..r).map(|k| self.in_stride(i as usize, k)).collect(),
            ),
            Source::Stage(s) => (
                self.scratch_base(s),
                (0..r).map(|k| self.scratch_stride(k)).collect(),
            ),
        };
        let mut idx = Vec::with_capacity(r);
        let mut guard: Option<String> = None;
        for axis in 0..r {
            let c = pt.coords[axis].clone();
            let o = if axis >= 2 { offset[axis - 2] } else { 0 };
            if o == 0 {
                idx.push(c);
                continue;
            }
            let j = self.rd();
            e!(self, "add.s64 {j}, {c}, {o}");
            if path == Path::Interior {
                idx.push(j);
                continue;
            }
            let n = self.dim(axis);
            if let Border::Constant(_) = border {
                let p = self.in_range(&j, &n);
                guard = self.and_opt(guard, p);
                idx.push(j);
            } else {
                idx.push(self.remap(&j, &n, border, axis));
            }
        }
        let addr = self.address(&base, &idx, &strides, d.size_bytes());
        let g = match (guard.as_deref(), border) {
            (Some(p), Border::Constant(c)) => Some((p, *c)),
            _ => None,
        };
        Ok(self.load("global", d, &addr, g))
    }

    // ----- schedules ---------------------------------------------------------------------

    /// Emits the loops over blocks for a stencil schedule; `body` is called once per
    /// (x-block, y-block, z) iteration with the point and the tile origin `(x0, y0)`.
    fn stencil_loops(
        &mut self,
        block: [u32; 3],
        mut body: impl FnMut(&mut Self, &Point, &str, &str) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let r = self.rank();
        let two = r - 2 >= 2;
        let (tx32, ty32, tx, ty) = (self.r(), self.r(), self.rd(), self.rd());
        e!(self, "mov.u32 {tx32}, %tid.x");
        e!(self, "mov.u32 {ty32}, %tid.y");
        e!(self, "cvt.u64.u32 {tx}, {tx32}");
        e!(self, "cvt.u64.u32 {ty}, {ty32}");
        let folded: Vec<usize> = if two {
            (0..r - 2).collect()
        } else {
            (0..r - 1).collect()
        };
        let zn = self.rd();
        e!(self, "mov.u64 {zn}, 1");
        let mut zacc = zn;
        for &a in &folded {
            let n = self.dim(a);
            let t = self.rd();
            e!(self, "mul.lo.s64 {t}, {zacc}, {n}");
            zacc = t;
        }
        let w = self.dim(r - 1);
        let h = if two { self.dim(r - 2) } else { String::new() };
        // block-uniform loop counters
        let (xb, yb, zz) = (self.rd(), self.rd(), self.rd());
        let (c32, n32) = (self.r(), self.r());
        let (nbx, nby, nbz) = (self.rd(), self.rd(), self.rd());
        for (dim, reg) in [("x", &nbx), ("y", &nby), ("z", &nbz)] {
            e!(self, "mov.u32 {n32}, %nctaid.{dim}");
            e!(self, "cvt.u64.u32 {reg}, {n32}");
        }
        let (lx, ly, lz, nx, ny, end) = (
            self.label("xblk"),
            self.label("yblk"),
            self.label("z"),
            self.label("xnext"),
            self.label("ynext"),
            self.label("end"),
        );
        e!(self, "mov.u32 {c32}, %ctaid.x");
        e!(self, "cvt.u64.u32 {xb}, {c32}");
        self.put_label(&lx);
        let (x0, x, px) = (self.rd(), self.rd(), self.p());
        e!(self, "mul.lo.s64 {x0}, {xb}, {}", block[0]);
        e!(self, "setp.ge.s64 {px}, {x0}, {w}");
        e!(self, "@{px} bra.uni {end}");
        e!(self, "add.s64 {x}, {x0}, {tx}");
        e!(self, "mov.u32 {c32}, %ctaid.y");
        e!(self, "cvt.u64.u32 {yb}, {c32}");
        self.put_label(&ly);
        let (y0, y) = (self.rd(), self.rd());
        if two {
            let py = self.p();
            e!(self, "mul.lo.s64 {y0}, {yb}, {}", block[1]);
            e!(self, "setp.ge.s64 {py}, {y0}, {h}");
            e!(self, "@{py} bra.uni {nx}");
            e!(self, "add.s64 {y}, {y0}, {ty}");
        } else {
            let py = self.p();
            e!(self, "mov.u64 {y0}, 0");
            e!(self, "mov.u64 {y}, 0");
            e!(self, "setp.ne.s64 {py}, {yb}, 0");
            e!(self, "@{py} bra.uni {nx}");
        }
        e!(self, "mov.u32 {c32}, %ctaid.z");
        e!(self, "cvt.u64.u32 {zz}, {c32}");
        self.put_label(&lz);
        let pz = self.p();
        e!(self, "setp.ge.s64 {pz}, {zz}, {zacc}");
        e!(self, "@{pz} bra.uni {ny}");
        // decompose zz over the folded axes (last fastest)
        let mut coords = vec![String::new(); r];
        let mut rest = zz.clone();
        for &a in folded.iter().rev() {
            let n = self.dim(a);
            let (q, c) = (self.rd(), self.rd());
            e!(self, "div.u64 {q}, {rest}, {n}");
            e!(self, "mul.lo.s64 {c}, {q}, {n}");
            e!(self, "sub.s64 {c}, {rest}, {c}");
            coords[a] = c;
            rest = q;
        }
        coords[r - 1] = x.clone();
        if two {
            coords[r - 2] = y.clone();
        }
        let pt = Point {
            coords,
            tiles: Some((Vec::new(), tx.clone(), ty.clone())),
        };
        body(self, &pt, &x0, &y0)?;
        e!(self, "add.s64 {zz}, {zz}, {nbz}");
        e!(self, "bra.uni {lz}");
        self.put_label(&ny);
        e!(self, "add.s64 {yb}, {yb}, {nby}");
        e!(self, "bra.uni {ly}");
        self.put_label(&nx);
        e!(self, "add.s64 {xb}, {xb}, {nbx}");
        e!(self, "bra.uni {lx}");
        self.put_label(&end);
        Ok(())
    }

    /// Stores `v` (stage value at `pt`) when the thread's point is inside the shape.
    fn guarded_store(
        &mut self,
        pt: &Point,
        d: DType,
        v_emit: impl FnOnce(&mut Self) -> Result<String, CodegenError>,
        target: Option<u32>,
    ) -> Result<(), CodegenError> {
        let r = self.rank();
        let skip = self.label("skip");
        let w = self.dim(r - 1);
        let p = self.p();
        e!(self, "setp.ge.s64 {p}, {}, {w}", pt.coords[r - 1]);
        e!(self, "@{p} bra {skip}");
        if r - 2 >= 2 {
            let h = self.dim(r - 2);
            let q = self.p();
            e!(self, "setp.ge.s64 {q}, {}, {h}", pt.coords[r - 2]);
            e!(self, "@{q} bra {skip}");
        }
        let v = v_emit(self)?;
        let (base, strides): (String, Vec<String>) = match target {
            None => (
                self.out.clone(),
                (0..r).map(|k| self.out_stride(k)).collect(),
            ),
            Some(s) => (
                self.scratch_base(s),
                (0..r).map(|k| self.scratch_stride(k)).collect(),
            ),
        };
        let addr = self.address(&base, &pt.coords, &strides, d.size_bytes());
        self.store("global", d, &addr, &v);
        self.put_label(&skip);
        Ok(())
    }

    /// Fills `tile` cooperatively: each element is the stage's value at the remapped
    /// virtual coordinate (or the border constant).
    fn fill_tile(
        &mut self,
        stages: &[Stage],
        t: &Tile,
        pt: &Point,
        x0: &str,
        y0: &str,
        block: [u32; 3],
    ) -> Result<(), CodegenError> {
        let r = self.rank();
        let two = r - 2 >= 2;
        let (tx, ty) = match &pt.tiles {
            Some((_, tx, ty)) => (tx.clone(), ty.clone()),
            None => return Err(err("tile fill outside a tiled schedule")),
        };
        let (i, lx, ly, vx, vy, t0) = (
            self.rd(),
            self.rd(),
            self.rd(),
            self.rd(),
            self.rd(),
            self.rd(),
        );
        e!(self, "mad.lo.s64 {i}, {ty}, {}, {tx}", block[0]);
        let (lp, ldone) = (self.label("tile"), self.label("tiledone"));
        self.put_label(&lp);
        let p = self.p();
        e!(self, "setp.ge.s64 {p}, {i}, {}", t.elems());
        e!(self, "@{p} bra {ldone}");
        e!(self, "div.u64 {ly}, {i}, {}", t.width);
        e!(self, "mul.lo.s64 {t0}, {ly}, {}", t.width);
        e!(self, "sub.s64 {lx}, {i}, {t0}");
        e!(self, "add.s64 {vx}, {x0}, {lx}");
        e!(self, "sub.s64 {vx}, {vx}, {}", t.hx.0);
        e!(self, "add.s64 {vy}, {y0}, {ly}");
        e!(self, "sub.s64 {vy}, {vy}, {}", t.hy.0);
        let mut coords = pt.coords.clone();
        let mut guard: Option<String> = None;
        let mut axes = vec![(r - 1, vx.clone())];
        if two {
            axes.push((r - 2, vy.clone()));
        }
        for (axis, v) in axes {
            let n = self.dim(axis);
            if let Border::Constant(_) = t.border {
                let q = self.in_range(&v, &n);
                guard = self.and_opt(guard, q);
                coords[axis] = v;
            } else {
                coords[axis] = self.remap(&v, &n, &t.border, axis);
            }
        }
        let inner = Point {
            coords,
            tiles: None,
        };
        let val = match (&guard, t.border) {
            (Some(g), Border::Constant(c)) => {
                let res = self.reg(t.dtype);
                let cv = self.constant(c);
                self.mov(t.dtype, &res, &cv);
                let skip = self.label("tilecval");
                e!(self, "@!{g} bra {skip}");
                let v = self.point(stages, t.stage as usize, &inner)?;
                self.mov(t.dtype, &res, &v);
                self.put_label(&skip);
                res
            }
            _ => self.point(stages, t.stage as usize, &inner)?,
        };
        let base = self.tile_addr(&t.sym);
        let addr = self.rd();
        e!(
            self,
            "mad.lo.s64 {addr}, {i}, {}, {base}",
            t.dtype.size_bytes()
        );
        self.store("shared", t.dtype, &addr, &val);
        e!(self, "add.s64 {i}, {i}, {}", block[0] * block[1]);
        e!(self, "bra {lp}");
        self.put_label(&ldone);
        Ok(())
    }

    /// Wraps the body in an entry point.
    fn finish(&self, name: &str, shared: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{shared}");
        let _ = write!(s, ".visible .entry {name}(\n\t.param .u64 kiln_args,\n\t.param .u64 kiln_out,\n\t.param .u64 kiln_scratch");
        for i in 0..self.ins.len() {
            let _ = write!(s, ",\n\t.param .u64 kiln_in{i}");
        }
        let _ = writeln!(s, "\n)\n{{");
        let _ = writeln!(s, "\t.reg .pred %p<{}>;", self.n_p + 1);
        let _ = writeln!(s, "\t.reg .b32 %r<{}>;", self.n_r + 1);
        let _ = writeln!(s, "\t.reg .b64 %rd<{}>;", self.n_rd + 1);
        let _ = writeln!(s, "\t.reg .f32 %f<{}>;", self.n_f + 1);
        let _ = writeln!(s, "\t.reg .f64 %fd<{}>;", self.n_fd + 1);
        let mut params = vec![
            ("kiln_args", &self.args),
            ("kiln_out", &self.out),
            ("kiln_scratch", &self.scratch),
        ];
        let names: Vec<String> = (0..self.ins.len()).map(|i| format!("kiln_in{i}")).collect();
        for (i, r) in self.ins.iter().enumerate() {
            params.push((names[i].as_str(), r));
        }
        for (p, r) in params {
            let _ = writeln!(s, "\tld.param.u64 {r}, [{p}];");
            let _ = writeln!(s, "\tcvta.to.global.u64 {r}, {r};");
        }
        for l in &self.prologue {
            let _ = writeln!(s, "\t{l};");
        }
        s.push_str(&self.body);
        s.push_str("\tret;\n}\n");
        s
    }
}

fn ft(d: DType) -> &'static str {
    if d == DType::F64 {
        "f64"
    } else {
        "f32"
    }
}

pub(super) fn header(target: &PtxTarget) -> String {
    format!(
        "// Generated by kiln-codegen (PTX backend). Exactness: round-to-nearest on every float op,\n// no flush-to-zero, canonical NaNs, kiln min/max via total-order keys (docs/PTX.md).\n.version {}.{}\n.target sm_{}\n.address_size 64\n\n",
        target.ptx_version.0, target.ptx_version.1, target.sm
    )
}

/// Plans the tiles of a fused (single-launch) multi-stage schedule, or `None` when it must
/// fall back to the staged schedule.
fn plan_tiles(kernel: &Kernel, stages: &[Stage], block: [u32; 3]) -> Option<Vec<Tile>> {
    let r = kernel.rank;
    let two = r - 2 >= 2;
    let last = stages.len() - 1;
    // earlier stages may read only inputs
    for st in &stages[..last] {
        if st.insts.iter().any(|i| {
            matches!(
                i.op,
                Op::Load {
                    source: Source::Stage(_),
                    ..
                }
            )
        }) {
            return None;
        }
    }
    let mut tiles: Vec<Tile> = Vec::new();
    for inst in &stages[last].insts {
        if let Op::Load {
            source: Source::Stage(s),
            offset,
            border,
        } = &inst.op
        {
            let outer = if two {
                &offset[..offset.len() - 2]
            } else {
                &offset[..offset.len() - 1]
            };
            if outer.iter().any(|&o| o != 0) {
                return None;
            }
            let ox = offset[offset.len() - 1];
            let oy = if two { offset[offset.len() - 2] } else { 0 };
            let pos = match tiles
                .iter()
                .position(|t| t.stage == *s && t.border == *border)
            {
                Some(p) => p,
                None => {
                    tiles.push(Tile {
                        stage: *s,
                        border: *border,
                        hx: (0, 0),
                        hy: (0, 0),
                        width: 0,
                        height: 0,
                        dtype: stages[*s as usize].dtype(),
                        sym: format!("kiln_tile{}", tiles.len()),
                    });
                    tiles.len() - 1
                }
            };
            let t = &mut tiles[pos];
            t.hx = (t.hx.0.max(-ox), t.hx.1.max(ox));
            t.hy = (t.hy.0.max(-oy), t.hy.1.max(oy));
        }
    }
    let mut bytes = 0usize;
    for t in &mut tiles {
        // halos far beyond the block: fall back (also bounds the arithmetic below)
        if [t.hx.0, t.hx.1, t.hy.0, t.hy.1].iter().any(|&h| h > 4096) {
            return None;
        }
        t.width = block[0] as i64 + t.hx.0 + t.hx.1;
        t.height = block[1] as i64 + t.hy.0 + t.hy.1;
        bytes = bytes.div_ceil(8) * 8 + t.elems() as usize * t.dtype.size_bytes();
    }
    if bytes > MAX_SHARED_BYTES {
        return None;
    }
    Some(tiles)
}

pub(super) fn render(
    kernel: &Kernel,
    target: &PtxTarget,
    options: &CompileOptions,
) -> Result<PtxModule, CodegenError> {
    let mut text = header(target);
    let r = kernel.rank;
    let block = if r - 2 >= 2 { BLOCK_2D } else { BLOCK_1D };
    let mut module = PtxModule {
        text: String::new(),
        target: *target,
        entries: Vec::new(),
        block,
        schedule: Schedule::Staged,
        rank: r,
        inputs: kernel.inputs.clone(),
        output: kernel.output,
        stages: Vec::new(),
    };
    match &kernel.body {
        KernelBody::Stencil { stages } => {
            module.stages = stages.iter().map(Stage::dtype).collect();
            let last = stages.len() - 1;
            let tiles = if last == 0 {
                Some(Vec::new())
            } else {
                plan_tiles(kernel, stages, block)
            };
            match tiles {
                Some(tiles) => {
                    let mut em = Em::new(kernel, options);
                    let mut shared = String::new();
                    let mut bytes = 0usize;
                    for t in &tiles {
                        let n = t.elems() as usize * t.dtype.size_bytes();
                        let _ = writeln!(shared, ".shared .align 8 .b8 {}[{n}];", t.sym);
                        bytes = bytes.div_ceil(8) * 8 + n;
                    }
                    let tiled = !tiles.is_empty();
                    em.stencil_loops(block, |em, pt, x0, y0| {
                        let pt = Point {
                            coords: pt.coords.clone(),
                            tiles: pt
                                .tiles
                                .as_ref()
                                .map(|(_, a, b)| (tiles.clone(), a.clone(), b.clone())),
                        };
                        for t in &tiles {
                            em.fill_tile(stages, t, &pt, x0, y0, block)?;
                        }
                        if tiled {
                            e!(em, "bar.sync 0");
                        }
                        em.guarded_store(
                            &pt,
                            kernel.output,
                            |em| em.point(stages, last, &pt),
                            None,
                        )?;
                        if tiled {
                            e!(em, "bar.sync 0");
                        }
                        Ok(())
                    })?;
                    text.push_str(&em.finish("kiln_main", &shared));
                    module.entries.push("kiln_main".into());
                    module.schedule = Schedule::Fused {
                        shared_bytes: bytes,
                    };
                }
                None => {
                    for si in 0..stages.len() {
                        let mut em = Em::new(kernel, options);
                        let d = stages[si].dtype();
                        let target_stage = if si == last { None } else { Some(si as u32) };
                        em.stencil_loops(block, |em, pt, _, _| {
                            let pt = Point {
                                coords: pt.coords.clone(),
                                tiles: None,
                            };
                            em.guarded_store(&pt, d, |em| em.point(stages, si, &pt), target_stage)
                        })?;
                        let name = format!("kiln_stage{si}");
                        text.push_str(&em.finish(&name, ""));
                        text.push('\n');
                        module.entries.push(name);
                    }
                    module.schedule = Schedule::Staged;
                }
            }
        }
        KernelBody::Extern(call) => {
            return Err(crate::CodegenError::ExternUnsupported {
                name: call.name.clone(),
            })
        }
        KernelBody::Line(l) => {
            text.push_str(&line::render(kernel, l, options)?);
            module.entries.push("kiln_lines".into());
            module.schedule = Schedule::Lines {
                axis: l.axis,
                scan: l.keeps_each(),
            };
            module.block = BLOCK_1D;
        }
    }
    module.text = text;
    Ok(module)
}
