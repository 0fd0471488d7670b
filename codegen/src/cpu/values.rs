//! kiln's scalar semantics in CLIF, for one lane or four.
//!
//! Register representation: f32 → `F32` / `F32X4`, f64 → `F64`, u8 → `I8`, bool → `I8`
//! holding 0 or 1 (scalar) or an `I32X4` lane mask of all-ones / all-zeros (vector). Vectors
//! only ever hold f32 and bool values. The other integer dtypes (i8, u16, i16, i32, u32)
//! are scalar only, in `I8` / `I16` / `I32` registers, with wrapping arithmetic and the
//! signed or unsigned order of their dtype (see [`int_math`]).
//!
//! Float min/max work on integer total-order keys plus a NaN mask. A value produced by a
//! min/max stays in that *key domain* ([`Val::key`]) while it only feeds more min/max, and
//! is decoded once when something else needs its float bits, so a comparator costs one
//! integer min, one integer max and one `bor` of the NaN masks.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::{
    types, Block, ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value,
};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::semantics::{CANONICAL_NAN_F32, CANONICAL_NAN_F64};
use kiln_ir::{BinaryOp, DType, Scalar, UnaryOp};

use super::int_math;
use crate::{CodegenError, Fault};

mod math;

/// A stage value in registers, in plain form, key form, or both (each computed on demand
/// and cached).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Val {
    /// The value's dtype.
    pub(crate) dtype: DType,
    plain: Option<Value>,
    /// Total-order key (floats only).
    key: Option<Value>,
    /// NaN mask (floats only). A value in key form without a mask is an *unmasked* min/max
    /// result: its NaN-ness is ignored because a dominating guard discards it whenever any
    /// of its inputs is NaN (see `nanguard`).
    nan: Option<Value>,
    /// For a bool from a finiteness test of an f32: `(a, neg)` with `a` the f32's bits with
    /// the sign cleared (`I32` / `I32X4`, so `0 <= a < 2^31`); the bool is `a < +Inf bits`
    /// (finite), or `a >= +Inf bits` when `neg`. ORs of non-finite tests (and ANDs of finite
    /// tests) combine as one integer `smax`, compared once when the plain bool is needed.
    fin: Option<(Value, bool)>,
    /// A float min/max tree in *compare form* (see [`Tree`]); its NaN mask is `nan`.
    tree: Option<Tree>,
}

/// A float min or max over a tree of operands, computed with compares instead of order
/// keys. Every min step picks in both operand orders and ORs the two picks' bits:
/// `m = (a < b ? a : b) | (b < a ? b : a)` (two `minps` and a `por`). Where the operands
/// differ both picks agree; for -0 and +0 the picks are one of each and the OR gives -0,
/// kiln's min. So `m` is exact at every step for operands without NaN.
///
/// A max tree is the same min tree over negated operands, `max(a, b) = -min(-a, -b)`
/// (exact: negation only flips the sign bit, and `-min(+0, -0) = +0` is kiln's max of the
/// zeros): its `m` holds the *negated* maximum, each leaf costs one sign flip and the
/// plain value one more.
///
/// NaN: when either operand is NaN one of the picks is that NaN, and the OR keeps the
/// exponent all ones and the mantissa non-zero, so `m` itself is a NaN (any payload) and no
/// mask is kept. The plain value then only needs the canonical NaN.
#[derive(Clone, Copy, Debug)]
struct Tree {
    /// A max tree, `m` negated (`false`: a min tree).
    max: bool,
    /// The tree's value so far, negated for a max (`F32`/`F32X4`/`F64`): exact, except
    /// NaN as above.
    m: Value,
}

impl Val {
    /// A value in its plain register form.
    pub(crate) fn plain(dtype: DType, v: Value) -> Val {
        Val {
            dtype,
            plain: Some(v),
            key: None,
            nan: None,
            fin: None,
            tree: None,
        }
    }
}

fn bad(msg: impl Into<String>) -> CodegenError {
    CodegenError::Lower(msg.into())
}

/// Emits value computations into a function, one lane (`vec == false`) or four.
pub(crate) struct Em<'a, 'b> {
    /// The function being built.
    pub(crate) b: &'a mut FunctionBuilder<'b>,
    /// Four f32/bool lanes per value instead of one.
    pub(crate) vec: bool,
    /// Planted miscompilation, if any.
    pub(crate) fault: Option<Fault>,
    /// Leave NaN results of float arithmetic as the hardware gives them (the instruction
    /// being emitted only feeds users whose results do not depend on a NaN's bits, see
    /// `rawnan::raw_nan`).
    pub(crate) raw_nan: bool,
    /// The float arithmetic being emitted gives a NaN or a value with a clear sign bit
    /// (`+0..=+inf`, see `signclear::sign_clear`): its NaN is canonicalised with one unsigned
    /// minimum of the bits on the vector path.
    pub(crate) sign_clear: bool,
    /// Plain picks of f32 vectors are integer minima/maxima of the bits (`pminsd`/`pmaxsd`):
    /// exact when every value picked from is finite with a clear sign bit (the inputs
    /// checked so, see `clean::nonneg_kernel`), whose bits order like their values.
    pub(crate) int_picks: bool,
    /// Integer splats already built in a block (`int_splat`): a constant is built once per
    /// block and reused there (the block's earlier instructions dominate its later ones), so
    /// a stage's many sign flips and NaN canonicalisations do not each rebuild their mask.
    splats: Vec<(Block, Type, i64, Value)>,
}

