//! The shrinker: greedily simplifies a failing case while the finding still reproduces.
//!
//! Steps, each kept only if the same kind of finding reproduces: drop outputs; bypass nodes
//! (replace a node's uses by one of its operands of the same type); cut a node into a fresh
//! input holding its eager value; narrow networks (remove pairs, wires) and footprints; move
//! gather offsets towards 0; shrink shapes (halve or drop sizes, drop spatial dims); make
//! layouts contiguous; zero data (in chunks, then element by element) and replace what must
//! stay non-zero by one.

use std::time::{Duration, Instant};

use kiln_ir::{DType, Graph, GraphBuilder, NodeId, NodeKind, Scalar};
use kiln_runtime::Tensor;

use super::data::InputData;
use super::gen::Case;

/// What the shrinker asks about candidate cases.
pub trait Oracle {
    /// True when `case` still shows the finding being shrunk.
    fn reproduces(&mut self, case: &Case) -> bool;
    /// The reference value of `graph`'s outputs on `inputs` (to cut a node into an input);
    /// `None` disables that step.
    fn evaluate(&mut self, _graph: &Graph, _inputs: &[Tensor]) -> Option<Vec<Tensor>> {
        None
    }
}

/// Limits on one shrink.
#[derive(Clone, Copy, Debug)]
pub struct ShrinkLimits {
    /// Most candidate cases tried.
    pub max_tries: usize,
    /// Most wall time spent.
    pub max_time: Duration,
}

impl Default for ShrinkLimits {
    fn default() -> Self {
        ShrinkLimits {
            max_tries: 4000,
            max_time: Duration::from_secs(30),
        }
    }
}

/// A case being edited: node kinds in the original numbering, plus what `build` needs.
#[derive(Clone, Debug)]
struct Draft {
    kinds: Vec<NodeKind>,
    /// Shape of every node (used for constants only).
    shapes: Vec<Vec<usize>>,
    outputs: Vec<NodeId>,
    /// Input data by the `index` of `Input` nodes.
    inputs: Vec<InputData>,
}

impl Draft {
    fn of(case: &Case) -> Draft {
        Draft {
            kinds: case.graph.nodes.iter().map(|n| n.kind.clone()).collect(),
            shapes: case
                .graph
                .nodes
                .iter()
                .map(|n| n.ty.shape.clone())
                .collect(),
            outputs: case.graph.outputs.clone(),
            inputs: case.inputs.clone(),
        }
    }

    /// Rebuilds a valid case from the draft (dead nodes dropped, inputs renumbered), or
    /// `None` when the builder rejects it.
    fn build(&self, seed: u64) -> Option<Case> {
        let n = self.kinds.len();
        let mut live = vec![false; n];
        for o in &self.outputs {
            *live.get_mut(o.index())? = true;
        }
        for i in (0..n).rev() {
            if live[i] {
                for op in self.kinds[i].operands() {
                    if op.index() >= i {
                        return None;
                    }
                    live[op.index()] = true;
                }
            }
        }
        let mut map: Vec<Option<NodeId>> = vec![None; n];
        let mut b = GraphBuilder::new();
        let mut inputs = Vec::new();
        for i in 0..n {
            if !live[i] {
                continue;
            }
            let id = match &self.kinds[i] {
                NodeKind::Input { index } => {
                    let d = self.inputs.get(*index)?;
                    inputs.push(d.clone());
                    b.input(d.dtype, &d.shape).ok()?
                }
                NodeKind::Constant { value } => b.constant(*value, &self.shapes[i]).ok()?,
                k => {
                    let mut k = k.clone();
                    let mut ok = true;
                    k.map_operands(|o| {
                        map[o.index()].unwrap_or_else(|| {
                            ok = false;
                            o
                        })
                    });
                    if !ok {
                        return None;
                    }
                    b.add(k).ok()?
                }
            };
            map[i] = Some(id);
        }
        let outputs: Vec<NodeId> = self
            .outputs
            .iter()
            .map(|o| map[o.index()])
            .collect::<Option<_>>()?;
        let graph = b.finish(&outputs).ok()?;
        Some(Case {
            seed,
            graph,
            inputs,
        })
    }

    /// Replaces every use of `from` (operands and outputs) by `to`.
    fn replace_uses(&mut self, from: NodeId, to: NodeId) {
        for k in &mut self.kinds {
            k.map_operands(|o| if o == from { to } else { o });
        }
        for o in &mut self.outputs {
            if *o == from {
                *o = to;
            }
        }
    }
}

