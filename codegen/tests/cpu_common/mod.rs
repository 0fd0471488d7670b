//! Shared helpers of the CPU backend tests: a scalar reference evaluator written directly
//! from `kiln_ir::semantics` (independent of the code generator), a tiny runtime that builds
//! row pointers like the fused executor does, and random data with awkward floats.
#![allow(dead_code)]

use kiln_codegen::cpu::{CpuBody, CpuKernel, SlotKind};
use kiln_codegen::kernel::{Inst, Kernel, KernelBody, Op, Source, Stage, ValueId};
use kiln_ir::semantics::{self as sem, remap_index};
use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

/// A 2-D image (one batch, one channel) of scalars, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Img {
    pub dtype: DType,
    pub h: usize,
    pub w: usize,
    pub data: Vec<Scalar>,
}

impl Img {
    pub fn at(&self, y: usize, x: usize) -> Scalar {
        self.data[y * self.w + x]
    }
}

/// xorshift64*: deterministic test data without extra dependencies.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub const SPECIAL_F32: [u32; 16] = [
    0x7fc0_0000, // canonical NaN
    0x7fc0_0001, // quiet NaN with payload
    0xffc0_0000, // negative quiet NaN (x86 default NaN)
    0x7f80_0001, // signalling NaN
    0xffff_ffff, // negative NaN, full payload
    0x0000_0000, // +0
    0x8000_0000, // -0
    0x7f80_0000, // +Inf
    0xff80_0000, // -Inf
    0x0000_0001, // smallest subnormal
    0x807f_ffff, // largest negative subnormal
    0x0080_0000, // smallest normal
    0x3f80_0000, // 1
    0xc020_0000, // -2.5
    0x7f7f_ffff, // max finite
    0x4380_0000, // 256
];

pub const SPECIAL_F64: [u64; 12] = [
    0x7ff8_0000_0000_0000,
    0x7ff8_0000_0000_0001,
    0xfff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0x0000_0000_0000_0000,
    0x8000_0000_0000_0000,
    0x7ff0_0000_0000_0000,
    0xfff0_0000_0000_0000,
    0x0000_0000_0000_0001,
    0x3ff0_0000_0000_0000,
    0x41f0_0000_0000_0000, // 2^32
    0xc059_0000_0000_0000, // -100
];

/// A random scalar: often special values, small integers, or random bits.
pub fn rand_scalar(r: &mut Rng, d: DType, nan_free: bool) -> Scalar {
    loop {
        let s = match d {
            DType::F32 => match r.below(4) {
                0 => Scalar::F32(SPECIAL_F32[r.below(16) as usize]),
                1 => Scalar::f32((r.below(21) as f32 - 10.0) * 0.5),
                2 => Scalar::f32((r.below(600) as f32) - 20.0),
                _ => Scalar::F32(r.next() as u32),
            },
            DType::F64 => match r.below(4) {
                0 => Scalar::F64(SPECIAL_F64[r.below(12) as usize]),
                1 => Scalar::f64((r.below(21) as f64 - 10.0) * 0.5),
                2 => Scalar::f64(r.below(600) as f64 - 20.25),
                _ => Scalar::F64(r.next()),
            },
            DType::U8 => Scalar::U8(if r.below(4) == 0 { 0 } else { r.next() as u8 }),
            DType::Bool => Scalar::Bool(r.below(2) == 1),
            d => {
                let (lo, hi) = d.int_range().unwrap();
                let v = match r.below(4) {
                    0 => [lo, hi, 0, -1][r.below(4) as usize],
                    1 => r.below(9) as i64 - 4,
                    _ => r.next() as i64,
                };
                Scalar::wrap_int(d, v).unwrap()
            }
        };
        if !(nan_free && s.to_f64().is_nan()) {
            return s;
        }
    }
}

pub fn rand_img(r: &mut Rng, d: DType, h: usize, w: usize, nan_free: bool) -> Img {
    Img {
        dtype: d,
        h,
        w,
        data: (0..h * w).map(|_| rand_scalar(r, d, nan_free)).collect(),
    }
}

// ---------------------------------------------------------------- reference semantics
//
// NaN tests go through the bits: LLVM may fold `if v.is_nan() { NAN } else { v }` into `v`
// when `v` comes straight from a float operation (it treats the NaN bits of arithmetic
// results as unspecified), which happens for `kiln_ir::semantics::canon_f32(x.sqrt())`.