/// Memory flags for every load and store: no alignment assumption, no trap expected.
pub(crate) fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// A value as a block argument.
pub(crate) fn arg(v: Value) -> cranelift_codegen::ir::BlockArg {
    cranelift_codegen::ir::BlockArg::Value(v)
}

impl<'a, 'b> Em<'a, 'b> {
    /// An emitter into `b`: one lane (`vec == false`) or four, plain picks as integer picks
    /// when `int_picks`; `raw_nan` and `sign_clear` start off.
    pub(crate) fn new(
        b: &'a mut FunctionBuilder<'b>,
        vec: bool,
        fault: Option<Fault>,
        int_picks: bool,
    ) -> Em<'a, 'b> {
        Em {
            b,
            vec,
            fault,
            raw_nan: false,
            sign_clear: false,
            int_picks,
            splats: Vec::new(),
        }
    }

    /// Register type of a value of dtype `d`.
    pub(crate) fn ty(&self, d: DType) -> Type {
        match (self.vec, d) {
            (false, DType::F32) => types::F32,
            (false, DType::F64) => types::F64,
            (false, DType::U8 | DType::Bool | DType::I8) => types::I8,
            (false, DType::U16 | DType::I16) => types::I16,
            (false, DType::I32 | DType::U32) => types::I32,
            (true, DType::F32) => types::F32X4,
            (true, DType::Bool) => types::I32X4,
            (true, DType::F64) => types::F64X2,
            (true, DType::U8 | DType::I8) => types::I8X16,
            (true, DType::U16 | DType::I16) => types::I16X8,
            (true, DType::I32 | DType::U32) => types::I32X4,
        }
    }

    fn need_scalar_or_f32_bool(&self, d: DType) -> Result<(), CodegenError> {
        if self.vec && !matches!(d, DType::F32 | DType::Bool) {
            return Err(bad(format!("{d} values cannot be vectorised")));
        }
        Ok(())
    }

    fn key_ty(&self, d: DType) -> Type {
        match (self.vec, d) {
            (false, DType::F64) => types::I64,
            (false, _) => types::I32,
            (true, _) => types::I32X4,
        }
    }

    fn int_splat(&mut self, ty: Type, v: i64) -> Value {
        if !ty.is_vector() {
            return self.b.ins().iconst(ty, v);
        }
        let block = self.b.current_block();
        if let Some(block) = block {
            let hit = self
                .splats
                .iter()
                .find(|e| (e.0, e.1, e.2) == (block, ty, v));
            if let Some(&(_, _, _, value)) = hit {
                return value;
            }
        }
        let s = self.b.ins().iconst(ty.lane_type(), v);
        let value = self.b.ins().splat(ty, s);
        if let Some(block) = block {
            self.splats.push((block, ty, v, value));
        }
        value
    }

    /// `-v` for a float value (its sign bit flipped), as an integer XOR with a constant:
    /// Cranelift's vector `fneg` rebuilds the sign mask at every use (three instructions).
    fn flip_sign(&mut self, d: DType, v: Value) -> Value {
        if !self.vec {
            return self.b.ins().fneg(v);
        }
        let kt = self.key_ty(d);
        let sign = if d == DType::F64 {
            i64::MIN
        } else {
            i32::MIN as i64
        };
        let bits = self.b.ins().bitcast(kt, MemFlagsData::new(), v);
        let m = self.int_splat(kt, sign);
        let r = self.b.ins().bxor(bits, m);
        let t = self.ty(d);
        self.b.ins().bitcast(t, MemFlagsData::new(), r)
    }

    fn float_const(&mut self, d: DType, bits: u64) -> Value {
        match d {
            DType::F64 => self.b.ins().f64const(Ieee64::with_bits(bits)),
            _ => {
                let c = self.b.ins().f32const(Ieee32::with_bits(bits as u32));
                if self.vec {
                    self.b.ins().splat(types::F32X4, c)
                } else {
                    c
                }
            }
        }
    }

    fn canon_bits(d: DType) -> u64 {
        if d == DType::F64 {
            CANONICAL_NAN_F64
        } else {
            CANONICAL_NAN_F32 as u64
        }
    }

    /// A constant.
    pub(crate) fn constant(&mut self, s: Scalar) -> Result<Val, CodegenError> {
        self.need_scalar_or_f32_bool(s.dtype())?;
        let v = match s {
            Scalar::F32(bits) => self.float_const(DType::F32, bits as u64),
            Scalar::F64(bits) => self.float_const(DType::F64, bits),
            Scalar::U8(v) => self.b.ins().iconst(types::I8, v as i64),
            Scalar::Bool(v) => {
                if self.vec {
                    self.int_splat(types::I32X4, -(v as i64))
                } else {
                    self.b.ins().iconst(types::I8, v as i64)
                }
            }
            int => {
                let t = self.ty(int.dtype());
                let v = int.to_i64().expect("integer scalar");
                // iconst takes the bits zero-extended from the type's width.
                let bits = (v as u64) & (u64::MAX >> (64 - t.bits()));
                self.b.ins().iconst(t, bits as i64)
            }
        };
        Ok(Val::plain(s.dtype(), v))
    }

