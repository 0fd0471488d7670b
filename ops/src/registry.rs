//! The operator registry used by the CLI: operators by name, with `name=value` parameters.
//!
//! Parameter syntax:
//! - `k=3` or `k=3,5` (kornia kernel size; two values are `ky,kx`);
//! - `size=3` (every spatial axis) or `size=3,5` (one per spatial axis);
//! - `footprint=1,0,1;0,1,0;1,0,1`: `,` separates entries of a row (last axis), `;` rows
//!   (second-last axis), `|` planes (third-last axis); `structure=` is the same for the
//!   binary operators and holds numbers for the grey ones (non-flat elements);
//! - `mode=reflect` (scipy names, see [`kiln_ir::Border::from_mode_name`]), `cval=0.5`
//!   (also `nan`, `inf`, `-inf`; converted to the input dtype like a cast from f64);
//! - `origin=0` or `origin=-1,0`; `border_value=0|1`.

use kiln_ir::{Border, DType, Graph, GraphBuilder, Scalar, TensorType};

use crate::error::OpError;
use crate::gradient::gradient_magnitude;
use crate::median::median_filter;
use crate::morphology::{grey_closing, grey_dilation, grey_erosion, grey_opening};
use crate::window::Window;

/// Description of one registered operator and its parameters.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    /// Registry name.
    pub name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// `(parameter, description)` pairs.
    pub params: &'static [(&'static str, &'static str)],
}

const P_SIZE: (&str, &str) = (
    "size",
    "window extent: one value for every spatial axis or one per axis, e.g. 3 or 3,5",
);
const P_FOOTPRINT: (&str, &str) = (
    "footprint",
    "boolean window instead of size: rows of 0/1 split by ';' (planes by '|'), e.g. 0,1,0;1,1,1;0,1,0",
);
const P_MODE: (&str, &str) = (
    "mode",
    "border: constant, reflect (default), mirror, nearest, wrap (and scipy's grid-* aliases)",
);
const P_CVAL: (&str, &str) = (
    "cval",
    "value outside the image for mode=constant (default 0)",
);
const P_ORIGIN: (&str, &str) = (
    "origin",
    "scipy origin: one value or one per spatial axis, -(size/2) <= origin <= (size-1)/2",
);
const SCIPY_WINDOW: &[(&str, &str)] = &[P_SIZE, P_FOOTPRINT, P_MODE, P_CVAL, P_ORIGIN];

// Rank filters (helper rank).
const RANK_PARAMS: &[(&str, &str)] = &[
    (
        "rank",
        "0-based rank in the sorted window, negative from the end (required)",
    ),
    P_SIZE,
    P_FOOTPRINT,
    P_MODE,
    P_CVAL,
    P_ORIGIN,
];
const PERCENTILE_PARAMS: &[(&str, &str)] = &[
    (
        "percentile",
        "percentile in -100..=100, negative from 100 (required)",
    ),
    P_SIZE,
    P_FOOTPRINT,
    P_MODE,
    P_CVAL,
    P_ORIGIN,
];

