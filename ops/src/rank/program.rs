//! [`RankProgram`]: a rank selection over a window too large for a network, as a program.
//!
//! Scope: one input `[B, C, S..]`, one output of the same type. Exactness: `Exec::Eager`
//! runs the sorting reference ([`super::reference`]), `Exec::Fused` the sliding histogram
//! ([`super::sliding`]) on the engine's threads; both are the network's selection bit for
//! bit (see [`super`]). Limits: the fused path refuses with `RuntimeError::OutOfMemory`
//! before allocating when its scratch exceeds the available memory.

use kiln_runtime::Tensor;

use super::RankSpec;
use crate::error::OpError;
use crate::program::{Exec, Program, RunError};

/// A rank selection as a program (see the module header).
#[derive(Clone, Debug)]
pub struct RankProgram {
    name: &'static str,
    spec: RankSpec,
}

impl RankProgram {
    /// A program computing `spec`, reported under registry name `name`. Any window size
    /// is accepted (tests use small ones to compare with the networks).
    pub fn new(name: &'static str, spec: RankSpec) -> Result<RankProgram, OpError> {
        spec.check(name)?;
        Ok(RankProgram { name, spec })
    }

    /// The selection it computes.
    pub fn spec(&self) -> &RankSpec {
        &self.spec
    }
}

impl Program for RankProgram {
    fn name(&self) -> &'static str {
        self.name
    }

    fn outputs(&self) -> Vec<&'static str> {
        vec!["out"]
    }

    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        let [x] = inputs else {
            return Err(RunError::BadInput {
                op: self.name,
                problem: format!("takes 1 input, got {}", inputs.len()),
            });
        };
        let out = match exec {
            Exec::Eager => super::reference::rank_reference(x, &self.spec)?,
            Exec::Fused(engine) => {
                engine.install(|| super::sliding::rank_sliding(x, &self.spec))?
            }
        };
        Ok(vec![out])
    }
}
