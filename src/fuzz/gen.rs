//! The case generator: random, well-typed graphs over kiln's whole op vocabulary, random
//! shapes and layouts, and random data. Deterministic for a given seed.

use kiln_ir::network::selection_network;
use kiln_ir::{
    BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, LineKeep, LineOp, LineProgram, NodeId,
    ReduceOp, Scalar, TensorType, UnaryOp,
};

use super::data::{random_data, random_order, random_scalar, InputData};
use super::rng::Rng;

/// Largest total number of elements per input the generator produces.
pub const MAX_CASE_ELEMENTS: usize = 20_000;

/// Widths of the wide rows some cases get: the CPU backend's shared vector steps (up to
/// 8 vectors, 128 byte columns), its one-vector loops and its edge vectors (from 48 byte
/// columns) need rows this wide.
pub const WIDE_ROWS: std::ops::RangeInclusive<usize> = 40..=170;
/// Largest gather offset / footprint radius the generator uses.
pub const MAX_RADIUS: i64 = 3;

/// One fuzz case: a graph and the data of its inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The seed the case was generated from (0 for hand-made or parsed cases without one).
    pub seed: u64,
    /// The graph.
    pub graph: Graph,
    /// One entry per graph input, in input order.
    pub inputs: Vec<InputData>,
}

impl Case {
    /// Number of nodes in the graph (inputs included).
    pub fn node_count(&self) -> usize {
        self.graph.len()
    }
}

/// Generates the case of `seed` with at most `max_nodes` non-input nodes (at least 1).
pub fn generate(seed: u64, max_nodes: usize) -> Case {
    generate_for(seed, max_nodes, true)
}

/// [`generate`], with extern nodes (calls of the runtime's built-in extern line functions)
/// only when `externs` is true: a backend that cannot run them (CUDA) gets none.
pub fn generate_for(seed: u64, max_nodes: usize, externs: bool) -> Case {
    let mut rng = Rng::new(seed);
    let shape = random_shape(&mut rng);
    let n_inputs = rng.range(1, 3);
    let main = DType::ALL[rng.weighted(&[5, 2, 2, 1, 1, 1, 1, 1, 1])];
    let mut g = Gen {
        rng: &mut rng,
        b: GraphBuilder::new(),
        pool: Vec::new(),
        extra_outputs: Vec::new(),
        externs,
    };
    for i in 0..n_inputs {
        let d = if i == 0 || g.rng.chance(0.7) {
            main
        } else {
            *g.rng.pick(&DType::ALL)
        };
        let id = g.b.input(d, &shape).expect("generator shapes are valid");
        g.pool.push(id);
    }
    let target = g.rng.range(1, max_nodes.max(1));
    let mut guard = 0;
    while g.pool.len() < n_inputs + target && guard < 10 * (target + 4) {
        guard += 1;
        g.step();
    }
    if g.pool.len() == n_inputs {
        // Every step failed (should not happen): fall back to a gather.
        let x = g.pool[0];
        let off = vec![1; shape.len() - 2];
        let id = g.b.gather(x, &off, Border::Nearest).expect("valid gather");
        g.pool.push(id);
    }
    let last = *g.pool.last().expect("non-empty pool");
    let mut outputs = vec![last];
    for o in std::mem::take(&mut g.extra_outputs) {
        if !outputs.contains(&o) && outputs.len() < 3 {
            outputs.push(o);
        }
    }
    // Prefer leaves (nodes nothing uses) as further outputs, so little code is dead.
    let n_out = g.rng.range(1, 3);
    let built = g.b.clone().finish(&outputs).expect("outputs exist");
    let users = built.users();
    let mut leaves: Vec<NodeId> = g.pool[n_inputs..]
        .iter()
        .copied()
        .filter(|&id| users[id.index()].is_empty() && !outputs.contains(&id))
        .collect();
    leaves.dedup();
    while outputs.len() < n_out && !leaves.is_empty() {
        let k = g.rng.index(leaves.len());
        outputs.push(leaves.swap_remove(k));
    }
    let graph = g.b.finish(&outputs).expect("outputs exist");
    let inputs = graph
        .inputs
        .iter()
        .map(|t| InputData {
            dtype: t.dtype,
            shape: t.shape.clone(),
            order: random_order(&mut rng, t.shape.len()),
            data: random_data(&mut rng, t.dtype, t.numel()),
        })
        .collect();
    let case = Case {
        seed,
        graph,
        inputs,
    };
    // Drop the nodes no output needs (and inputs only they read).
    super::shrink::without_dead_code(&case).unwrap_or(case)
}