/// Every registered operator.
pub const OPS: &[OpInfo] = &[
    OpInfo {
        name: "median_blur",
        summary: "kornia median_blur: zero padding, lower median, NaN where the window holds NaN/Inf",
        params: &[
            ("k", "kernel size k or ky,kx (required)"),
            // Rank filters (helper rank).
            ("padding", "zeros (default) or reflect (torch's reflect, kornia 0.9's default)"),
        ],
    },
    OpInfo {
        name: "median_filter",
        summary: "scipy.ndimage.median_filter (element n//2 of the sorted window)",
        params: SCIPY_WINDOW,
    },
    OpInfo {
        name: "grey_erosion",
        summary: "scipy.ndimage.grey_erosion with a flat footprint (minimum filter)",
        params: crate::morphology_registry::GREY_PARAMS,
    },
    OpInfo {
        name: "grey_dilation",
        summary: "scipy.ndimage.grey_dilation with a flat footprint (maximum over the reflected footprint)",
        params: crate::morphology_registry::GREY_PARAMS,
    },
    OpInfo {
        name: "grey_opening",
        summary: "scipy.ndimage.grey_opening: dilation of the erosion",
        params: crate::morphology_registry::GREY_PARAMS,
    },
    OpInfo {
        name: "grey_closing",
        summary: "scipy.ndimage.grey_closing: erosion of the dilation",
        params: crate::morphology_registry::GREY_PARAMS,
    },
    OpInfo {
        name: "gradient_magnitude",
        summary: "sqrt(dx*dx + dy*dy) with central differences over the last two spatial axes",
        params: &[P_MODE, P_CVAL],
    },
    // Rank filters (helper rank): windows over 441 values run as programs (build_plan).
    OpInfo {
        name: "rank_filter",
        summary: "scipy.ndimage.rank_filter (element rank of the sorted window; negative counts from the end)",
        params: RANK_PARAMS,
    },
    OpInfo {
        name: "percentile_filter",
        summary: "scipy.ndimage.percentile_filter (element int(n * p / 100) of the sorted window)",
        params: PERCENTILE_PARAMS,
    },
    // Morphology family (helper morph): binary and derived grey operators.
    OpInfo {
        name: "binary_erosion",
        summary: "scipy.ndimage.binary_erosion (truth-tested input, 1 to 64 iterations; masks and fixpoints: programs)",
        params: crate::morphology_registry::BINARY_PARAMS,
    },
    OpInfo {
        name: "binary_dilation",
        summary: "scipy.ndimage.binary_dilation (reflected structure; 1 to 64 iterations)",
        params: crate::morphology_registry::BINARY_PARAMS,
    },
    OpInfo {
        name: "binary_opening",
        summary: "scipy.ndimage.binary_opening: dilation of the erosion, one kernel",
        params: crate::morphology_registry::BINARY_PARAMS,
    },
    OpInfo {
        name: "binary_closing",
        summary: "scipy.ndimage.binary_closing: erosion of the dilation, one kernel",
        params: crate::morphology_registry::BINARY_PARAMS,
    },
    OpInfo {
        name: "binary_hit_or_miss",
        summary: "scipy.ndimage.binary_hit_or_miss: erosion by structure1 and not any under structure2",
        params: crate::morphology_registry::HIT_OR_MISS_PARAMS,
    },
    OpInfo {
        name: "white_tophat",
        summary: "scipy.ndimage.white_tophat: x - opening (XOR on bool), one kernel",
        params: crate::morphology_registry::GREY_PARAMS,
    },
    OpInfo {
        name: "black_tophat",
        summary: "scipy.ndimage.black_tophat: closing - x (XOR on bool), one kernel",
        params: crate::morphology_registry::GREY_PARAMS,
    },
    OpInfo {
        name: "morphological_gradient",
        summary: "scipy.ndimage.morphological_gradient: dilation - erosion in the input dtype",
        params: crate::morphology_registry::GREY_PARAMS,
    },
    OpInfo {
        name: "morphological_laplace",
        summary: "scipy.ndimage.morphological_laplace: ((dilation + erosion) - x) - x in the input dtype",
        params: crate::morphology_registry::GREY_PARAMS,
    },
];

/// The names of every registered operator.
pub fn op_names() -> &'static [&'static str] {
    const NAMES: &[&str] = &[
        "median_blur",
        "median_filter",
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
        "gradient_magnitude",
        // Morphology family (helper morph).
        "binary_erosion",
        "binary_dilation",
        "binary_opening",
        "binary_closing",
        "binary_hit_or_miss",
        "white_tophat",
        "black_tophat",
        "morphological_gradient",
        "morphological_laplace",
        // Rank filters (helper rank).
        "rank_filter",
        "percentile_filter",
    ];
    NAMES
}

/// The names of every operator, graph operators and programs ([`crate::program::PROGRAMS`]).
pub fn all_names() -> Vec<&'static str> {
    let mut names = op_names().to_vec();
    names.extend(crate::program::PROGRAMS.iter().map(|p| p.info.name));
    names
}

