//! Edge vectors: the first and the last `4k` columns of a row as `k` `F32X4` steps each
//! (`k` = 1 or 2), instead of scalar border columns. The byte path (`bytevec`) takes one
//! 16-column `I8X16` vector per end ([`Shape::BYTES`]: the same rules with 16 lanes and
//! anchors within 32 columns of an end).
//!
//! A load `x + dx` in an edge vector (`x` in `[4v, 4v+4)` at the left end, in
//! `[W-4v-4, W-4v)` at the right end, `v < k`) reads columns outside the row for some lanes.
//! For `|dx| <= 4k` and a row at least [`min_width`]`(k)` wide, every border mode maps such a
//! lane to a column at a fixed distance from one end of the row (or to the mode's
//! constant), so each lane's source is known when the code is generated: a lane of one of
//! the *anchor* vectors (columns `4a..4a+4` or `W-16+4a..W-12+4a`, `a < 4`) or of the
//! constant. The load becomes those anchor loads and one lane shuffle per extra source.
//! In-range tests become constant lane masks.
//!
//! The lane sources are derived from `kiln_ir::semantics::remap_index` itself (probed at
//! three widths), not restated here; a test checks them against it for every width from
//! [`min_width`] on.

use kiln_ir::semantics::remap_index;
use kiln_ir::Border;

/// Lanes per edge vector.
pub(crate) const EDGE_LANES: i64 = 4;

/// Most edge vectors at each end of a row.
pub(crate) const MAX_EDGE_VECTORS: i64 = 2;

/// Columns from each end an anchor vector may start at (four anchors per end).
const ANCHOR_SPAN: i64 = 16;

/// The geometry of one path's edge vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Lanes (columns) per vector.
    pub(crate) lanes: i64,
    /// Most edge vectors per end.
    pub(crate) max_vectors: i64,
    /// Lane sources lie within this many columns of their end (anchor vectors).
    pub(crate) span: i64,
}

impl Shape {
    /// `F32X4`: up to two vectors of 4 lanes per end, anchors within 16 columns.
    pub(crate) const F32: Shape = Shape {
        lanes: EDGE_LANES,
        max_vectors: MAX_EDGE_VECTORS,
        span: ANCHOR_SPAN,
    };
    /// `I8X16`: one vector of 16 lanes per end, anchors within 32 columns (two vectors).
    pub(crate) const BYTES: Shape = Shape {
        lanes: 16,
        max_vectors: 1,
        span: 32,
    };

    /// The edge vectors of the byte path (`bytes`) or of the `F32X4` path.
    pub(crate) fn of_path(bytes: bool) -> Shape {
        if bytes {
            Shape::BYTES
        } else {
            Shape::F32
        }
    }

    /// Edge vectors per end for column offsets in `[min_dx, max_dx]`: enough to cover the
    /// border columns, `None` beyond `max_vectors`.
    pub(crate) fn vectors_for(self, min_dx: i64, max_dx: i64) -> Option<i64> {
        let reach = (-min_dx).max(max_dx).max(1);
        let k = (reach + self.lanes - 1) / self.lanes;
        (k <= self.max_vectors).then_some(k)
    }

    /// Narrowest row that takes `k` edge vectors per end: every lane source holds from
    /// here on, and the interior between them, `[lanes·k, W-lanes·k)`, is at least one
    /// vector wide.
    pub(crate) fn min_width(self, k: i64) -> i64 {
        2 * k * self.lanes + self.lanes
    }

    /// The first column of edge vector `v` on `side` in a row of `width` columns.
    pub(crate) fn first_column(self, side: Side, v: i64, width: i64) -> i64 {
        match side {
            Side::Left => self.lanes * v,
            Side::Right => width - self.lanes * (v + 1),
        }
    }

    fn column(self, side: Side, v: i64, lane: i64, dx: i64, width: i64) -> i64 {
        self.first_column(side, v, width) + lane + dx
    }

