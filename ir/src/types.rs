//! Element types, scalars, shapes and border modes.

use std::fmt;

/// Maximum number of spatial dimensions a tensor may have (`[B, C, S1..Sd]`, `d <= 8`).
pub const MAX_SPATIAL_DIMS: usize = 8;

/// Largest number of elements a tensor may hold; bigger shapes are rejected at build time.
pub const MAX_ELEMENTS: usize = 1 << 40;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary64.
    F64,
    /// Unsigned 8-bit integer, wrapping arithmetic.
    U8,
    /// Boolean stored as one byte holding 0 or 1.
    Bool,
    /// Signed 8-bit integer, wrapping (two's complement) arithmetic.
    I8,
    /// Unsigned 16-bit integer, wrapping arithmetic.
    U16,
    /// Signed 16-bit integer, wrapping arithmetic.
    I16,
    /// Signed 32-bit integer, wrapping arithmetic.
    I32,
    /// Unsigned 32-bit integer, wrapping arithmetic.
    U32,
}

impl DType {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
            DType::U8 | DType::Bool | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::I32 | DType::U32 => 4,
        }
    }

    /// True for the integer dtypes (`u8`, `i8`, `u16`, `i16`, `i32`, `u32`; not bool).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32
        )
    }

    /// True for the signed integer dtypes (`i8`, `i16`, `i32`).
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32)
    }

    /// The integer range `[min, max]` of an integer dtype (bool: `[0, 1]`); `None` for floats.
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            DType::U8 => (0, u8::MAX as i64),
            DType::I8 => (i8::MIN as i64, i8::MAX as i64),
            DType::U16 => (0, u16::MAX as i64),
            DType::I16 => (i16::MIN as i64, i16::MAX as i64),
            DType::I32 => (i32::MIN as i64, i32::MAX as i64),
            DType::U32 => (0, u32::MAX as i64),
            DType::Bool => (0, 1),
            DType::F32 | DType::F64 => return None,
        })
    }

    /// True for `F32` and `F64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Lower-case name used by the printer and the CLI (`f32`, `f64`, `u8`, `bool`, `i8`,
    /// `u16`, `i16`, `i32`, `u32`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::U8 => "u8",
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::U32 => "u32",
        }
    }

    /// Parses a name produced by [`DType::name`].
    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s {
            "f32" => DType::F32,
            "f64" => DType::F64,
            "u8" => DType::U8,
            "bool" => DType::Bool,
            "i8" => DType::I8,
            "u16" => DType::U16,
            "i16" => DType::I16,
            "i32" => DType::I32,
            "u32" => DType::U32,
            _ => return None,
        })
    }

    /// All dtypes, in a fixed order.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::F64,
        DType::U8,
        DType::Bool,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::U32,
    ];
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scalar value of a given dtype, stored by its bits so that it can be hashed and
/// compared exactly (NaN payloads and the sign of zero are kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// An f32, as its IEEE bits.
    F32(u32),
    /// An f64, as its IEEE bits.
    F64(u64),
    /// A u8.
    U8(u8),
    /// A bool.
    Bool(bool),
    /// An i8.
    I8(i8),
    /// A u16.
    U16(u16),
    /// An i16.
    I16(i16),
    /// An i32.
    I32(i32),
    /// A u32.
    U32(u32),
}

