//! Typed operators: kiln's operators with scipy.ndimage's (or kornia's) parameters as Rust
//! values instead of the CLI registry's `name=value` strings.
//!
//! Scope: [`Op`] names one operator and its parameters; [`Op::append`] appends its nodes to a
//! graph through the same `kiln_ops` builder functions the registry calls, so an `Op` computes
//! exactly what `kiln run` computes for the same parameters (exactness is the operators' own,
//! documented in `kiln_ops`). Limits: binary `mask` and `iterations < 1` (fixpoints) are not
//! graphs: see [`crate::embed::morphology`].

use kiln_ir::{Border, DType, GraphBuilder, NodeId, Scalar};
use kiln_ops::Window;

use super::error::{Error, Result};

/// scipy.ndimage's boundary modes (`mode=`); the value outside for `Constant` is the op's
/// `cval`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `d c b a | a b c d | d c b a` (scipy's default; alias `grid-mirror`).
    #[default]
    Reflect,
    /// Reads outside give `cval` (alias `grid-constant`).
    Constant,
    /// `a a a | a b c d | d d d`.
    Nearest,
    /// `d c b | a b c d | c b a`.
    Mirror,
    /// `b c d | a b c d | a b c` (alias `grid-wrap`).
    Wrap,
}

impl Mode {
    /// Parses a scipy mode name (with scipy's `grid-*` aliases).
    pub fn from_name(name: &str) -> Result<Mode> {
        Ok(match name {
            "reflect" | "grid-mirror" => Mode::Reflect,
            "constant" | "grid-constant" => Mode::Constant,
            "nearest" => Mode::Nearest,
            "mirror" => Mode::Mirror,
            "wrap" | "grid-wrap" => Mode::Wrap,
            _ => {
                return Err(Error::Input(format!(
                    "unknown mode `{name}` (expected reflect, constant, nearest, mirror, wrap, \
                     grid-constant, grid-mirror or grid-wrap)"
                )))
            }
        })
    }

    /// The scipy name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Reflect => "reflect",
            Mode::Constant => "constant",
            Mode::Nearest => "nearest",
            Mode::Mirror => "mirror",
            Mode::Wrap => "wrap",
        }
    }

    /// kiln's border for this mode on `dtype`, `cval` converted like a cast from f64.
    pub fn border(self, dtype: DType, cval: f64) -> Border {
        match self {
            Mode::Reflect => Border::Reflect,
            Mode::Constant => Border::Constant(Scalar::from_f64(dtype, cval)),
            Mode::Nearest => Border::Nearest,
            Mode::Mirror => Border::Mirror,
            Mode::Wrap => Border::Wrap,
        }
    }
}

/// Anything that is a scipy window: a size for every axis (`3`), one size per axis
/// (`[3, 5]`, `&[3, 5][..]`, `vec![3, 5]`) or a [`Window`] (a footprint).
pub trait IntoWindow {
    /// The window.
    fn into_window(self) -> Window;
}

impl IntoWindow for usize {
    fn into_window(self) -> Window {
        Window::size(&[self])
    }
}

impl<const N: usize> IntoWindow for [usize; N] {
    fn into_window(self) -> Window {
        Window::size(&self)
    }
}

impl IntoWindow for &[usize] {
    fn into_window(self) -> Window {
        Window::size(self)
    }
}

impl IntoWindow for Vec<usize> {
    fn into_window(self) -> Window {
        Window::size(&self)
    }
}

impl IntoWindow for Window {
    fn into_window(self) -> Window {
        self
    }
}

