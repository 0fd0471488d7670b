//! Text form of line nodes: print -> parse gives the identical graph (the toy running max
//! with NaN reset, a chamfer pass, casts/selects/backward/final keeps), and malformed line
//! nodes give `ParseError`s with line:col, never panics.

use kiln_ir::parser::{parse, ParseError};
use kiln_ir::printer::print;
use kiln_ir::{
    BinaryOp, DType, Graph, GraphBuilder, LineKeep, LineOp, LineProgram, Scalar, UnaryOp,
};

/// `c' = isnan(x) ? -inf : max(c, x)`, keeping `max(c, x)` or the final carry.
fn running_max_reset(axis: usize, backward: bool, each: bool) -> LineProgram {
    LineProgram {
        axis,
        backward,
        init: vec![Scalar::f32(f32::NEG_INFINITY)],
        step: vec![
            LineOp::Unary(UnaryOp::IsNan, 1),
            LineOp::Binary(BinaryOp::Max, 0, 1),
            LineOp::Const(Scalar::f32(f32::NEG_INFINITY)),
            LineOp::Select(2, 4, 3),
        ],
        next: vec![5],
        keep: if each {
            LineKeep::Each(3)
        } else {
            LineKeep::Final(0)
        },
    }
}

/// Two carries of different dtypes, a cast, a NaN constant and a u8 counter.
fn mixed(axis: usize) -> LineProgram {
    LineProgram {
        axis,
        backward: true,
        init: vec![Scalar::f32(0.0), Scalar::U8(0)],
        step: vec![
            LineOp::Const(Scalar::f32(f32::NAN)), // 3
            LineOp::Binary(BinaryOp::Add, 0, 2),  // 4
            LineOp::Const(Scalar::U8(1)),         // 5
            LineOp::Binary(BinaryOp::Add, 1, 5),  // 6
            LineOp::Cast(6, DType::F32),          // 7
            LineOp::Binary(BinaryOp::Lt, 4, 7),   // 8
            LineOp::Select(8, 3, 4),              // 9
        ],
        next: vec![9, 6],
        keep: LineKeep::Final(1),
    }
}

fn graph(p: LineProgram, shape: &[usize]) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let y = b.line(x, p).unwrap();
    let z = b.binary(BinaryOp::Add, x, x).unwrap();
    b.finish(&[y, z]).unwrap()
}

fn round_trip(g: &Graph) {
    let text = print(g);
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, g, "{text}");
    assert_eq!(print(&back), text);
}

#[test]
fn running_max_reset_round_trips() {
    for axis in 1..3 {
        for backward in [false, true] {
            for each in [false, true] {
                round_trip(&graph(running_max_reset(axis, backward, each), &[1, 3, 5]));
            }
        }
    }
    let text = print(&graph(running_max_reset(2, false, true), &[1, 3, 5]));
    assert!(
        text.contains("line %0 axis=2 dir=forward init=[f32:"),
        "{text}"
    );
    assert!(text.contains("keep=each(3)"), "{text}");
}

#[test]
fn mixed_program_round_trips() {
    round_trip(&graph(mixed(2), &[1, 4, 2]));
    round_trip(&graph(mixed(1), &[1, 4, 2]));
}

#[test]
fn docs_example_parses_and_prints_back() {
    let text = "%0 = input 0 : f32[1,1,8]\n%1 = line %0 axis=2 dir=forward init=[f32:0xff800000] step=[is_nan(1), max(0,1), const(f32:0xff800000), select(2,4,3)] next=[5] keep=each(3) : f32[1,1,8]\nreturn %1\n";
    let g = parse(text).unwrap();
    assert_eq!(print(&g), text);
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 8]).unwrap();
    let y = b.line(x, running_max_reset(2, false, true)).unwrap();
    assert_eq!(g, b.finish(&[y]).unwrap());
}

