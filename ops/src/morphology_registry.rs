//! Registry glue for the morphology family: parameter lists, the `name=value` parsers of
//! binary structures (`structure=`, `connectivity=`, `structure_iterations=`) and numeric
//! grey structures, the graph-operator dispatch and the program builders.
//!
//! Exactness: parsing only; the operators are in `morphology_binary`, `morphology_grey`
//! and `morphology_program`. Limits: `structure=` values of grey operators are decimal
//! numbers parsed as f64 (as numpy's `asarray(structure, float64)`).

use kiln_ir::{GraphBuilder, NodeId, TensorType};

use crate::error::OpError;
use crate::morphology_binary::{
    binary_closing, binary_dilation, binary_erosion_with, binary_hit_or_miss, binary_opening,
    BinaryArgs,
};
use crate::morphology_grey::{
    black_tophat, grey_dilation_el, grey_erosion_el, morphological_gradient, morphological_laplace,
    white_tophat, GreyElement,
};
use crate::morphology_program::{BinaryFixpoint, BinaryKind};
use crate::morphology_tools::{generate_binary_structure, iterate_structure};
use crate::program::Program;
use crate::registry::Params;
use crate::window::Window;

const P_STRUCTURE: (&str, &str) = (
    "structure",
    "boolean structure, same syntax as footprint (default: generate_binary_structure(rank, connectivity))",
);
const P_CONNECTIVITY: (&str, &str) = (
    "connectivity",
    "default structure's connectivity: generate_binary_structure(rank, connectivity) (default 1)",
);
const P_STRUCTURE_ITERATIONS: (&str, &str) = (
    "structure_iterations",
    "iterate_structure(structure, n) applied to the structure first (default 1)",
);
const P_BORDER_VALUE: (&str, &str) = (
    "border_value",
    "0 (default) or 1: the value outside the image",
);
const P_ORIGIN: (&str, &str) = (
    "origin",
    "scipy origin: one value or one per spatial axis, -(size/2) <= origin <= (size-1)/2",
);
const P_BRUTE_FORCE: (&str, &str) = (
    "brute_force",
    "0 or 1: accepted as scipy's; the result does not depend on it",
);

/// Parameters of binary_erosion / dilation / opening / closing (graph forms).
pub(crate) const BINARY_PARAMS: &[(&str, &str)] = &[
    P_STRUCTURE,
    ("footprint", "alias of structure"),
    P_CONNECTIVITY,
    P_STRUCTURE_ITERATIONS,
    (
        "iterations",
        "passes, 1 to 64 in a graph (default 1; until convergence: the Rust API's programs)",
    ),
    P_BORDER_VALUE,
    P_ORIGIN,
    P_BRUTE_FORCE,
];

/// Parameters of binary_hit_or_miss.
pub(crate) const HIT_OR_MISS_PARAMS: &[(&str, &str)] = &[
    (
        "structure1",
        "boolean structure of the hit part (default: the cross)",
    ),
    (
        "structure2",
        "boolean structure of the miss part (default: NOT structure1)",
    ),
    P_CONNECTIVITY,
    ("origin1", "origin of structure1 (default 0)"),
    ("origin2", "origin of structure2 (default origin1)"),
];

/// Parameters of binary_propagation (program; inputs: input, mask).
pub(crate) const PROPAGATION_PARAMS: &[(&str, &str)] = &[
    P_STRUCTURE,
    P_CONNECTIVITY,
    P_STRUCTURE_ITERATIONS,
    P_BORDER_VALUE,
    P_ORIGIN,
];

/// Parameters of binary_fill_holes (program).
pub(crate) const FILL_HOLES_PARAMS: &[(&str, &str)] = &[
    P_STRUCTURE,
    P_CONNECTIVITY,
    P_STRUCTURE_ITERATIONS,
    P_ORIGIN,
];