    /// A bool value from a scalar `I8` holding 0 or 1 (broadcast to a lane mask in vector
    /// mode).
    pub(crate) fn bool_from_i8(&mut self, v: Value) -> Value {
        if self.vec {
            let w = self.b.ins().uextend(types::I32, v);
            let m = self.b.ins().ineg(w);
            self.b.ins().splat(types::I32X4, m)
        } else {
            v
        }
    }

    /// `x < y ? x : y` (`max == false`) or `y < x ? x : y`, as one `minps` / `maxps`: the
    /// select stays in the operands' own type, the form Cranelift matches. Exact for kiln's
    /// min/max only where equal operands have equal bits (no -0 against +0, no NaN).
    fn pick(&mut self, max: bool, x: Value, y: Value) -> Value {
        let c = if max {
            self.b.ins().fcmp(FloatCC::LessThan, y, x)
        } else {
            self.b.ins().fcmp(FloatCC::LessThan, x, y)
        };
        if !self.vec {
            return self.b.ins().select(c, x, y);
        }
        let ty = self.b.func.dfg.value_type(x);
        let c = if ty == self.b.func.dfg.value_type(c) {
            c
        } else {
            self.b.ins().bitcast(ty, MemFlagsData::new(), c)
        };
        self.b.ins().bitselect(c, x, y)
    }

    /// `c ? a : b` per lane (`c` a lane mask on vectors).
    pub(crate) fn sel(&mut self, c: Value, a: Value, b: Value) -> Value {
        if self.vec {
            // Select in the mask's own type: Cranelift lowers a `bitselect` whose mask is a
            // lane compare to one blend, but only when it sees the compare (no bitcast in
            // between); a bitcast of the operands costs nothing.
            let ty = self.b.func.dfg.value_type(a);
            let cty = self.b.func.dfg.value_type(c);
            if ty == cty {
                return self.b.ins().bitselect(c, a, b);
            }
            let a = self.b.ins().bitcast(cty, MemFlagsData::new(), a);
            let b = self.b.ins().bitcast(cty, MemFlagsData::new(), b);
            let r = self.b.ins().bitselect(c, a, b);
            self.b.ins().bitcast(ty, MemFlagsData::new(), r)
        } else {
            self.b.ins().select(c, a, b)
        }
    }

    /// Replaces a NaN `r` by the canonical NaN.
    fn canon(&mut self, d: DType, r: Value) -> Value {
        if self.raw_nan {
            return r;
        }
        if self.sign_clear && self.vec && d == DType::F32 {
            // Hardware arithmetic gives quiet NaNs: with the sign clear their bits are at
            // least the canonical NaN's 0x7fc00000, with it set above 2^31, and every value
            // with a clear sign is at most +inf's 0x7f800000. So the unsigned minimum with
            // the canonical NaN's bits (one `pminud`) is the canonicalisation.
            let kt = self.key_ty(d);
            let bits = self.b.ins().bitcast(kt, MemFlagsData::new(), r);
            let canon = self.int_splat(kt, Self::canon_bits(d) as i64);
            let m = self.b.ins().umin(bits, canon);
            let t = self.ty(d);
            return self.b.ins().bitcast(t, MemFlagsData::new(), m);
        }
        let n = self.b.ins().fcmp(FloatCC::Unordered, r, r);
        let c = self.float_const(d, Self::canon_bits(d));
        self.sel(n, c, r)
    }

    /// The plain register form of `v`.
    pub(crate) fn plain(&mut self, v: &mut Val) -> Value {
        if let Some(p) = v.plain {
            return p;
        }
        if let Some((a, neg)) = v.fin {
            // `a` is non-negative, so signed compares (one `pcmpgtd`) are exact.
            let kt = self.key_ty(DType::F32);
            let inf = f32::INFINITY.to_bits() as i64;
            let p = if neg {
                let lim = self.int_splat(kt, inf - 1);
                self.b.ins().icmp(IntCC::SignedGreaterThan, a, lim)
            } else {
                let lim = self.int_splat(kt, inf);
                self.b.ins().icmp(IntCC::SignedGreaterThan, lim, a)
            };
            v.plain = Some(p);
            return p;
        }
        let d = v.dtype;
        if let Some(t) = v.tree {
            let p = self.tree_plain(d, t);
            v.plain = Some(p);
            return p;
        }
        let k = match v.key {
            Some(k) => k,
            // Unreachable by construction (a value has a plain, key or finiteness form);
            // a zero keeps code generation total.
            None => {
                let t = self.ty(d);
                let z = self.int_splat(self.key_ty(d), 0);
                return self.b.ins().bitcast(t, MemFlagsData::new(), z);
            }
        };
        let kt = self.key_ty(d);
        let bits = self.flip(d, k);
        let bits = match v.nan {
            Some(n) => {
                let cb = Self::canon_bits(d) as i64;
                let canon = self.int_splat(kt, cb);
                if self.vec {
                    self.b.ins().bitselect(n, canon, bits)
                } else {
                    self.b.ins().select(n, canon, bits)
                }
            }
            None => bits,
        };
        let t = self.ty(d);
        let p = self.b.ins().bitcast(t, MemFlagsData::new(), bits);
        v.plain = Some(p);
        p
    }