impl Scalar {
    /// The scalar's dtype.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::U8(_) => DType::U8,
            Scalar::Bool(_) => DType::Bool,
            Scalar::I8(_) => DType::I8,
            Scalar::U16(_) => DType::U16,
            Scalar::I16(_) => DType::I16,
            Scalar::I32(_) => DType::I32,
            Scalar::U32(_) => DType::U32,
        }
    }

    /// Builds a scalar of `dtype` from an f64 value, with the same rule as a cast from f64
    /// (see [`crate::semantics::cast_f64`]).
    pub fn from_f64(dtype: DType, v: f64) -> Scalar {
        crate::semantics::cast_f64(v, dtype)
    }

    /// An f32 scalar.
    pub fn f32(v: f32) -> Scalar {
        Scalar::F32(v.to_bits())
    }

    /// An f64 scalar.
    pub fn f64(v: f64) -> Scalar {
        Scalar::F64(v.to_bits())
    }

    /// The zero of `dtype` (+0.0 for floats, false for bool).
    pub fn zero(dtype: DType) -> Scalar {
        match dtype {
            DType::F32 => Scalar::F32(0),
            DType::F64 => Scalar::F64(0),
            DType::U8 => Scalar::U8(0),
            DType::Bool => Scalar::Bool(false),
            DType::I8 => Scalar::I8(0),
            DType::U16 => Scalar::U16(0),
            DType::I16 => Scalar::I16(0),
            DType::I32 => Scalar::I32(0),
            DType::U32 => Scalar::U32(0),
        }
    }

    /// The value as f64 (exact for every dtype; NaN payloads of f32 are widened).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::F32(b) => f32::from_bits(b) as f64,
            Scalar::F64(b) => f64::from_bits(b),
            Scalar::U8(v) => v as f64,
            Scalar::Bool(v) => v as u8 as f64,
            Scalar::I8(v) => v as f64,
            Scalar::U16(v) => v as f64,
            Scalar::I16(v) => v as f64,
            Scalar::I32(v) => v as f64,
            Scalar::U32(v) => v as f64,
        }
    }

    /// The value of an integer or bool scalar as i64 (exact); `None` for floats.
    pub fn to_i64(self) -> Option<i64> {
        Some(match self {
            Scalar::F32(_) | Scalar::F64(_) => return None,
            Scalar::U8(v) => v as i64,
            Scalar::Bool(v) => v as i64,
            Scalar::I8(v) => v as i64,
            Scalar::U16(v) => v as i64,
            Scalar::I16(v) => v as i64,
            Scalar::I32(v) => v as i64,
            Scalar::U32(v) => v as i64,
        })
    }

    /// The integer scalar of `dtype` holding `v` reduced modulo 2^bits (two's complement
    /// wrap, numpy's integer `astype`); bool is `v != 0`. `None` for float dtypes.
    pub fn wrap_int(dtype: DType, v: i64) -> Option<Scalar> {
        Some(match dtype {
            DType::F32 | DType::F64 => return None,
            DType::U8 => Scalar::U8(v as u8),
            DType::Bool => Scalar::Bool(v != 0),
            DType::I8 => Scalar::I8(v as i8),
            DType::U16 => Scalar::U16(v as u16),
            DType::I16 => Scalar::I16(v as i16),
            DType::I32 => Scalar::I32(v as i32),
            DType::U32 => Scalar::U32(v as u32),
        })
    }

    /// The scalar of `dtype` stored in the first `dtype.size_bytes()` little-endian bytes
    /// of `b` (bool: any non-zero byte is true); `None` when `b` is shorter.
    pub fn from_le_bytes(dtype: DType, b: &[u8]) -> Option<Scalar> {
        let b = b.get(..dtype.size_bytes())?;
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        let u = u64::from_le_bytes(w);
        Some(match dtype {
            DType::F32 => Scalar::F32(u as u32),
            DType::F64 => Scalar::F64(u),
            DType::U8 => Scalar::U8(u as u8),
            DType::Bool => Scalar::Bool(u != 0),
            DType::I8 => Scalar::I8(u as i8),
            DType::U16 => Scalar::U16(u as u16),
            DType::I16 => Scalar::I16(u as i16),
            DType::I32 => Scalar::I32(u as i32),
            DType::U32 => Scalar::U32(u as u32),
        })
    }

    /// Little-endian bytes of the value as stored in a tensor of its dtype.
    pub fn to_le_bytes(self) -> Vec<u8> {
        match self {
            Scalar::F32(b) => b.to_le_bytes().to_vec(),
            Scalar::F64(b) => b.to_le_bytes().to_vec(),
            Scalar::U8(v) => vec![v],
            Scalar::Bool(v) => vec![v as u8],
            Scalar::I8(v) => v.to_le_bytes().to_vec(),
            Scalar::U16(v) => v.to_le_bytes().to_vec(),
            Scalar::I16(v) => v.to_le_bytes().to_vec(),
            Scalar::I32(v) => v.to_le_bytes().to_vec(),
            Scalar::U32(v) => v.to_le_bytes().to_vec(),
        }
    }
}