/// A random shape `[B, C, S1..Sd]`: B, C in 1..=3, 1–4 spatial dims of size 1..=67, many
/// small, or, one time in seven, an innermost axis of [`WIDE_ROWS`] columns; at most
/// [`MAX_CASE_ELEMENTS`] elements (usually far fewer).
pub fn random_shape(rng: &mut Rng) -> Vec<usize> {
    let d = 1 + rng.weighted(&[3, 4, 2, 1]);
    let mut shape = vec![*rng.pick(&[1, 1, 1, 2, 3]), *rng.pick(&[1, 1, 2, 3])];
    for _ in 0..d {
        let s = match rng.weighted(&[6, 3, 1]) {
            0 => rng.range(1, 8),
            1 => rng.range(9, 24),
            _ => rng.range(25, 67),
        };
        shape.push(s);
    }
    let wide = rng.chance(1.0 / 7.0);
    if wide {
        let last = shape.len() - 1;
        shape[last] = rng.range(*WIDE_ROWS.start(), *WIDE_ROWS.end());
    }
    let limit = if rng.chance(0.1) {
        MAX_CASE_ELEMENTS
    } else {
        rng.range(64, 1500)
    };
    while shape.iter().product::<usize>() > limit {
        // A wide row is kept while another spatial axis can shrink.
        let inner = shape.len() - 1;
        let keep_inner = wide && shape[2..inner].iter().any(|&s| s > 1);
        let (ax, _) = shape
            .iter()
            .enumerate()
            .skip(2)
            .filter(|&(ax, _)| !(keep_inner && ax == inner))
            .max_by_key(|&(_, &s)| s)
            .expect("a spatial axis");
        if shape[ax] == 1 {
            break;
        }
        shape[ax] = shape[ax].div_ceil(2);
    }
    shape
}

/// A random border mode for a source of `dtype`.
pub fn random_border(rng: &mut Rng, dtype: DType) -> Border {
    match rng.below(5) {
        0 => Border::Constant(if rng.chance(0.4) {
            Scalar::zero(dtype)
        } else {
            random_scalar(rng, dtype)
        }),
        1 => Border::Reflect,
        2 => Border::Mirror,
        3 => Border::Nearest,
        _ => Border::Wrap,
    }
}

struct Gen<'r> {
    rng: &'r mut Rng,
    b: GraphBuilder,
    /// Every node built so far, in order.
    pool: Vec<NodeId>,
    /// Nodes that should become outputs (siblings of networks, so kept wires are shared).
    extra_outputs: Vec<NodeId>,
    /// Whether extern nodes may be generated.
    externs: bool,
}

/// The built-in extern line functions the generator calls (`kiln_runtime::line_extern`,
/// `BUILTIN_NAMES`), by the input dtypes they take.
const FLOAT_EXTERNS: [&str; 2] = ["kiln.median3", "kiln.copy"];
/// See [`FLOAT_EXTERNS`]; `kiln.since_true` takes one f32 parameter.
const FEATURE_EXTERNS: [&str; 3] = ["kiln.since_true", "kiln.nearest_true", "kiln.copy"];

const FLOATS_U8: [DType; 3] = [DType::F32, DType::F64, DType::U8];

