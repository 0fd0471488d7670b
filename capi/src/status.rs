//! Status codes, kiln's error enums mapped onto them, the thread-local last-error message,
//! and [`guard`], which runs every entry point under `catch_unwind`.
//!
//! Exactness: not applicable (no arithmetic). Limits: the message of the last failure is kept
//! per thread; a successful call clears it. Kiln's error enums may grow, so every mapping has
//! a `_ =>` arm.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use kiln_ir::parser::ParseError;
use kiln_ir::BuildError;
use kiln_ops::OpError;
use kiln_runtime::RuntimeError;

/// Result of every fallible entry point (`kiln_status` in kiln.h). Zero is success.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KilnStatus {
    /// Success.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullPointer = 1,
    /// An argument is invalid by itself: an unknown dtype code, a string that is not UTF-8,
    /// a parameter given with the wrong kind, a count out of range.
    InvalidArgument = 2,
    /// A buffer's dtype, rank, shape or strides do not fit the graph, or the count of
    /// buffers is wrong.
    Shape = 3,
    /// No operator of that name.
    UnknownOp = 4,
    /// An operator parameter is unknown, malformed, missing or out of range.
    Param = 5,
    /// The graph builder or an operator rejected the input type or arguments.
    Build = 6,
    /// IR text that does not parse (the message has `line:col`).
    Parse = 7,
    /// Lowering or code generation failed.
    Compile = 8,
    /// The run needs more memory than is available.
    OutOfMemory = 9,
    /// Any other failure while running.
    Runtime = 10,
    /// A bug inside kiln (a caught panic); the message says where.
    Internal = 11,
}

impl KilnStatus {
    /// The constant's name in kiln.h, as a C string.
    pub fn c_name(self) -> &'static CStr {
        match self {
            KilnStatus::Ok => c"KILN_OK",
            KilnStatus::NullPointer => c"KILN_ERR_NULL_POINTER",
            KilnStatus::InvalidArgument => c"KILN_ERR_INVALID_ARGUMENT",
            KilnStatus::Shape => c"KILN_ERR_SHAPE",
            KilnStatus::UnknownOp => c"KILN_ERR_UNKNOWN_OP",
            KilnStatus::Param => c"KILN_ERR_PARAM",
            KilnStatus::Build => c"KILN_ERR_BUILD",
            KilnStatus::Parse => c"KILN_ERR_PARSE",
            KilnStatus::Compile => c"KILN_ERR_COMPILE",
            KilnStatus::OutOfMemory => c"KILN_ERR_OUT_OF_MEMORY",
            KilnStatus::Runtime => c"KILN_ERR_RUNTIME",
            KilnStatus::Internal => c"KILN_ERR_INTERNAL",
        }
    }

    /// The constant's name in kiln.h.
    pub fn name(self) -> &'static str {
        self.c_name().to_str().unwrap_or("KILN_UNKNOWN_STATUS")
    }

    /// The status with code `code`, if any.
    pub fn from_code(code: c_int) -> Option<KilnStatus> {
        const ALL: [KilnStatus; 12] = [
            KilnStatus::Ok,
            KilnStatus::NullPointer,
            KilnStatus::InvalidArgument,
            KilnStatus::Shape,
            KilnStatus::UnknownOp,
            KilnStatus::Param,
            KilnStatus::Build,
            KilnStatus::Parse,
            KilnStatus::Compile,
            KilnStatus::OutOfMemory,
            KilnStatus::Runtime,
            KilnStatus::Internal,
        ];
        ALL.into_iter().find(|s| *s as c_int == code)
    }
}

/// A failed call: its status and a one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The status returned to C.
    pub status: KilnStatus,
    /// The message `kiln_last_error` returns.
    pub message: String,
}

impl Failure {
    /// A failure with `status` and `message`.
    pub fn new(status: KilnStatus, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }

    /// A NULL pointer passed as `what`.
    pub fn null(what: &str) -> Failure {
        Failure::new(KilnStatus::NullPointer, format!("{what} is NULL"))
    }
}

