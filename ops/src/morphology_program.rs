//! scipy.ndimage's binary morphology with `mask`, any `iterations` (including `< 1`: until
//! nothing changes), `binary_propagation` and `binary_fill_holes`, as [`Program`]s.
//!
//! Scope: [`BinaryFixpoint`] runs scipy's erosion kernel (see
//! [`crate::morphology_binary`]) `iterations` times, or to a fixpoint, with an optional mask
//! (where the mask is false the output keeps the input). A fixed count runs one fused graph
//! of unrolled passes (chunks of [`MAX_GRAPH_ITERATIONS`]). A fixpoint runs, with
//! `Exec::Eager`, the one-pass graph until its output equals its input (scipy's brute-force
//! loop); with `Exec::Fused`, a native flood fill.
//!
//! Exactness: with the structure's centre true (required for a fixpoint; scipy loops forever
//! otherwise), a dilation pass is monotone and extensive, so the passes converge to the least
//! fixpoint above the input, and any schedule (a flood fill in any order) reaches the same
//! set: the result is reachability. Erosion is the dilation of the complement with the
//! complemented border value. Both executors therefore agree bit for bit (tests check it).
//!
//! Limits: the flood fill is sequential; a plane is `[S1..Sd]` of one `(batch, channel)`.

use kiln_ir::{DType, Footprint, GraphBuilder, TensorType, UnaryOp};
use kiln_runtime::Tensor;

use crate::error::OpError;
use crate::morphology_binary::{centre_is_true, kernel, resolve_structure, truth};
use crate::program::{Exec, Program, RunError};
use crate::window::{spatial_rank, Window};

pub use crate::morphology_binary::MAX_GRAPH_ITERATIONS;

/// Which scipy operation a [`BinaryFixpoint`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryKind {
    /// `binary_erosion`.
    Erosion,
    /// `binary_dilation` (and `binary_propagation`: iterations < 1).
    Dilation,
    /// `binary_fill_holes`: NOT of the propagation of zeros into NOT input, border 1.
    FillHoles,
}

/// scipy's iterated / masked binary erosion or dilation, or fill_holes (module header).
#[derive(Clone, Debug)]
pub struct BinaryFixpoint {
    name: &'static str,
    kind: BinaryKind,
    /// The kernel's offsets (dilation: already reflected).
    fp: Footprint,
    border_value: bool,
    /// scipy's `iterations` (`< 1`: until nothing changes).
    iterations: i64,
    has_mask: bool,
}

impl BinaryFixpoint {
    /// Builds the program for an input of type `input` (and a mask of the same shape when
    /// `has_mask`). Errors: origin out of range (scipy segfaults), `iterations < 1` with a
    /// false structure centre (scipy loops forever), a structure with no true entry.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &'static str,
        kind: BinaryKind,
        input: &TensorType,
        structure: Option<&Window>,
        iterations: i64,
        has_mask: bool,
        border_value: bool,
        origin: &[i64],
    ) -> Result<BinaryFixpoint, OpError> {
        let rank = spatial_rank(name, input, 1)?;
        let w = resolve_structure(name, structure, origin, rank, false)?;
        let fp = match kind {
            BinaryKind::Erosion => w.footprint(),
            BinaryKind::Dilation | BinaryKind::FillHoles => w.reflected_footprint(),
        };
        let (iterations, border_value) = match kind {
            BinaryKind::FillHoles => (0, true),
            _ => (iterations, border_value),
        };
        if iterations < 1 && !centre_is_true(&fp) {
            return Err(OpError::BadFootprint {
                op: name,
                problem: "iterations < 1 needs a structure whose centre (after origin) is true \
                          (scipy loops forever)"
                    .into(),
            });
        }
        Ok(BinaryFixpoint {
            name,
            kind,
            fp,
            border_value,
            iterations,
            has_mask: has_mask || kind == BinaryKind::FillHoles,
        })
    }

    /// A graph `(x, [mask]) -> n passes` (x and mask truth-tested).
    fn passes_graph(&self, ty: &TensorType, n: usize) -> Result<kiln_ir::Graph, OpError> {
        let mut b = GraphBuilder::new();
        let x = b.input(ty.dtype, &ty.shape)?;
        let mut x = truth(&mut b, x)?;
        let mask = if self.has_mask {
            Some(b.input(DType::Bool, &ty.shape)?)
        } else {
            None
        };
        let invert = self.kind != BinaryKind::Erosion;
        for _ in 0..n {
            let e = kernel(&mut b, x, &self.fp, invert, self.border_value)?;
            x = match mask {
                Some(m) => b.select(m, e, x)?,
                None => e,
            };
        }
        Ok(b.finish(&[x])?)
    }

    fn check(&self, inputs: &[Tensor]) -> Result<(), RunError> {
        let want = if self.has_mask && self.kind != BinaryKind::FillHoles {
            2
        } else {
            1
        };
        if inputs.len() != want {
            return Err(self.bad(format!("takes {want} input(s), got {}", inputs.len())));
        }
        if let [x, m] = inputs {
            if x.shape() != m.shape() {
                return Err(self.bad(format!(
                    "mask shape {:?} differs from input shape {:?}",
                    m.shape(),
                    x.shape()
                )));
            }
        }
        Ok(())
    }

    fn bad(&self, problem: String) -> RunError {
        RunError::BadInput {
            op: self.name,
            problem,
        }
    }
}