    /// The value a stage stores as its result: the plain form, except that with `raw` (see
    /// `rawresult::raw_result`) a min/max tree's value is stored with its NaN not canonicalised.
    pub(crate) fn result_value(&mut self, v: &mut Val, raw: bool) -> Value {
        match v.tree {
            Some(t) if raw && v.plain.is_none() => {
                if t.max {
                    self.flip_sign(v.dtype, t.m)
                } else {
                    t.m
                }
            }
            _ => self.plain(v),
        }
    }

    /// `k ^ ((k >>s (w-1)) >>u 1)`: the order-key involution.
    fn flip(&mut self, d: DType, k: Value) -> Value {
        let sh = if d == DType::F64 { 63 } else { 31 };
        let s = self.b.ins().sshr_imm_u(k, sh);
        let s = self.b.ins().ushr_imm_u(s, 1);
        self.b.ins().bxor(k, s)
    }

    /// The total-order key of a float value.
    fn key(&mut self, v: &mut Val) -> Value {
        if let Some(k) = v.key {
            return k;
        }
        let d = v.dtype;
        let p = self.plain(v);
        let kt = self.key_ty(d);
        let bits = self.b.ins().bitcast(kt, MemFlagsData::new(), p);
        let k = self.flip(d, bits);
        v.key = Some(k);
        k
    }

    /// The NaN mask of a float value.
    fn nan(&mut self, v: &mut Val) -> Value {
        if let Some(n) = v.nan {
            return n;
        }
        // A tree's value (negated or not) is a NaN exactly where the plain value is.
        let p = match v.tree {
            Some(t) => t.m,
            None => self.plain(v),
        };
        let n = self.b.ins().fcmp(FloatCC::Unordered, p, p);
        v.nan = Some(n);
        n
    }

    /// `c && x` for `x` a non-finite test in integer form: stays in that form (the integer
    /// is zeroed where `c` is false, and zero is finite). `None` when `x` is not in that form.
    pub(crate) fn fin_gate(&mut self, c: &mut Val, x: &Val) -> Option<Val> {
        let (a, true) = x.fin? else {
            return None;
        };
        let pc = self.plain(c);
        let g = if self.vec {
            self.b.ins().band(pc, a)
        } else {
            let z = self.b.ins().iconst(types::I32, 0);
            self.b.ins().select(pc, a, z)
        };
        let mut r = Val::plain(DType::Bool, g);
        r.plain = None;
        r.fin = Some((g, true));
        Some(r)
    }

    /// The f32's bits with the sign cleared, as an integer (`I32` / `I32X4`).
    fn abs_bits(&mut self, p: Value) -> Value {
        let kt = self.key_ty(DType::F32);
        let bits = self.b.ins().bitcast(kt, MemFlagsData::new(), p);
        let m = self.int_splat(kt, 0x7fff_ffff);
        self.b.ins().band(bits, m)
    }

    /// kiln's float min (`max == false`) or max. With `masked == false` the NaN mask is not
    /// propagated (only for values under a dominating NaN guard, see `nanguard`).
    /// With `tree` the result is in compare form (see [`Tree`]).
    pub(crate) fn float_minmax(
        &mut self,
        max: bool,
        a: &mut Val,
        b: &mut Val,
        masked: bool,
        tree: bool,
    ) -> Val {
        let d = a.dtype;
        if self.fault == Some(Fault::FminSemantics) {
            let pa = self.plain(a);
            let pb = self.plain(b);
            let r = if max {
                self.b.ins().fmax(pa, pb)
            } else {
                self.b.ins().fmin(pa, pb)
            };
            return Val::plain(d, r);
        }
        if tree {
            // Both kinds of tree carry NaN in the value (see [`Tree`]): no mask.
            return self.compare_tree(max, a, b);
        }
        let n = if !masked {
            None
        } else if self.fault == Some(Fault::DropNanMask) {
            let t = self.key_ty(d);
            let t = if self.vec { t } else { types::I8 };
            Some(self.int_splat(t, 0))
        } else {
            Some(self.nan_either(a, b))
        };
        let ka = self.key(a);
        let kb = self.key(b);
        let k = if max {
            self.b.ins().smax(ka, kb)
        } else {
            self.b.ins().smin(ka, kb)
        };
        Val {
            dtype: d,
            plain: None,
            key: Some(k),
            nan: n,
            fin: None,
            tree: None,
        }
    }

    /// A min/max tree step (see [`Tree`]): a min of the operands' tree values. Under the
    /// planted [`Fault::DropNanMask`] it keeps only its first pick, which loses a NaN (and
    /// -0) in the first operand.
    fn compare_tree(&mut self, max: bool, a: &mut Val, b: &mut Val) -> Val {
        let d = a.dtype;
        let pa = self.tree_value(max, a);
        let pb = self.tree_value(max, b);
        let m1 = self.pick(false, pa, pb);
        let m2 = self.pick(false, pb, pa);
        let m = if self.fault == Some(Fault::DropNanMask) {
            m1
        } else {
            // The OR of the two picks' bits, on the float type itself (`orps`): the same
            // bits as an integer OR, without the three bitcasts around it (15x15 opening's
            // first compile 3-11% faster at one thread, 1-5% at two).
            self.b.ins().bor(m1, m2)
        };
        Val {
            dtype: d,
            plain: None,
            key: None,
            nan: None,
            fin: None,
            tree: Some(Tree { max, m }),
        }
    }