impl fmt::Display for Scalar {
    /// Prints floats by their bits when they are not plain finite numbers, so that the text
    /// form round-trips exactly: `f32:1.5`, `f32:0x7fc00001`, `u8:7`, `bool:true`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::F32(b) => {
                let v = f32::from_bits(b);
                if v.is_finite() && format!("{v:?}").parse::<f32>().map(f32::to_bits) == Ok(b) {
                    write!(f, "f32:{v:?}")
                } else {
                    write!(f, "f32:0x{b:08x}")
                }
            }
            Scalar::F64(b) => {
                let v = f64::from_bits(b);
                if v.is_finite() && format!("{v:?}").parse::<f64>().map(f64::to_bits) == Ok(b) {
                    write!(f, "f64:{v:?}")
                } else {
                    write!(f, "f64:0x{b:016x}")
                }
            }
            Scalar::U8(v) => write!(f, "u8:{v}"),
            Scalar::Bool(v) => write!(f, "bool:{v}"),
            Scalar::I8(v) => write!(f, "i8:{v}"),
            Scalar::U16(v) => write!(f, "u16:{v}"),
            Scalar::I16(v) => write!(f, "i16:{v}"),
            Scalar::I32(v) => write!(f, "i32:{v}"),
            Scalar::U32(v) => write!(f, "u32:{v}"),
        }
    }
}

/// How a gather or window read outside `[0, n)` along a spatial axis is resolved.
/// Names and meanings are scipy.ndimage's (see SEMANTICS.md for the table against
/// torch, numpy, OpenCV and Halide).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Border {
    /// Out-of-range reads give the scalar (scipy `constant` with `cval`).
    Constant(Scalar),
    /// Half-sample symmetric: `d c b a | a b c d | d c b a` (scipy `reflect`).
    Reflect,
    /// Whole-sample symmetric: `d c b | a b c d | c b a` (scipy `mirror`).
    Mirror,
    /// Repeat the edge: `a a a | a b c d | d d d` (scipy `nearest`).
    Nearest,
    /// Periodic: `b c d | a b c d | a b c` (scipy `wrap`).
    Wrap,
}

impl Border {
    /// The mode's scipy name.
    pub fn mode_name(&self) -> &'static str {
        match self {
            Border::Constant(_) => "constant",
            Border::Reflect => "reflect",
            Border::Mirror => "mirror",
            Border::Nearest => "nearest",
            Border::Wrap => "wrap",
        }
    }

    /// Parses a scipy mode name; `cval` is used for `constant`. Accepts scipy's aliases
    /// `grid-constant`, `grid-mirror` (= reflect) and `grid-wrap`.
    pub fn from_mode_name(name: &str, cval: Scalar) -> Option<Border> {
        Some(match name {
            "constant" | "grid-constant" => Border::Constant(cval),
            "reflect" | "grid-mirror" => Border::Reflect,
            "mirror" => Border::Mirror,
            "nearest" => Border::Nearest,
            "wrap" | "grid-wrap" => Border::Wrap,
            _ => return None,
        })
    }

    /// The five modes with a given constant for `Constant`.
    pub fn all(cval: Scalar) -> [Border; 5] {
        [
            Border::Constant(cval),
            Border::Reflect,
            Border::Mirror,
            Border::Nearest,
            Border::Wrap,
        ]
    }
}

impl fmt::Display for Border {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Border::Constant(c) => write!(f, "constant({c})"),
            other => f.write_str(other.mode_name()),
        }
    }
}

/// The shape and dtype of a tensor value: `[B, C, S1..Sd]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Full shape, batch and channel first.
    pub shape: Vec<usize>,
}

impl TensorType {
    /// Number of spatial dimensions (`shape.len() - 2`).
    pub fn spatial_rank(&self) -> usize {
        self.shape.len() - 2
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}
