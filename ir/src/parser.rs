//! Parser for the IR text form written by [`crate::printer::print`] (grammar: docs/IR_TEXT.md).
//!
//! The parser builds through [`GraphBuilder`], so a parsed graph is validated exactly like a
//! built one. Node names are any `%name`; they are mapped to fresh ids in order of definition,
//! so printed graphs (whose names are their ids) parse back to equal graphs.

use std::collections::HashMap;

use thiserror::Error;

use crate::builder::GraphBuilder;
use crate::error::BuildError;
use crate::graph::{BinaryOp, Footprint, Graph, NodeId, NodeKind, ReduceOp, UnaryOp};
use crate::line::{LineKeep, LineOp, LineProgram};
use crate::types::{Border, DType, Scalar, TensorType};

/// Why a text could not be parsed. Lines and columns are 1-based; columns count characters.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The text does not follow the grammar, or names something that does not exist.
    #[error("{line}:{col}: {message}")]
    Syntax {
        /// Line of the offending token.
        line: usize,
        /// Column of the offending token.
        col: usize,
        /// What was expected or what is wrong.
        message: String,
    },
    /// The line is well formed but the builder rejected the node (or the outputs).
    #[error("{line}:{col}: {source}")]
    Build {
        /// Line of the rejected node.
        line: usize,
        /// Column of the node's operation.
        col: usize,
        /// The builder's error.
        source: BuildError,
    },
}

impl ParseError {
    /// The 1-based line of the error.
    pub fn line(&self) -> usize {
        match self {
            ParseError::Syntax { line, .. } | ParseError::Build { line, .. } => *line,
        }
    }

    /// The 1-based column of the error.
    pub fn col(&self) -> usize {
        match self {
            ParseError::Syntax { col, .. } | ParseError::Build { col, .. } => *col,
        }
    }
}

/// One lexical token of a line.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A run of `[A-Za-z0-9_.+-]`: keywords, numbers, dtypes.
    Word(String),
    /// `%name`.
    Operand(String),
    /// One of `= : , [ ] ( )`.
    Punct(char),
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("'{w}'"),
            Tok::Operand(n) => format!("'%{n}'"),
            Tok::Punct(c) => format!("'{c}'"),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-')
}

/// Splits one line into tokens with their 1-based columns; `#` starts a comment.
fn lex(line: &str, lineno: usize) -> Result<Vec<(Tok, usize)>, ParseError> {
    let chars: Vec<char> = line.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c == '#' {
            break;
        }
        if c.is_whitespace() {
            i += 1;
        } else if matches!(c, '=' | ':' | ',' | '[' | ']' | '(' | ')') {
            toks.push((Tok::Punct(c), col));
            i += 1;
        } else if c == '%' {
            let start = i + 1;
            i = start;
            while i < chars.len() && is_word_char(chars[i]) {
                i += 1;
            }
            if i == start {
                return Err(syntax(lineno, col, "expected a name after '%'"));
            }
            toks.push((Tok::Operand(chars[start..i].iter().collect()), col));
        } else if is_word_char(c) {
            let start = i;
            while i < chars.len() && is_word_char(chars[i]) {
                i += 1;
            }
            toks.push((Tok::Word(chars[start..i].iter().collect()), col));
        } else {
            return Err(syntax(lineno, col, format!("unexpected character '{c}'")));
        }
    }
    Ok(toks)
}

fn syntax(line: usize, col: usize, message: impl Into<String>) -> ParseError {
    ParseError::Syntax {
        line,
        col,
        message: message.into(),
    }
}

/// A cursor over one line's tokens.
struct Line<'a> {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    lineno: usize,
    /// Column just past the end of the line (for "expected ... at end of line").
    end_col: usize,
    names: &'a HashMap<String, NodeId>,
}