/// The truth-tested values of `t` (row-major).
fn truth_values(t: &Tensor) -> Vec<bool> {
    // Bool: a row-major copy of the stored bytes, each `!= 0` (what `to_ndarray::<bool>`
    // gives, without an N-D iterator per element: that took ~85% of fill_holes' time).
    if let kiln_runtime::Storage::Bool(v) = t.contiguous_storage() {
        return v.into_iter().map(|b| b != 0).collect();
    }
    t.to_scalars()
        .into_iter()
        .map(|s| match s {
            kiln_ir::Scalar::Bool(v) => v,
            kiln_ir::Scalar::F32(bits) => f32::from_bits(bits) != 0.0,
            kiln_ir::Scalar::F64(bits) => f64::from_bits(bits) != 0.0,
            other => other.to_f64() != 0.0,
        })
        .collect()
}

impl Program for BinaryFixpoint {
    fn name(&self) -> &'static str {
        self.name
    }

    fn outputs(&self) -> Vec<&'static str> {
        vec!["out"]
    }

    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        self.check(inputs)?;
        let shape = inputs[0].shape().to_vec();
        // fill_holes: seed zeros, mask NOT input; the rest runs as a masked dilation.
        let (x, mask): (Tensor, Option<Tensor>) = if self.kind == BinaryKind::FillHoles {
            let m: Vec<bool> = truth_values(&inputs[0]).iter().map(|v| !v).collect();
            (
                Tensor::zeros(DType::Bool, &shape),
                Some(Tensor::from_bool(m, &shape)?),
            )
        } else {
            let mask = match inputs.get(1) {
                Some(m) => Some(Tensor::from_bool(truth_values(m), &shape)?),
                None => None,
            };
            (inputs[0].clone(), mask)
        };
        let ty = TensorType {
            dtype: x.dtype(),
            shape: shape.clone(),
        };
        let graph_inputs = |x: Tensor| -> Vec<Tensor> {
            let mut v = vec![x];
            v.extend(mask.clone());
            v
        };
        let out = if self.iterations >= 1 {
            let mut left = self.iterations as u64;
            let mut x = x;
            while left > 0 {
                let n = left.min(MAX_GRAPH_ITERATIONS as u64) as usize;
                let g = self.passes_graph(
                    &TensorType {
                        dtype: x.dtype(),
                        shape: shape.clone(),
                    },
                    n,
                )?;
                x = exec.run_graph(&g, &graph_inputs(x))?.remove(0);
                left -= n as u64;
            }
            x
        } else if exec.is_eager() {
            // scipy's loop: one pass at a time until the pass changes nothing.
            let first = self.passes_graph(&ty, 1)?;
            let mut x = exec.run_graph(&first, &graph_inputs(x))?.remove(0);
            let step = self.passes_graph(
                &TensorType {
                    dtype: DType::Bool,
                    shape: shape.clone(),
                },
                1,
            )?;
            loop {
                let next = exec.run_graph(&step, &graph_inputs(x.clone()))?.remove(0);
                if next.to_scalars() == x.to_scalars() {
                    break x;
                }
                x = next;
            }
        } else {
            let xv = truth_values(&x);
            let mv = mask.as_ref().map(truth_values);
            let r = match self.kind {
                BinaryKind::Erosion => {
                    let y: Vec<bool> = xv.iter().map(|v| !v).collect();
                    flood(&y, mv.as_deref(), &shape, &self.fp, !self.border_value)
                        .into_iter()
                        .map(|v| !v)
                        .collect()
                }
                _ => flood(&xv, mv.as_deref(), &shape, &self.fp, self.border_value),
            };
            Tensor::from_bool(r, &shape)?
        };
        if self.kind == BinaryKind::FillHoles && !exec.is_eager() {
            let v = truth_values(&out).into_iter().map(|v| !v).collect();
            return Ok(vec![Tensor::from_bool(v, &shape)?]);
        }
        if self.kind == BinaryKind::FillHoles {
            let mut b = GraphBuilder::new();
            let x = b.input(DType::Bool, &shape).map_err(OpError::from)?;
            let n = b.unary(UnaryOp::Not, x).map_err(OpError::from)?;
            let g = b.finish(&[n]).map_err(OpError::from)?;
            return exec.run_graph(&g, &[out]);
        }
        Ok(vec![out])
    }
}

