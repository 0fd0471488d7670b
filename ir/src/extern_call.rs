//! Extern line calls: the IR form of a named line function applied along one axis
//! ([`NodeKind::Extern`](crate::NodeKind::Extern)), kiln's escape hatch for line algorithms
//! that no [`LineProgram`](crate::LineProgram) step expresses (on the model of Halide's
//! `define_extern`).
//!
//! The IR knows only the call: the function's name, the axis, the walking direction, the
//! output dtype and the parameters. Whether a function of that name is registered, and
//! whether it accepts the input dtype, the parameters and the output dtype, is checked by
//! the runtime when the node runs (`kiln_runtime::line_extern`), with a typed error. Every
//! field is part of the node's identity, so CSE merges two calls only when they are equal in
//! every field (parameters compared by their bits) and the kernel cache keys on all of them.
//!
//! Exactness: the registered function is the semantics; kiln only guarantees that every
//! executor hands it the same lines, each in its walking order, with the same parameters.
//! Limits: one input, and the output has the input's shape (one output element per input
//! element of each line).

use crate::types::{DType, Scalar};

/// Longest accepted extern name, in bytes.
pub const MAX_EXTERN_NAME: usize = 64;

/// A call of a registered line function; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExternCall {
    /// The registered name (see [`check_extern_name`]).
    pub name: String,
    /// Axis into the full shape that the lines run along.
    pub axis: usize,
    /// The function sees each line from its last index down (and its output is written
    /// back in the same order).
    pub backward: bool,
    /// The output dtype.
    pub out: DType,
    /// Parameters handed to the function on every line, in order.
    pub params: Vec<Scalar>,
}

/// Checks an extern name: 1 to [`MAX_EXTERN_NAME`] bytes of ASCII letters, digits, `_` and
/// `.`, starting with a letter (so the IR text form can write it as one word).
pub fn check_extern_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    let starts = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if name.len() > MAX_EXTERN_NAME || !ok_chars || !starts {
        return Err(format!(
            "bad extern name {name:?}: 1 to {MAX_EXTERN_NAME} ASCII letters, digits, '_' or '.', \
             starting with a letter"
        ));
    }
    Ok(())
}