impl Line<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    /// Column of the next token (or the end of the line).
    fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end_col, |(_, c)| *c)
    }

    fn err(&self, message: impl Into<String>) -> ParseError {
        syntax(self.lineno, self.col(), message)
    }

    /// An error "expected X, found Y" at the next token.
    fn expected(&self, what: &str) -> ParseError {
        let found = match self.peek() {
            Some(t) => t.describe(),
            None => "end of line".to_string(),
        };
        self.err(format!("expected {what}, found {found}"))
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(t, _)| t.clone());
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn punct(&mut self, c: char, what: &str) -> Result<(), ParseError> {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn word(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek() {
            Some(Tok::Word(w)) => {
                let w = w.clone();
                self.pos += 1;
                Ok(w)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Expects the keyword `kw` followed by `=`.
    fn key(&mut self, kw: &str) -> Result<(), ParseError> {
        if self.peek() == Some(&Tok::Word(kw.to_string())) {
            self.pos += 1;
            self.punct('=', &format!("'=' after '{kw}'"))
        } else {
            Err(self.expected(&format!("'{kw}='")))
        }
    }

    fn keyword(&mut self, kw: &str) -> Result<(), ParseError> {
        if self.peek() == Some(&Tok::Word(kw.to_string())) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.expected(&format!("'{kw}'")))
        }
    }

    fn int<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, ParseError> {
        let col = self.col();
        let w = self.word(what)?;
        w.parse::<T>()
            .map_err(|_| syntax(self.lineno, col, format!("expected {what}, found '{w}'")))
    }

    fn operand(&mut self) -> Result<NodeId, ParseError> {
        match self.peek() {
            Some(Tok::Operand(n)) => {
                let id = self.names.get(n).copied();
                let e = self.err(format!("unknown operand '%{n}'"));
                self.pos += 1;
                id.ok_or(e)
            }
            _ => Err(self.expected("an operand '%name'")),
        }
    }

    /// `%a, %b, ...` (at least one).
    fn operand_list(&mut self) -> Result<Vec<NodeId>, ParseError> {
        let mut v = vec![self.operand()?];
        while self.eat_punct(',') {
            v.push(self.operand()?);
        }
        Ok(v)
    }

    fn dtype(&mut self) -> Result<DType, ParseError> {
        let col = self.col();
        let w = self.word("a dtype (f32, f64, u8, bool)")?;
        DType::from_name(&w).ok_or_else(|| {
            syntax(
                self.lineno,
                col,
                format!("expected a dtype (f32, f64, u8, bool), found '{w}'"),
            )
        })
    }

    /// `dtype:value`.
    fn scalar(&mut self) -> Result<Scalar, ParseError> {
        let dtype = self.dtype()?;
        self.punct(':', "':' between dtype and value")?;
        let col = self.col();
        let w = self.word("a scalar value")?;
        parse_scalar(dtype, &w)
            .ok_or_else(|| syntax(self.lineno, col, format!("bad {dtype} scalar '{w}'")))
    }

    /// `[i, j, ...]` of i64 (possibly empty).
    fn int_list(&mut self, what: &str) -> Result<Vec<i64>, ParseError> {
        self.punct('[', &format!("'[' before {what}"))?;
        let mut v = Vec::new();
        if !self.eat_punct(']') {
            loop {
                v.push(self.int::<i64>("an integer")?);
                if self.eat_punct(']') {
                    break;
                }
                self.punct(',', &format!("',' or ']' after {what}"))?;
            }
        }
        Ok(v)
    }

    fn border(&mut self) -> Result<Border, ParseError> {
        let col = self.col();
        let w = self.word("a border mode")?;
        let cval = if w == "constant" || w == "grid-constant" {
            self.punct('(', "'(' after 'constant'")?;
            let s = self.scalar()?;
            self.punct(')', "')' after the border constant")?;
            s
        } else {
            Scalar::zero(DType::F32)
        };
        Border::from_mode_name(&w, cval).ok_or_else(|| {
            syntax(
                self.lineno,
                col,
                format!(
                    "expected a border mode (constant(..), reflect, mirror, nearest, wrap), found '{w}'"
                ),
            )
        })
    }

    fn reduce_op(&mut self) -> Result<ReduceOp, ParseError> {
        let col = self.col();
        let w = self.word("a reduction (min, max, sum, any, all)")?;
        ReduceOp::from_name(&w).ok_or_else(|| {
            syntax(
                self.lineno,
                col,
                format!("expected a reduction (min, max, sum, any, all), found '{w}'"),
            )
        })
    }

    /// `dtype[d0,d1,...]`.
    fn tensor_type(&mut self) -> Result<TensorType, ParseError> {
        let dtype = self.dtype()?;
        self.punct('[', "'[' before the shape")?;
        let mut shape = Vec::new();
        loop {
            shape.push(self.int::<usize>("a dimension")?);
            if self.eat_punct(']') {
                break;
            }
            self.punct(',', "',' or ']' in the shape")?;
        }
        Ok(TensorType { dtype, shape })
    }

    /// `[a, b, ...]` of step value numbers (possibly empty).
    fn u32_list(&mut self, what: &str) -> Result<Vec<u32>, ParseError> {
        self.punct('[', &format!("'[' before {what}"))?;
        let mut v = Vec::new();
        if !self.eat_punct(']') {
            loop {
                v.push(self.int::<u32>("a step value number")?);
                if self.eat_punct(']') {
                    break;
                }
                self.punct(',', &format!("',' or ']' after {what}"))?;
            }
        }
        Ok(v)
    }

    /// `(a, b, ...)`: exactly `n` step value numbers.
    fn step_args(&mut self, name: &str, n: usize) -> Result<Vec<u32>, ParseError> {
        self.punct('(', &format!("'(' after '{name}'"))?;
        let mut v = Vec::with_capacity(n);
        for k in 0..n {
            if k > 0 {
                self.punct(',', &format!("',' between the operands of '{name}'"))?;
            }
            v.push(self.int::<u32>("a step value number")?);
        }
        self.punct(')', &format!("')' after the {n} operand(s) of '{name}'"))?;
        Ok(v)
    }

    /// One step op: `const(dtype:v)`, `unary(a)`, `binary(a,b)`, `select(c,a,b)`,
    /// `cast(a,dtype)`.
    fn line_op(&mut self) -> Result<LineOp, ParseError> {
        let col = self.col();
        let w = self.word("a step op")?;
        Ok(match w.as_str() {
            "const" => {
                self.punct('(', "'(' after 'const'")?;
                let c = self.scalar()?;
                self.punct(')', "')' after the constant")?;
                LineOp::Const(c)
            }
            "select" => {
                let v = self.step_args("select", 3)?;
                LineOp::Select(v[0], v[1], v[2])
            }
            "cast" => {
                self.punct('(', "'(' after 'cast'")?;
                let a = self.int::<u32>("a step value number")?;
                self.punct(',', "',' before the cast's dtype")?;
                let to = self.dtype()?;
                self.punct(')', "')' after the cast's dtype")?;
                LineOp::Cast(a, to)
            }
            _ => {
                if let Some(op) = UnaryOp::from_name(&w) {
                    LineOp::Unary(op, self.step_args(&w, 1)?[0])
                } else if let Some(op) = BinaryOp::from_name(&w) {
                    let v = self.step_args(&w, 2)?;
                    LineOp::Binary(op, v[0], v[1])
                } else {
                    return Err(syntax(
                        self.lineno,
                        col,
                        format!("expected a step op, found '{w}'"),
                    ));
                }
            }
        })
    }

    /// The rest of a line node after `%x`:
    /// `axis=A dir=forward|backward init=[..] step=[..] next=[..] keep=each(v)|final(k)`.
    fn line_program(&mut self) -> Result<LineProgram, ParseError> {
        self.key("axis")?;
        let axis: usize = self.int("an axis")?;
        self.key("dir")?;
        let col = self.col();
        let backward = match self.word("'forward' or 'backward'")?.as_str() {
            "forward" => false,
            "backward" => true,
            w => {
                return Err(syntax(
                    self.lineno,
                    col,
                    format!("expected 'forward' or 'backward', found '{w}'"),
                ))
            }
        };
        self.key("init")?;
        self.punct('[', "'[' before the initial carries")?;
        let mut init = Vec::new();
        if !self.eat_punct(']') {
            loop {
                init.push(self.scalar()?);
                if self.eat_punct(']') {
                    break;
                }
                self.punct(',', "',' or ']' after an initial carry")?;
            }
        }
        self.key("step")?;
        self.punct('[', "'[' before the step ops")?;
        let mut step = Vec::new();
        if !self.eat_punct(']') {
            loop {
                step.push(self.line_op()?);
                if self.eat_punct(']') {
                    break;
                }
                self.punct(',', "',' or ']' after a step op")?;
            }
        }
        self.key("next")?;
        let next = self.u32_list("the next carries")?;
        self.key("keep")?;
        let col = self.col();
        let kw = self.word("'each' or 'final'")?;
        let mk: fn(u32) -> LineKeep = match kw.as_str() {
            "each" => LineKeep::Each,
            "final" => LineKeep::Final,
            _ => {
                return Err(syntax(
                    self.lineno,
                    col,
                    format!("expected 'each' or 'final', found '{kw}'"),
                ))
            }
        };
        let v = self.step_args(&kw, 1)?[0];
        Ok(LineProgram {
            axis,
            backward,
            init,
            step,
            next,
            keep: mk(v),
        })
    }

    fn end(&self) -> Result<(), ParseError> {
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(self.err(format!("expected end of line, found {}", t.describe()))),
        }
    }
}