/// The fixpoint of `y[i] = mask[i] ? OR over o in fp of y[i + o] (border_value outside) :
/// y[i]` above `y`, per `(batch, channel)` plane, by a flood fill (offset 0 is in `fp`).
fn flood(
    y: &[bool],
    mask: Option<&[bool]>,
    shape: &[usize],
    fp: &Footprint,
    border_value: bool,
) -> Vec<bool> {
    let spatial = &shape[2..];
    let plane: usize = spatial.iter().product();
    let mut r = y.to_vec();
    if plane == 0 {
        return r;
    }
    let mut strides = vec![1i64; spatial.len()];
    for ax in (0..spatial.len().saturating_sub(1)).rev() {
        strides[ax] = strides[ax + 1] * spatial[ax + 1] as i64;
    }
    let coords = |mut flat: usize, c: &mut [i64]| {
        for ax in (0..spatial.len()).rev() {
            c[ax] = (flat % spatial[ax]) as i64;
            flat /= spatial[ax];
        }
    };
    let can = |i: usize| mask.is_none_or(|m| m[i]);
    let nd = spatial.len();
    // Per axis, the smallest and largest offset component: an offset leaves the plane from
    // `c` iff on some axis `c + o < 0` or `c + o >= n`, i.e. (the two "exists" commute)
    // iff on some axis `c + lo < 0` or `c + hi >= n`. Same test as offset by offset, with
    // no per-pixel loop over the offsets.
    let mut lo = vec![i64::MAX; nd];
    let mut hi = vec![i64::MIN; nd];
    for o in &fp.offsets {
        for ax in 0..nd {
            lo[ax] = lo[ax].min(o[ax]);
            hi[ax] = hi[ax].max(o[ax]);
        }
    }
    let any_offset = !fp.offsets.is_empty();
    let dims: Vec<i64> = spatial.iter().map(|&n| n as i64).collect();
    let reaches_out = |c: &[i64]| {
        any_offset && (0..nd).any(|ax| c[ax] + lo[ax] < 0 || c[ax] + hi[ax] >= dims[ax])
    };
    // Each offset as a flat step, for pixels whose every neighbour is in the plane.
    let flat_offsets: Vec<i64> = fp
        .offsets
        .iter()
        .map(|o| o.iter().zip(&strides).map(|(&d, &s)| d * s).sum())
        .collect();
    let mut c = vec![0i64; nd];
    let mut queue: Vec<usize> = Vec::new();
    for base in (0..r.len()).step_by(plane) {
        queue.clear();
        // Pixels in row-major order with their coordinates kept by counting (no division).
        c.iter_mut().for_each(|x| *x = 0);
        #[allow(clippy::needless_range_loop)] // `i` is also the pixel's index in `r`
        for i in base..base + plane {
            if r[i] {
                queue.push(i);
            } else if border_value && can(i) && reaches_out(&c) {
                r[i] = true;
                queue.push(i);
            }
            for ax in (0..nd).rev() {
                c[ax] += 1;
                if c[ax] < dims[ax] {
                    break;
                }
                c[ax] = 0;
            }
        }
        // A true q sets every i = q - o (in the plane, mask true).
        while let Some(q) = queue.pop() {
            coords(q - base, &mut c);
            // Every q - o is in the plane iff on every axis c - hi >= 0 and c - lo < n.
            let interior =
                any_offset && (0..nd).all(|ax| c[ax] - hi[ax] >= 0 && c[ax] - lo[ax] < dims[ax]);
            if interior {
                for &of in &flat_offsets {
                    let i = (q as i64 - of) as usize;
                    if !r[i] && can(i) {
                        r[i] = true;
                        queue.push(i);
                    }
                }
                continue;
            }
            for o in &fp.offsets {
                let mut flat = 0i64;
                let mut inside = true;
                for ax in 0..nd {
                    let p = c[ax] - o[ax];
                    if p < 0 || p >= spatial[ax] as i64 {
                        inside = false;
                        break;
                    }
                    flat += p * strides[ax];
                }
                if inside {
                    let i = base + flat as usize;
                    if !r[i] && can(i) {
                        r[i] = true;
                        queue.push(i);
                    }
                }
            }
        }
    }
    r
}

