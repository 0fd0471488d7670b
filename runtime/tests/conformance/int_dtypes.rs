//! Conformance cases for the integer dtypes i8, u16, i16, i32 and u32: networks (median),
//! windows and scans under every border, a multi-stage opening, pointwise chains with every
//! arithmetic op, comparison, select and cast, and the registry's grey morphology and
//! median filter, eager against each runner, bit for bit.
//!
//! Exactness: compared with `first_difference` like every conformance case. The inputs
//! (`super::data`) mix values around zero, the dtype's extremes and their neighbours, and
//! random bit patterns, so wrapping arithmetic, division by 0 and by -1 of the minimum,
//! and the signed/unsigned order are all exercised. Limits: shapes are small.

use kiln_ir::{BinaryOp, Border, DType, Footprint, GraphBuilder, ReduceOp, TensorType, UnaryOp};

use super::{check, cval_of, median3, window, Runner, SHAPES_2D};

/// The integer dtypes beyond u8.
pub const INTS: [DType; 5] = [DType::I8, DType::U16, DType::I16, DType::I32, DType::U32];

/// Median networks, windows (min, max, sum) under every border, scans and reductions.
pub fn int_windows_networks_and_scans(runners: &[&dyn Runner]) {
    let fps = [
        Footprint::scipy_box(&[3, 3], &[0, 0]),
        Footprint::scipy_masked(
            &[3, 3],
            &[false, true, false, true, true, true, false, true, false],
            &[0, 0],
        ),
        Footprint::scipy_box(&[2, 7], &[0, 1]),
    ];
    for dtype in INTS {
        for shape in SHAPES_2D {
            for border in Border::all(cval_of(dtype)) {
                let g = median3(dtype, &shape, border);
                check(runners, &g, &format!("median {dtype} {border}"));
                for fp in &fps {
                    for op in [ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum] {
                        let g = window(dtype, &shape, op, fp, border);
                        check(runners, &g, &format!("window {dtype} {op:?} {border}"));
                    }
                }
            }
        }
        for shape in [[2usize, 3, 4, 5], [1, 1, 1, 70]] {
            for axis in 0..4 {
                for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max] {
                    let mut b = GraphBuilder::new();
                    let x = b.input(dtype, &shape).unwrap();
                    let s = b.scan(x, axis, op).unwrap();
                    let r = b.axis_reduce(x, axis, op).unwrap();
                    let g = b.finish(&[s, r]).unwrap();
                    check(runners, &g, &format!("scan/reduce {dtype} {op:?} {axis}"));
                }
            }
        }
    }
}

/// A two-stage opening and a three-stage top-hat-like chain (`x - opening`, wrapping).
pub fn int_opening_and_tophat(runners: &[&dyn Runner]) {
    let fp = Footprint::scipy_box(&[3, 5], &[0, 0]);
    for dtype in INTS {
        for shape in SHAPES_2D {
            for border in Border::all(cval_of(dtype)) {
                let mut b = GraphBuilder::new();
                let x = b.input(dtype, &shape).unwrap();
                let e = b.window_reduce(x, ReduceOp::Min, &fp, border).unwrap();
                let d = b.window_reduce(e, ReduceOp::Max, &fp, border).unwrap();
                let t = b.binary(BinaryOp::Sub, x, d).unwrap();
                let s = b.gather(d, &[-2, 3], Border::Wrap).unwrap();
                let m = b.binary(BinaryOp::Max, s, t).unwrap();
                let g = b.finish(&[d, m]).unwrap();
                check(runners, &g, &format!("opening/tophat {dtype} {border}"));
            }
        }
    }
}

/// Every arithmetic op, neg, abs, comparison and select on each integer dtype, and casts
/// to and from every dtype.
pub fn int_pointwise_and_casts(runners: &[&dyn Runner]) {
    for dtype in INTS {
        for shape in [[1usize, 1, 1, 1], [2, 3, 7, 5], [1, 1, 17, 33]] {
            let mut b = GraphBuilder::new();
            let x = b.input(dtype, &shape).unwrap();
            let y = b.input(dtype, &shape).unwrap();
            let mut outs = Vec::new();
            for op in [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Min,
                BinaryOp::Max,
                BinaryOp::Lt,
                BinaryOp::Le,
                BinaryOp::Gt,
                BinaryOp::Ge,
                BinaryOp::Eq,
                BinaryOp::Ne,
            ] {
                outs.push(b.binary(op, x, y).unwrap());
            }
            // x / x: the divisor is zero where x is.
            outs.push(b.binary(BinaryOp::Div, x, x).unwrap());
            let n = b.unary(UnaryOp::Neg, x).unwrap();
            let a = b.unary(UnaryOp::Abs, y).unwrap();
            let lt = b.binary(BinaryOp::Lt, n, a).unwrap();
            let sel = b.select(lt, n, a).unwrap();
            outs.extend([n, a, sel]);
            for to in DType::ALL {
                let c = b.cast(sel, to).unwrap();
                let back = b.cast(c, dtype).unwrap();
                outs.extend([c, back]);
            }
            // from every other dtype into this one (f32 with NaN, infinities, big values)
            for from in DType::ALL {
                let c = b.cast(x, from).unwrap();
                let c2 = b.unary(UnaryOp::Neg, c);
                let c = match c2 {
                    Ok(v) if from != dtype => v,
                    _ => c,
                };
                outs.push(b.cast(c, dtype).unwrap());
            }
            let g = b.finish(&outs).unwrap();
            check(runners, &g, &format!("pointwise {dtype} {shape:?}"));
        }
        // f32 and f64 sources with special values (NaN, inf, huge) into this dtype
        for from in [DType::F32, DType::F64] {
            let shape = [1usize, 2, 9, 13];
            let mut b = GraphBuilder::new();
            let x = b.input(from, &shape).unwrap();
            let c = b.cast(x, dtype).unwrap();
            let g = b.finish(&[c]).unwrap();
            check(runners, &g, &format!("cast {from} -> {dtype}"));
        }
    }
}

/// The registry's grey morphology and median filter on every integer dtype and mode.
pub fn int_grey_morphology_and_median(runners: &[&dyn Runner]) {
    let modes = ["constant", "reflect", "mirror", "nearest", "wrap"];
    for dtype in INTS {
        for shape in [
            [1usize, 1, 1, 1],
            [1, 1, 9, 1],
            [2, 1, 7, 5],
            [1, 1, 13, 34],
        ] {
            let ty = TensorType {
                dtype,
                shape: shape.to_vec(),
            };
            for op in [
                "grey_erosion",
                "grey_dilation",
                "grey_opening",
                "grey_closing",
                "median_filter",
            ] {
                for mode in modes {
                    for size in ["3", "2,5"] {
                        let params = vec![
                            ("size".to_string(), size.to_string()),
                            ("mode".to_string(), mode.to_string()),
                            ("cval".to_string(), "-3".to_string()),
                        ];
                        let g = kiln_ops::build_op(op, &params, &ty)
                            .unwrap_or_else(|e| panic!("{op} {dtype}: {e}"));
                        check(
                            runners,
                            &g,
                            &format!("{op} {dtype} {mode} {size} {shape:?}"),
                        );
                    }
                }
            }
        }
    }
}