/// Parses a scalar value of `dtype` as [`Scalar`]'s `Display` writes it (floats also accept
/// any decimal form Rust's float parser takes, e.g. `1e-3`, `inf`).
fn parse_scalar(dtype: DType, w: &str) -> Option<Scalar> {
    let hex = w.strip_prefix("0x");
    match dtype {
        DType::F32 => match hex {
            Some(h) if h.len() == 8 => u32::from_str_radix(h, 16).ok().map(Scalar::F32),
            Some(_) => None,
            None => w.parse::<f32>().ok().map(Scalar::f32),
        },
        DType::F64 => match hex {
            Some(h) if h.len() == 16 => u64::from_str_radix(h, 16).ok().map(Scalar::F64),
            Some(_) => None,
            None => w.parse::<f64>().ok().map(Scalar::f64),
        },
        DType::U8 => w.parse::<u8>().ok().map(Scalar::U8),
        DType::I8 => w.parse::<i8>().ok().map(Scalar::I8),
        DType::U16 => w.parse::<u16>().ok().map(Scalar::U16),
        DType::I16 => w.parse::<i16>().ok().map(Scalar::I16),
        DType::I32 => w.parse::<i32>().ok().map(Scalar::I32),
        DType::U32 => w.parse::<u32>().ok().map(Scalar::U32),
        DType::Bool => match w {
            "true" => Some(Scalar::Bool(true)),
            "false" => Some(Scalar::Bool(false)),
            _ => None,
        },
    }
}

