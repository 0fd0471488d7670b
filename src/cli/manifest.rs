//! The `kiln aot build` manifest (`kernels.toml`): which operators to compile, with which
//! parameters, ranks and dtypes (format in docs/AOT.md, example in
//! `examples/aot/kernels.toml`).
//!
//! Scope: a small TOML subset, enough for the format and checked strictly: `#` comments,
//! `[[kernel]]` table headers, and `key = value` lines whose value is a basic string, an
//! integer, an array of those, or an inline table of those (`params = { k = 5 }`). Anything
//! else (other tables, multi-line values, unknown keys, missing fields) is a
//! [`ManifestError`] naming the line; nothing panics. Limits: no escapes in strings other
//! than `\"` and `\\`, no floats (pass them as strings: `params = { sigma = "1.5" }`).

use kiln::ir::DType;
use thiserror::Error;

/// One `[[kernel]]` of a manifest: an operator instance to compile for every dtype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// Registry name (`kiln run --op`).
    pub op: String,
    /// Parameters as `name=value` strings, in manifest order.
    pub params: Vec<(String, String)>,
    /// Rank of the input tensor.
    pub rank: usize,
    /// Input dtypes: one graph per dtype.
    pub dtypes: Vec<DType>,
    /// Shape the graph is built for (the kernels are shape-free; default: 1 along the
    /// leading axes, 64 along the last two).
    pub shape: Vec<usize>,
    /// Line of the `[[kernel]]` header.
    pub line: usize,
}

/// Why a manifest was rejected.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ManifestError {
    /// A line is not valid in the supported TOML subset.
    #[error("manifest line {line}: {msg}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// A `[[kernel]]` table lacks a field or has a wrong one.
    #[error("manifest [[kernel]] at line {line}: {msg}")]
    Kernel {
        /// Line of the table header.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// No `[[kernel]]` table.
    #[error("manifest lists no [[kernel]]")]
    Empty,
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Str(String),
    Int(i64),
    Array(Vec<Value>),
    Table(Vec<(String, Value)>),
}

impl Value {
    /// A scalar as parameter text.
    fn as_param(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            _ => None,
        }
    }
}

/// Parses a manifest.
pub fn parse(text: &str) -> Result<Vec<KernelSpec>, ManifestError> {
    let mut tables: Vec<(usize, Vec<(String, Value)>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let syn = |msg: &str| ManifestError::Syntax {
            line,
            msg: msg.to_string(),
        };
        let mut p = Parser {
            s: raw.as_bytes(),
            pos: 0,
        };
        p.ws();
        if p.done() {
            continue;
        }
        if p.eat("[[") {
            p.ws();
            let name = p.key().ok_or_else(|| syn("expected a table name"))?;
            p.ws();
            if !p.eat("]]") || name != "kernel" {
                return Err(syn("only [[kernel]] tables are supported"));
            }
            p.ws();
            if !p.done() {
                return Err(syn("unexpected text after [[kernel]]"));
            }
            tables.push((line, Vec::new()));
            continue;
        }
        let key = p.key().ok_or_else(|| syn("expected key = value"))?;
        p.ws();
        if !p.eat("=") {
            return Err(syn("expected '=' after the key"));
        }
        p.ws();
        let value = p.value(0).map_err(|m| syn(&m))?;
        p.ws();
        if !p.done() {
            return Err(syn("unexpected text after the value"));
        }
        let Some((_, fields)) = tables.last_mut() else {
            return Err(syn("key outside a [[kernel]] table"));
        };
        if fields.iter().any(|(k, _)| *k == key) {
            return Err(syn(&format!("duplicate key '{key}'")));
        }
        fields.push((key, value));
    }
    if tables.is_empty() {
        return Err(ManifestError::Empty);
    }
    tables.into_iter().map(|(l, f)| spec(l, f)).collect()
}