    /// The source of each lane of a load (see [`load_lanes`]).
    pub(crate) fn load_lanes(
        self,
        side: Side,
        v: i64,
        dx: i64,
        border: &Border,
    ) -> Option<Vec<LaneSource>> {
        if dx.abs() > self.max_vectors * self.lanes || !(0..self.max_vectors).contains(&v) {
            return None;
        }
        let mut out = vec![LaneSource::Constant; self.lanes as usize];
        for (lane, slot) in out.iter_mut().enumerate() {
            let probes: Vec<(i64, Option<i64>)> = PROBE_WIDTHS
                .iter()
                .map(|&w| {
                    let j = self.column(side, v, lane as i64, dx, w as i64);
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
                if from_left.iter().all(|&m| m == from_left[0])
                    && (0..self.span).contains(&from_left[0])
                {
                    LaneSource::FromLeft(from_left[0])
                } else if from_right.iter().all(|&r| r == from_right[0])
                    && (-self.span..0).contains(&from_right[0])
                {
                    LaneSource::FromRight(from_right[0])
                } else {
                    return None;
                }
            };
        }
        Some(out)
    }

    /// Whether every lane reads its own column (see [`is_direct`]).
    pub(crate) fn is_direct(self, side: Side, v: i64, dx: i64, lanes: &[LaneSource]) -> bool {
        lanes.iter().enumerate().all(|(lane, src)| {
            let lane = lane as i64;
            match (side, *src) {
                (Side::Left, LaneSource::FromLeft(c)) => c == self.column(side, v, lane, dx, 0),
                (Side::Right, LaneSource::FromRight(r)) => r == self.column(side, v, lane, dx, 0),
                _ => false,
            }
        })
    }

    /// The vectors a load's lanes come from, each once in order of first use, and per lane
    /// the index of its anchor and its lane there (a constant lane keeps its own lane).
    pub(crate) fn anchors(self, lanes: &[LaneSource]) -> (Vec<Anchor>, Vec<(usize, u8)>) {
        let mut anchors: Vec<Anchor> = Vec::new();
        let picks = lanes
            .iter()
            .enumerate()
            .map(|(j, lane)| {
                let (anchor, l) = match *lane {
                    LaneSource::FromLeft(c) => (Anchor::Left(c / self.lanes), c % self.lanes),
                    LaneSource::FromRight(r) => {
                        let c = r + self.span;
                        (Anchor::Right(c / self.lanes), c % self.lanes)
                    }
                    LaneSource::Constant => (Anchor::Constant, j as i64),
                };
                let k = anchors
                    .iter()
                    .position(|&a| a == anchor)
                    .unwrap_or_else(|| {
                        anchors.push(anchor);
                        anchors.len() - 1
                    });
                (k, l as u8)
            })
            .collect();
        (anchors, picks)
    }

    /// Per lane: whether column `x + dx` is inside the row (see [`in_range_lanes`]).
    pub(crate) fn in_range_lanes(self, side: Side, v: i64, dx: i64) -> Vec<bool> {
        let w = PROBE_WIDTHS[0] as i64;
        (0..self.lanes)
            .map(|lane| (0..w).contains(&self.column(side, v, lane, dx, w)))
            .collect()
    }
}

/// Widths at which the lane sources are probed (all at least `min_width(MAX_EDGE_VECTORS)`).
const PROBE_WIDTHS: [usize; 3] = [64, 65, 97];

/// Which end of the row an edge vector covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// Columns `4v..4v+4` for the `v`-th vector from the left end.
    Left,
    /// Columns `W-4v-4..W-4v` for the `v`-th vector from the right end.
    Right,
}

/// Where one lane of an edge-vector load reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LaneSource {
    /// Column `c` (`0 <= c < 16`).
    FromLeft(i64),
    /// Column `W + r` (`-16 <= r < 0`).
    FromRight(i64),
    /// The border mode's constant.
    Constant,
}

