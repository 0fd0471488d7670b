//! Printer/parser round trip and parse errors.

mod common;

use kiln_ir::parser::{parse, ParseError};
use kiln_ir::printer::print;
use kiln_ir::{Border, BuildError, DType, Footprint, GraphBuilder, NodeKind, ReduceOp, Scalar};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn print_parse_round_trip(g in common::graphs()) {
        let text = print(&g);
        let back = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &g, "{}", text);
        // Display is the same text.
        prop_assert_eq!(g.to_string(), text);
    }
}

#[test]
fn generator_covers_every_node_kind() {
    let mut seen = std::collections::HashSet::new();
    for seed in 0..300u64 {
        let g = common::random_graph(seed, 30);
        for n in &g.nodes {
            seen.insert(n.kind.name());
        }
    }
    for k in [
        "input", "const", "unary", "binary", "select", "cast", "gather", "network", "window",
        "scan", "reduce",
    ] {
        assert!(seen.contains(k), "generator never made a {k} node");
    }
}

#[test]
fn prints_the_documented_form() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 8, 8]).unwrap();
    let g1 = b
        .gather(x, &[-1, 0], Border::Constant(Scalar::f32(0.0)))
        .unwrap();
    let nan = b.constant(Scalar::F32(0x7fc0_0001), &[1, 1, 8, 8]).unwrap();
    let m = b.binary(kiln_ir::BinaryOp::Max, g1, nan).unwrap();
    let w = b
        .window_reduce(
            m,
            ReduceOp::Sum,
            &Footprint {
                offsets: vec![vec![0, 0], vec![0, 1]],
            },
            Border::Reflect,
        )
        .unwrap();
    let n = b.network(&[x, w], 3, &[(0, 2), (0, 1)], 1).unwrap();
    let s = b.scan(n, 3, ReduceOp::Max).unwrap();
    let g = b.finish(&[s, x]).unwrap();
    let want = "\
%0 = input 0 : f32[1,1,8,8]
%1 = gather %0 offset=[-1,0] border=constant(f32:0.0) : f32[1,1,8,8]
%2 = const f32:0x7fc00001 : f32[1,1,8,8]
%3 = max %1, %2 : f32[1,1,8,8]
%4 = window sum %3 footprint=[[0,0],[0,1]] border=reflect : f32[1,1,8,8]
%5 = network %0, %4 width=3 pairs=[(0,2),(0,1)] output=1 : f32[1,1,8,8]
%6 = scan max %5 axis=3 : f32[1,1,8,8]
return %6, %0
";
    assert_eq!(print(&g), want);
    assert_eq!(parse(want).unwrap(), g);
}

#[test]
fn parser_accepts_names_comments_and_missing_types() {
    let text = "
# a comment
%x = input 0 : u8[1,2,3]   # trailing comment
%two = const u8:2 : u8[1,2,3]
%y = mul %x, %two
%m = reduce sum %y axis=2
return %m
";
    let g = parse(text).unwrap();
    assert_eq!(g.len(), 4);
    assert_eq!(g.nodes[3].ty.shape, vec![1, 2, 1]);
    assert!(matches!(g.nodes[2].kind, NodeKind::Binary { .. }));
}

#[test]
fn float_scalars_round_trip_bit_exactly() {
    for bits in common::F32_SPECIAL {
        let text = format!("%0 = const {} : f32[1,1,1]\nreturn %0\n", Scalar::F32(bits));
        let g = parse(&text).unwrap();
        assert_eq!(
            g.nodes[0].kind,
            NodeKind::Constant {
                value: Scalar::F32(bits)
            }
        );
    }
    for bits in common::F64_SPECIAL {
        let text = format!("%0 = const {} : f64[1,1,1]\nreturn %0\n", Scalar::F64(bits));
        let g = parse(&text).unwrap();
        assert_eq!(
            g.nodes[0].kind,
            NodeKind::Constant {
                value: Scalar::F64(bits)
            }
        );
    }
    // Decimal forms are parsed directly in the target precision (no double rounding).
    let g = parse("%0 = const f32:0.1 : f32[1,1,1]\nreturn %0").unwrap();
    assert_eq!(
        g.nodes[0].kind,
        NodeKind::Constant {
            value: Scalar::f32(0.1)
        }
    );
}

/// Parses `text` and returns the error's (line, col, message).
fn err(text: &str) -> (usize, usize, String) {
    let e = parse(text).expect_err("text should not parse");
    (e.line(), e.col(), e.to_string())
}

const HEAD: &str = "%0 = input 0 : f32[1,1,8,8]\n";

#[test]
fn error_bad_token() {
    let (l, c, m) = err(&format!("{HEAD}%1 = neg %0 $ : f32[1,1,8,8]\nreturn %1"));
    assert_eq!((l, c), (2, 13), "{m}");
    assert!(m.starts_with("2:13: unexpected character '$'"), "{m}");
}

#[test]
fn error_unknown_op() {
    let (l, c, m) = err(&format!("{HEAD}%1 = frobnicate %0\nreturn %1"));
    assert_eq!((l, c), (2, 6), "{m}");
    assert!(m.contains("unknown operation 'frobnicate'"), "{m}");
}

#[test]
fn error_bad_scalar() {
    let (l, c, m) = err("%0 = const f32:1.2.3 : f32[1,1,1]\nreturn %0");
    assert_eq!((l, c), (1, 16), "{m}");
    assert!(m.contains("bad f32 scalar '1.2.3'"), "{m}");
    let (l, c, m) = err("%0 = const u8:256 : u8[1,1,1]\nreturn %0");
    assert_eq!((l, c), (1, 15), "{m}");
    let (l, c, m2) = err("%0 = const f32:0x7fc0 : f32[1,1,1]\nreturn %0");
    assert_eq!((l, c), (1, 16), "{m2} {m}");
}