/// Parses the text form into a validated [`Graph`].
pub fn parse(text: &str) -> Result<Graph, ParseError> {
    let mut b = GraphBuilder::new();
    let mut names: HashMap<String, NodeId> = HashMap::new();
    let mut outputs: Option<(Vec<NodeId>, usize)> = None;
    let mut nlines = 0;
    let mut n_inputs = 0usize;
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        nlines = lineno;
        let toks = lex(raw, lineno)?;
        if toks.is_empty() {
            continue;
        }
        let mut ln = Line {
            toks,
            pos: 0,
            lineno,
            end_col: raw.chars().count() + 1,
            names: &names,
        };
        if outputs.is_some() {
            return Err(ln.err("unexpected text after the 'return' line"));
        }
        if ln.peek() == Some(&Tok::Word("return".into())) {
            ln.pos += 1;
            let outs = ln.operand_list()?;
            ln.end()?;
            outputs = Some((outs, lineno));
            continue;
        }
        let name = match ln.next() {
            Some(Tok::Operand(n)) => n,
            _ => {
                ln.pos = 0;
                return Err(ln.expected("'%name =' or 'return'"));
            }
        };
        if names.contains_key(&name) {
            ln.pos = 0;
            return Err(ln.err(format!("'%{name}' is already defined")));
        }
        ln.punct('=', &format!("'=' after '%{name}'"))?;
        let id = parse_def(&mut ln, &mut b, &mut n_inputs)?;
        names.insert(name, id);
    }
    let (outs, lineno) = outputs.ok_or_else(|| {
        syntax(
            nlines + 1,
            1,
            "unexpected end of input: expected a 'return' line",
        )
    })?;
    b.finish(&outs).map_err(|source| ParseError::Build {
        line: lineno,
        col: 1,
        source,
    })
}

