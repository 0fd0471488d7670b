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
}

impl DType {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// True for `F32` and `F64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Lower-case name used by the printer and the CLI (`f32`, `f64`, `u8`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// Parses a name produced by [`DType::name`].
    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s {
            "f32" => DType::F32,
            "f64" => DType::F64,
            "u8" => DType::U8,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// All dtypes, in a fixed order.
    pub const ALL: [DType; 4] = [DType::F32, DType::F64, DType::U8, DType::Bool];
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
}

impl Scalar {
    /// The scalar's dtype.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::U8(_) => DType::U8,
            Scalar::Bool(_) => DType::Bool,
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
        }
    }

    /// The value as f64 (exact for every dtype; NaN payloads of f32 are widened).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::F32(b) => f32::from_bits(b) as f64,
            Scalar::F64(b) => f64::from_bits(b),
            Scalar::U8(v) => v as f64,
            Scalar::Bool(v) => v as u8 as f64,
        }
    }

    /// Little-endian bytes of the value as stored in a tensor of its dtype.
    pub fn to_le_bytes(self) -> Vec<u8> {
        match self {
            Scalar::F32(b) => b.to_le_bytes().to_vec(),
            Scalar::F64(b) => b.to_le_bytes().to_vec(),
            Scalar::U8(v) => vec![v],
            Scalar::Bool(v) => vec![v as u8],
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