/// A vector an edge load takes lanes from (see [`Shape::anchors`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// Columns `lanes·k .. lanes·(k+1)`.
    Left(i64),
    /// Columns `W - span + lanes·k ..` (the `k`-th vector of the row's last `span` columns).
    Right(i64),
    /// The border mode's constant in every lane.
    Constant,
}

/// The column lane `lane` of edge vector `v` on `side` reads with offset `dx` (possibly
/// outside the row).
#[cfg(test)]
fn column(side: Side, v: i64, lane: i64, dx: i64, width: i64) -> i64 {
    Shape::F32.column(side, v, lane, dx, width)
}

/// The source of each lane of a load with column offset `dx` under `border` in edge vector
/// `v`, or `None` when an edge vector cannot compute it (`|dx| > 8`, or a source farther
/// than sixteen columns from its end).
pub(crate) fn load_lanes(side: Side, v: i64, dx: i64, border: &Border) -> Option<[LaneSource; 4]> {
    let lanes = Shape::F32.load_lanes(side, v, dx, border)?;
    lanes.try_into().ok()
}

/// Whether every lane of `lanes` reads its own column `x + dx` inside the row (a plain
/// vector load then does).
pub(crate) fn is_direct(side: Side, v: i64, dx: i64, lanes: &[LaneSource; 4]) -> bool {
    Shape::F32.is_direct(side, v, dx, lanes)
}

/// Per lane: whether column `x + dx` of edge vector `v` is inside the row (for rows of at
/// least `min_width(k)` columns, `v < k` and `|dx| <= 4k`).
pub(crate) fn in_range_lanes(side: Side, v: i64, dx: i64) -> [bool; 4] {
    let lanes = Shape::F32.in_range_lanes(side, v, dx);
    std::array::from_fn(|lane| lanes[lane])
}