fn nan32(b: u32) -> bool {
    b & 0x7fff_ffff > 0x7f80_0000
}
fn nan64(b: u64) -> bool {
    b & 0x7fff_ffff_ffff_ffff > 0x7ff0_0000_0000_0000
}
/// Canonical-NaN rule on f32 bits.
pub fn c32(v: f32) -> Scalar {
    let b = std::hint::black_box(v).to_bits();
    Scalar::F32(if nan32(b) { sem::CANONICAL_NAN_F32 } else { b })
}
/// Canonical-NaN rule on f64 bits.
pub fn c64(v: f64) -> Scalar {
    let b = std::hint::black_box(v).to_bits();
    Scalar::F64(if nan64(b) { sem::CANONICAL_NAN_F64 } else { b })
}
fn minmax32(max: bool, a: u32, b: u32) -> Scalar {
    if nan32(a) || nan32(b) {
        return Scalar::F32(sem::CANONICAL_NAN_F32);
    }
    let (ka, kb) = (sem::order_key_f32(a), sem::order_key_f32(b));
    Scalar::F32(if (ka <= kb) != max { a } else { b })
}
fn minmax64(max: bool, a: u64, b: u64) -> Scalar {
    if nan64(a) || nan64(b) {
        return Scalar::F64(sem::CANONICAL_NAN_F64);
    }
    let (ka, kb) = (sem::order_key_f64(a), sem::order_key_f64(b));
    Scalar::F64(if (ka <= kb) != max { a } else { b })
}

/// kiln's cast table (SEMANTICS.md), with the NaN rule applied on bits.
pub fn ref_cast(s: Scalar, to: DType) -> Scalar {
    if s.dtype() == to {
        return s;
    }
    match (s, to) {
        (Scalar::F32(_), DType::F64) => c64(f32v(s) as f64),
        (Scalar::F64(_), DType::F32) => c32(f64v(s) as f32),
        _ => sem::cast(s, to),
    }
}

fn f32v(s: Scalar) -> f32 {
    match s {
        Scalar::F32(b) => f32::from_bits(b),
        _ => panic!("not f32"),
    }
}
fn f64v(s: Scalar) -> f64 {
    match s {
        Scalar::F64(b) => f64::from_bits(b),
        _ => panic!("not f64"),
    }
}

pub fn ref_unary(op: UnaryOp, x: Scalar) -> Scalar {
    if let Some(r) = ref_int_unary(op, x) {
        return r;
    }
    match (op, x) {
        (UnaryOp::Neg, Scalar::F32(_)) => c32(-f32v(x)),
        (UnaryOp::Neg, Scalar::F64(_)) => c64(-f64v(x)),
        (UnaryOp::Neg, Scalar::U8(v)) => Scalar::U8(v.wrapping_neg()),
        (UnaryOp::Abs, Scalar::F32(_)) => c32(f32v(x).abs()),
        (UnaryOp::Abs, Scalar::F64(_)) => c64(f64v(x).abs()),
        (UnaryOp::Abs, Scalar::U8(v)) => Scalar::U8(v),
        (UnaryOp::Sqrt, Scalar::F32(_)) => c32(f32v(x).sqrt()),
        (UnaryOp::Sqrt, Scalar::F64(_)) => c64(f64v(x).sqrt()),
        (UnaryOp::IsNan, _) => Scalar::Bool(x.to_f64().is_nan()),
        (UnaryOp::IsFinite, _) => Scalar::Bool(x.to_f64().is_finite()),
        (UnaryOp::Not, Scalar::Bool(v)) => Scalar::Bool(!v),
        (UnaryOp::Exp, Scalar::F32(_)) => Scalar::F32(kiln_ir::math::exp_f32(f32v(x)).to_bits()),
        (UnaryOp::Exp, Scalar::F64(_)) => Scalar::F64(kiln_ir::math::exp_f64(f64v(x)).to_bits()),
        (UnaryOp::Log, Scalar::F32(_)) => Scalar::F32(kiln_ir::math::log_f32(f32v(x)).to_bits()),
        (UnaryOp::Log, Scalar::F64(_)) => Scalar::F64(kiln_ir::math::log_f64(f64v(x)).to_bits()),
        _ => panic!("ill-typed unary {op:?} {x:?}"),
    }
}

/// Neg and abs of the integer dtypes other than u8: exact i64 arithmetic reduced modulo
/// 2^bits; `None` for every other case.
fn ref_int_unary(op: UnaryOp, x: Scalar) -> Option<Scalar> {
    let d = x.dtype();
    if !d.is_int() || d == DType::U8 {
        return None;
    }
    let v = x.to_i64()?;
    match op {
        UnaryOp::Neg => Scalar::wrap_int(d, -v),
        UnaryOp::Abs => Scalar::wrap_int(d, v.abs()),
        _ => None,
    }
}