#[test]
fn error_missing_bracket() {
    let (l, c, m) = err(&format!(
        "{HEAD}%1 = gather %0 offset=[-1,0 border=reflect\nreturn %1"
    ));
    assert_eq!((l, c), (2, 29), "{m}");
    assert!(m.contains("expected ',' or ']' after offsets"), "{m}");
    let (l, c, m) = err("%0 = input 0 : f32[1,1,8\nreturn %0");
    assert_eq!((l, c), (1, 25), "{m}");
    assert!(m.contains("found end of line"), "{m}");
}

#[test]
fn error_unknown_operand() {
    let (l, c, m) = err(&format!("{HEAD}%1 = add %0, %7\nreturn %1"));
    assert_eq!((l, c), (2, 14), "{m}");
    assert!(m.contains("unknown operand '%7'"), "{m}");
    let (l, c, _) = err(&format!("{HEAD}return %0, %3"));
    assert_eq!((l, c), (2, 12));
}

#[test]
fn error_structure() {
    // Missing return.
    let (l, c, m) = err(HEAD);
    assert_eq!((l, c), (2, 1), "{m}");
    // Text after return.
    let (l, c, _) = err(&format!("{HEAD}return %0\n%1 = neg %0"));
    assert_eq!((l, c), (3, 1));
    // Redefinition.
    let (l, c, m) = err(&format!("{HEAD}%0 = neg %0\nreturn %0"));
    assert_eq!((l, c), (2, 1));
    assert!(m.contains("already defined"), "{m}");
    // Input index out of order.
    let (l, c, m) = err("%0 = input 1 : f32[1,1,1]\nreturn %0");
    assert_eq!((l, c), (1, 12));
    assert!(m.contains("expected input index 0"), "{m}");
    // Type annotation that does not match.
    let (l, c, m) = err(&format!("{HEAD}%1 = is_nan %0 : f32[1,1,8,8]\nreturn %1"));
    assert_eq!((l, c), (2, 18), "{m}");
    assert!(
        m.contains("does not match the inferred type bool[1,1,8,8]"),
        "{m}"
    );
    // Constant dtype vs type.
    let (l, c, _) = err("%0 = const u8:1 : f32[1,1,1]\nreturn %0");
    assert_eq!((l, c), (1, 19));
    // Trailing junk.
    let (l, c, m) = err(&format!(
        "{HEAD}%1 = neg %0 : f32[1,1,8,8] extra\nreturn %1"
    ));
    assert_eq!((l, c), (2, 28), "{m}");
    // Bad border mode.
    let (l, c, m) = err(&format!(
        "{HEAD}%1 = gather %0 offset=[0,0] border=clamp\nreturn %1"
    ));
    assert_eq!((l, c), (2, 36), "{m}");
}

#[test]
fn builder_errors_carry_the_line() {
    let e = parse(&format!("{HEAD}%1 = not %0\nreturn %1")).unwrap_err();
    match &e {
        ParseError::Build { line, col, source } => {
            assert_eq!((*line, *col), (2, 6));
            assert!(
                matches!(source, BuildError::DType { node: 1, .. }),
                "{source:?}"
            );
        }
        other => panic!("expected a build error, got {other:?}"),
    }
    assert!(e.to_string().starts_with("2:6: node %1 (unary)"), "{e}");
    let e = parse(&format!(
        "{HEAD}%1 = gather %0 offset=[0] border=wrap\nreturn %1"
    ))
    .unwrap_err();
    assert!(
        matches!(
            e,
            ParseError::Build {
                line: 2,
                source: BuildError::Invalid { .. },
                ..
            }
        ),
        "{e:?}"
    );
    let e = parse("%0 = input 0 : f32[1,1]\nreturn %0").unwrap_err();
    assert!(
        matches!(
            e,
            ParseError::Build {
                line: 1,
                source: BuildError::BadShape { .. },
                ..
            }
        ),
        "{e:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Mutated text gives a graph or an error, never a panic; errors point inside the text.
    #[test]
    fn mutated_text_never_panics(g in common::graphs(), pos in any::<usize>(), what in 0usize..4, c in prop::sample::select(vec!['[', ']', ',', '%', '-', '9', 'x', ' ', ':', '(', '\n', '0', 'f'])) {
        let mut chars: Vec<char> = print(&g).chars().collect();
        let p = pos % chars.len();
        match what {
            0 => { chars.remove(p); }
            1 => chars.insert(p, c),
            2 => chars[p] = c,
            _ => {
                for (k, d) in "-99999999999999999999".chars().enumerate() {
                    chars.insert(p + k, d);
                }
            }
        }
        let text: String = chars.into_iter().collect();
        if let Err(e) = parse(&text) {
            let lines = text.lines().count();
            prop_assert!(e.line() >= 1 && e.line() <= lines + 1, "{} for\n{}", e, text);
            prop_assert!(e.col() >= 1);
        }
    }
}

#[test]
fn doc_example_parses_and_round_trips() {
    let doc = include_str!("../../docs/IR_TEXT.md");
    let start = doc.find("```text\n").unwrap() + 8;
    let end = start + doc[start..].find("```").unwrap();
    let g = parse(&doc[start..end]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.len(), 12);
    assert_eq!(parse(&print(&g)).unwrap(), g);
}