#[test]
fn hand_written_line_parses() {
    let text = "%x = input 0 : f32[1,2,6]\n\
                %y = line %x axis=2 dir=forward init=[f32:inf] \
                step=[const(f32:1.0), add(0,2), min(3,1)] next=[4] keep=each(4) : f32[1,2,6]\n\
                return %y\n";
    let g = parse(text).unwrap();
    match &g.nodes[1].kind {
        kiln_ir::NodeKind::Line { program, .. } => {
            assert_eq!(program.step.len(), 3);
            assert_eq!(program.keep, LineKeep::Each(4));
        }
        k => panic!("not a line node: {k:?}"),
    }
}

fn err(body: &str) -> ParseError {
    let text = format!("%x = input 0 : f32[1,2,6]\n%y = line %x {body}\nreturn %y\n");
    match parse(&text) {
        Ok(g) => panic!("parsed: {g:?}\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn malformed_line_nodes_are_errors() {
    let ok = "axis=2 dir=forward init=[f32:inf] step=[const(f32:1.0), add(0,2), min(3,1)] next=[4] keep=each(4)";
    assert!(parse(&format!(
        "%x = input 0 : f32[1,2,6]\n%y = line %x {ok}\nreturn %y\n"
    ))
    .is_ok());
    // (body, the text at which the error must point; col = 13 + its offset + 1).
    let cases: &[(&str, &str)] = &[
        (
            "axis=2 dir=sideways init=[] step=[] next=[] keep=each(1)",
            "sideways",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[frob(0,1)] next=[0] keep=each(0)",
            "frob",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[add(0)] next=[0] keep=each(0)",
            ")]",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[add(0,1,2)] next=[0] keep=each(0)",
            ",2)",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[] next=[0] keep=later(0)",
            "later",
        ),
        ("axis=2 dir=forward init=[f32:inf] step=[] next=[0]", "@END"),
        (
            "axis=2 dir=forward init=[f32:inf step=[] next=[0] keep=each(0)",
            "step",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[cast(0,f16)] next=[0] keep=each(0)",
            "f16",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[const(f32:abc)] next=[0] keep=each(0)",
            "abc",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[add(0,99999999999)] next=[0] keep=each(0)",
            "9999",
        ),
        (
            "axis=2 dir=forward init=[f32:inf] step=[] next=[0] keep=each(0) junk",
            "junk",
        ),
        ("axis=2", "@END"),
    ];
    for (body, at) in cases {
        let col = 13 + body.find(at).unwrap_or(body.len()) + 1;
        match err(body) {
            ParseError::Syntax {
                line,
                col: c,
                message,
            } => {
                eprintln!("{c} {message}: {body}");
                assert_eq!((line, c), (2, col), "{body}: {message}")
            }
            e => panic!("{body}: not a syntax error: {e}"),
        }
    }
    // Well formed but ill-typed/out-of-range programs: rejected by the builder.
    for body in [
        "axis=2 dir=forward init=[f32:inf] step=[add(0,7)] next=[2] keep=each(2)",
        "axis=2 dir=forward init=[f32:inf] step=[is_nan(1)] next=[2] keep=each(2)",
        "axis=2 dir=forward init=[f32:inf] step=[] next=[] keep=each(0)",
        "axis=2 dir=forward init=[f32:inf] step=[] next=[0] keep=final(3)",
        "axis=2 dir=forward init=[f32:inf] step=[] next=[0] keep=each(9)",
        "axis=5 dir=forward init=[f32:inf] step=[] next=[0] keep=each(0)",
    ] {
        match err(body) {
            ParseError::Build { line, col, .. } => assert_eq!((line, col), (2, 6), "{body}"),
            e => panic!("{body}: not a build error: {e}"),
        }
    }
}

#[test]
fn truncated_line_texts_never_panic() {
    let text = print(&graph(mixed(1), &[1, 4, 2]));
    let chars: Vec<char> = text.chars().collect();
    for n in 0..chars.len() {
        let s: String = chars[..n].iter().collect();
        let _ = parse(&s);
        let mut t = chars.clone();
        t.remove(n);
        let _ = parse(&t.into_iter().collect::<String>());
    }
}