/// Parameters of the grey operators: scipy's window plus a numeric `structure`.
pub(crate) const GREY_PARAMS: &[(&str, &str)] = &[
    (
        "size",
        "window extent: one value for every spatial axis or one per axis, e.g. 3 or 3,5",
    ),
    (
        "footprint",
        "boolean window instead of size: rows of 0/1 split by ';' (planes by '|'), e.g. 0,1,0;1,1,1;0,1,0",
    ),
    (
        "structure",
        "non-flat element: numbers in footprint syntax, e.g. 0,1,0;1,2,1;0,1,0 (erosion subtracts, dilation adds)",
    ),
    (
        "mode",
        "border: constant, reflect (default), mirror, nearest, wrap (and scipy's grid-* aliases)",
    ),
    ("cval", "value outside the image for mode=constant (default 0)"),
    P_ORIGIN,
];

/// The graph operators this file dispatches (grey erosion etc. only with `structure=`).
pub(crate) fn handles(name: &str, p: &Params<'_>) -> bool {
    matches!(
        name,
        "binary_erosion"
            | "binary_dilation"
            | "binary_opening"
            | "binary_closing"
            | "binary_hit_or_miss"
            | "white_tophat"
            | "black_tophat"
            | "morphological_gradient"
            | "morphological_laplace"
    ) || (matches!(
        name,
        "grey_erosion" | "grey_dilation" | "grey_opening" | "grey_closing"
    ) && p.get("structure").is_some())
}

/// A parsed grid: its shape and row-major entries.
type Grid<'a> = (Vec<usize>, Vec<&'a str>);

/// Splits `a,b;c,d|e,f;g,h` into a shape of `rank` axes (leading unit axes added or dropped
/// as for footprints) and the row-major entries.
fn grid<'a>(p: &Params<'a>, name: &str, rank: usize) -> Result<Option<Grid<'a>>, OpError> {
    let Some(v) = p.get(name) else {
        return Ok(None);
    };
    let planes: Vec<&str> = v.split('|').collect();
    let mut plane_shape: Option<Vec<usize>> = None;
    let mut entries = Vec::new();
    for plane in &planes {
        let rows: Vec<&str> = plane.split(';').collect();
        let mut width = None;
        for row in &rows {
            let e: Vec<&str> = row.split(',').map(str::trim).collect();
            if *width.get_or_insert(e.len()) != e.len() {
                return Err(p.bad(name, "rows have different lengths"));
            }
            entries.extend(e);
        }
        let this = vec![rows.len(), width.unwrap_or(0)];
        if *plane_shape.get_or_insert_with(|| this.clone()) != this {
            return Err(p.bad(name, "planes have different shapes"));
        }
    }
    let mut shape = vec![planes.len()];
    shape.extend(plane_shape.unwrap_or_default());
    while shape.len() > rank && shape[0] == 1 {
        shape.remove(0);
    }
    while shape.len() < rank {
        shape.insert(0, 1);
    }
    Ok(Some((shape, entries)))
}

fn int_param(p: &Params<'_>, name: &str, default: i64) -> Result<i64, OpError> {
    match p.get(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| p.bad(name, format!("`{v}` is not an integer"))),
    }
}

fn bool_param(p: &Params<'_>, name: &str) -> Result<bool, OpError> {
    match p.get(name) {
        None | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(_) => Err(p.bad(name, "must be 0 or 1")),
    }
}

/// A binary structure from `key` (or `footprint` when `alias`), else
/// `generate_binary_structure(rank, connectivity)`, then `iterate_structure` by
/// `structure_iterations`. `None` when nothing is given (the operator's default).
fn binary_structure(
    p: &Params<'_>,
    key: &str,
    alias: bool,
    rank: usize,
) -> Result<Option<Window>, OpError> {
    if alias && p.get(key).is_some() && p.get("footprint").is_some() {
        return Err(p.bad(key, "give structure or footprint, not both"));
    }
    let given = match p.footprint(key, rank)? {
        Some(s) => Some(s),
        None if alias => p.footprint("footprint", rank)?,
        None => None,
    };
    let conn = p
        .get("connectivity")
        .map(|_| int_param(p, "connectivity", 1));
    let s = match (given, conn) {
        (Some(_), Some(_)) => return Err(p.bad("connectivity", "give structure or connectivity")),
        (Some(s), None) => Some(s),
        (None, Some(c)) => Some(generate_binary_structure(rank, c?)?),
        (None, None) => None,
    };
    let n = int_param(p, "structure_iterations", 1)?;
    if n < 1 {
        return Err(p.bad("structure_iterations", "must be at least 1"));
    }
    Ok(match s {
        Some(s) if n > 1 => Some(iterate_structure(&s, n, None)?),
        None if n > 1 => Some(iterate_structure(&Window::cross(rank), n, None)?),
        s => s,
    })
}

