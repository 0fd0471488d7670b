//! Plane replay: a single-stage kernel over `[B, C, H, W]` computes its block's whole
//! planes by working out one plane's row calls once and replaying them for the others, with
//! every input pointer moved by whole planes (see `Job::replay_planes`).
//!
//! Exactness: a replayed call receives exactly the pointers, steps and strides that
//! resolving its row would give (batch and channel are never remapped, and every input's
//! planes are evenly spaced), and the calls are the row loop's own, so the bits are the
//! row loop's (`replayed_planes_match_the_reference`).
//!
//! Limits: single-stage kernels of rank 4 that read no earlier stage, with evenly spaced
//! input planes; while checking inputs, planes of at most `CHECK_BYTES` of input.

use kiln_codegen::cpu::{CpuStage, Purity, SlotKind};
use kiln_codegen::kernel::Source;

use super::exec::RunBufs;
use super::guards::CHECK_BYTES;
use super::{Job, OutPtr};
use crate::tensor::Tensor;

impl Job<'_> {
    /// Computes the whole planes among rows `r0..r1` of a single-stage kernel over
    /// `[B, C, H, W]` and returns the rows it computed (`a..b`, empty when it does not
    /// apply). With `checked` (see [`Job::rows_clean`]), checks each plane's input rows
    /// after computing it, and returns `None` at an unclean one; planes of more than
    /// [`CHECK_BYTES`] are then left to the row loop. The calls one plane needs (the border rows one by one, the interior in one
    /// multi-row call) are worked out once, for the first whole plane, and replayed for
    /// the others with every input pointer moved by whole planes. That applies when the
    /// stage reads no earlier stage and every input's planes are evenly spaced (its batch
    /// stride is `C` times its channel stride, or there is one batch). Resolving the slots
    /// of every call instead took about 18% of gradient magnitude's time on 28² planes.
    pub(super) fn replay_planes(
        &self,
        code: &[CpuStage],
        r0: usize,
        r1: usize,
        out: OutPtr,
        bufs: &mut RunBufs,
        mut checked: Option<(&mut [(usize, usize)], Purity)>,
    ) -> Result<(usize, usize), Purity> {
        let stage = &code[0];
        let none = Ok((r1, r1));
        let reads_stage = stage.slots.iter().any(|slot| {
            matches!(
                slot.kind,
                SlotKind::Row {
                    source: Source::Stage(_),
                    ..
                }
            )
        });
        if self.shape.len() != 4 || code.len() != 1 || reads_stage {
            return none;
        }
        let (c, h) = (self.shape[1], self.shape[2]);
        let even = |t: &Tensor| self.shape[0] == 1 || t.strides()[0] == c * t.strides()[1];
        let (p0, p1) = (r0.div_ceil(h), r1 / h);
        let row_bytes = self.width * self.dtypes[0].size_bytes();
        let too_big = checked.is_some() && h * self.width * 4 > CHECK_BYTES;
        if p0 + 1 >= p1 || too_big || !self.inputs.iter().all(even) {
            return none;
        }
        let plane_bytes: Vec<usize> = self
            .inputs
            .iter()
            .map(|t| t.strides()[1] * t.dtype().size_bytes())
            .collect();
        // The first whole plane's calls: first row in the plane, rows (one for a call of the
        // single-row function), and per slot its pointer, the input whose planes it moves
        // by (none for a constant or an in-range answer), row step and column stride.
        type Call = (
            usize,
            usize,
            Vec<(*const u8, Option<usize>)>,
            Vec<i64>,
            Vec<i64>,
        );
        let mut calls: Vec<Call> = Vec::new();
        let mut oc = [0usize; 3];
        let mut y = 0;
        while y < h {
            self.decode(p0 * h + y, &mut oc);
            let n = match stage.rows {
                Some(_) => self.run_len(0, &oc, h - y).max(1),
                None => 1,
            };
            let (mut ptrs, mut steps, mut strides) = (Vec::new(), Vec::new(), Vec::new());
            for (s, slot) in stage.slots.iter().enumerate() {
                let Some((p, step, st, moves)) =
                    self.slot_args(0, s, slot, &self.resolve(&oc, slot))
                else {
                    return none;
                };
                let p = (p, moves);
                ptrs.push(p);
                steps.push(step);
                strides.push(st);
            }
            calls.push((y, n, ptrs, steps, strides));
            y += n;
        }
        for p in p0..p1 {
            for (y, n, ptrs, steps, strides) in &calls {
                bufs.ptrs.clear();
                for &(q, moves) in ptrs {
                    bufs.ptrs.push(match moves {
                        // SAFETY: see the call below: this is the pointer that resolving
                        // the slot for row `y` of plane `p` gives, inside the input.
                        Some(i) => unsafe { q.add((p - p0) * plane_bytes[i]) },
                        None => q,
                    });
                }
                // SAFETY: rows `p * h + y ..` for `n` rows are the block's own rows (plane
                // `p` lies in `r0..r1`), inside the output, so `dst` has room for them. The
                // batch and channel coordinates are never remapped and every input's planes
                // are evenly spaced (`even`: one channel stride apart, also across batches),
                // so moving plane `p0`'s resolved pointers by `p - p0` planes gives exactly
                // the pointers resolving plane `p`'s rows gives; constants and in-range
                // answers depend on the row within the plane only. The calls are those the
                // row loop makes for one plane (`run_len` interior runs to the multi-row
                // function, each other row to the single-row one), with its arguments.
                unsafe {
                    let dst = out.get().add((p * h + y) * row_bytes);
                    match stage.rows {
                        Some(rows_fn) if *n > 1 => rows_fn(
                            bufs.ptrs.as_ptr(),
                            steps.as_ptr(),
                            strides.as_ptr(),
                            dst,
                            row_bytes as i64,
                            1,
                            self.width as i64,
                            *n as i64,
                        ),
                        _ => (stage.func)(
                            bufs.ptrs.as_ptr(),
                            strides.as_ptr(),
                            dst,
                            1,
                            self.width as i64,
                        ),
                    }
                }
            }
            // A plane's calls read that plane's rows only (the batch and channel are never
            // remapped): check them all.
            if let Some((checked, need)) = checked.as_mut() {
                for (n, iv) in checked.iter_mut().enumerate() {
                    self.rows_clean(n, p * h, (p + 1) * h, iv, *need)?;
                }
            }
        }
        Ok((p0 * h, p1 * h))
    }
}