fn cmp<T: PartialOrd>(op: BinaryOp, a: T, b: T) -> bool {
    match op {
        BinaryOp::Lt => a < b,
        BinaryOp::Le => a <= b,
        BinaryOp::Gt => a > b,
        BinaryOp::Ge => a >= b,
        BinaryOp::Eq => a == b,
        BinaryOp::Ne => a != b,
        _ => unreachable!(),
    }
}

pub fn ref_binary(op: BinaryOp, a: Scalar, b: Scalar) -> Scalar {
    use BinaryOp::*;
    if op.is_comparison() {
        return Scalar::Bool(match (a, b) {
            (Scalar::F32(_), Scalar::F32(_)) => cmp(op, f32v(a), f32v(b)),
            (Scalar::F64(_), Scalar::F64(_)) => cmp(op, f64v(a), f64v(b)),
            (Scalar::U8(x), Scalar::U8(y)) => cmp(op, x, y),
            (Scalar::Bool(x), Scalar::Bool(y)) => cmp(op, x, y),
            _ if a.dtype() == b.dtype() && a.dtype().is_int() => {
                cmp(op, a.to_i64().unwrap(), b.to_i64().unwrap())
            }
            _ => panic!("mixed comparison"),
        });
    }
    match (a, b) {
        (Scalar::F32(_), Scalar::F32(_)) => {
            let (x, y) = (f32v(a), f32v(b));
            match op {
                Add => c32(x + y),
                Sub => c32(x - y),
                Mul => c32(x * y),
                Div => c32(x / y),
                Min => minmax32(false, x.to_bits(), y.to_bits()),
                Max => minmax32(true, x.to_bits(), y.to_bits()),
                _ => panic!("ill-typed"),
            }
        }
        (Scalar::F64(_), Scalar::F64(_)) => {
            let (x, y) = (f64v(a), f64v(b));
            match op {
                Add => c64(x + y),
                Sub => c64(x - y),
                Mul => c64(x * y),
                Div => c64(x / y),
                Min => minmax64(false, x.to_bits(), y.to_bits()),
                Max => minmax64(true, x.to_bits(), y.to_bits()),
                _ => panic!("ill-typed"),
            }
        }
        (Scalar::U8(x), Scalar::U8(y)) => Scalar::U8(match op {
            Add => x.wrapping_add(y),
            Sub => x.wrapping_sub(y),
            Mul => x.wrapping_mul(y),
            Div => x.checked_div(y).unwrap_or(0),
            Min => x.min(y),
            Max => x.max(y),
            _ => panic!("ill-typed"),
        }),
        (Scalar::Bool(x), Scalar::Bool(y)) => Scalar::Bool(match op {
            And | Min => x && y,
            Or | Max => x || y,
            _ => panic!("ill-typed"),
        }),
        _ if a.dtype() == b.dtype() && a.dtype().is_int() => {
            let d = a.dtype();
            let (x, y) = (a.to_i64().unwrap(), b.to_i64().unwrap());
            let v = match op {
                Add => x + y,
                Sub => x - y,
                Mul => x.wrapping_mul(y),
                // Truncating; x / 0 = 0; MIN / -1 wraps to MIN (exact in i64, then reduced).
                Div if y == 0 => 0,
                Div => x / y,
                Min => x.min(y),
                Max => x.max(y),
                _ => panic!("ill-typed"),
            };
            Scalar::wrap_int(d, v).unwrap()
        }
        _ => panic!("mixed binary"),
    }
}

fn outer_dy(offset: &[i64]) -> i64 {
    if offset.len() == 2 {
        offset[0]
    } else {
        0
    }
}