/// Which operator an [`Op`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// scipy.ndimage.median_filter.
    MedianFilter,
    /// scipy.ndimage.grey_erosion (flat footprint).
    GreyErosion,
    /// scipy.ndimage.grey_dilation (flat footprint).
    GreyDilation,
    /// scipy.ndimage.grey_opening (flat footprint).
    GreyOpening,
    /// scipy.ndimage.grey_closing (flat footprint).
    GreyClosing,
    /// scipy.ndimage.binary_erosion (one iteration, no mask).
    BinaryErosion,
    /// Central-difference gradient magnitude over the last two spatial axes.
    GradientMagnitude,
    /// kornia.filters.median_blur (zero padding, lower median, NaN on non-finite windows).
    MedianBlur,
    // Morphology family (helper morph).
    /// scipy.ndimage.binary_dilation (1 to 64 iterations, no mask).
    BinaryDilation,
    /// scipy.ndimage.binary_opening (1 to 64 iterations, no mask).
    BinaryOpening,
    /// scipy.ndimage.binary_closing (1 to 64 iterations, no mask).
    BinaryClosing,
    /// scipy.ndimage.binary_hit_or_miss.
    BinaryHitOrMiss,
    /// scipy.ndimage.white_tophat: `x - opening` (XOR on bool).
    WhiteTophat,
    /// scipy.ndimage.black_tophat: `closing - x` (XOR on bool).
    BlackTophat,
    /// scipy.ndimage.morphological_gradient: `dilation - erosion`.
    MorphologicalGradient,
    /// scipy.ndimage.morphological_laplace: `((dilation + erosion) - x) - x`.
    MorphologicalLaplace,
}

impl OpKind {
    /// The registry name (`kiln run`'s operator name).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::MedianFilter => "median_filter",
            OpKind::GreyErosion => "grey_erosion",
            OpKind::GreyDilation => "grey_dilation",
            OpKind::GreyOpening => "grey_opening",
            OpKind::GreyClosing => "grey_closing",
            OpKind::BinaryErosion => "binary_erosion",
            OpKind::GradientMagnitude => "gradient_magnitude",
            OpKind::MedianBlur => "median_blur",
            // Morphology family (helper morph).
            OpKind::BinaryDilation => "binary_dilation",
            OpKind::BinaryOpening => "binary_opening",
            OpKind::BinaryClosing => "binary_closing",
            OpKind::BinaryHitOrMiss => "binary_hit_or_miss",
            OpKind::WhiteTophat => "white_tophat",
            OpKind::BlackTophat => "black_tophat",
            OpKind::MorphologicalGradient => "morphological_gradient",
            OpKind::MorphologicalLaplace => "morphological_laplace",
        }
    }
}

/// One operator with typed parameters. Build with a constructor, refine with the chained
/// setters:
///
/// ```
/// use kiln::embed::{Mode, Op};
/// let op = Op::median_filter([3, 5]).mode(Mode::Constant).cval(1.5).origin([0, -1]);
/// assert_eq!(op.kind().name(), "median_filter");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    kind: OpKind,
    window: Option<Window>,
    origin: Vec<i64>,
    mode: Option<Mode>,
    cval: f64,
    border_value: bool,
    /// Binary operators' `iterations` (1 to 64 in a graph).
    iterations: usize,
    /// Grey operators' non-flat `structure` values (row-major over the window).
    structure: Option<Vec<f64>>,
    /// binary_hit_or_miss's `structure2` (`None`: NOT structure1).
    structure2: Option<Window>,
}

impl Op {
    fn new(kind: OpKind, window: Option<Window>) -> Op {
        Op {
            kind,
            window,
            origin: Vec::new(),
            mode: None,
            cval: 0.0,
            border_value: false,
            iterations: 1,
            structure: None,
            structure2: None,
        }
    }

    /// scipy.ndimage.median_filter with `size` or a footprint ([`IntoWindow`]).
    pub fn median_filter(window: impl IntoWindow) -> Op {
        Op::new(OpKind::MedianFilter, Some(window.into_window()))
    }

    /// scipy.ndimage.grey_erosion (minimum filter) with a flat window.
    pub fn grey_erosion(window: impl IntoWindow) -> Op {
        Op::new(OpKind::GreyErosion, Some(window.into_window()))
    }