fn spec(line: usize, fields: Vec<(String, Value)>) -> Result<KernelSpec, ManifestError> {
    let bad = |msg: String| ManifestError::Kernel { line, msg };
    let mut op = None;
    let mut params = Vec::new();
    let mut rank = None;
    let mut dtypes = Vec::new();
    let mut shape = None;
    for (k, v) in fields {
        match (k.as_str(), v) {
            ("op", Value::Str(s)) => op = Some(s),
            ("params", Value::Table(t)) => {
                for (name, v) in t {
                    let text = v.as_param().ok_or_else(|| {
                        bad(format!("parameter '{name}' is not a string or integer"))
                    })?;
                    params.push((name, text));
                }
            }
            ("rank", Value::Int(r)) if (1..=8).contains(&r) => rank = Some(r as usize),
            ("dtypes", Value::Array(a)) => {
                for d in a {
                    let name = match d {
                        Value::Str(s) => s,
                        _ => return Err(bad("dtypes must be strings".into())),
                    };
                    dtypes.push(
                        DType::from_name(&name)
                            .ok_or_else(|| bad(format!("unknown dtype '{name}'")))?,
                    );
                }
            }
            ("shape", Value::Array(a)) => {
                let dims = a
                    .iter()
                    .map(|d| match d {
                        Value::Int(n) if *n >= 1 => Ok(*n as usize),
                        _ => Err(bad("shape must be positive integers".into())),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                shape = Some(dims);
            }
            (k, _) => return Err(bad(format!("unknown key or wrong value type: '{k}'"))),
        }
    }
    let op = op.ok_or_else(|| bad("missing op = \"name\"".into()))?;
    let rank = rank.ok_or_else(|| bad("missing rank = 1..8".into()))?;
    if dtypes.is_empty() {
        return Err(bad("missing dtypes = [\"f32\", ...]".into()));
    }
    let shape = match shape {
        Some(s) if s.len() == rank => s,
        Some(s) => return Err(bad(format!("shape has {} axes, rank is {rank}", s.len()))),
        None => (0..rank)
            .map(|a| if a + 2 >= rank { 64 } else { 1 })
            .collect(),
    };
    Ok(KernelSpec {
        op,
        params,
        rank,
        dtypes,
        shape,
        line,
    })
}

/// A cursor over one line.
struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && (self.s[self.pos] == b' ' || self.s[self.pos] == b'\t') {
            self.pos += 1;
        }
    }

    /// At the end of the line or at a comment.
    fn done(&self) -> bool {
        self.pos >= self.s.len() || self.s[self.pos] == b'#'
    }

    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.pos..].starts_with(t.as_bytes()) {
            self.pos += t.len();
            true
        } else {
            false
        }
    }

    fn key(&mut self) -> Option<String> {
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric() || b"_-".contains(&self.s[self.pos]))
        {
            self.pos += 1;
        }
        (self.pos > start).then(|| String::from_utf8_lossy(&self.s[start..self.pos]).into_owned())
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > 2 {
            return Err("values nested too deeply".into());
        }
        match self.s.get(self.pos) {
            Some(b'"') => self.string().map(Value::Str),
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.eat("]") {
                        return Ok(Value::Array(items));
                    }
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if !self.eat(",") {
                        self.ws();
                        if self.eat("]") {
                            return Ok(Value::Array(items));
                        }
                        return Err("expected ',' or ']' in an array".into());
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                let mut fields: Vec<(String, Value)> = Vec::new();
                self.ws();
                if self.eat("}") {
                    return Ok(Value::Table(fields));
                }
                loop {
                    self.ws();
                    let k = self.key().ok_or("expected a key in an inline table")?;
                    self.ws();
                    if !self.eat("=") {
                        return Err("expected '=' in an inline table".into());
                    }
                    self.ws();
                    let v = self.value(depth + 1)?;
                    if fields.iter().any(|(f, _)| *f == k) {
                        return Err(format!("duplicate key '{k}' in an inline table"));
                    }
                    fields.push((k, v));
                    self.ws();
                    if self.eat("}") {
                        return Ok(Value::Table(fields));
                    }
                    if !self.eat(",") {
                        return Err("expected ',' or '}' in an inline table".into());
                    }
                }
            }
            Some(c) if c.is_ascii_digit() || *c == b'-' || *c == b'+' => {
                let start = self.pos;
                self.pos += 1;
                while self.pos < self.s.len()
                    && (self.s[self.pos].is_ascii_digit() || self.s[self.pos] == b'_')
                {
                    self.pos += 1;
                }
                let text: String =
                    String::from_utf8_lossy(&self.s[start..self.pos]).replace('_', "");
                text.parse::<i64>()
                    .map(Value::Int)
                    .map_err(|_| format!("'{text}' is not an integer"))
            }
            _ => Err("expected a string, an integer, an array or an inline table".into()),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.pos += 1;
        let mut out = Vec::new();
        while let Some(&c) = self.s.get(self.pos) {
            self.pos += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|_| "string is not UTF-8".into()),
                b'\\' => match self.s.get(self.pos) {
                    Some(&e @ (b'"' | b'\\')) => {
                        out.push(e);
                        self.pos += 1;
                    }
                    _ => return Err("only \\\" and \\\\ escapes are supported".into()),
                },
                _ => out.push(c),
            }
        }
        Err("unterminated string".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_manifest_parses() {
        let text = include_str!("../../examples/aot/kernels.toml");
        let specs = parse(text).unwrap();
        assert!(specs.len() >= 3);
        assert_eq!(specs[0].op, "median_blur");
        assert_eq!(specs[0].params, vec![("k".into(), "3".into())]);
        assert_eq!(specs[0].shape, vec![1, 1, 64, 64]);
    }

    #[test]
    fn values_and_errors() {
        let s = parse(
            "# c\n[[kernel]]\nop = \"grey_opening\" # c\nparams = { size = 3, mode = \"reflect\" }\nrank = 2\ndtypes = [\"f32\", \"u8\",]\nshape = [8, 9]\n",
        )
        .unwrap();
        assert_eq!(s[0].rank, 2);
        assert_eq!(s[0].dtypes, vec![DType::F32, DType::U8]);
        assert_eq!(s[0].shape, vec![8, 9]);
        assert_eq!(s[0].params[1], ("mode".into(), "reflect".into()));
        let bad = [
            ("", ManifestError::Empty),
            (
                "op = \"x\"",
                ManifestError::Syntax {
                    line: 1,
                    msg: "key outside a [[kernel]] table".into(),
                },
            ),
        ];
        for (t, e) in bad {
            assert_eq!(parse(t), Err(e));
        }
        for t in [
            "[table]",
            "[[kernel]]\nop = \"x\nrank = 2",
            "[[kernel]]\nop = 1.5",
            "[[kernel]]\nop = \"a\"\nop = \"b\"",
            "[[kernel]]\nop = \"a\"\nrank = 9\ndtypes = [\"f32\"]",
            "[[kernel]]\nop = \"a\"\nrank = 2\ndtypes = [\"f17\"]",
            "[[kernel]]\nop = \"a\"\nrank = 2",
            "[[kernel]]\nrank = 2\ndtypes = [\"f32\"]",
            "[[kernel]]\nop = \"a\"\nrank = 2\ndtypes = [\"f32\"]\nshape = [1]",
            "[[kernel]]\nop = \"a\"\nextra = 1",
            "[[kernel]]\nparams = { k = [1, [2, [3]]] }",
        ] {
            assert!(parse(t).is_err(), "{t:?}");
        }
    }
}
