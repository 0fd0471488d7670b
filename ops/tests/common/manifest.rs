//! The scipy golden manifests shared by the ops tests (tests/reference, tests/golden/int_dtypes,
//! tests/golden/morphology): one line per case, `NAME OP INPUT[,INPUT..] [key=value ..]`, where
//! `#` starts a comment line and the parameter `layout=bc` says the arrays are already
//! `[B, C, S..]` (it is not passed to the operator). Also `promote`, the `[S..]` → `[1, 1, S..]`
//! view every golden comparison uses.
//!
//! Limits: test-only; a malformed line panics with the line's problem (the manifests are
//! committed files written by the scripts under scripts/).

#![allow(dead_code)]

use std::path::Path;

use kiln_ir::Scalar;
use kiln_runtime::Tensor;

/// One golden case.
pub struct Case {
    /// The case name (its output is `NAME.out.npy`).
    pub name: String,
    /// The operator's registry name.
    pub op: String,
    /// Input file names, in the operator's input order.
    pub inputs: Vec<String>,
    /// Operator parameters.
    pub params: Vec<(String, String)>,
    /// `layout=bc`: the arrays are already `[B, C, S..]`.
    pub bc: bool,
}

impl Case {
    /// The first (for most operators: the only) input file.
    pub fn input(&self) -> &str {
        &self.inputs[0]
    }
}

/// Every case of `dir/manifest.txt`; `hint` names the script that writes it.
pub fn read(dir: &Path, hint: &str) -> Vec<Case> {
    let path = dir.join("manifest.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} ({e}; run {hint})", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next().expect("case name").to_string();
            let op = it.next().expect("op name").to_string();
            let inputs = it
                .next()
                .expect("input files")
                .split(',')
                .map(String::from)
                .collect();
            let mut bc = false;
            let params = it
                .filter_map(|p| {
                    let (k, v) = p.split_once('=').expect("name=value");
                    if k == "layout" {
                        bc = v == "bc";
                        return None;
                    }
                    Some((k.to_string(), v.to_string()))
                })
                .collect();
            Case {
                name,
                op,
                inputs,
                params,
                bc,
            }
        })
        .collect()
}

/// `[S1..Sd]` as a `[1, 1, S1..Sd]` view of the same storage.
pub fn promote(t: Tensor) -> Tensor {
    let mut shape = vec![1, 1];
    shape.extend_from_slice(t.shape());
    let mut strides = vec![t.numel(), t.numel()];
    strides.extend_from_slice(t.strides());
    Tensor::from_parts(t.storage().clone(), &shape, &strides, t.offset()).expect("valid view")
}

/// The first element where `got` and `want` differ, as a message.
pub fn compare(got: &Tensor, want: &Tensor) -> Option<String> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        return Some(format!(
            "type {}{:?} vs scipy {}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let (g, w): (Vec<Scalar>, Vec<Scalar>) = (got.to_scalars(), want.to_scalars());
    let bad: Vec<usize> = (0..g.len()).filter(|&i| g[i] != w[i]).collect();
    bad.first().map(|&i| {
        format!(
            "{} of {} elements differ; first at flat index {i}: kiln {} vs scipy {}",
            bad.len(),
            g.len(),
            g[i],
            w[i]
        )
    })
}