impl Gen<'_> {
    fn ty(&self, id: NodeId) -> TensorType {
        self.b.ty(id).expect("pool nodes exist").clone()
    }

    fn push(&mut self, r: Result<NodeId, kiln_ir::BuildError>) -> Option<NodeId> {
        match r {
            Ok(id) => {
                self.pool.push(id);
                Some(id)
            }
            Err(_) => None,
        }
    }

    /// An operand, biased towards the most recent nodes so that chains form.
    fn operand(&mut self) -> NodeId {
        let n = self.pool.len();
        if n > 1 && self.rng.chance(0.6) {
            self.pool[n - 1 - self.rng.index(n.min(3))]
        } else {
            self.pool[self.rng.index(n)]
        }
    }

    /// An operand of exactly type `t` (making a cast or a constant when none exists).
    fn of_type(&mut self, t: &TensorType, avoid: Option<NodeId>) -> NodeId {
        let cands: Vec<NodeId> = self
            .pool
            .iter()
            .copied()
            .filter(|&id| Some(id) != avoid && self.b.ty(id) == Some(t))
            .collect();
        if !cands.is_empty() && self.rng.chance(0.8) {
            return *self.rng.pick(&cands);
        }
        let same_shape: Vec<NodeId> = self
            .pool
            .iter()
            .copied()
            .filter(|&id| self.b.ty(id).map(|x| &x.shape) == Some(&t.shape))
            .collect();
        if !same_shape.is_empty() && self.rng.chance(0.6) {
            let x = *self.rng.pick(&same_shape);
            if self.ty(x).dtype == t.dtype {
                return x;
            }
            let r = self.b.cast(x, t.dtype);
            if let Some(id) = self.push(r) {
                return id;
            }
        }
        let v = random_scalar(self.rng, t.dtype);
        let r = self.b.constant(v, &t.shape);
        self.push(r).expect("constants of valid shapes build")
    }

    /// A bool node of `shape` (an existing one, or a fresh comparison / is_nan / is_finite).
    fn bool_of_shape(&mut self, shape: &[usize]) -> NodeId {
        let t = TensorType {
            dtype: DType::Bool,
            shape: shape.to_vec(),
        };
        let cands: Vec<NodeId> = self
            .pool
            .iter()
            .copied()
            .filter(|&id| self.b.ty(id) == Some(&t))
            .collect();
        if !cands.is_empty() && self.rng.chance(0.5) {
            return *self.rng.pick(&cands);
        }
        let same: Vec<NodeId> = self
            .pool
            .iter()
            .copied()
            .filter(|&id| self.b.ty(id).map(|x| &x.shape[..]) == Some(shape))
            .collect();
        let x = *self.rng.pick(&same);
        let tx = self.ty(x);
        if tx.dtype.is_float() && self.rng.chance(0.3) {
            let op = if self.rng.chance(0.5) {
                UnaryOp::IsNan
            } else {
                UnaryOp::IsFinite
            };
            let r = self.b.unary(op, x);
            return self.push(r).expect("is_nan on floats builds");
        }
        let y = self.of_type(&tx, Some(x));
        let op = *self.rng.pick(&[
            BinaryOp::Lt,
            BinaryOp::Le,
            BinaryOp::Gt,
            BinaryOp::Ge,
            BinaryOp::Eq,
            BinaryOp::Ne,
        ]);
        let r = self.b.binary(op, x, y);
        self.push(r).expect("comparisons of equal types build")
    }

    fn random_offset(&mut self, rank: usize) -> Vec<i64> {
        let r = *self.rng.pick(&[1, 1, 1, 2, 3]).min(&MAX_RADIUS);
        let mut off: Vec<i64> = (0..rank).map(|_| self.rng.range_i64(-r, r)).collect();
        if off.iter().all(|&o| o == 0) {
            let ax = self.rng.index(rank);
            off[ax] = if self.rng.chance(0.5) { r } else { -r };
        }
        off
    }

    fn random_footprint(&mut self, rank: usize) -> Footprint {
        if rank >= 2 && self.rng.chance(0.05) {
            // A tall symmetric column along an outer axis: what `double_windows` rewrites
            // into a chain (for min/max under nearest, reflect and mirror).
            let mut size = vec![1; rank];
            size[self.rng.index(rank - 1)] = *self.rng.pick(&[9usize, 11, 13, 15, 17]);
            return Footprint::scipy_box(&size, &vec![0; rank]);
        }
        let size: Vec<usize> = (0..rank)
            .map(|_| {
                let hi = if rank >= 3 { 2 } else { 3 };
                if self.rng.chance(0.1) {
                    self.rng.range(4, 5)
                } else {
                    self.rng.range(1, hi)
                }
            })
            .collect();
        let origin: Vec<i64> = (0..rank)
            .map(|ax| {
                if self.rng.chance(0.7) {
                    0
                } else {
                    let h = (size[ax] / 2) as i64;
                    self.rng.range_i64(-h, (size[ax] as i64 - 1) - h)
                }
            })
            .collect();
        let total: usize = size.iter().product();
        let p = if self.rng.chance(0.5) {
            1.0
        } else {
            0.3 + 0.6 * self.rng.unit()
        };
        let mut mask: Vec<bool> = (0..total).map(|_| self.rng.chance(p)).collect();
        if !mask.iter().any(|&m| m) {
            let i = self.rng.index(total);
            mask[i] = true;
        }
        let mut fp = Footprint::scipy_masked(&size, &mask, &origin);
        if self.rng.chance(0.5) {
            self.rng.shuffle(&mut fp.offsets);
        }
        fp
    }

    fn reduce_op(&mut self, d: DType) -> ReduceOp {
        match d {
            DType::Bool => {
                *self
                    .rng
                    .pick(&[ReduceOp::Min, ReduceOp::Max, ReduceOp::Any, ReduceOp::All])
            }
            _ => *self.rng.pick(&[
                ReduceOp::Min,
                ReduceOp::Max,
                ReduceOp::Min,
                ReduceOp::Max,
                ReduceOp::Sum,
            ]),
        }
    }

    /// A line node over `x`: 1-2 carries (of `x`'s dtype or bool) from random constants, up
    /// to 6 random well-typed step ops (min/max/add/compare/select/cast/...), next carries and
    /// the kept value drawn among the values of the right dtype.
    fn line(&mut self, x: NodeId) -> Option<NodeId> {
        let t = self.ty(x);
        let xd = t.dtype;
        let nc = 1 + self.rng.index(2);
        let init: Vec<Scalar> = (0..nc)
            .map(|_| {
                let d = if self.rng.chance(0.8) {
                    xd
                } else {
                    DType::Bool
                };
                random_scalar(self.rng, d)
            })
            .collect();
        let mut d: Vec<DType> = init.iter().map(|s| s.dtype()).collect();
        d.push(xd);
        let mut step = Vec::new();
        let nops = 1 + self.rng.index(6);
        let mut tries = 0;
        while step.len() < nops && tries < 40 {
            tries += 1;
            // Operands biased towards recent values.
            let n = d.len() as u32;
            let pick = |rng: &mut Rng| -> u32 {
                if n > 2 && rng.chance(0.5) {
                    n - 1 - rng.index(2) as u32
                } else {
                    rng.index(n as usize) as u32
                }
            };
            let a = pick(self.rng);
            let bb = pick(self.rng);
            let c = pick(self.rng);
            let (op, r) = match self.rng.below(8) {
                0 => {
                    let s = random_scalar(self.rng, d[a as usize]);
                    let dt = s.dtype();
                    (LineOp::Const(s), Some(dt))
                }
                1 => {
                    let op = *self.rng.pick(&[
                        UnaryOp::Neg,
                        UnaryOp::Abs,
                        UnaryOp::Sqrt,
                        UnaryOp::IsNan,
                        UnaryOp::IsFinite,
                        UnaryOp::Not,
                        // exp / log (issue 30)
                        UnaryOp::Exp,
                        UnaryOp::Log,
                    ]);
                    (LineOp::Unary(op, a), op.result_dtype(d[a as usize]))
                }
                2..=4 => {
                    let op = *self.rng.pick(&[
                        BinaryOp::Min,
                        BinaryOp::Max,
                        BinaryOp::Add,
                        BinaryOp::Sub,
                        BinaryOp::Mul,
                        BinaryOp::Div,
                        BinaryOp::Lt,
                        BinaryOp::Le,
                        BinaryOp::Gt,
                        BinaryOp::Ge,
                        BinaryOp::Eq,
                        BinaryOp::Ne,
                        BinaryOp::And,
                        BinaryOp::Or,
                    ]);
                    (
                        LineOp::Binary(op, a, bb),
                        op.result_dtype(d[a as usize], d[bb as usize]),
                    )
                }
                5 | 6 => {
                    let ok = d[c as usize] == DType::Bool && d[a as usize] == d[bb as usize];
                    (LineOp::Select(c, a, bb), ok.then_some(d[a as usize]))
                }
                _ => {
                    let to = *self.rng.pick(&DType::ALL);
                    (LineOp::Cast(a, to), Some(to))
                }
            };
            if let Some(r) = r {
                step.push(op);
                d.push(r);
            }
        }
        let n = d.len();
        let mut next = Vec::with_capacity(nc);
        for (k, s) in init.iter().enumerate() {
            let cands: Vec<u32> = (0..n as u32)
                .filter(|&v| d[v as usize] == s.dtype())
                .collect();
            // Prefer the latest values so the step matters; the carry itself always fits.
            let v = if self.rng.chance(0.6) {
                *cands.last().unwrap_or(&(k as u32))
            } else {
                *self.rng.pick(&cands)
            };
            next.push(v);
        }
        let keep = if self.rng.chance(0.7) {
            LineKeep::Each(if self.rng.chance(0.6) {
                n as u32 - 1
            } else {
                self.rng.index(n) as u32
            })
        } else {
            LineKeep::Final(self.rng.index(nc) as u32)
        };
        let program = LineProgram {
            axis: self.rng.index(t.shape.len()),
            backward: self.rng.chance(0.5),
            init,
            step,
            next,
            keep,
        };
        let r = self.b.line(x, program);
        self.push(r)
    }

    /// An extern node over `x`: a built-in extern that takes `x`'s dtype (median of 3 or a
    /// copy for floats; distances to features or a copy for u8 and bool), on a random axis
    /// and direction; `kiln.since_true` gets a unit among 1, 0.5, -2, 0, +inf and NaN.
    fn extern_call(&mut self, x: NodeId) -> Option<NodeId> {
        let t = self.ty(x);
        // Extern line functions take f32, f64, u8 and bool lines only.
        if !matches!(t.dtype, DType::F32 | DType::F64 | DType::U8 | DType::Bool) {
            return None;
        }
        let name = if t.dtype.is_float() {
            *self.rng.pick(&FLOAT_EXTERNS)
        } else {
            *self.rng.pick(&FEATURE_EXTERNS)
        };
        let (out, params) = match name {
            "kiln.copy" | "kiln.median3" => (t.dtype, vec![]),
            "kiln.since_true" => {
                let u = *self
                    .rng
                    .pick(&[1.0, 0.5, -2.0, 0.0, f32::INFINITY, f32::NAN]);
                (DType::F32, vec![Scalar::f32(u)])
            }
            _ => (DType::F32, vec![]),
        };
        let call = kiln_ir::ExternCall {
            name: name.into(),
            axis: self.rng.index(t.shape.len()),
            backward: self.rng.chance(0.5),
            out,
            params,
        };
        let r = self.b.line_extern(x, call);
        self.push(r)
    }

    fn gather(&mut self, x: NodeId) -> Option<NodeId> {
        let t = self.ty(x);
        let off = self.random_offset(t.spatial_rank());
        let border = random_border(self.rng, t.dtype);
        let r = self.b.gather(x, &off, border);
        self.push(r)
    }

    fn window(&mut self, x: NodeId) -> Option<NodeId> {
        let t = self.ty(x);
        let fp = self.random_footprint(t.spatial_rank());
        let op = self.reduce_op(t.dtype);
        let border = random_border(self.rng, t.dtype);
        let r = self.b.window_reduce(x, op, &fp, border);
        self.push(r)
    }

    fn network(&mut self) -> Option<NodeId> {
        let first = self.operand();
        let t = self.ty(first);
        if t.spatial_rank() >= 2 && self.rng.chance(0.2) {
            return self.box_selection(first);
        }
        let k = self.rng.range(1, 5);
        let mut inputs = vec![first];
        while inputs.len() < k {
            // Neighbourhoods: often gathers of the first input, like a median filter.
            let x = if self.rng.chance(0.5) {
                match self.gather(first) {
                    Some(g) => g,
                    None => first,
                }
            } else {
                self.of_type(&t, None)
            };
            inputs.push(x);
        }
        let width = if self.rng.chance(0.25) {
            k + self.rng.range(1, 2)
        } else {
            k
        } as u32;
        let mut pairs = Vec::new();
        if width >= 2 {
            if self.rng.chance(0.4) {
                // A full odd-even transposition sort, maybe truncated.
                for round in 0..width {
                    let mut i = round % 2;
                    while i + 1 < width {
                        pairs.push((i, i + 1));
                        i += 2;
                    }
                }
                if self.rng.chance(0.3) {
                    let keep = self.rng.range(1, pairs.len());
                    pairs.truncate(keep);
                }
            } else {
                let n = self.rng.range(1, 2 * width as usize);
                for _ in 0..n {
                    let i = self.rng.below(width as u64 - 1) as u32;
                    let j = self.rng.range(i as usize + 1, width as usize - 1) as u32;
                    pairs.push((i, j));
                }
            }
        }
        let output = self.rng.below(width as u64) as u32;
        let r = self.b.network(&inputs, width, &pairs, output);
        let id = self.push(r)?;
        if width >= 2 && self.rng.chance(0.35) {
            let mut other = self.rng.below(width as u64) as u32;
            if other == output {
                other = (output + 1) % width;
            }
            let r = self.b.network(&inputs, width, &pairs, other);
            if let Some(sib) = self.push(r) {
                self.extra_outputs.push(sib);
            }
            // Keep the first network last so it stays the main output.
            self.pool.push(id);
        }
        Some(id)
    }

    /// A rank selection over a `ky x kx` box of gathers of `x` (2..=5 each way, anywhere
    /// around the point within [`MAX_RADIUS`], over the last two spatial axes, one border, any rank): the
    /// canonical Batcher selector that `share_columns` rewrites into column sorts, pair
    /// merges and a merge.
    fn box_selection(&mut self, x: NodeId) -> Option<NodeId> {
        let t = self.ty(x);
        let (ky, kx) = (self.rng.range(2, 5), self.rng.range(2, 5));
        // The first offset of a k-wide box inside `-MAX_RADIUS..=MAX_RADIUS`, covering 0.
        let mut start = |k: i64| {
            self.rng
                .range_i64((1 - k).max(-MAX_RADIUS), (MAX_RADIUS + 1 - k).min(0))
        };
        let (y0, x0) = (start(ky as i64), start(kx as i64));
        let outer: Vec<i64> = (2..t.spatial_rank())
            .map(|_| self.rng.range_i64(-1, 1))
            .collect();
        let border = random_border(self.rng, t.dtype);
        let mut cells: Vec<(i64, i64)> = (0..ky as i64)
            .flat_map(|dy| (0..kx as i64).map(move |dx| (y0 + dy, x0 + dx)))
            .collect();
        self.rng.shuffle(&mut cells);
        let mut gathers = Vec::with_capacity(cells.len());
        for (dy, dx) in cells {
            let mut off = outer.clone();
            off.extend([dy, dx]);
            gathers.push(self.b.gather(x, &off, border).ok()?);
        }
        let n = ky * kx;
        let net = selection_network(n, self.rng.below(n as u64) as usize)?;
        let r = self.b.network(&gathers, net.width, &net.pairs, net.output);
        self.push(r)
    }

    /// The same value read at two or three neighbouring columns (one border), combined: the
    /// shape the CPU backend shares between columns with lane shuffles (a pointwise value
    /// read at offsets is inlined with shifted loads, so the copies are the same program at
    /// shifted columns).
    fn row_neighbours(&mut self) -> Option<NodeId> {
        let mut x = self.operand();
        let t = self.ty(x);
        if self.rng.chance(0.7) {
            // A computed value (not a bare input), so each read is a program of its own.
            let op = match t.dtype {
                DType::Bool => UnaryOp::Not,
                DType::U8 => UnaryOp::Neg,
                d if d.is_int() => UnaryOp::Neg,
                _ => *self.rng.pick(&[UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sqrt]),
            };
            let r = self.b.unary(op, x);
            x = self.push(r)?;
        }
        let rank = t.spatial_rank();
        if rank == 0 {
            return None;
        }
        let mut off = self.random_offset(rank);
        let step = *self.rng.pick(&[1, 1, 2, 3]);
        let border = random_border(self.rng, t.dtype);
        let taps = self.rng.range(2, 3);
        // Every tap within the generator's offset range.
        let span = step * (taps as i64 - 1);
        let last = &mut off[rank - 1];
        *last = (*last).clamp(-MAX_RADIUS, (MAX_RADIUS - span).max(-MAX_RADIUS));
        let mut reads = Vec::with_capacity(taps);
        for _ in 0..taps {
            let r = self.b.gather(x, &off, border);
            reads.push(self.push(r)?);
            off[rank - 1] += step;
        }
        let op = match t.dtype {
            DType::Bool => *self.rng.pick(&[BinaryOp::And, BinaryOp::Or, BinaryOp::Min]),
            _ => *self
                .rng
                .pick(&[BinaryOp::Min, BinaryOp::Max, BinaryOp::Add, BinaryOp::Sub]),
        };
        let mut acc = reads[0];
        for &r in &reads[1..] {
            let built = self.b.binary(op, acc, r);
            acc = self.push(built)?;
        }
        Some(acc)
    }

    /// Min and max windows over boxes in turn, each reading the one before (an opening, a
    /// closing, or longer): the kernels whose max stages the CPU backend can run with its
    /// min stages' code on negated values (`cpu::dual`).
    fn morphology(&mut self) -> Option<NodeId> {
        let mut acc = self.operand();
        let t = self.ty(acc);
        let rank = t.spatial_rank();
        if t.dtype == DType::Bool || rank < 2 {
            return None;
        }
        let links = self.rng.range(2, 4);
        let max_first = self.rng.chance(0.5);
        for i in 0..links {
            let op = if (i % 2 == 1) == max_first {
                ReduceOp::Min
            } else {
                ReduceOp::Max
            };
            let mut size = vec![1; rank];
            let k = 2 * MAX_RADIUS as usize + 1;
            size[rank - 2] = self.rng.range(3, k);
            size[rank - 1] = self.rng.range(3, k);
            let fp = Footprint::scipy_box(&size, &vec![0; rank]);
            let border = random_border(self.rng, t.dtype);
            let r = self.b.window_reduce(acc, op, &fp, border);
            acc = self.push(r)?;
        }
        Some(acc)
    }

    /// Adds one random operation (sometimes a few nodes).
    fn step(&mut self) {
        let kind = self
            .rng
            .weighted(&[14, 8, 16, 6, 6, 14, 14, 4, 4, 8, 6, 8, 6]);
        match kind {
            0 => {
                let x = self.operand();
                self.gather(x);
            }
            1 => {
                let x = self.operand();
                let d = self.ty(x).dtype;
                let ops: &[UnaryOp] = match d {
                    DType::F32 | DType::F64 => &[
                        UnaryOp::Neg,
                        UnaryOp::Abs,
                        UnaryOp::Sqrt,
                        UnaryOp::IsNan,
                        UnaryOp::IsFinite,
                        // exp / log (issue 30)
                        UnaryOp::Exp,
                        UnaryOp::Log,
                    ],
                    DType::U8 => &[UnaryOp::Neg, UnaryOp::Abs],
                    DType::Bool => &[UnaryOp::Not],
                    DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32 => {
                        &[UnaryOp::Neg, UnaryOp::Abs]
                    }
                };
                let op = *self.rng.pick(ops);
                let r = self.b.unary(op, x);
                self.push(r);
            }
            2 => {
                let a = self.operand();
                let t = self.ty(a);
                let bb = self.of_type(&t, Some(a));
                let ops: Vec<BinaryOp> = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Min,
                    BinaryOp::Max,
                    BinaryOp::Min,
                    BinaryOp::Max,
                    BinaryOp::And,
                    BinaryOp::Or,
                    BinaryOp::Lt,
                    BinaryOp::Le,
                    BinaryOp::Gt,
                    BinaryOp::Ge,
                    BinaryOp::Eq,
                    BinaryOp::Ne,
                ]
                .into_iter()
                .filter(|op| match op {
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                        FLOATS_U8.contains(&t.dtype) || t.dtype.is_int()
                    }
                    BinaryOp::And | BinaryOp::Or => t.dtype == DType::Bool,
                    _ => true,
                })
                .collect();
                let op = *self.rng.pick(&ops);
                let (x, y) = if self.rng.chance(0.5) {
                    (a, bb)
                } else {
                    (bb, a)
                };
                let r = self.b.binary(op, x, y);
                self.push(r);
            }
            3 => {
                let a = self.operand();
                let t = self.ty(a);
                let cond = self.bool_of_shape(&t.shape);
                let bb = self.of_type(&t, Some(a));
                let r = self.b.select(cond, a, bb);
                self.push(r);
            }
            4 => {
                let x = self.operand();
                let to = *self.rng.pick(&DType::ALL);
                let r = self.b.cast(x, to);
                self.push(r);
            }
            5 => {
                self.network();
            }
            6 => {
                let x = self.operand();
                self.window(x);
            }
            7 | 8 => {
                let x = self.operand();
                let t = self.ty(x);
                let axis = self.rng.index(t.shape.len());
                let op = self.reduce_op(t.dtype);
                let r = if kind == 7 {
                    self.b.scan(x, axis, op)
                } else {
                    self.b.axis_reduce(x, axis, op)
                };
                self.push(r);
            }
            10 => {
                self.row_neighbours();
            }
            11 => {
                self.morphology();
            }
            12 => {
                let x = self.operand();
                if self.externs && self.rng.chance(0.35) {
                    self.extern_call(x);
                } else {
                    self.line(x);
                }
            }
            _ => {
                // A chain of stencils: window of window, gather of window, window of gather.
                let x = self.operand();
                let first = if self.rng.chance(0.5) {
                    self.window(x)
                } else {
                    self.gather(x)
                };
                if let Some(y) = first {
                    if self.rng.chance(0.5) {
                        self.window(y);
                    } else {
                        self.gather(y);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::NodeKind;

    /// Some shapes have rows wide enough for the vector paths' shared steps and edge
    /// vectors (48 columns and more) with more than one row, and none exceeds the limit.
    #[test]
    fn some_shapes_have_wide_rows() {
        let mut rng = Rng::new(7);
        let mut wide = 0;
        for _ in 0..700 {
            let shape = random_shape(&mut rng);
            assert!(shape.iter().product::<usize>() <= MAX_CASE_ELEMENTS);
            let rows: usize = shape[2..shape.len() - 1].iter().product();
            if shape[shape.len() - 1] >= 48 && rows >= 2 {
                wide += 1;
            }
        }
        assert!(wide >= 30, "only {wide} of 700 shapes have wide rows");
    }

    #[test]
    fn deterministic_per_seed() {
        for seed in 0..50 {
            assert_eq!(generate(seed, 12), generate(seed, 12));
        }
        assert_ne!(generate(1, 12).graph, generate(2, 12).graph);
    }

    #[test]
    fn generates_varied_line_nodes() {
        let (mut each, mut fin, mut back, mut two, mut long) = (0, 0, 0, 0, 0);
        for seed in 0..300 {
            for n in &generate(seed, 12).graph.nodes {
                if let NodeKind::Line { program: p, .. } = &n.kind {
                    match p.keep {
                        LineKeep::Each(_) => each += 1,
                        LineKeep::Final(_) => fin += 1,
                    }
                    back += usize::from(p.backward);
                    two += usize::from(p.init.len() == 2);
                    long += usize::from(p.step.len() >= 4);
                }
            }
        }
        assert!(
            each > 0 && fin > 0 && back > 0 && two > 0 && long > 0,
            "{each} {fin} {back} {two} {long}"
        );
    }

    #[test]
    fn generates_every_builtin_extern_and_none_without_externs() {
        let mut seen = std::collections::HashSet::new();
        let (mut back, mut fwd) = (0, 0);
        for seed in 0..2000 {
            for n in &generate(seed, 12).graph.nodes {
                if let NodeKind::Extern { call, .. } = &n.kind {
                    assert!(
                        kiln_runtime::line_extern::BUILTIN_NAMES.contains(&call.name.as_str()),
                        "{}",
                        call.name
                    );
                    seen.insert(call.name.clone());
                    if call.backward {
                        back += 1;
                    } else {
                        fwd += 1;
                    }
                }
            }
            let plain = generate_for(seed, 12, false);
            assert!(plain
                .graph
                .nodes
                .iter()
                .all(|n| !matches!(n.kind, NodeKind::Extern { .. })));
        }
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert!(back > 0 && fwd > 0);
    }

    #[test]
    fn covers_the_vocabulary_and_shapes() {
        let mut kinds = std::collections::HashSet::new();
        let mut borders = std::collections::HashSet::new();
        let mut ranks = std::collections::HashSet::new();
        let mut layouts = std::collections::HashSet::new();
        let mut wide_networks = 0;
        let mut odd_sizes = 0;
        let mut big = 0;
        let (mut boxes, mut paired_boxes) = (0, 0);
        for seed in 0..500 {
            let case = generate(seed, 12);
            // Box selections that `share_columns` rewrites; with four or more columns the
            // rewrite merges column pairs (a network of twice the column height).
            let shared = kiln_ir::passes::share_columns(&case.graph);
            if shared != case.graph {
                boxes += 1;
                let heights: Vec<usize> = shared
                    .nodes
                    .iter()
                    .filter_map(|n| match &n.kind {
                        NodeKind::Network { inputs, .. } => Some(inputs.len()),
                        _ => None,
                    })
                    .collect();
                paired_boxes += usize::from(heights.iter().any(|h| heights.contains(&(2 * h))));
            }
            assert!((1..=3).contains(&case.graph.outputs.len()));
            for inp in &case.inputs {
                assert!(inp.data.len() <= MAX_CASE_ELEMENTS);
                ranks.insert(inp.shape.len() - 2);
                layouts.insert(inp.layout_name());
                odd_sizes += inp.shape[2..]
                    .iter()
                    .filter(|&&s| s % 2 == 1 && s > 1)
                    .count();
                big += inp.shape[2..].iter().filter(|&&s| s > 24).count();
            }
            for n in &case.graph.nodes {
                kinds.insert(n.kind.name());
                match &n.kind {
                    NodeKind::Gather { border, offset, .. } => {
                        assert!(offset.iter().all(|o| o.abs() <= MAX_RADIUS));
                        borders.insert(border.mode_name());
                    }
                    NodeKind::Network { inputs, width, .. } if *width as usize > inputs.len() => {
                        wide_networks += 1
                    }
                    _ => {}
                }
            }
        }
        for k in [
            "input", "const", "unary", "binary", "select", "cast", "gather", "network", "window",
            "scan", "reduce", "line", "extern",
        ] {
            assert!(kinds.contains(k), "no {k} generated");
        }
        assert_eq!(borders.len(), 5);
        assert_eq!(ranks.len(), 4);
        assert!(layouts.len() >= 3, "{layouts:?}");
        assert!(wide_networks > 0 && odd_sizes > 0 && big > 0);
        assert!(
            paired_boxes > 0 && boxes > paired_boxes,
            "{boxes} / {paired_boxes}"
        );
    }
}