    /// A min (`max == false`) or max tree leaf from plain value `p`: its tree value (negated
    /// for a max) is computed here once, for every tree step that reads the leaf.
    pub(crate) fn tree_leaf(&mut self, max: bool, d: DType, p: Value) -> Val {
        let m = if max { self.flip_sign(d, p) } else { p };
        Val {
            dtype: d,
            plain: Some(p),
            key: None,
            nan: None,
            fin: None,
            tree: Some(Tree { max, m }),
        }
    }

    /// kiln's min (`max == false`) or max of two values known to be clean (no NaN, no -0,
    /// see `clean`): one plain pick, exact because equal operands then have equal bits.
    pub(crate) fn plain_pick(&mut self, max: bool, a: &mut Val, b: &mut Val) -> Val {
        let d = a.dtype;
        let pa = self.plain(a);
        let pb = self.plain(b);
        if self.int_picks && self.vec && d == DType::F32 {
            // Integer minima and maxima run on more execution ports than float ones:
            // measured on the 2-core EPYC VM, 0.075 against 0.112 ns per operation.
            let kt = self.key_ty(d);
            let ia = self.b.ins().bitcast(kt, MemFlagsData::new(), pa);
            let ib = self.b.ins().bitcast(kt, MemFlagsData::new(), pb);
            let r = if max {
                self.b.ins().smax(ia, ib)
            } else {
                self.b.ins().smin(ia, ib)
            };
            let t = self.ty(d);
            return Val::plain(d, self.b.ins().bitcast(t, MemFlagsData::new(), r));
        }
        Val::plain(d, self.pick(max, pa, pb))
    }

    /// A min/max tree operand: the value of a tree of the same kind, else the plain value
    /// (negated for a max tree).
    fn tree_value(&mut self, max: bool, v: &mut Val) -> Value {
        match v.tree {
            Some(t) if t.max == max => t.m,
            _ => {
                let p = self.plain(v);
                if max {
                    self.flip_sign(v.dtype, p)
                } else {
                    p
                }
            }
        }
    }

    /// `is_nan(a) | is_nan(b)`: one unordered compare of the two when neither mask is known
    /// yet (both plain values), else the OR of the masks.
    fn nan_either(&mut self, a: &mut Val, b: &mut Val) -> Value {
        if a.nan.is_none() && b.nan.is_none() {
            if let (Some(pa), Some(pb)) = (a.plain, b.plain) {
                return self.b.ins().fcmp(FloatCC::Unordered, pa, pb);
            }
        }
        let na = self.nan(a);
        let nb = self.nan(b);
        self.b.ins().bor(na, nb)
    }

    /// The plain value of a min/max tree: its value (negated back for a max) with a NaN
    /// made canonical.
    fn tree_plain(&mut self, d: DType, t: Tree) -> Value {
        let v = if t.max { self.flip_sign(d, t.m) } else { t.m };
        let n = self.b.ins().fcmp(FloatCC::Unordered, t.m, t.m);
        let c = self.float_const(d, Self::canon_bits(d));
        self.sel(n, c, v)
    }

    /// Lanes `k..k+4` of the eight lanes `lo ++ hi` (vector mode, `1 <= k <= 3`): one
    /// `palignr` per register form. Used to get a value at a column shift from the same
    /// value computed at two neighbouring vectors (see `shift`). When both values hold the
    /// same forms (always, for two vectors of one instruction emitted by the same code),
    /// each form is shifted and the result has those forms; otherwise the plain forms are.
    pub(crate) fn shift_lanes(&mut self, lo: &mut Val, hi: &mut Val, k: u8) -> Val {
        let same = lo.plain.is_some() == hi.plain.is_some()
            && lo.key.is_some() == hi.key.is_some()
            && lo.nan.is_some() == hi.nan.is_some()
            && lo.fin.map(|f| f.1) == hi.fin.map(|f| f.1)
            && lo.tree.map(|t| t.max) == hi.tree.map(|t| t.max);
        if !same {
            let (pl, ph) = (self.plain(lo), self.plain(hi));
            let p = self.lane_shift(pl, ph, k);
            return Val::plain(lo.dtype, p);
        }
        let mut sh = |a: Option<Value>, b: Option<Value>| match (a, b) {
            (Some(a), Some(b)) => Some(self.lane_shift(a, b, k)),
            _ => None,
        };
        Val {
            dtype: lo.dtype,
            plain: sh(lo.plain, hi.plain),
            key: sh(lo.key, hi.key),
            nan: sh(lo.nan, hi.nan),
            fin: match (lo.fin, hi.fin) {
                (Some((a, neg)), Some((b, _))) => Some((sh(Some(a), Some(b)).unwrap_or(a), neg)),
                _ => None,
            },
            tree: match (lo.tree, hi.tree) {
                (Some(a), Some(b)) => Some(Tree {
                    max: a.max,
                    m: sh(Some(a.m), Some(b.m)).unwrap_or(a.m),
                }),
                _ => None,
            },
        }
    }