/// Binary fixpoints run one after another (opening, closing), all with the same mask.
#[derive(Clone, Debug)]
pub struct BinaryChain {
    stages: Vec<BinaryFixpoint>,
}

impl BinaryChain {
    /// Runs `stages` in order (each with the chain's mask, if any). At least one stage.
    pub fn new(stages: Vec<BinaryFixpoint>) -> Option<BinaryChain> {
        (!stages.is_empty()).then_some(BinaryChain { stages })
    }
}

impl Program for BinaryChain {
    fn name(&self) -> &'static str {
        self.stages[0].name
    }

    fn outputs(&self) -> Vec<&'static str> {
        vec!["out"]
    }

    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        let mut x = inputs
            .first()
            .cloned()
            .ok_or_else(|| self.stages[0].bad("needs an input".into()))?;
        for s in &self.stages {
            let mut v = vec![x];
            v.extend(inputs.iter().skip(1).cloned());
            x = s.run(exec, &v)?.remove(0);
        }
        Ok(vec![x])
    }
}

/// The program form of scipy's `binary_erosion`, `binary_dilation`, `binary_opening` and
/// `binary_closing` with the registry's parameters (`structure`, `connectivity`,
/// `structure_iterations`, `iterations` of any value, `border_value`, `origin`,
/// `brute_force`) on `inputs` = `[input]` or `[input, mask]` (scipy's `mask`: where it is
/// false the output keeps the input). `iterations < 1` repeats until nothing changes.
pub fn binary_program(
    name: &str,
    params: &[(String, String)],
    inputs: &[TensorType],
) -> Result<Box<dyn Program>, OpError> {
    let info = crate::op_info(name).ok_or_else(|| OpError::UnknownOp {
        name: name.to_string(),
        known: "binary_erosion, binary_dilation, binary_opening, binary_closing".into(),
    })?;
    let p = crate::registry::Params::new(info, params)?;
    let stages = crate::morphology_registry::build_binary_program(name, &p, inputs)?;
    Ok(Box::new(BinaryChain { stages }))
}