/// The description of graph operator `name`, if registered.
pub fn op_info(name: &str) -> Option<&'static OpInfo> {
    OPS.iter().find(|o| o.name == name)
}

/// Builds a one-input, one-output graph applying operator `name` with `params` to an input of
/// type `input`. Unknown operators, unknown, duplicate or malformed parameters and invalid
/// arguments are errors with a one-line message.
pub fn build_op(
    name: &str,
    params: &[(String, String)],
    input: &TensorType,
) -> Result<Graph, OpError> {
    if crate::program::program_info(name).is_some() {
        return Err(OpError::BadInput {
            op: crate::program::program_info(name).map_or("?", |p| p.info.name),
            problem: "is not a single graph: build it with `kiln_ops::build_plan`".into(),
        });
    }
    let info = op_info(name).ok_or_else(|| OpError::UnknownOp {
        name: name.to_string(),
        known: all_names().join(", "),
    })?;
    let op = info.name;
    let p = Params::new(info, params)?;
    let mut b = GraphBuilder::new();
    let x = b.input(input.dtype, &input.shape)?;
    let rank = input.shape.len().saturating_sub(2);
    let out = match op {
        // Rank filters (helper rank): median_blur (with its padding), rank and percentile.
        "median_blur" | "rank_filter" | "percentile_filter" => {
            crate::rank::build_graph(&p, &mut b, x)?
        }
        "gradient_magnitude" => {
            // cval stays f64 for f32 input: scipy's convolve uses it unrounded.
            let border = p.border(DType::F64)?;
            gradient_magnitude(&mut b, x, border)?
        }
        // Morphology family (helper morph).
        name if crate::morphology_registry::handles(name, &p) => {
            crate::morphology_registry::build(name, &p, &mut b, x, input)?
        }
        _ => {
            let window = p.window(rank)?;
            let border = p.border(input.dtype)?;
            match op {
                "median_filter" => median_filter(&mut b, x, &window, border)?,
                "grey_erosion" => grey_erosion(&mut b, x, &window, border)?,
                "grey_dilation" => grey_dilation(&mut b, x, &window, border)?,
                "grey_opening" => grey_opening(&mut b, x, &window, border)?,
                "grey_closing" => grey_closing(&mut b, x, &window, border)?,
                _ => unreachable!("every registered operator is dispatched above"),
            }
        }
    };
    Ok(b.finish(&[out])?)
}

/// Parameters checked against an operator's accepted names; the parsers every operator and
/// program shares (one syntax, one set of messages).
pub struct Params<'a> {
    op: &'static str,
    list: &'a [(String, String)],
}