    /// A vector whose lane `i` is lane `picks[i].1` of `srcs[picks[i].0]` (32-bit lanes, all
    /// sources of one type): one shuffle for up to two sources, one more per further source.
    pub(crate) fn pick_lanes(&mut self, srcs: &[Value], picks: [(usize, u8); 4]) -> Value {
        let ty = self.b.func.dfg.value_type(srcs[0]);
        let flags = MemFlagsData::new().with_endianness(Endianness::Little);
        let bytes: Vec<Value> = srcs
            .iter()
            .map(|&s| self.b.ins().bitcast(types::I8X16, flags, s))
            .collect();
        let shuffle = |b: &mut FunctionBuilder, x: Value, y: Value, lane: [u8; 4]| {
            let mask: Vec<u8> = (0..16).map(|j| 4 * lane[j / 4] + (j % 4) as u8).collect();
            let imm = b.func.dfg.immediates.push(ConstantData::from(mask));
            b.ins().shuffle(x, y, imm)
        };
        // Lanes `0..4` name the first operand's lanes, `4..8` the second's.
        let own = |i: usize| i as u8;
        let first: [u8; 4] = std::array::from_fn(|i| match picks[i] {
            (0, l) => l,
            (1, l) => 4 + l,
            _ => own(i),
        });
        let second = bytes.get(1).copied().unwrap_or(bytes[0]);
        let mut acc = shuffle(self.b, bytes[0], second, first);
        for (s, &src) in bytes.iter().enumerate().skip(2) {
            let lanes: [u8; 4] = std::array::from_fn(|i| match picks[i] {
                (t, l) if t == s => 4 + l,
                _ => own(i),
            });
            acc = shuffle(self.b, acc, src, lanes);
        }
        self.b.ins().bitcast(ty, flags, acc)
    }