impl From<RuntimeError> for Failure {
    fn from(e: RuntimeError) -> Failure {
        // Other variants (e.g. for external kernels) may be added: they map to Runtime.
        #[allow(unreachable_patterns)]
        let status = match &e {
            RuntimeError::Shape(_)
            | RuntimeError::InputMismatch { .. }
            | RuntimeError::InputCount { .. } => KilnStatus::Shape,
            RuntimeError::OutOfMemory { .. } => KilnStatus::OutOfMemory,
            RuntimeError::Codegen(_) => KilnStatus::Compile,
            _ => KilnStatus::Runtime,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<OpError> for Failure {
    fn from(e: OpError) -> Failure {
        #[allow(unreachable_patterns)]
        let status = match &e {
            OpError::UnknownOp { .. } => KilnStatus::UnknownOp,
            OpError::UnknownParam { .. }
            | OpError::BadParam { .. }
            | OpError::UnknownMode { .. } => KilnStatus::Param,
            OpError::Build(_)
            | OpError::BadInput { .. }
            | OpError::BadSize { .. }
            | OpError::BadOrigin { .. }
            | OpError::BadFootprint { .. } => KilnStatus::Build,
            _ => KilnStatus::Build,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<BuildError> for Failure {
    fn from(e: BuildError) -> Failure {
        Failure::new(KilnStatus::Build, e.to_string())
    }
}

impl From<ParseError> for Failure {
    fn from(e: ParseError) -> Failure {
        Failure::new(KilnStatus::Parse, e.to_string())
    }
}

thread_local! {
    /// The message of this thread's last failed call; `None` after a successful one.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Records the outcome of a call for `kiln_last_error` and returns its status.
fn record(outcome: Result<(), Failure>) -> KilnStatus {
    let (status, message) = match outcome {
        Ok(()) => (KilnStatus::Ok, None),
        Err(f) => {
            // Interior NULs would cut the C string short: show them as `?`.
            let bytes: Vec<u8> = f
                .message
                .into_bytes()
                .into_iter()
                .map(|b| if b == 0 { b'?' } else { b })
                .collect();
            (f.status, CString::new(bytes).ok())
        }
    };
    // `try_with` fails only while the thread is being torn down: then there is no one to
    // read the message anyway.
    let _ = LAST_ERROR.try_with(|m| *m.borrow_mut() = message);
    status
}

/// Runs one entry point's body: a panic becomes `KILN_ERR_INTERNAL` (never unwinds into C),
/// the outcome is recorded for `kiln_last_error`, and the status is returned.
pub fn guard(body: impl FnOnce() -> Result<(), Failure>) -> KilnStatus {
    let outcome = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".into());
            Err(Failure::new(
                KilnStatus::Internal,
                format!("internal error (a bug in kiln, please report it): {what}"),
            ))
        }
    };
    record(outcome)
}

/// Runs a `void` entry point (the `*_free` functions) under `catch_unwind`; a panic is
/// swallowed, since the caller has no status to look at.
pub fn guard_void(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

/// Frees a handle made by `Box::into_raw` (engines, ops, graphs, compiled graphs); NULL is
/// ignored, and a panic in a destructor stays on this side of the boundary.
///
/// # Safety
/// `handle` is NULL or came from `Box::into_raw` of a `Box<T>` and was not freed before.
pub unsafe fn free_boxed<T>(handle: *mut T) {
    guard_void(|| {
        if !handle.is_null() {
            // SAFETY: a non-NULL handle came from `Box::into_raw` and is freed once (the
            // caller's contract above).
            drop(unsafe { Box::from_raw(handle) });
        }
    })
}

/// The message of the calling thread's last failed call, or `""` when the last call
/// succeeded (or none was made). Valid until the next kiln call on this thread.
#[no_mangle]
pub extern "C" fn kiln_last_error() -> *const c_char {
    let found = catch_unwind(|| {
        LAST_ERROR
            .try_with(|m| m.borrow().as_ref().map(|c| c.as_ptr()))
            .ok()
            .flatten()
    });
    match found {
        Ok(Some(p)) => p,
        _ => c"".as_ptr(),
    }
}

/// The constant name of status `code` (`"KILN_ERR_SHAPE"`), or `"KILN_UNKNOWN_STATUS"`; a
/// static string.
#[no_mangle]
pub extern "C" fn kiln_status_name(code: c_int) -> *const c_char {
    let name = KilnStatus::from_code(code).map_or(c"KILN_UNKNOWN_STATUS", KilnStatus::c_name);
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: kiln_last_error returns a valid NUL-terminated string owned by this
        // thread's slot (or a static), alive until the next kiln call on this thread.
        unsafe { CStr::from_ptr(kiln_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_internal_and_is_reported() {
        let s = guard(|| panic!("planted panic {}", 42));
        assert_eq!(s, KilnStatus::Internal);
        assert!(last().contains("planted panic 42"), "{}", last());
        let s = guard(|| std::panic::panic_any(7u32));
        assert_eq!(s, KilnStatus::Internal);
        assert!(last().contains("unknown panic payload"));
    }

    #[test]
    fn success_clears_the_message_and_nul_bytes_are_replaced() {
        assert_eq!(
            guard(|| Err(Failure::new(KilnStatus::Param, "a\0b"))),
            KilnStatus::Param
        );
        assert_eq!(last(), "a?b");
        assert_eq!(guard(|| Ok(())), KilnStatus::Ok);
        assert_eq!(last(), "");
    }

    #[test]
    fn names_match_codes() {
        for code in -1..14 {
            // SAFETY: kiln_status_name returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(kiln_status_name(code)) }
                .to_str()
                .unwrap();
            match KilnStatus::from_code(code) {
                Some(s) => assert_eq!(name, s.name()),
                None => assert_eq!(name, "KILN_UNKNOWN_STATUS"),
            }
        }
    }

    #[test]
    fn runtime_errors_map_to_statuses() {
        let f = Failure::from(RuntimeError::InputCount {
            expected: 1,
            got: 2,
        });
        assert_eq!(f.status, KilnStatus::Shape);
        let f = Failure::from(RuntimeError::OutOfMemory {
            what: "x".into(),
            needed: 2,
            available: 1,
        });
        assert_eq!(f.status, KilnStatus::OutOfMemory);
    }
}