impl<'a> Params<'a> {
    /// Checks `list` against `info`'s parameter names (unknown or repeated names are errors).
    pub fn new(info: &'static OpInfo, list: &'a [(String, String)]) -> Result<Self, OpError> {
        for (i, (name, _)) in list.iter().enumerate() {
            if !info.params.iter().any(|(n, _)| n == name) {
                return Err(OpError::UnknownParam {
                    op: info.name,
                    name: name.clone(),
                    accepted: info
                        .params
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            if list[..i].iter().any(|(n, _)| n == name) {
                return Err(OpError::BadParam {
                    op: info.name,
                    name: name.clone(),
                    problem: "given more than once".into(),
                });
            }
        }
        Ok(Params {
            op: info.name,
            list,
        })
    }

    /// The operator's name.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The trimmed value of parameter `name`, if given.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.list
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
    }

    /// A `BadParam` error for parameter `name`.
    pub fn bad(&self, name: &str, problem: impl Into<String>) -> OpError {
        OpError::BadParam {
            op: self.op,
            name: name.to_string(),
            problem: problem.into(),
        }
    }

    /// A `BadParam` error for a missing required parameter.
    pub fn missing(&self, name: &str, problem: &str) -> OpError {
        self.bad(name, format!("missing: {problem}"))
    }

    /// A comma-separated list of `T` (`what` names them in the error).
    pub fn list<T: std::str::FromStr>(
        &self,
        name: &str,
        what: &str,
    ) -> Result<Option<Vec<T>>, OpError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        v.split(',')
            .map(|s| {
                s.trim().parse::<T>().map_err(|_| {
                    self.bad(
                        name,
                        format!("`{v}` is not a comma-separated list of {what}"),
                    )
                })
            })
            .collect::<Result<Vec<T>, _>>()
            .map(Some)
    }

    /// A comma-separated list of non-negative integers.
    pub fn usizes(&self, name: &str) -> Result<Option<Vec<usize>>, OpError> {
        self.list(name, "non-negative integers")
    }

    /// A comma-separated list of integers.
    pub fn i64s(&self, name: &str) -> Result<Option<Vec<i64>>, OpError> {
        self.list(name, "integers")
    }

    /// `a,b;c,d|e,f;g,h`: planes by `|`, rows by `;`, entries by `,`; entries 0 or 1.
    /// Leading axes of extent 1 are added or dropped to give `rank` axes where possible (so
    /// `1,1,1` is a 1-D footprint on a 1-D input and a 1x3 one on a 2-D input).
    pub fn footprint(&self, name: &str, rank: usize) -> Result<Option<Window>, OpError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let planes: Vec<&str> = v.split('|').collect();
        let mut shape_of_plane: Option<Vec<usize>> = None;
        let mut mask = Vec::new();
        for plane in &planes {
            let rows: Vec<&str> = plane.split(';').collect();
            let mut width = None;
            for row in &rows {
                let entries: Vec<&str> = row.split(',').collect();
                if *width.get_or_insert(entries.len()) != entries.len() {
                    return Err(self.bad(name, "rows have different lengths"));
                }
                for e in entries {
                    mask.push(match e.trim() {
                        "0" => false,
                        "1" => true,
                        other => {
                            return Err(self.bad(name, format!("entry `{other}` is not 0 or 1")))
                        }
                    });
                }
            }
            let this = vec![rows.len(), width.unwrap_or(0)];
            if *shape_of_plane.get_or_insert_with(|| this.clone()) != this {
                return Err(self.bad(name, "planes have different shapes"));
            }
        }
        let mut shape = vec![planes.len()];
        shape.extend(shape_of_plane.unwrap_or_default());
        while shape.len() > rank && shape[0] == 1 {
            shape.remove(0);
        }
        while shape.len() < rank {
            shape.insert(0, 1);
        }
        Ok(Some(Window::footprint(&shape, &mask)))
    }

    /// scipy's window: `size` or `footprint` (exactly one), with `origin`.
    pub fn window(&self, rank: usize) -> Result<Window, OpError> {
        let size = self.usizes("size")?;
        let fp = self.footprint("footprint", rank)?;
        let window = match (size, fp) {
            (Some(_), Some(_)) => {
                return Err(self.bad("size", "give size or footprint, not both"));
            }
            (Some(s), None) => Window::size(&s),
            (None, Some(f)) => f,
            (None, None) => {
                return Err(self.missing("size", "give size or footprint"));
            }
        };
        let origin = self.i64s("origin")?.unwrap_or_default();
        Ok(window.with_origin(&origin))
    }

    /// scipy's `mode` (default reflect) and `cval` (default 0) converted to `dtype`.
    pub fn border(&self, dtype: DType) -> Result<Border, OpError> {
        let cval = match self.get("cval") {
            None => 0.0,
            Some(c) => c
                .parse::<f64>()
                .map_err(|_| self.bad("cval", format!("`{c}` is not a number")))?,
        };
        let mode = self.get("mode").unwrap_or("reflect");
        Border::from_mode_name(mode, Scalar::from_f64(dtype, cval)).ok_or(OpError::UnknownMode {
            op: self.op,
            mode: mode.to_string(),
        })
    }
}