fn binary_args(p: &Params<'_>, rank: usize) -> Result<BinaryArgs, OpError> {
    bool_param(p, "brute_force")?;
    let iterations = int_param(p, "iterations", 1)?;
    if iterations < 1 {
        return Err(p.bad(
            "iterations",
            "a graph operator runs 1 to 64 passes; until convergence (iterations < 1) and masks \
             are the program forms (kiln::morphology, binary_propagation)",
        ));
    }
    Ok(BinaryArgs {
        structure: binary_structure(p, "structure", true, rank)?,
        iterations: iterations as usize,
        border_value: bool_param(p, "border_value")?,
        origin: p.i64s("origin")?.unwrap_or_default(),
    })
}

/// The grey element: `structure` numbers (alone, or with a `footprint` of the same shape),
/// or scipy's flat `size` / `footprint`.
fn grey_element(p: &Params<'_>, rank: usize) -> Result<GreyElement, OpError> {
    let Some((shape, entries)) = grid(p, "structure", rank)? else {
        return Ok(GreyElement::flat(p.window(rank)?));
    };
    if p.get("size").is_some() {
        return Err(p.bad("size", "give structure (with or without footprint) or size"));
    }
    let values = entries
        .iter()
        .map(|e| {
            e.parse::<f64>()
                .map_err(|_| p.bad("structure", format!("entry `{e}` is not a number")))
        })
        .collect::<Result<Vec<f64>, _>>()?;
    let origin = p.i64s("origin")?.unwrap_or_default();
    let window = match p.footprint("footprint", rank)? {
        Some(f) if f.shape != shape => {
            return Err(p.bad(
                "footprint",
                format!("shape {:?} differs from structure shape {shape:?}", f.shape),
            ))
        }
        Some(f) => f,
        None => Window::footprint(&shape, &vec![true; values.len()]),
    };
    Ok(GreyElement {
        window: window.with_origin(&origin),
        values: Some(values),
    })
}

/// Appends operator `name` (one that [`handles`]) reading `x` of type `input`.
pub(crate) fn build(
    name: &str,
    p: &Params<'_>,
    b: &mut GraphBuilder,
    x: NodeId,
    input: &TensorType,
) -> Result<NodeId, OpError> {
    let rank = input.shape.len().saturating_sub(2);
    match name {
        "binary_erosion" => binary_erosion_with(b, x, &binary_args(p, rank)?),
        "binary_dilation" => binary_dilation(b, x, &binary_args(p, rank)?),
        "binary_opening" => binary_opening(b, x, &binary_args(p, rank)?),
        "binary_closing" => binary_closing(b, x, &binary_args(p, rank)?),
        "binary_hit_or_miss" => {
            let s1 = binary_structure(p, "structure1", false, rank)?;
            let s2 = p.footprint("structure2", rank)?;
            let o1 = p.i64s("origin1")?.unwrap_or_default();
            let o2 = p.i64s("origin2")?;
            binary_hit_or_miss(b, x, s1.as_ref(), s2.as_ref(), &o1, o2.as_deref())
        }
        _ => {
            let el = grey_element(p, rank)?;
            let border = p.border(input.dtype)?;
            match name {
                "white_tophat" => white_tophat(b, x, &el, border),
                "black_tophat" => black_tophat(b, x, &el, border),
                "morphological_gradient" => morphological_gradient(b, x, &el, border),
                "morphological_laplace" => morphological_laplace(b, x, &el, border),
                "grey_erosion" => grey_erosion_el(b, x, &el, border),
                "grey_dilation" => grey_dilation_el(b, x, &el, border),
                "grey_opening" => {
                    let e = grey_erosion_el(b, x, &el, border)?;
                    grey_dilation_el(b, e, &el, border)
                }
                "grey_closing" => {
                    let d = grey_dilation_el(b, x, &el, border)?;
                    grey_erosion_el(b, d, &el, border)
                }
                _ => unreachable!("`handles` lists every name"),
            }
        }
    }
}

