//! The eager reference of the rank programs: every window gathered and sorted.
//!
//! Scope: `out[i]` = the `rank`-th smallest of the values read at `i + o` for every offset
//! `o` of the footprint, each read through the border rule (`kiln_ir::semantics::
//! remap_index` per axis, the constant when any axis falls outside under a constant
//! border), over every `[B, C]` plane. Exactness: a plain sort of order keys
//! ([`super::keys`]), then the NaN rules of the selection networks (`super::decide`).
//! It shares no code with the sliding histogram but those rules and the keys, so comparing
//! the two is a real test. Limits: `O(n log n)` per point — the oracle, not a fast path.

use kiln_ir::semantics::remap_index;
use kiln_ir::Border;
use kiln_runtime::memory::ensure_fits;
use kiln_runtime::Tensor;

use super::keys::{order_key, raw_elements, scalar_raw, storage_from_raw};
use super::{decide, Decision, RankSpec};
use crate::program::RunError;

/// Runs `spec` on `x` (`[B, C, S..]`) by sorting every window.
pub fn rank_reference(x: &Tensor, spec: &RankSpec) -> Result<Tensor, RunError> {
    let geo = spec.check_input(x)?;
    let dtype = x.dtype();
    // The input's and the output's bits and the output storage.
    let numel = x.numel() as u64;
    ensure_fits(
        numel * (16 + dtype.size_bytes() as u64),
        &format!("rank selection (reference) over {:?}", x.shape()),
    )?;
    let raw = raw_elements(x);
    let cval = match spec.border {
        Border::Constant(c) => scalar_raw(c),
        _ => 0,
    };
    let nd = geo.spatial.len();
    let plane: usize = geo.spatial.iter().product();
    let mut out = vec![0u64; raw.len()];
    let mut window = Vec::with_capacity(spec.footprint.offsets.len());
    let mut keys = Vec::with_capacity(spec.footprint.offsets.len());
    let mut idx = vec![0usize; nd];
    for p in 0..geo.planes {
        let src = &raw[p * plane..(p + 1) * plane];
        idx.iter_mut().for_each(|v| *v = 0);
        for o in out[p * plane..(p + 1) * plane].iter_mut() {
            window.clear();
            for off in &spec.footprint.offsets {
                let mut lin = Some(0usize);
                for k in 0..nd {
                    let j = idx[k] as i64 + off[k];
                    lin = match (lin, remap_index(j, geo.spatial[k], &spec.border)) {
                        (Some(l), Some(m)) => Some(l * geo.spatial[k] + m),
                        _ => None,
                    };
                }
                window.push(lin.map_or(cval, |l| src[l]));
            }
            *o = match decide(dtype, spec, &window) {
                Decision::Value(v) => v,
                Decision::Select => {
                    keys.clear();
                    keys.extend(window.iter().map(|&v| order_key(dtype, v)));
                    keys.sort_unstable();
                    super::keys::key_raw(dtype, keys[spec.rank])
                }
            };
            // Next spatial index, row-major.
            for k in (0..nd).rev() {
                idx[k] += 1;
                if idx[k] < geo.spatial[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
    Ok(Tensor::from_storage(
        storage_from_raw(dtype, &out),
        x.shape(),
    )?)
}