    /// scipy.ndimage.grey_dilation (maximum over the reflected window).
    pub fn grey_dilation(window: impl IntoWindow) -> Op {
        Op::new(OpKind::GreyDilation, Some(window.into_window()))
    }

    /// scipy.ndimage.grey_opening: dilation of the erosion.
    pub fn grey_opening(window: impl IntoWindow) -> Op {
        Op::new(OpKind::GreyOpening, Some(window.into_window()))
    }

    /// scipy.ndimage.grey_closing: erosion of the dilation.
    pub fn grey_closing(window: impl IntoWindow) -> Op {
        Op::new(OpKind::GreyClosing, Some(window.into_window()))
    }

    /// scipy.ndimage.binary_erosion on bool arrays; `structure: None` is scipy's default
    /// cross of radius 1.
    pub fn binary_erosion(structure: Option<Window>) -> Op {
        Op::new(OpKind::BinaryErosion, structure)
    }

    /// `sqrt(dx*dx + dy*dy)` with central differences over the last two spatial axes
    /// (f32/f64).
    pub fn gradient_magnitude() -> Op {
        Op::new(OpKind::GradientMagnitude, None)
    }

    /// kornia's median_blur with a `ky x kx` kernel over the last two axes (f32/f64).
    pub fn median_blur(ky: usize, kx: usize) -> Op {
        Op::new(OpKind::MedianBlur, Some(Window::size(&[ky, kx])))
    }

    // Morphology family (helper morph).
    /// scipy.ndimage.binary_dilation on bool arrays (`structure: None`: the cross); the
    /// structure is reflected and the origin negated, as scipy does.
    pub fn binary_dilation(structure: Option<Window>) -> Op {
        Op::new(OpKind::BinaryDilation, structure)
    }

    /// scipy.ndimage.binary_opening on bool arrays: dilation of the erosion (one kernel).
    pub fn binary_opening(structure: Option<Window>) -> Op {
        Op::new(OpKind::BinaryOpening, structure)
    }

    /// scipy.ndimage.binary_closing on bool arrays: erosion of the dilation (one kernel).
    pub fn binary_closing(structure: Option<Window>) -> Op {
        Op::new(OpKind::BinaryClosing, structure)
    }

    /// scipy.ndimage.binary_hit_or_miss on bool arrays: erosion by `structure1` (default the
    /// cross) and no true value under `structure2` (default NOT structure1, not reflected,
    /// outside counts as false). [`Op::origin`] sets origin1 and origin2 alike.
    pub fn binary_hit_or_miss(structure1: Option<Window>, structure2: Option<Window>) -> Op {
        let mut op = Op::new(OpKind::BinaryHitOrMiss, structure1);
        op.structure2 = structure2;
        op
    }

    /// scipy.ndimage.white_tophat: `x - grey_opening(x)` in the input dtype (XOR on bool).
    pub fn white_tophat(window: impl IntoWindow) -> Op {
        Op::new(OpKind::WhiteTophat, Some(window.into_window()))
    }

    /// scipy.ndimage.black_tophat: `grey_closing(x) - x` in the input dtype (XOR on bool).
    pub fn black_tophat(window: impl IntoWindow) -> Op {
        Op::new(OpKind::BlackTophat, Some(window.into_window()))
    }

    /// scipy.ndimage.morphological_gradient: `grey_dilation(x) - grey_erosion(x)` (wrapping
    /// for u8; bool refused).
    pub fn morphological_gradient(window: impl IntoWindow) -> Op {
        Op::new(OpKind::MorphologicalGradient, Some(window.into_window()))
    }

    /// scipy.ndimage.morphological_laplace: `((dilation + erosion) - x) - x` (wrapping for
    /// u8; bool refused).
    pub fn morphological_laplace(window: impl IntoWindow) -> Op {
        Op::new(OpKind::MorphologicalLaplace, Some(window.into_window()))
    }