    /// Lanes `k..k+4` of the 32-bit lanes of `a ++ b` (`palignr`), in `a`'s type.
    fn lane_shift(&mut self, a: Value, b: Value, k: u8) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let bytes_ty = types::I8X16;
        let ab = self.b.ins().bitcast(
            bytes_ty,
            MemFlagsData::new().with_endianness(Endianness::Little),
            a,
        );
        let bb = self.b.ins().bitcast(
            bytes_ty,
            MemFlagsData::new().with_endianness(Endianness::Little),
            b,
        );
        let mask: Vec<u8> = (0..16).map(|j| 4 * k + j).collect();
        let imm = self.b.func.dfg.immediates.push(ConstantData::from(mask));
        let r = self.b.ins().shuffle(ab, bb, imm);
        self.b.ins().bitcast(
            ty,
            MemFlagsData::new().with_endianness(Endianness::Little),
            r,
        )
    }

    /// Elementwise unary op.
    pub(crate) fn unary(&mut self, op: UnaryOp, x: &mut Val) -> Result<Val, CodegenError> {
        let d = x.dtype;
        self.need_scalar_or_f32_bool(d)?;
        match (op, d) {
            (UnaryOp::IsFinite, DType::F32) => {
                let p = self.plain(x);
                let a = self.abs_bits(p);
                let mut r = Val::plain(DType::Bool, a);
                r.plain = None;
                r.fin = Some((a, false));
                return Ok(r);
            }
            (UnaryOp::Not, DType::Bool) => {
                if let Some((a, neg)) = x.fin {
                    let mut r = Val::plain(DType::Bool, a);
                    r.plain = None;
                    r.fin = Some((a, !neg));
                    return Ok(r);
                }
            }
            _ => {}
        }
        let p = self.plain(x);
        let r = match (op, d) {
            (UnaryOp::Neg, DType::F32 | DType::F64) => {
                let r = self.flip_sign(d, p);
                Val::plain(d, self.canon(d, r))
            }
            (UnaryOp::Neg, DType::U8) => Val::plain(d, self.b.ins().ineg(p)),
            (UnaryOp::Neg | UnaryOp::Abs, _) if d.is_int() => {
                Val::plain(d, int_math::unary(self, op, d, p))
            }
            (UnaryOp::Abs, DType::F32 | DType::F64) => {
                // A bit operation: a signalling NaN stays signalling, so not the unsigned
                // minimum (see `canon`).
                let r = self.b.ins().fabs(p);
                self.sign_clear = false;
                Val::plain(d, self.canon(d, r))
            }
            (UnaryOp::Abs, DType::U8) => *x,
            (UnaryOp::Sqrt, DType::F32 | DType::F64) => {
                let r = self.b.ins().sqrt(p);
                Val::plain(d, self.canon(d, r))
            }
            (UnaryOp::Exp, DType::F32 | DType::F64) => Val::plain(d, self.exp(d, p)),
            (UnaryOp::Log, DType::F32 | DType::F64) => Val::plain(d, self.log(d, p)),
            (UnaryOp::IsNan, DType::F32 | DType::F64) => {
                Val::plain(DType::Bool, self.b.ins().fcmp(FloatCC::Unordered, p, p))
            }
            (UnaryOp::IsFinite, DType::F32 | DType::F64) => {
                let a = self.b.ins().fabs(p);
                let inf = self.float_const(
                    d,
                    if d == DType::F64 {
                        f64::INFINITY.to_bits()
                    } else {
                        f32::INFINITY.to_bits() as u64
                    },
                );
                Val::plain(DType::Bool, self.b.ins().fcmp(FloatCC::LessThan, a, inf))
            }
            (UnaryOp::Not, DType::Bool) => {
                let r = if self.vec {
                    self.b.ins().bnot(p)
                } else {
                    self.b.ins().bxor_imm_u(p, 1)
                };
                Val::plain(d, r)
            }
            _ => return Err(bad(format!("unary {op:?} does not accept {d}"))),
        };
        Ok(r)
    }

    /// Elementwise binary op; `swap` exchanges min and max (the planted comparator fault).
    pub(crate) fn binary(
        &mut self,
        op: BinaryOp,
        a: &mut Val,
        b: &mut Val,
        swap: bool,
        masked: bool,
        tree: bool,
    ) -> Result<Val, CodegenError> {
        let d = a.dtype;
        if b.dtype != d {
            return Err(bad(format!("binary {op:?} on {d} and {}", b.dtype)));
        }
        self.need_scalar_or_f32_bool(d)?;
        let op = match (swap, op) {
            (true, BinaryOp::Min) => BinaryOp::Max,
            (true, BinaryOp::Max) => BinaryOp::Min,
            (_, op) => op,
        };
        let float = d.is_float();
        if float && matches!(op, BinaryOp::Min | BinaryOp::Max) {
            return Ok(self.float_minmax(op == BinaryOp::Max, a, b, masked, tree));
        }
        // OR of non-finite tests / AND of finite tests: one integer max.
        if let (Some((fa, na)), Some((fb, nb))) = (a.fin, b.fin) {
            let ok = match op {
                BinaryOp::Or | BinaryOp::Max => na && nb,
                BinaryOp::And | BinaryOp::Min => !na && !nb,
                _ => false,
            };
            if ok {
                let m = self.b.ins().smax(fa, fb);
                let mut r = Val::plain(DType::Bool, m);
                r.plain = None;
                r.fin = Some((m, na));
                return Ok(r);
            }
        }
        let pa = self.plain(a);
        let pb = self.plain(b);
        if op.is_comparison() {
            let r = if float {
                let cc = match op {
                    BinaryOp::Lt => FloatCC::LessThan,
                    BinaryOp::Le => FloatCC::LessThanOrEqual,
                    BinaryOp::Gt => FloatCC::GreaterThan,
                    BinaryOp::Ge => FloatCC::GreaterThanOrEqual,
                    BinaryOp::Eq => FloatCC::Equal,
                    _ => FloatCC::NotEqual,
                };
                self.b.ins().fcmp(cc, pa, pb)
            } else if d.is_signed_int() {
                let cc = match op {
                    BinaryOp::Lt => IntCC::SignedLessThan,
                    BinaryOp::Le => IntCC::SignedLessThanOrEqual,
                    BinaryOp::Gt => IntCC::SignedGreaterThan,
                    BinaryOp::Ge => IntCC::SignedGreaterThanOrEqual,
                    BinaryOp::Eq => IntCC::Equal,
                    _ => IntCC::NotEqual,
                };
                self.b.ins().icmp(cc, pa, pb)
            } else {
                let cc = match op {
                    BinaryOp::Lt => IntCC::UnsignedLessThan,
                    BinaryOp::Le => IntCC::UnsignedLessThanOrEqual,
                    BinaryOp::Gt => IntCC::UnsignedGreaterThan,
                    BinaryOp::Ge => IntCC::UnsignedGreaterThanOrEqual,
                    BinaryOp::Eq => IntCC::Equal,
                    _ => IntCC::NotEqual,
                };
                self.b.ins().icmp(cc, pa, pb)
            };
            return Ok(Val::plain(DType::Bool, r));
        }
        let r = match (op, d) {
            (BinaryOp::Add, DType::F32 | DType::F64) => {
                let r = self.b.ins().fadd(pa, pb);
                self.canon(d, r)
            }
            (BinaryOp::Sub, DType::F32 | DType::F64) => {
                let r = self.b.ins().fsub(pa, pb);
                self.canon(d, r)
            }
            (BinaryOp::Mul, DType::F32 | DType::F64) => {
                let r = self.b.ins().fmul(pa, pb);
                self.canon(d, r)
            }
            (BinaryOp::Div, DType::F32 | DType::F64) => {
                let r = self.b.ins().fdiv(pa, pb);
                self.canon(d, r)
            }
            (BinaryOp::Add, DType::U8) => self.b.ins().iadd(pa, pb),
            (BinaryOp::Sub, DType::U8) => self.b.ins().isub(pa, pb),
            (BinaryOp::Mul, DType::U8) => self.b.ins().imul(pa, pb),
            (BinaryOp::Div, DType::U8) => {
                // udiv traps on a zero divisor: divide by 1 instead and select 0.
                let z = self.b.ins().icmp_imm_s(IntCC::Equal, pb, 0);
                let one = self.b.ins().iconst(types::I8, 1);
                let zero = self.b.ins().iconst(types::I8, 0);
                let dv = self.b.ins().select(z, one, pb);
                let q = self.b.ins().udiv(pa, dv);
                self.b.ins().select(z, zero, q)
            }
            (BinaryOp::Min, DType::U8) => self.b.ins().umin(pa, pb),
            (BinaryOp::Max, DType::U8) => self.b.ins().umax(pa, pb),
            (
                BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Min
                | BinaryOp::Max,
                _,
            ) if d.is_int() => int_math::binary(self, op, d, pa, pb),
            (BinaryOp::Min | BinaryOp::And, DType::Bool) => self.b.ins().band(pa, pb),
            (BinaryOp::Max | BinaryOp::Or, DType::Bool) => self.b.ins().bor(pa, pb),
            _ => return Err(bad(format!("binary {op:?} does not accept {d}"))),
        };
        Ok(Val::plain(d, r))
    }

    /// `c ? a : b`.
    pub(crate) fn select(
        &mut self,
        c: &mut Val,
        a: &mut Val,
        b: &mut Val,
    ) -> Result<Val, CodegenError> {
        if c.dtype != DType::Bool || a.dtype != b.dtype {
            return Err(bad("select needs a bool condition and equal branch dtypes"));
        }
        self.need_scalar_or_f32_bool(a.dtype)?;
        let pc = self.plain(c);
        let pa = self.plain(a);
        let pb = self.plain(b);
        Ok(Val::plain(a.dtype, self.sel(pc, pa, pb)))
    }

    /// Conversion to `to` by kiln's cast table.
    pub(crate) fn cast(&mut self, x: &mut Val, to: DType) -> Result<Val, CodegenError> {
        let from = x.dtype;
        if from == to {
            return Ok(*x);
        }
        self.need_scalar_or_f32_bool(from)?;
        self.need_scalar_or_f32_bool(to)?;
        let p = self.plain(x);
        let r = match (from, to) {
            (DType::F32, DType::F64) => {
                let r = self.b.ins().fpromote(types::F64, p);
                self.canon(to, r)
            }
            (DType::F64, DType::F32) => {
                let r = self.b.ins().fdemote(types::F32, p);
                self.canon(to, r)
            }
            (DType::F32 | DType::F64, DType::U8) => {
                let i = self.b.ins().fcvt_to_uint_sat(types::I32, p);
                let m = self.b.ins().iconst(types::I32, 255);
                let i = self.b.ins().umin(i, m);
                self.b.ins().ireduce(types::I8, i)
            }
            (DType::F32 | DType::F64, DType::Bool) => {
                let z = self.float_const(from, 0);
                self.b.ins().fcmp(FloatCC::NotEqual, p, z)
            }
            (DType::U8, DType::F32 | DType::F64) => {
                let w = self.b.ins().uextend(types::I32, p);
                let t = self.ty(to);
                self.b.ins().fcvt_from_uint(t, w)
            }
            (DType::Bool, DType::F32 | DType::F64) => {
                if self.vec {
                    let one = self.float_const(to, 1.0f32.to_bits() as u64);
                    let zero = self.float_const(to, 0);
                    self.sel(p, one, zero)
                } else {
                    let w = self.b.ins().uextend(types::I32, p);
                    let t = self.ty(to);
                    self.b.ins().fcvt_from_uint(t, w)
                }
            }
            (DType::U8, DType::Bool) => self.b.ins().icmp_imm_s(IntCC::NotEqual, p, 0),
            (DType::Bool, DType::U8) => p,
            _ if !from.is_float() || !to.is_float() => int_math::cast(self, from, to, p)
                .ok_or_else(|| bad(format!("cast {from} -> {to}")))?,
            _ => return Err(bad(format!("cast {from} -> {to}"))),
        };
        Ok(Val::plain(to, r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::ir::{AbiParam, Function, Signature, UserFuncName};
    use cranelift_codegen::isa::CallConv;
    use cranelift_frontend::FunctionBuilderContext;

    /// A splat is built once per block and reused there, never across blocks (a value of
    /// one block does not dominate another); the function stays valid.
    #[test]
    fn splats_are_shared_within_a_block_only() {
        let mut sig = Signature::new(CallConv::SystemV);
        sig.params.push(AbiParam::new(types::I32X4));
        let mut func = Function::with_name_signature(UserFuncName::default(), sig);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let (first, second) = (b.create_block(), b.create_block());
        b.append_block_params_for_function_params(first);
        b.switch_to_block(first);
        let x = b.block_params(first)[0];
        let mut em = Em::new(&mut b, true, None, false);
        let a1 = em.int_splat(types::I32X4, 7);
        let a2 = em.int_splat(types::I32X4, 7);
        let other = em.int_splat(types::I32X4, 8);
        assert_eq!(a1, a2);
        assert_ne!(a1, other);
        let y = em.b.ins().bxor(x, a1);
        em.b.ins().jump(second, &[]);
        em.b.switch_to_block(second);
        let b1 = em.int_splat(types::I32X4, 7);
        assert_ne!(a1, b1, "a value of the first block reused in the second");
        let z = em.b.ins().bxor(y, b1);
        let _ = em.b.ins().bxor(z, other);
        em.b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(cranelift_codegen::isa::TargetFrontendConfig {
            default_call_conv: CallConv::SystemV,
            pointer_width: target_lexicon::PointerWidth::U64,
            page_size_align_log2: 12,
        });
        let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
        cranelift_codegen::verify_function(&func, &flags).expect("valid function");
    }
}