/// Parses the right-hand side of one definition and adds the node.
fn parse_def(
    ln: &mut Line<'_>,
    b: &mut GraphBuilder,
    n_inputs: &mut usize,
) -> Result<NodeId, ParseError> {
    let op_col = ln.col();
    let op = ln.word("an operation")?;
    let build = |r: Result<NodeId, BuildError>, ln: &Line<'_>| {
        r.map_err(|source| ParseError::Build {
            line: ln.lineno,
            col: op_col,
            source,
        })
    };
    // Inputs and constants take their type from the annotation.
    if op == "input" || op == "const" {
        let id = if op == "input" {
            let icol = ln.col();
            let index: usize = ln.int("an input index")?;
            ln.punct(':', "':' before the type")?;
            let ty = ln.tensor_type()?;
            ln.end()?;
            let want = *n_inputs;
            if index != want {
                return Err(syntax(
                    ln.lineno,
                    icol,
                    format!("expected input index {want}, found {index}"),
                ));
            }
            *n_inputs += 1;
            build(b.input(ty.dtype, &ty.shape), ln)?
        } else {
            let value = ln.scalar()?;
            ln.punct(':', "':' before the type")?;
            let ty_col = ln.col();
            let ty = ln.tensor_type()?;
            ln.end()?;
            if ty.dtype != value.dtype() {
                return Err(syntax(
                    ln.lineno,
                    ty_col,
                    format!("constant is {} but its type is {}", value.dtype(), ty),
                ));
            }
            build(b.constant(value, &ty.shape), ln)?
        };
        return Ok(id);
    }
    let kind = if let Some(uop) = UnaryOp::from_name(&op) {
        NodeKind::Unary {
            op: uop,
            x: ln.operand()?,
        }
    } else if let Some(bop) = BinaryOp::from_name(&op) {
        let a = ln.operand()?;
        ln.punct(',', "',' between operands")?;
        let b2 = ln.operand()?;
        NodeKind::Binary { op: bop, a, b: b2 }
    } else {
        match op.as_str() {
            "select" => {
                let cond = ln.operand()?;
                ln.punct(',', "',' between operands")?;
                let a = ln.operand()?;
                ln.punct(',', "',' between operands")?;
                let b2 = ln.operand()?;
                NodeKind::Select { cond, a, b: b2 }
            }
            "cast" => {
                let x = ln.operand()?;
                ln.keyword("to")?;
                let to = ln.dtype()?;
                NodeKind::Cast { x, to }
            }
            "gather" => {
                let x = ln.operand()?;
                ln.key("offset")?;
                let offset = ln.int_list("offsets")?;
                ln.key("border")?;
                let border = ln.border()?;
                NodeKind::Gather { x, offset, border }
            }
            "network" => {
                let inputs = ln.operand_list()?;
                ln.key("width")?;
                let width: u32 = ln.int("a width")?;
                ln.key("pairs")?;
                ln.punct('[', "'[' before pairs")?;
                let mut pairs = Vec::new();
                if !ln.eat_punct(']') {
                    loop {
                        ln.punct('(', "'(' before a pair")?;
                        let i: u32 = ln.int("a wire")?;
                        ln.punct(',', "',' in a pair")?;
                        let j: u32 = ln.int("a wire")?;
                        ln.punct(')', "')' after a pair")?;
                        pairs.push((i, j));
                        if ln.eat_punct(']') {
                            break;
                        }
                        ln.punct(',', "',' or ']' after a pair")?;
                    }
                }
                ln.key("output")?;
                let output: u32 = ln.int("an output wire")?;
                NodeKind::Network {
                    inputs,
                    width,
                    pairs,
                    output,
                }
            }
            "window" => {
                let rop = ln.reduce_op()?;
                let x = ln.operand()?;
                ln.key("footprint")?;
                ln.punct('[', "'[' before the footprint")?;
                let mut offsets = Vec::new();
                if !ln.eat_punct(']') {
                    loop {
                        offsets.push(ln.int_list("offsets")?);
                        if ln.eat_punct(']') {
                            break;
                        }
                        ln.punct(',', "',' or ']' after an offset")?;
                    }
                }
                ln.key("border")?;
                let border = ln.border()?;
                NodeKind::WindowReduce {
                    x,
                    op: rop,
                    footprint: Footprint { offsets },
                    border,
                }
            }
            "scan" | "reduce" => {
                let rop = ln.reduce_op()?;
                let x = ln.operand()?;
                ln.key("axis")?;
                let axis: usize = ln.int("an axis")?;
                if op == "scan" {
                    NodeKind::Scan { x, axis, op: rop }
                } else {
                    NodeKind::AxisReduce { x, axis, op: rop }
                }
            }
            "line" => {
                let x = ln.operand()?;
                NodeKind::Line {
                    x,
                    program: ln.line_program()?,
                }
            }
            _ => {
                return Err(syntax(
                    ln.lineno,
                    op_col,
                    format!("unknown operation '{op}'"),
                ))
            }
        }
    };
    let annotation = if ln.eat_punct(':') {
        let col = ln.col();
        Some((col, ln.tensor_type()?))
    } else {
        None
    };
    ln.end()?;
    let id = build(b.add(kind), ln)?;
    if let Some((col, ty)) = annotation {
        let inferred = b.ty(id).cloned();
        if inferred.as_ref() != Some(&ty) {
            return Err(syntax(
                ln.lineno,
                col,
                format!(
                    "type {ty} does not match the inferred type {}",
                    inferred.map_or("?".to_string(), |t| t.to_string())
                ),
            ));
        }
    }
    Ok(id)
}