    /// Sets the binary operators' `iterations` (1 to 64; masks and `iterations < 1` are
    /// [`crate::embed::morphology`]'s functions).
    pub fn iterations(mut self, n: usize) -> Op {
        self.iterations = n;
        self
    }

    /// Sets the grey operators' non-flat `structure`: one value per entry of the window's
    /// shape, row-major (erosion subtracts, dilation adds, in f64; f32/f64 input only).
    pub fn structure(mut self, values: &[f64]) -> Op {
        self.structure = Some(values.to_vec());
        self
    }

    /// Sets scipy's `mode` (not taken by `binary_erosion` or `median_blur`).
    pub fn mode(mut self, mode: Mode) -> Op {
        self.mode = Some(mode);
        self
    }

    /// Sets scipy's `cval`, the value outside under [`Mode::Constant`].
    pub fn cval(mut self, cval: f64) -> Op {
        self.cval = cval;
        self
    }

    /// Sets scipy's `origin`: one value for every axis or one per spatial axis.
    pub fn origin(mut self, origin: impl AsRef<[i64]>) -> Op {
        self.origin = origin.as_ref().to_vec();
        self
    }

    /// Sets `binary_erosion`'s `border_value`.
    pub fn border_value(mut self, value: bool) -> Op {
        self.border_value = value;
        self
    }

    /// Which operator this is.
    pub fn kind(&self) -> OpKind {
        self.kind
    }

    /// The border mode (scipy's default `reflect` when unset).
    pub fn border_mode(&self) -> Mode {
        self.mode.unwrap_or_default()
    }

    /// Rank filters (helper rank): a `median_filter`'s window (with its origin), mode and
    /// cval, so that [`Op::run`] can take windows over the network limit to the program;
    /// `None` for the other operators.
    pub(crate) fn median_filter_parts(&self) -> Option<(Window, Mode, f64)> {
        match self.kind {
            OpKind::MedianFilter => {
                let w = self.window.clone()?.with_origin(&self.effective_origin());
                Some((w, self.border_mode(), self.cval))
            }
            _ => None,
        }
    }