/// Evaluates stage `si` at every point; `srcs` holds the inputs then the earlier stages.
pub fn ref_stage(kernel: &Kernel, si: usize, srcs: &[Img], h: usize, w: usize) -> Img {
    let KernelBody::Stencil { stages } = &kernel.body else {
        panic!("not a stencil")
    };
    let st = &stages[si];
    let n_in = kernel.inputs.len();
    let mut data = Vec::with_capacity(h * w);
    for y in 0..h {
        for x in 0..w {
            let mut vals: Vec<Scalar> = Vec::new();
            for inst in &st.insts {
                let v = match &inst.op {
                    Op::Load {
                        source,
                        offset,
                        border,
                    } => {
                        let img = match source {
                            Source::Input(n) => &srcs[*n as usize],
                            Source::Stage(j) => &srcs[n_in + *j as usize],
                        };
                        let dx = *offset.last().unwrap();
                        let yy = remap_index(y as i64 + outer_dy(offset), h, border);
                        let xx = remap_index(x as i64 + dx, w, border);
                        match (yy, xx, border) {
                            (Some(yy), Some(xx), _) => img.at(yy, xx),
                            (_, _, Border::Constant(c)) => *c,
                            _ => unreachable!(),
                        }
                    }
                    Op::InRange(offset) => {
                        let yy = y as i64 + outer_dy(offset);
                        let xx = x as i64 + offset.last().unwrap();
                        Scalar::Bool((0..h as i64).contains(&yy) && (0..w as i64).contains(&xx))
                    }
                    Op::Const(c) => *c,
                    Op::Unary(op, a) => ref_unary(*op, vals[a.0 as usize]),
                    Op::Binary(op, a, b) => ref_binary(*op, vals[a.0 as usize], vals[b.0 as usize]),
                    Op::Select(c, a, b) => {
                        if vals[c.0 as usize] == Scalar::Bool(true) {
                            vals[a.0 as usize]
                        } else {
                            vals[b.0 as usize]
                        }
                    }
                    Op::Cast(a) => ref_cast(vals[a.0 as usize], inst.dtype),
                };
                vals.push(v);
            }
            data.push(vals[st.result.0 as usize]);
        }
    }
    Img {
        dtype: st.dtype(),
        h,
        w,
        data,
    }
}

// ---------------------------------------------------------------- a tiny row runtime

fn to_bytes(s: Scalar) -> Vec<u8> {
    s.to_le_bytes()
}

fn from_bytes(d: DType, b: &[u8]) -> Scalar {
    match d {
        DType::F32 => Scalar::F32(u32::from_le_bytes(b[..4].try_into().unwrap())),
        DType::F64 => Scalar::F64(u64::from_le_bytes(b[..8].try_into().unwrap())),
        DType::U8 => Scalar::U8(b[0]),
        DType::Bool => Scalar::Bool(b[0] != 0),
        d => Scalar::from_le_bytes(d, b).unwrap(),
    }
}

/// How the harness lays rows out in memory.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Column stride (elements) of every source row; 0 means "every source row is a single
    /// repeated element" and is only valid for images whose rows are constant.
    pub src_stride: usize,
    /// Column stride (elements) of the output row.
    pub out_stride: usize,
}

pub const DENSE: Layout = Layout {
    src_stride: 1,
    out_stride: 1,
};

/// Dense, strided sources, and a strided output: the layouts most tests run each case in.
pub const LAYOUTS: [Layout; 3] = [
    DENSE,
    Layout {
        src_stride: 2,
        out_stride: 1,
    },
    Layout {
        src_stride: 1,
        out_stride: 3,
    },
];

/// A row buffer with `stride` elements between columns (at least one element).
fn row_bytes(img: &Img, y: usize, stride: usize) -> Vec<u8> {
    let es = img.dtype.size_bytes();
    let cols = if stride == 0 { 1 } else { img.w };
    let mut v = vec![0xa5u8; (cols.max(1) * stride.max(1)) * es + 16];
    for x in 0..cols {
        v[x * stride * es..][..es].copy_from_slice(&to_bytes(img.at(y, x)));
    }
    v
}

