//! The element types an embedded call takes and returns: f32, f64, u8, bool, i8, u16, i16,
//! i32 and u32.
//!
//! Scope: moving a kernel's output storage into an `ndarray` without copying (every type
//! but bool takes the vector as it is; bool converts its 0/1 bytes). Exactness: values move
//! bit for bit. Limits: the trait is sealed to kiln's dtypes.

use kiln_runtime::tensor::NdElement;
use kiln_runtime::Storage;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for u8 {}
    impl Sealed for bool {}
    impl Sealed for i8 {}
    impl Sealed for u16 {}
    impl Sealed for i16 {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
}

/// An element type kiln computes on (f32, f64, u8, bool, i8, u16, i16, i32, u32).
pub trait Element: NdElement + Send + Sync + sealed::Sealed {
    /// The elements of `s`, moved out when `s` has this dtype.
    fn take(s: Storage) -> Option<Vec<Self>>;
}

impl Element for f32 {
    fn take(s: Storage) -> Option<Vec<Self>> {
        match s {
            Storage::F32(v) => Some(v),
            _ => None,
        }
    }
}

impl Element for f64 {
    fn take(s: Storage) -> Option<Vec<Self>> {
        match s {
            Storage::F64(v) => Some(v),
            _ => None,
        }
    }
}

impl Element for u8 {
    fn take(s: Storage) -> Option<Vec<Self>> {
        match s {
            Storage::U8(v) => Some(v),
            _ => None,
        }
    }
}

impl Element for bool {
    fn take(s: Storage) -> Option<Vec<Self>> {
        match s {
            Storage::Bool(v) => Some(v.into_iter().map(|b| b != 0).collect()),
            _ => None,
        }
    }
}

/// `Element` for the integer types stored as themselves.
macro_rules! int_element {
    ($t:ty, $V:ident) => {
        impl Element for $t {
            fn take(s: Storage) -> Option<Vec<Self>> {
                match s {
                    Storage::$V(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

int_element!(i8, I8);
int_element!(u16, U16);
int_element!(i16, I16);
int_element!(i32, I32);
int_element!(u32, U32);
