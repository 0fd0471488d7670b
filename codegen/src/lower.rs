//! Lowering: a fused group of the graph becomes a [`Kernel`].

use kiln_ir::passes::FusedGroup;
use kiln_ir::Graph;

use crate::kernel::Kernel;
use crate::CodegenError;

/// Lowers `group` of `graph` to the kernel form.
pub fn lower(graph: &Graph, group: &FusedGroup) -> Result<Kernel, CodegenError> {
    let _ = (graph, group);
    todo!("lowering")
}
