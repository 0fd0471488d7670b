//! Edge vectors: the first and the last four columns of a row as one `F32X4` step each,
//! instead of scalar border columns.
//!
//! A load `x + dx` at the left edge (`x = 0..4`) or the right edge (`x = W-4..W`) reads
//! columns outside the row for some lanes. For `|dx| <= 4` and a row at least
//! [`EDGE_MIN_WIDTH`] wide, every border mode maps such a lane to a column at a fixed
//! distance from one end of the row (or to the mode's constant), so each lane's source is
//! known when the code is generated: a lane of one of four *anchor* vectors (columns
//! `0..4`, `4..8`, `W-8..W-4`, `W-4..W`) or of the constant. The load becomes those anchor
//! loads and one lane shuffle per extra source. In-range tests become constant lane masks.
//!
//! The lane sources are derived from `kiln_ir::semantics::remap_index` itself (probed at
//! three widths), not restated here; a test checks them against it for every width from
//! [`EDGE_MIN_WIDTH`] on.

use kiln_ir::semantics::remap_index;
use kiln_ir::Border;

/// Lanes per edge vector.
pub(crate) const EDGE_LANES: i64 = 4;

/// Largest `|dx|` an edge vector handles.
pub(crate) const EDGE_MAX_DX: i64 = 4;

/// Narrowest row that takes edge vectors: every lane source below holds from here on, and
/// the interior between the two edge vectors, `[4, W-4)`, is at least one vector wide.
pub(crate) const EDGE_MIN_WIDTH: i64 = 12;

// The minimum width leaves room for both pairs of anchor vectors and an interior of at least
// one vector between the edge vectors.
const _: () = assert!(EDGE_MIN_WIDTH - 2 * EDGE_LANES >= EDGE_LANES);

/// Widths at which the lane sources are probed (all at least [`EDGE_MIN_WIDTH`]).
const PROBE_WIDTHS: [usize; 3] = [64, 65, 97];

/// Which end of the row an edge vector covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// Columns `0..4`.
    Left,
    /// Columns `W-4..W`.
    Right,
}

/// Where one lane of an edge-vector load reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LaneSource {
    /// Column `c` (`0 <= c < 8`).
    FromLeft(i64),
    /// Column `W + r` (`-8 <= r < 0`).
    FromRight(i64),
    /// The border mode's constant.
    Constant,
}

/// The column lane `lane` of the edge vector on `side` reads with offset `dx`, in a row of
/// `width` columns (possibly outside the row).
fn column(side: Side, lane: i64, dx: i64, width: i64) -> i64 {
    match side {
        Side::Left => lane + dx,
        Side::Right => width - EDGE_LANES + lane + dx,
    }
}

/// The source of each lane of a load with column offset `dx` under `border`, or `None` when
/// an edge vector cannot compute it (`|dx| > 4`, or a source farther than eight columns
/// from its end).
pub(crate) fn load_lanes(side: Side, dx: i64, border: &Border) -> Option<[LaneSource; 4]> {
    if dx.abs() > EDGE_MAX_DX {
        return None;
    }
    let mut out = [LaneSource::Constant; 4];
    for (lane, slot) in out.iter_mut().enumerate() {
        let probes: Vec<(i64, Option<i64>)> = PROBE_WIDTHS
            .iter()
            .map(|&w| {
                let j = column(side, lane as i64, dx, w as i64);
                (w as i64, remap_index(j, w, border).map(|m| m as i64))
            })
            .collect();
        *slot = if probes.iter().all(|(_, m)| m.is_none()) {
            LaneSource::Constant
        } else if probes.iter().any(|(_, m)| m.is_none()) {
            return None;
        } else {
            let from_left: Vec<i64> = probes.iter().filter_map(|&(_, m)| m).collect();
            let from_right: Vec<i64> = probes
                .iter()
                .zip(&from_left)
                .map(|(&(w, _), &m)| m - w)
                .collect();
            if from_left.iter().all(|&m| m == from_left[0]) && (0..8).contains(&from_left[0]) {
                LaneSource::FromLeft(from_left[0])
            } else if from_right.iter().all(|&r| r == from_right[0])
                && (-8..0).contains(&from_right[0])
            {
                LaneSource::FromRight(from_right[0])
            } else {
                return None;
            }
        };
    }
    Some(out)
}