/// `binary_propagation` (inputs: input, mask): scipy's `binary_dilation(input, structure,
/// iterations=-1, mask, border_value, origin)`.
pub(crate) fn build_propagation(
    p: &Params<'_>,
    inputs: &[TensorType],
) -> Result<Box<dyn Program>, OpError> {
    let rank = inputs[0].shape.len().saturating_sub(2);
    let s = binary_structure(p, "structure", false, rank)?;
    let origin = p.i64s("origin")?.unwrap_or_default();
    Ok(Box::new(BinaryFixpoint::new(
        "binary_propagation",
        BinaryKind::Dilation,
        &inputs[0],
        s.as_ref(),
        -1,
        true,
        bool_param(p, "border_value")?,
        &origin,
    )?))
}

/// `binary_fill_holes` (input): NOT of the propagation of zeros into NOT input, border 1.
pub(crate) fn build_fill_holes(
    p: &Params<'_>,
    inputs: &[TensorType],
) -> Result<Box<dyn Program>, OpError> {
    let rank = inputs[0].shape.len().saturating_sub(2);
    let s = binary_structure(p, "structure", false, rank)?;
    let origin = p.i64s("origin")?.unwrap_or_default();
    Ok(Box::new(BinaryFixpoint::new(
        "binary_fill_holes",
        BinaryKind::FillHoles,
        &inputs[0],
        s.as_ref(),
        0,
        true,
        true,
        &origin,
    )?))
}

/// The program form of `binary_erosion` / `binary_dilation` / `binary_opening` /
/// `binary_closing`: any `iterations` (`< 1`: until nothing changes) and, with two inputs,
/// a mask. Opening and closing chain two fixpoints with the same arguments, as scipy does.
pub(crate) fn build_binary_program(
    name: &str,
    p: &Params<'_>,
    inputs: &[TensorType],
) -> Result<Vec<BinaryFixpoint>, OpError> {
    let op = p.op();
    let Some(input) = inputs.first() else {
        return Err(OpError::BadInput {
            op,
            problem: "needs an input".into(),
        });
    };
    if inputs.len() > 2 {
        return Err(OpError::BadInput {
            op,
            problem: format!(
                "takes an input and an optional mask, got {} inputs",
                inputs.len()
            ),
        });
    }
    if let Some(m) = inputs.get(1) {
        if m.shape != input.shape {
            return Err(OpError::BadInput {
                op,
                problem: format!(
                    "mask shape {:?} differs from input shape {:?}",
                    m.shape, input.shape
                ),
            });
        }
    }
    bool_param(p, "brute_force")?;
    let rank = input.shape.len().saturating_sub(2);
    let s = binary_structure(p, "structure", true, rank)?;
    let iterations = int_param(p, "iterations", 1)?;
    let bv = bool_param(p, "border_value")?;
    let origin = p.i64s("origin")?.unwrap_or_default();
    let has_mask = inputs.len() == 2;
    let stage = |kind, ty: &TensorType| {
        BinaryFixpoint::new(op, kind, ty, s.as_ref(), iterations, has_mask, bv, &origin)
    };
    let bool_ty = TensorType {
        dtype: kiln_ir::DType::Bool,
        shape: input.shape.clone(),
    };
    Ok(match name {
        "binary_erosion" => vec![stage(BinaryKind::Erosion, input)?],
        "binary_dilation" => vec![stage(BinaryKind::Dilation, input)?],
        "binary_opening" => vec![
            stage(BinaryKind::Erosion, input)?,
            stage(BinaryKind::Dilation, &bool_ty)?,
        ],
        "binary_closing" => vec![
            stage(BinaryKind::Dilation, input)?,
            stage(BinaryKind::Erosion, &bool_ty)?,
        ],
        _ => {
            return Err(OpError::BadInput {
                op,
                problem: "has no program form".into(),
            })
        }
    })
}