/// `case` without the nodes no output depends on (unused inputs are dropped too); `None`
/// if the rebuilt graph is rejected, which does not happen for valid graphs.
pub fn without_dead_code(case: &Case) -> Option<Case> {
    Draft::of(case).build(case.seed)
}

/// Rewrites values laid out in `old` shape into `new` shape, reading the old element at
/// `to_old(new_index)`.
fn resample(
    data: &[Scalar],
    old: &[usize],
    new: &[usize],
    to_old: impl Fn(&[usize]) -> Vec<usize>,
) -> Vec<Scalar> {
    let strides = kiln_runtime::tensor::contiguous_strides(old);
    let n: usize = new.iter().product();
    let mut idx = vec![0usize; new.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let o = to_old(&idx);
        let flat: usize = o.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.push(data[flat]);
        kiln_runtime::tensor::increment(&mut idx, new);
    }
    out
}

/// The simplest non-zero value of a dtype.
fn one(d: DType) -> Scalar {
    match d {
        DType::F32 => Scalar::f32(1.0),
        DType::F64 => Scalar::f64(1.0),
        DType::U8 => Scalar::U8(1),
        DType::Bool => Scalar::Bool(true),
        d => Scalar::wrap_int(d, 1).expect("integer dtype"),
    }
}

/// Candidate edits of `case`, one family per step, simplest-first within each.
fn candidates(case: &Case, step: usize, oracle: &mut dyn Oracle) -> Vec<Draft> {
    let base = Draft::of(case);
    let g = &case.graph;
    let mut out = Vec::new();
    match step {
        // Fewer outputs, or outputs closer to the inputs.
        0 => {
            if g.outputs.len() > 1 {
                for &o in &g.outputs {
                    let mut d = base.clone();
                    d.outputs = vec![o];
                    out.push(d);
                }
                for k in 0..g.outputs.len() {
                    let mut d = base.clone();
                    d.outputs.remove(k);
                    out.push(d);
                }
            }
            // Return an output's operand instead (any type): cuts the graph's top off.
            for k in 0..g.outputs.len() {
                for op in g.node(g.outputs[k]).kind.operands() {
                    let mut d = base.clone();
                    d.outputs[k] = op;
                    out.push(d);
                }
            }
        }
        // Bypass a node: its uses read one of its same-typed operands instead.
        1 => {
            for i in (0..g.len()).rev() {
                let mut seen = Vec::new();
                for op in g.nodes[i].kind.operands() {
                    if g.node(op).ty == g.nodes[i].ty && !seen.contains(&op) {
                        seen.push(op);
                        let mut d = base.clone();
                        d.replace_uses(NodeId(i as u32), op);
                        out.push(d);
                    }
                }
            }
        }
        // Cut a node into an input holding its reference value.
        2 => {
            let tensors: Option<Vec<Tensor>> =
                case.inputs.iter().map(|i| i.to_tensor().ok()).collect();
            let Some(tensors) = tensors else { return out };
            for i in (0..g.len()).rev() {
                let n = &g.nodes[i];
                let deep = n
                    .kind
                    .operands()
                    .iter()
                    .any(|&o| !matches!(g.node(o).kind, NodeKind::Input { .. }));
                if !deep {
                    continue;
                }
                let mut sub = g.clone();
                sub.outputs = vec![NodeId(i as u32)];
                let Some(v) = oracle.evaluate(&sub, &tensors) else {
                    continue;
                };
                let Some(t) = v.into_iter().next() else {
                    continue;
                };
                let mut d = base.clone();
                d.kinds[i] = NodeKind::Input {
                    index: d.inputs.len(),
                };
                d.inputs.push(InputData {
                    dtype: n.ty.dtype,
                    shape: n.ty.shape.clone(),
                    order: (0..n.ty.shape.len()).collect(),
                    data: t.to_scalars(),
                });
                out.push(d);
            }
        }
        // Narrow networks and footprints, move offsets towards zero, simplify borders.
        3 => {
            for i in (0..g.len()).rev() {
                match &g.nodes[i].kind {
                    NodeKind::Network {
                        inputs,
                        width,
                        pairs,
                        output,
                    } => {
                        for k in 0..pairs.len() {
                            let mut p = pairs.clone();
                            p.remove(k);
                            let mut d = base.clone();
                            d.kinds[i] = NodeKind::Network {
                                inputs: inputs.clone(),
                                width: *width,
                                pairs: p,
                                output: *output,
                            };
                            out.push(d);
                        }
                        for w in (0..*width).rev() {
                            if w == *output || ((w as usize) < inputs.len() && inputs.len() == 1) {
                                continue;
                            }
                            let mut ins = inputs.clone();
                            if (w as usize) < inputs.len() {
                                ins.remove(w as usize);
                            }
                            let down = |x: u32| if x > w { x - 1 } else { x };
                            let p: Vec<(u32, u32)> = pairs
                                .iter()
                                .filter(|&&(a, b)| a != w && b != w)
                                .map(|&(a, b)| (down(a), down(b)))
                                .collect();
                            let mut d = base.clone();
                            d.kinds[i] = NodeKind::Network {
                                inputs: ins,
                                width: width - 1,
                                pairs: p,
                                output: down(*output),
                            };
                            out.push(d);
                        }
                    }
                    NodeKind::WindowReduce {
                        x,
                        op,
                        footprint,
                        border,
                    } => {
                        for k in 0..footprint.offsets.len() {
                            if footprint.offsets.len() == 1 {
                                break;
                            }
                            let mut f = footprint.clone();
                            f.offsets.remove(k);
                            let mut d = base.clone();
                            d.kinds[i] = NodeKind::WindowReduce {
                                x: *x,
                                op: *op,
                                footprint: f,
                                border: *border,
                            };
                            out.push(d);
                        }
                    }
                    NodeKind::Gather { x, offset, border } => {
                        for ax in 0..offset.len() {
                            if offset[ax] == 0 {
                                continue;
                            }
                            for v in [0, offset[ax] - offset[ax].signum()] {
                                let mut o = offset.clone();
                                o[ax] = v;
                                let mut d = base.clone();
                                d.kinds[i] = NodeKind::Gather {
                                    x: *x,
                                    offset: o,
                                    border: *border,
                                };
                                out.push(d);
                                if v == 0 && offset[ax].abs() == 1 {
                                    break;
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            // Simpler line programs: a step op becomes a constant of its dtype, a kept
            // value an earlier one of the same dtype.
            for (i, k) in base.kinds.iter().enumerate() {
                let NodeKind::Line { x, program } = k else {
                    continue;
                };
                let Ok(dts) = program.value_dtypes(g.node(*x).ty.dtype) else {
                    continue;
                };
                let first = program.init.len() + 1;
                for (j, op) in program.step.iter().enumerate() {
                    if matches!(op, kiln_ir::LineOp::Const(_)) {
                        continue;
                    }
                    let mut p = program.clone();
                    p.step[j] = kiln_ir::LineOp::Const(one(dts[first + j]));
                    let mut d = base.clone();
                    d.kinds[i] = NodeKind::Line { x: *x, program: p };
                    out.push(d);
                }
                if let kiln_ir::LineKeep::Each(v) = program.keep {
                    for w in 0..v {
                        if dts.get(w as usize) == dts.get(v as usize) {
                            let mut p = program.clone();
                            p.keep = kiln_ir::LineKeep::Each(w);
                            let mut d = base.clone();
                            d.kinds[i] = NodeKind::Line { x: *x, program: p };
                            out.push(d);
                        }
                    }
                }
            }
        }
        // Smaller shapes: resize one axis everywhere, or drop a spatial axis.
        4 => {
            let rank = g.nodes.first().map_or(0, |n| n.ty.shape.len());
            for a in 0..rank {
                let old = g
                    .nodes
                    .iter()
                    .filter(|n| n.ty.shape.len() == rank)
                    .map(|n| n.ty.shape[a])
                    .max()
                    .unwrap_or(1);
                let mut sizes = vec![1, old / 2, old - 1];
                sizes.retain(|&s| s >= 1 && s < old);
                sizes.dedup();
                for s in sizes {
                    // Keep the first `s` indices, or the last `s`.
                    for tail in [false, true] {
                        out.push(resize_axis(&base, rank, a, old, s, tail));
                    }
                }
            }
            if rank >= 4 {
                for a in 2..rank {
                    if let Some(d) = drop_axis(&base, rank, a) {
                        out.push(d);
                    }
                }
            }
        }
        // Contiguous layouts.
        5 => {
            for k in 0..base.inputs.len() {
                let r = base.inputs[k].shape.len();
                let ident: Vec<usize> = (0..r).collect();
                if base.inputs[k].order != ident {
                    let mut d = base.clone();
                    d.inputs[k].order = ident;
                    out.push(d);
                }
            }
        }
        // Simpler data: zero chunks, then single elements; then one instead of specials.
        6 => {
            for k in 0..base.inputs.len() {
                let inp = &base.inputs[k];
                let zero = Scalar::zero(inp.dtype);
                let n = inp.data.len();
                let mut chunk = n;
                loop {
                    for start in (0..n).step_by(chunk) {
                        let end = (start + chunk).min(n);
                        if inp.data[start..end].iter().all(|&s| s == zero) {
                            continue;
                        }
                        let mut d = base.clone();
                        d.inputs[k].data[start..end].fill(zero);
                        out.push(d);
                    }
                    if chunk == 1 || n / chunk >= 256 {
                        break;
                    }
                    chunk = chunk.div_ceil(2);
                }
                let nonzero: Vec<usize> = (0..n)
                    .filter(|&j| inp.data[j] != zero && inp.data[j] != one(inp.dtype))
                    .collect();
                if nonzero.len() <= 64 {
                    for j in nonzero {
                        let mut d = base.clone();
                        d.inputs[k].data[j] = one(inp.dtype);
                        out.push(d);
                    }
                }
            }
        }
        _ => {}
    }
    out
}

/// Resizes axis `a` from `old` to `new` (`new < old`) in every shape of rank `rank` whose
/// size there is `old` (reduced axes of size 1 stay), cropping input data to its first `new`
/// indices along `a`, or its last when `tail`.
fn resize_axis(base: &Draft, rank: usize, a: usize, old: usize, new: usize, tail: bool) -> Draft {
    let shift = if tail { old - new } else { 0 };
    let mut d = base.clone();
    for s in &mut d.shapes {
        if s.len() == rank && s[a] == old {
            s[a] = new;
        }
    }
    for inp in &mut d.inputs {
        if inp.shape.len() != rank || inp.shape[a] != old {
            continue;
        }
        let mut ns = inp.shape.clone();
        ns[a] = new;
        inp.data = resample(&inp.data, &inp.shape, &ns, |i| {
            let mut o = i.to_vec();
            o[a] += shift;
            o
        });
        inp.shape = ns;
    }
    d
}

/// Removes spatial axis `a` (an index into the full shape) from every shape, offset and
/// footprint; fails when a scan or axis reduction runs along it.
fn drop_axis(base: &Draft, rank: usize, a: usize) -> Option<Draft> {
    let mut d = base.clone();
    let sa = a - 2;
    for k in &mut d.kinds {
        match k {
            NodeKind::Gather { offset, .. } => {
                offset.remove(sa);
            }
            NodeKind::WindowReduce { footprint, .. } => {
                for o in &mut footprint.offsets {
                    o.remove(sa);
                }
            }
            NodeKind::Scan { axis, .. }
            | NodeKind::AxisReduce { axis, .. }
            | NodeKind::Line {
                program: kiln_ir::LineProgram { axis, .. },
                ..
            } => {
                if *axis == a {
                    return None;
                }
                if *axis > a {
                    *axis -= 1;
                }
            }
            _ => {}
        }
    }
    for s in &mut d.shapes {
        if s.len() != rank {
            return None;
        }
        s.remove(a);
    }
    for inp in &mut d.inputs {
        if inp.shape.len() != rank {
            return None;
        }
        let mut ns = inp.shape.clone();
        ns.remove(a);
        inp.data = resample(&inp.data, &inp.shape, &ns, |i| {
            let mut o = i.to_vec();
            o.insert(a, 0);
            o
        });
        inp.shape = ns;
        inp.order.retain(|&x| x != a);
        for x in &mut inp.order {
            if *x > a {
                *x -= 1;
            }
        }
    }
    Some(d)
}

/// Shrinks `case` while `oracle` says the finding reproduces; returns the smallest case found
/// (the input itself when nothing smaller reproduces).
pub fn shrink(case: &Case, oracle: &mut dyn Oracle, limits: ShrinkLimits) -> Case {
    let start = Instant::now();
    let mut tries = 0usize;
    let mut cur = case.clone();
    const STEPS: usize = 7;
    'outer: loop {
        let mut progress = false;
        for step in 0..STEPS {
            let mut k = 0;
            loop {
                let cands = candidates(&cur, step, oracle);
                let mut advanced = false;
                while k < cands.len() {
                    if tries >= limits.max_tries || start.elapsed() > limits.max_time {
                        break 'outer;
                    }
                    let Some(c) = cands[k].build(cur.seed) else {
                        k += 1;
                        continue;
                    };
                    if c == cur {
                        k += 1;
                        continue;
                    }
                    tries += 1;
                    if oracle.reproduces(&c) {
                        cur = c;
                        progress = true;
                        advanced = true;
                        break;
                    }
                    k += 1;
                }
                if !advanced {
                    break;
                }
            }
        }
        if !progress {
            break;
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::gen::generate;
    use kiln_ir::{ReduceOp, UnaryOp};

    /// A fake finding: "a window min reads an input that holds a NaN".
    struct FakeBug;

    impl Oracle for FakeBug {
        fn reproduces(&mut self, case: &Case) -> bool {
            let g = &case.graph;
            g.nodes.iter().any(|n| match n.kind {
                NodeKind::WindowReduce {
                    op: ReduceOp::Min,
                    x,
                    ..
                } => match g.node(x).kind {
                    NodeKind::Input { index } => case.inputs[index].data.iter().any(|s| match s {
                        Scalar::F32(b) => f32::from_bits(*b).is_nan(),
                        Scalar::F64(b) => f64::from_bits(*b).is_nan(),
                        _ => false,
                    }),
                    _ => false,
                },
                _ => false,
            })
        }
    }

    /// A fake finding: "a line node with a max step op".
    struct FakeLineBug;

    impl Oracle for FakeLineBug {
        fn reproduces(&mut self, case: &Case) -> bool {
            case.graph.nodes.iter().any(|n| match &n.kind {
                NodeKind::Line { program, .. } => program
                    .step
                    .iter()
                    .any(|o| matches!(o, kiln_ir::LineOp::Binary(kiln_ir::BinaryOp::Max, ..))),
                _ => false,
            })
        }
    }

    #[test]
    fn shrinks_line_programs() {
        let mut found = 0;
        for seed in 0..600u64 {
            let case = generate(seed, 12);
            if !FakeLineBug.reproduces(&case) {
                continue;
            }
            found += 1;
            let small = shrink(&case, &mut FakeLineBug, ShrinkLimits::default());
            assert!(FakeLineBug.reproduces(&small));
            // Every other step op became a constant.
            for n in &small.graph.nodes {
                if let NodeKind::Line { program, .. } = &n.kind {
                    let non_const = program
                        .step
                        .iter()
                        .filter(|o| !matches!(o, kiln_ir::LineOp::Const(_)))
                        .count();
                    assert!(non_const <= 1, "seed {seed}: {program:?}");
                }
            }
            if found >= 3 {
                break;
            }
        }
        assert!(found >= 2, "{found}");
    }

    #[test]
    fn shrinks_a_fake_finding_to_a_minimal_case() {
        let mut found = 0;
        for seed in 0..400u64 {
            let case = generate(seed, 12);
            if !FakeBug.reproduces(&case) {
                continue;
            }
            found += 1;
            let small = shrink(&case, &mut FakeBug, ShrinkLimits::default());
            assert!(FakeBug.reproduces(&small));
            // The input and the window, one element: the NaN.
            assert!(
                small.graph.len() <= 2,
                "seed {seed}:\n{}",
                kiln_ir::printer::print(&small.graph)
            );
            let elems: usize = small.inputs.iter().map(|i| i.data.len()).sum();
            assert!(elems == 1, "seed {seed}: {elems} elements left");
            if found >= 5 {
                break;
            }
        }
        assert!(found >= 3);
    }

    /// Shape edits keep data aligned: dropping an axis reads index 0 along it.
    #[test]
    fn drop_axis_and_resize_keep_data_aligned() {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::U8, &[1, 1, 2, 3]).unwrap();
        let y = b.unary(UnaryOp::Neg, x).unwrap();
        let graph = b.finish(&[y]).unwrap();
        let data: Vec<Scalar> = (0..6).map(Scalar::U8).collect();
        let case = Case {
            seed: 0,
            graph,
            inputs: vec![InputData {
                dtype: DType::U8,
                shape: vec![1, 1, 2, 3],
                order: vec![0, 1, 3, 2],
                data,
            }],
        };
        let base = Draft::of(&case);
        let d = drop_axis(&base, 4, 2).unwrap().build(0).unwrap();
        assert_eq!(d.inputs[0].shape, vec![1, 1, 3]);
        assert_eq!(
            d.inputs[0].data,
            vec![Scalar::U8(0), Scalar::U8(1), Scalar::U8(2)]
        );
        assert_eq!(d.inputs[0].order, vec![0, 1, 2]);
        let d = drop_axis(&base, 4, 3).unwrap().build(0).unwrap();
        assert_eq!(d.inputs[0].data, vec![Scalar::U8(0), Scalar::U8(3)]);
        let r = resize_axis(&base, 4, 3, 3, 2, false).build(0).unwrap();
        assert_eq!(r.graph.outputs.len(), 1);
        assert_eq!(r.graph.nodes[1].ty.shape, vec![1, 1, 2, 2]);
        assert_eq!(
            r.inputs[0].data,
            vec![Scalar::U8(0), Scalar::U8(1), Scalar::U8(3), Scalar::U8(4)]
        );
        let r = resize_axis(&base, 4, 3, 3, 1, true).build(0).unwrap();
        assert_eq!(r.inputs[0].data, vec![Scalar::U8(2), Scalar::U8(5)]);
    }
}