/// Whether every lane of `lanes` reads its own column `x + dx` inside the row (a plain
/// vector load then does).
pub(crate) fn is_direct(side: Side, dx: i64, lanes: &[LaneSource; 4]) -> bool {
    lanes.iter().enumerate().all(|(lane, src)| {
        let lane = lane as i64;
        match (side, *src) {
            (Side::Left, LaneSource::FromLeft(c)) => c == lane + dx,
            (Side::Right, LaneSource::FromRight(r)) => r == lane - EDGE_LANES + dx,
            _ => false,
        }
    })
}

/// Per lane: whether column `x + dx` is inside the row (for rows of at least
/// [`EDGE_MIN_WIDTH`] columns and `|dx| <= 4`).
pub(crate) fn in_range_lanes(side: Side, dx: i64) -> [bool; 4] {
    let w = PROBE_WIDTHS[0] as i64;
    std::array::from_fn(|lane| (0..w).contains(&column(side, lane as i64, dx, w)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::Scalar;

    fn borders() -> [Border; 5] {
        [
            Border::Constant(Scalar::F32(0)),
            Border::Nearest,
            Border::Wrap,
            Border::Reflect,
            Border::Mirror,
        ]
    }

    /// The derived lane sources agree with `remap_index` at every width from the minimum.
    #[test]
    fn lane_sources_match_remap_index_at_every_width() {
        for border in borders() {
            for side in [Side::Left, Side::Right] {
                for dx in -EDGE_MAX_DX..=EDGE_MAX_DX {
                    let lanes = load_lanes(side, dx, &border)
                        .unwrap_or_else(|| panic!("{border:?} {side:?} dx {dx} unsupported"));
                    for w in EDGE_MIN_WIDTH..400 {
                        for (lane, src) in lanes.iter().enumerate() {
                            let j = column(side, lane as i64, dx, w);
                            let want = remap_index(j, w as usize, &border).map(|m| m as i64);
                            let got = match *src {
                                LaneSource::FromLeft(c) => Some(c),
                                LaneSource::FromRight(r) => Some(w + r),
                                LaneSource::Constant => None,
                            };
                            assert_eq!(got, want, "{border:?} {side:?} dx {dx} w {w} lane {lane}");
                        }
                        let inr = in_range_lanes(side, dx);
                        for (lane, &ok) in inr.iter().enumerate() {
                            let j = column(side, lane as i64, dx, w);
                            assert_eq!(ok, (0..w).contains(&j));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn direct_loads_and_refusals() {
        // Right of the left edge, every lane is its own column.
        let l = load_lanes(Side::Left, 1, &Border::Reflect).unwrap();
        assert!(is_direct(Side::Left, 1, &l));
        // One lane left of the row: reflect reads column 0 for column -1.
        let l = load_lanes(Side::Left, -1, &Border::Reflect).unwrap();
        assert!(!is_direct(Side::Left, -1, &l));
        assert_eq!(l[0], LaneSource::FromLeft(0));
        assert_eq!(l[1], LaneSource::FromLeft(0));
        // Wrap at the left edge reads the right end.
        let l = load_lanes(Side::Left, -2, &Border::Wrap).unwrap();
        assert_eq!(l[0], LaneSource::FromRight(-2));
        assert_eq!(l[2], LaneSource::FromLeft(0));
        let r = load_lanes(Side::Right, 3, &Border::Constant(Scalar::F32(0))).unwrap();
        assert_eq!(r[0], LaneSource::FromRight(-1));
        assert_eq!(r[1], LaneSource::Constant);
        assert!(load_lanes(Side::Left, 5, &Border::Reflect).is_none());
        assert!(load_lanes(Side::Right, -5, &Border::Nearest).is_none());
    }
}
