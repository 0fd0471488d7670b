//! Shared test helpers: a random generator of builder-accepted graphs.
#![allow(dead_code)]

use kiln_ir::{
    BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, NodeId, ReduceOp, Scalar, TensorType,
    UnaryOp,
};
use proptest::prelude::*;

/// A small xorshift generator, seeded by proptest.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }
}

/// Interesting f32 bit patterns: NaNs with payloads and signs, zeros, infinities, subnormals.
pub const F32_SPECIAL: [u32; 12] = [
    0x7fc0_0000,
    0x7fc0_0001,
    0xffc0_0000,
    0x7f80_0001,
    0x0000_0000,
    0x8000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x0000_0001,
    0x3fc0_0000,
    0xbf80_0000,
    0x4049_0fdb,
];

/// Interesting f64 bit patterns.
pub const F64_SPECIAL: [u64; 8] = [
    0x7ff8_0000_0000_0000,
    0x7ff8_0000_0000_0001,
    0xfff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0x8000_0000_0000_0000,
    0x7ff0_0000_0000_0000,
    0x0000_0000_0000_0001,
    0x3fb9_9999_9999_999a,
];

pub fn scalar(r: &mut Rng, dtype: DType) -> Scalar {
    match dtype {
        DType::F32 => {
            if r.chance(1, 2) {
                Scalar::F32(r.pick(&F32_SPECIAL))
            } else {
                Scalar::F32(r.next() as u32)
            }
        }
        DType::F64 => {
            if r.chance(1, 2) {
                Scalar::F64(r.pick(&F64_SPECIAL))
            } else {
                Scalar::F64(r.next())
            }
        }
        DType::U8 => Scalar::U8(r.next() as u8),
        DType::Bool => Scalar::Bool(r.chance(1, 2)),
        d => Scalar::wrap_int(d, r.next() as i64).expect("integer dtype"),
    }
}

pub fn border(r: &mut Rng, dtype: DType) -> Border {
    match r.below(5) {
        0 => Border::Constant(scalar(r, dtype)),
        1 => Border::Reflect,
        2 => Border::Mirror,
        3 => Border::Nearest,
        _ => Border::Wrap,
    }
}

/// Ids of nodes whose type satisfies `pred`.
fn nodes_where(types: &[TensorType], pred: impl Fn(&TensorType) -> bool) -> Vec<NodeId> {
    types
        .iter()
        .enumerate()
        .filter(|(_, t)| pred(t))
        .map(|(i, _)| NodeId(i as u32))
        .collect()
}

/// A random builder-accepted graph with up to `n_ops` nodes after its inputs.
pub fn random_graph(seed: u64, n_ops: usize) -> Graph {
    let mut r = Rng::new(seed);
    let rank = 1 + r.below(3);
    let mut shape = vec![1 + r.below(2), 1 + r.below(2)];
    for _ in 0..rank {
        shape.push(1 + r.below(4));
    }
    let mut b = GraphBuilder::new();
    let mut types: Vec<TensorType> = Vec::new();
    let n_inputs = 1 + r.below(3);
    for _ in 0..n_inputs {
        let d = r.pick(&DType::ALL);
        let id = b.input(d, &shape).unwrap();
        types.push(b.ty(id).unwrap().clone());
    }
    for _ in 0..n_ops {
        let all: Vec<NodeId> = (0..types.len() as u32).map(NodeId).collect();
        let x = r.pick(&all);
        let tx = types[x.index()].clone();
        let same = nodes_where(&types, |t| *t == tx);
        let res = match r.below(11) {
            0 => {
                let d = r.pick(&DType::ALL);
                let s = scalar(&mut r, d);
                b.constant(s, &tx.shape)
            }
            1 | 2 => b.unary(r.pick(&UnaryOp::ALL), x),
            3 | 4 => {
                let y = r.pick(&same);
                b.binary(r.pick(&BinaryOp::ALL), x, y)
            }
            5 => {
                let conds = nodes_where(&types, |t| t.dtype == DType::Bool && t.shape == tx.shape);
                if conds.is_empty() {
                    continue;
                }
                let c = r.pick(&conds);
                let y = r.pick(&same);
                b.select(c, x, y)
            }
            6 => b.cast(x, r.pick(&DType::ALL)),
            7 => {
                let off: Vec<i64> = (0..tx.spatial_rank()).map(|_| r.range(-3, 3)).collect();
                let bd = border(&mut r, tx.dtype);
                b.gather(x, &off, bd)
            }
            8 => {
                let k = 1 + r.below(5);
                let inputs: Vec<NodeId> = (0..k).map(|_| r.pick(&same)).collect();
                let width = k as u32 + r.below(4) as u32;
                let mut pairs = Vec::new();
                if width >= 2 {
                    for _ in 0..r.below(12) {
                        let i = r.below(width as usize - 1) as u32;
                        let j = i + 1 + r.below((width - i - 1) as usize) as u32;
                        pairs.push((i, j));
                    }
                }
                let output = r.below(width as usize) as u32;
                b.network(&inputs, width, &pairs, output)
            }
            9 => {
                let offsets: Vec<Vec<i64>> = (0..1 + r.below(5))
                    .map(|_| (0..tx.spatial_rank()).map(|_| r.range(-2, 2)).collect())
                    .collect();
                let bd = border(&mut r, tx.dtype);
                b.window_reduce(x, r.pick(&ReduceOp::ALL), &Footprint { offsets }, bd)
            }
            _ => {
                let axis = r.below(tx.shape.len());
                let op = r.pick(&ReduceOp::ALL);
                if r.chance(1, 2) {
                    b.scan(x, axis, op)
                } else {
                    b.axis_reduce(x, axis, op)
                }
            }
        };
        if let Ok(id) = res {
            types.push(b.ty(id).unwrap().clone());
        }
    }
    let n = types.len();
    let n_out = 1 + r.below(3);
    // Prefer late nodes as outputs so that most of the graph is live.
    let outputs: Vec<NodeId> = (0..n_out)
        .map(|_| NodeId((n - 1 - r.below(n.min(4))) as u32))
        .collect();
    b.finish(&outputs).unwrap()
}

/// Proptest strategy over random graphs.
pub fn graphs() -> impl Strategy<Value = Graph> {
    (any::<u64>(), 0usize..40).prop_map(|(seed, n)| random_graph(seed, n))
}
