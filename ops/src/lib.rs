//! kiln-ops: image-processing operators written in the kiln IR.
//!
//! Every operator is a builder function on a [`kiln_ir::GraphBuilder`] that appends the
//! nodes computing it and returns the result's id, or an [`OpError`]. The semantics of each
//! (kornia's or scipy.ndimage's, bit for bit where stated) are in its doc comment.
//! [`build_op`] builds a one-operator graph by name for the CLI; [`build_plan`] builds any
//! operator, including the [`Program`]s that are not one graph (fixpoints, several inputs or
//! outputs, native passes).

pub mod distance;
pub mod error;
pub mod gradient;
pub mod median;
pub mod morphology;
pub mod morphology_binary;
pub mod morphology_grey;
pub mod morphology_program;
pub(crate) mod morphology_registry;
pub mod morphology_tools;
pub mod network;
pub mod program;
// Rank filters for any window size (helper rank).
pub mod rank;
pub mod registry;
pub mod sinkhorn;
pub mod window;

pub use error::OpError;
pub use gradient::gradient_magnitude;
pub use median::{median_blur, median_blur_hw, median_filter, select_rank};
pub use morphology::{binary_erosion, grey_closing, grey_dilation, grey_erosion, grey_opening};
pub use morphology_binary::{
    binary_closing, binary_dilation, binary_erosion_with, binary_hit_or_miss, binary_opening,
    truth, BinaryArgs,
};
pub use morphology_grey::{
    black_tophat, grey_dilation_el, grey_erosion_el, morphological_gradient, morphological_laplace,
    white_tophat, GreyElement,
};
pub use morphology_program::{binary_program, BinaryChain, BinaryFixpoint, BinaryKind};
pub use morphology_tools::{generate_binary_structure, iterate_structure};
pub use network::{selection_network, Network};
pub use program::{build_plan, Exec, Layout, OpPlan, Program, ProgramInfo, RunError, PROGRAMS};
pub use rank::{large_plan, RankProgram, RankSpec};
pub use registry::{all_names, build_op, op_info, op_names, OpInfo, Params, OPS};
pub use sinkhorn::{build_cost_matrix, Sinkhorn, SinkhornOptions};
pub use window::{ResolvedWindow, Window};