    /// How far outside its point this op reads along each of `rank` spatial axes: per axis
    /// `(before, after)`. Used by callers that split arrays into overlapping chunks.
    pub fn halo(&self, rank: usize) -> Result<Vec<(usize, usize)>> {
        let mut h = vec![(0usize, 0usize); rank];
        let window_halo = |w: &Window, origin: &[i64], reflect: bool| -> Result<Vec<_>> {
            let shape = match w.shape.len() {
                1 if w.mask.is_none() => vec![w.shape[0]; rank],
                n if n == rank => w.shape.clone(),
                n => {
                    return Err(Error::Input(format!(
                        "{}: window has {n} axes, the input has {rank} spatial axes",
                        self.kind.name()
                    )))
                }
            };
            let org = |i: usize| match origin.len() {
                0 => 0,
                1 => origin[0],
                _ => origin.get(i).copied().unwrap_or(0),
            };
            Ok(shape
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    let lo = (s / 2) as i64 + org(i);
                    let hi = s as i64 - 1 - lo;
                    let (lo, hi) = if reflect { (hi, lo) } else { (lo, hi) };
                    (lo.max(0) as usize, hi.max(0) as usize)
                })
                .collect())
        };
        let add = |h: &mut Vec<(usize, usize)>, w: Vec<(usize, usize)>| {
            for (a, b) in h.iter_mut().zip(w) {
                a.0 += b.0;
                a.1 += b.1;
            }
        };
        let origin = self.effective_origin();
        match self.kind {
            OpKind::GradientMagnitude => {
                for a in h.iter_mut().skip(rank.saturating_sub(2)) {
                    *a = (1, 1);
                }
            }
            OpKind::MedianBlur => {
                let w = self
                    .window
                    .as_ref()
                    .map(|w| w.shape.clone())
                    .unwrap_or_default();
                if let ([ky, kx], true) = (w.as_slice(), rank >= 2) {
                    h[rank - 2] = ((ky - 1) / 2, ky / 2);
                    h[rank - 1] = ((kx - 1) / 2, kx / 2);
                }
            }
            OpKind::BinaryErosion => {
                let w = self.window.clone().unwrap_or_else(|| Window::cross(rank));
                add(&mut h, window_halo(&w, &origin, false)?);
            }
            // Morphology family (helper morph): every stage's reach, summed.
            OpKind::BinaryDilation
            | OpKind::BinaryOpening
            | OpKind::BinaryClosing
            | OpKind::BinaryHitOrMiss => {
                let w = self.window.clone().unwrap_or_else(|| Window::cross(rank));
                let n = match self.kind {
                    OpKind::BinaryHitOrMiss => 1,
                    _ => self.iterations.max(1),
                };
                for _ in 0..n {
                    if self.kind != OpKind::BinaryDilation {
                        add(&mut h, window_halo(&w, &origin, false)?);
                    }
                    if self.kind != OpKind::BinaryHitOrMiss {
                        add(&mut h, window_halo(&w, &origin, true)?);
                    }
                }
                if let Some(w2) = &self.structure2 {
                    add(&mut h, window_halo(w2, &origin, false)?);
                } else if self.kind == OpKind::BinaryHitOrMiss {
                    add(&mut h, window_halo(&w, &origin, false)?);
                }
            }
            kind => {
                let w = self
                    .window
                    .as_ref()
                    .ok_or_else(|| Error::Internal(format!("{} without a window", kind.name())))?;
                let ero = |h: &mut Vec<_>| window_halo(w, &origin, false).map(|x| add(h, x));
                let dil = |h: &mut Vec<_>| window_halo(w, &origin, true).map(|x| add(h, x));
                match kind {
                    OpKind::GreyDilation => dil(&mut h)?,
                    OpKind::GreyOpening
                    | OpKind::GreyClosing
                    | OpKind::WhiteTophat
                    | OpKind::BlackTophat
                    | OpKind::MorphologicalGradient
                    | OpKind::MorphologicalLaplace => {
                        ero(&mut h)?;
                        dil(&mut h)?;
                    }
                    _ => ero(&mut h)?,
                }
            }
        }
        Ok(h)
    }

    fn effective_origin(&self) -> Vec<i64> {
        if !self.origin.is_empty() {
            return self.origin.clone();
        }
        self.window
            .as_ref()
            .map(|w| w.origin.clone())
            .unwrap_or_default()
    }

    /// Appends this operator's nodes reading `x` (a `[B, C, S1..Sd]` node) to `b` and returns
    /// the result's node. The parameters are checked here (by `kiln_ops`).
    pub fn append(&self, b: &mut GraphBuilder, x: NodeId, dtype: DType) -> Result<NodeId> {
        let name = self.kind.name();
        let no_mode = |what: &str| -> Result<()> {
            if self.mode.is_some() {
                return Err(Error::Input(format!("{name}: takes no mode ({what})")));
            }
            Ok(())
        };
        let border = self.border_mode().border(dtype, self.cval);
        let origin = self.effective_origin();
        let window = || -> Result<Window> {
            let w = self
                .window
                .clone()
                .ok_or_else(|| Error::Internal(format!("{name} without a window")))?;
            Ok(w.with_origin(&origin))
        };
        // Morphology family (helper morph): setters only some operators take.
        let grey = matches!(
            self.kind,
            OpKind::GreyErosion
                | OpKind::GreyDilation
                | OpKind::GreyOpening
                | OpKind::GreyClosing
                | OpKind::WhiteTophat
                | OpKind::BlackTophat
                | OpKind::MorphologicalGradient
                | OpKind::MorphologicalLaplace
        );
        if self.structure.is_some() && !grey {
            return Err(Error::Input(format!("{name}: takes no non-flat structure")));
        }
        let iterated = matches!(
            self.kind,
            OpKind::BinaryErosion
                | OpKind::BinaryDilation
                | OpKind::BinaryOpening
                | OpKind::BinaryClosing
        );
        if self.iterations != 1 && !iterated {
            return Err(Error::Input(format!("{name}: takes no iterations")));
        }
        let grey_el = || -> Result<kiln_ops::GreyElement> {
            Ok(kiln_ops::GreyElement {
                window: window()?,
                values: self.structure.clone(),
            })
        };
        let binary_args = || kiln_ops::BinaryArgs {
            structure: self.window.clone(),
            iterations: self.iterations,
            border_value: self.border_value,
            origin: origin.clone(),
        };
        Ok(match self.kind {
            // Morphology family (helper morph).
            OpKind::BinaryDilation => {
                no_mode("its border is border_value")?;
                kiln_ops::binary_dilation(b, x, &binary_args())?
            }
            OpKind::BinaryOpening => {
                no_mode("its border is border_value")?;
                kiln_ops::binary_opening(b, x, &binary_args())?
            }
            OpKind::BinaryClosing => {
                no_mode("its border is border_value")?;
                kiln_ops::binary_closing(b, x, &binary_args())?
            }
            OpKind::BinaryHitOrMiss => {
                no_mode("outside counts as false")?;
                kiln_ops::binary_hit_or_miss(
                    b,
                    x,
                    self.window.as_ref(),
                    self.structure2.as_ref(),
                    &origin,
                    None,
                )?
            }
            OpKind::WhiteTophat => kiln_ops::white_tophat(b, x, &grey_el()?, border)?,
            OpKind::BlackTophat => kiln_ops::black_tophat(b, x, &grey_el()?, border)?,
            OpKind::MorphologicalGradient => {
                kiln_ops::morphological_gradient(b, x, &grey_el()?, border)?
            }
            OpKind::MorphologicalLaplace => {
                kiln_ops::morphological_laplace(b, x, &grey_el()?, border)?
            }
            OpKind::MedianFilter => kiln_ops::median_filter(b, x, &window()?, border)?,
            OpKind::GreyErosion => kiln_ops::grey_erosion_el(b, x, &grey_el()?, border)?,
            OpKind::GreyDilation => kiln_ops::grey_dilation_el(b, x, &grey_el()?, border)?,
            OpKind::GreyOpening => {
                let e = kiln_ops::grey_erosion_el(b, x, &grey_el()?, border)?;
                kiln_ops::grey_dilation_el(b, e, &grey_el()?, border)?
            }
            OpKind::GreyClosing => {
                let d = kiln_ops::grey_dilation_el(b, x, &grey_el()?, border)?;
                kiln_ops::grey_erosion_el(b, d, &grey_el()?, border)?
            }
            OpKind::GradientMagnitude => kiln_ops::gradient_magnitude(b, x, border)?,
            OpKind::BinaryErosion => {
                no_mode("its border is border_value")?;
                kiln_ops::binary_erosion_with(b, x, &binary_args())?
            }
            OpKind::MedianBlur => {
                no_mode("kornia pads with zeros")?;
                if !origin.is_empty() {
                    return Err(Error::Input(format!("{name}: takes no origin")));
                }
                let w = window()?;
                match w.shape.as_slice() {
                    [ky, kx] => kiln_ops::median_blur_hw(b, x, *ky, *kx)?,
                    s => {
                        return Err(Error::Input(format!(
                            "{name}: kernel size {s:?} must be ky, kx"
                        )))
                    }
                }
            }
        })
    }

    /// The spatial axes this op needs at least (`median_blur` and `gradient_magnitude`
    /// work over two axes).
    pub(crate) fn min_spatial_rank(&self) -> usize {
        match self.kind {
            OpKind::GradientMagnitude | OpKind::MedianBlur => 2,
            _ => 1,
        }
    }
}