/// Runs stage `si` of a compiled stencil kernel over every row, as the fused runtime would.
pub fn run_stage(ck: &CpuKernel, si: usize, srcs: &[Img], h: usize, w: usize, lay: Layout) -> Img {
    let CpuBody::Stencil(stages) = &ck.body else {
        panic!("not a stencil")
    };
    let stage = &stages[si];
    let n_in = ck.kernel.inputs.len();
    let KernelBody::Stencil { stages: kst } = &ck.kernel.body else {
        unreachable!()
    };
    let out_d = kst[si].dtype();
    let oes = out_d.size_bytes();
    let mut data = Vec::with_capacity(h * w);
    for y in 0..h {
        // Owned buffers for this row's pointers.
        let mut bufs: Vec<Vec<u8>> = Vec::new();
        let mut strides: Vec<i64> = Vec::new();
        for slot in &stage.slots {
            let dy = slot.outer_offset.first().copied().unwrap_or(0);
            match &slot.kind {
                SlotKind::Row { source, border } => {
                    let img = match source {
                        Source::Input(n) => &srcs[*n as usize],
                        Source::Stage(j) => &srcs[n_in + *j as usize],
                    };
                    match remap_index(y as i64 + dy, h, border) {
                        Some(yy) => {
                            bufs.push(row_bytes(img, yy, lay.src_stride));
                            strides.push(lay.src_stride as i64);
                        }
                        None => {
                            let Border::Constant(c) = border else {
                                unreachable!()
                            };
                            let mut b = to_bytes(*c);
                            b.resize(16, 0xa5);
                            bufs.push(b);
                            strides.push(0);
                        }
                    }
                }
                SlotKind::OuterInRange => {
                    let yy = y as i64 + dy;
                    bufs.push(vec![(0..h as i64).contains(&yy) as u8]);
                    strides.push(0);
                }
            }
        }
        let ptrs: Vec<*const u8> = bufs.iter().map(|b| b.as_ptr()).collect();
        let os = lay.out_stride.max(1);
        let mut out = vec![0x5au8; w * os * oes + 16];
        // SAFETY: one pointer and one stride per slot, in slot order; every row buffer holds
        // `w` elements at its stride (or one element for stride 0); `out` holds `w` elements
        // at `out_stride`; `width >= 1`. The kernel `ck` outlives the call.
        unsafe {
            (stage.func)(
                ptrs.as_ptr(),
                strides.as_ptr(),
                out.as_mut_ptr(),
                lay.out_stride as i64,
                w as i64,
            )
        };
        for x in 0..w {
            data.push(from_bytes(out_d, &out[x * lay.out_stride * oes..]));
        }
    }
    Img {
        dtype: out_d,
        h,
        w,
        data,
    }
}

/// Runs all stages, returns the last stage's image (earlier stages materialised in full).
pub fn run_all(ck: &CpuKernel, inputs: &[Img], h: usize, w: usize, lay: Layout) -> Img {
    let KernelBody::Stencil { stages } = &ck.kernel.body else {
        panic!()
    };
    let mut srcs = inputs.to_vec();
    for si in 0..stages.len() {
        let img = run_stage(ck, si, &srcs, h, w, lay);
        srcs.push(img);
    }
    srcs.pop().unwrap()
}

/// Reference for all stages.
pub fn ref_all(k: &Kernel, inputs: &[Img], h: usize, w: usize) -> Img {
    let KernelBody::Stencil { stages } = &k.body else {
        panic!()
    };
    let mut srcs = inputs.to_vec();
    for si in 0..stages.len() {
        let img = ref_stage(k, si, &srcs, h, w);
        srcs.push(img);
    }
    srcs.pop().unwrap()
}

/// First differing point, as a readable message.
pub fn diff(got: &Img, want: &Img) -> Option<String> {
    for (i, (g, w)) in got.data.iter().zip(&want.data).enumerate() {
        if g != w {
            return Some(format!(
                "at y={} x={}: got {g} want {w}",
                i / want.w,
                i % want.w
            ));
        }
    }
    None
}

// ---------------------------------------------------------------- kernel building

/// Builds a single stage program.
#[derive(Default)]
pub struct StageB {
    pub insts: Vec<Inst>,
}

impl StageB {
    pub fn push(&mut self, op: Op, dtype: DType) -> ValueId {
        self.insts.push(Inst { op, dtype });
        ValueId(self.insts.len() as u32 - 1)
    }
    pub fn load(&mut self, src: Source, d: DType, offset: &[i64], border: Border) -> ValueId {
        self.push(
            Op::Load {
                source: src,
                offset: offset.to_vec(),
                border,
            },
            d,
        )
    }
    pub fn dtype(&self, v: ValueId) -> DType {
        self.insts[v.0 as usize].dtype
    }
    pub fn bin(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        let d = if op.is_comparison() {
            DType::Bool
        } else {
            self.dtype(a)
        };
        self.push(Op::Binary(op, a, b), d)
    }
    pub fn un(&mut self, op: UnaryOp, a: ValueId) -> ValueId {
        let d = match op {
            UnaryOp::IsNan | UnaryOp::IsFinite | UnaryOp::Not => DType::Bool,
            _ => self.dtype(a),
        };
        self.push(Op::Unary(op, a), d)
    }
    pub fn finish(self, result: ValueId) -> Stage {
        Stage {
            insts: self.insts,
            result,
        }
    }
}

/// A single-stage stencil kernel.
pub fn stencil(rank: usize, inputs: &[DType], stage: Stage) -> Kernel {
    Kernel {
        rank,
        inputs: inputs.to_vec(),
        output: stage.dtype(),
        body: KernelBody::Stencil {
            stages: vec![stage],
        },
    }
}