// The widest minimum widths are below the probe widths.
const _: () = assert!(2 * MAX_EDGE_VECTORS * EDGE_LANES + EDGE_LANES < 64);
// The byte path's narrowest row is below the probe widths and holds its anchors (two
// vectors per end).
const BYTES_MIN_WIDTH: i64 = 2 * Shape::BYTES.max_vectors * Shape::BYTES.lanes + Shape::BYTES.lanes;
const _: () = assert!(BYTES_MIN_WIDTH < 64 && BYTES_MIN_WIDTH >= Shape::BYTES.span);

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

    /// The derived lane sources agree with `remap_index` at every width from the minimum,
    /// for every edge vector a stage of that reach takes.
    #[test]
    fn lane_sources_match_remap_index_at_every_width() {
        for border in borders() {
            for side in [Side::Left, Side::Right] {
                let reach = MAX_EDGE_VECTORS * EDGE_LANES;
                for dx in -reach..=reach {
                    let k = Shape::F32
                        .vectors_for(dx.min(0), dx.max(0))
                        .expect("within reach");
                    for v in 0..k {
                        let lanes = load_lanes(side, v, dx, &border).unwrap_or_else(|| {
                            panic!("{border:?} {side:?} v {v} dx {dx} unsupported")
                        });
                        for w in Shape::F32.min_width(k)..400 {
                            for (lane, src) in lanes.iter().enumerate() {
                                let j = column(side, v, lane as i64, dx, w);
                                let want = remap_index(j, w as usize, &border).map(|m| m as i64);
                                let got = match *src {
                                    LaneSource::FromLeft(c) => Some(c),
                                    LaneSource::FromRight(r) => Some(w + r),
                                    LaneSource::Constant => None,
                                };
                                assert_eq!(
                                    got, want,
                                    "{border:?} {side:?} v {v} dx {dx} w {w} lane {lane}"
                                );
                            }
                            let inr = in_range_lanes(side, v, dx);
                            for (lane, &ok) in inr.iter().enumerate() {
                                let j = column(side, v, lane as i64, dx, w);
                                assert_eq!(ok, (0..w).contains(&j));
                            }
                        }
                    }
                }
            }
        }
    }

    /// The same for the byte path's one 16-lane vector per end.
    #[test]
    fn byte_lane_sources_match_remap_index_at_every_width() {
        let sh = Shape::BYTES;
        for border in borders() {
            for side in [Side::Left, Side::Right] {
                for dx in -16..=16 {
                    assert_eq!(sh.vectors_for(dx.min(0), dx.max(0)), Some(1));
                    let lanes = sh
                        .load_lanes(side, 0, dx, &border)
                        .unwrap_or_else(|| panic!("{border:?} {side:?} dx {dx} unsupported"));
                    assert_eq!(lanes.len(), 16);
                    for w in sh.min_width(1)..400 {
                        for (lane, src) in lanes.iter().enumerate() {
                            let j = sh.column(side, 0, lane as i64, dx, w);
                            let want = remap_index(j, w as usize, &border).map(|m| m as i64);
                            let got = match *src {
                                LaneSource::FromLeft(c) => Some(c),
                                LaneSource::FromRight(r) => Some(w + r),
                                LaneSource::Constant => None,
                            };
                            assert_eq!(got, want, "{border:?} {side:?} dx {dx} w {w} lane {lane}");
                        }
                        for (lane, ok) in sh.in_range_lanes(side, 0, dx).into_iter().enumerate() {
                            let j = sh.column(side, 0, lane as i64, dx, w);
                            assert_eq!(ok, (0..w).contains(&j));
                        }
                    }
                }
            }
        }
        assert_eq!(sh.vectors_for(-17, 0), None);
        assert_eq!(sh.min_width(1), 48);
    }

    #[test]
    fn vectors_per_end_follow_the_reach() {
        let f = Shape::F32;
        assert_eq!(f.vectors_for(-1, 1), Some(1));
        assert_eq!(f.vectors_for(0, 4), Some(1));
        assert_eq!(f.vectors_for(-5, 0), Some(2));
        assert_eq!(f.vectors_for(-7, 7), Some(2));
        assert_eq!(f.vectors_for(-9, 0), None);
        assert_eq!(f.min_width(1), 12);
        assert_eq!(f.min_width(2), 20);
    }

    #[test]
    fn direct_loads_and_refusals() {
        // Right of the left edge, every lane is its own column.
        let l = load_lanes(Side::Left, 0, 1, &Border::Reflect).unwrap();
        assert!(is_direct(Side::Left, 0, 1, &l));
        // One lane left of the row: reflect reads column 0 for column -1.
        let l = load_lanes(Side::Left, 0, -1, &Border::Reflect).unwrap();
        assert!(!is_direct(Side::Left, 0, -1, &l));
        assert_eq!(l[0], LaneSource::FromLeft(0));
        assert_eq!(l[1], LaneSource::FromLeft(0));
        // The second vector from the left, seven columns left: lanes 0..3 read -3..0.
        let l = load_lanes(Side::Left, 1, -7, &Border::Reflect).unwrap();
        assert_eq!(l[0], LaneSource::FromLeft(2));
        assert_eq!(l[3], LaneSource::FromLeft(0));
        // Wrap at the left edge reads the right end.
        let l = load_lanes(Side::Left, 0, -2, &Border::Wrap).unwrap();
        assert_eq!(l[0], LaneSource::FromRight(-2));
        assert_eq!(l[2], LaneSource::FromLeft(0));
        let r = load_lanes(Side::Right, 0, 3, &Border::Constant(Scalar::F32(0))).unwrap();
        assert_eq!(r[0], LaneSource::FromRight(-1));
        assert_eq!(r[1], LaneSource::Constant);
        assert!(load_lanes(Side::Left, 0, 9, &Border::Reflect).is_none());
        assert!(load_lanes(Side::Right, 2, 1, &Border::Nearest).is_none());
    }
}
