//! Tiered compilation (`runtime/src/fused/tiers.rs`): a kernel whose vector steps were cut
//! down by the code budget is compiled again, in the background, with bigger steps; runs
//! switch to it once it lands and give the same bits as before and as eager.

mod common;

use std::time::Duration;

use common::{f32_tensor, Data};
use kiln::ir::{DType, Graph, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine};

fn median(k: usize, shape: &[usize]) -> Graph {
    let ty = TensorType {
        dtype: DType::F32,
        shape: shape.to_vec(),
    };
    kiln::ops::build_op("median_blur", &[("k".into(), k.to_string())], &ty).unwrap()
}

fn steps(describe: &str) -> Option<&str> {
    describe
        .split(", ")
        .find(|p| p.contains("vectors per step"))
}

#[test]
fn capped_kernels_are_recompiled_with_bigger_steps_and_give_the_same_bits() {
    let shape = [1, 2, 19, 45];
    let g = median(5, &shape);
    let engine = Engine::new();
    let compiled = engine.compile(&g).unwrap();
    assert_eq!(compiled.upgrades.len(), 1);
    let upgrade = compiled.upgrades[0]
        .as_ref()
        .expect("the 5x5 median's step is capped by the default budget");
    assert_eq!(engine.stats().upgrades_started, 1);
    let first = compiled.kernels[0].describe();

    // Before the upgrade lands (or whatever a run finds), after it: eager's bits.
    let inputs: Vec<_> = [Data::Uniform, Data::Ties, Data::Special]
        .into_iter()
        .enumerate()
        .map(|(i, d)| f32_tensor(&shape, d, 40 + i as u64))
        .collect();
    let want: Vec<_> = inputs
        .iter()
        .map(|x| eager::run(&g, std::slice::from_ref(x)).unwrap())
        .collect();
    for (x, w) in inputs.iter().zip(&want) {
        let got = compiled.run(&engine, std::slice::from_ref(x)).unwrap();
        assert!(first_difference(&w[0], &got[0]).is_none());
    }
    assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
    let better = upgrade.get().expect("the background compile succeeds");
    assert!(std::sync::Arc::ptr_eq(
        compiled.current_kernel(0).unwrap(),
        better
    ));
    let second = better.describe();
    assert_ne!(steps(&first), steps(&second), "{first}\n{second}");
    assert!(
        steps(&second).is_some_and(|s| s.starts_with("8 vectors")),
        "{second}"
    );
    for (x, w) in inputs.iter().zip(&want) {
        let got = compiled.run(&engine, std::slice::from_ref(x)).unwrap();
        if let Some(d) = first_difference(&w[0], &got[0]) {
            panic!("upgraded kernel differs from eager at {d}");
        }
    }
    // A second compile of the same graph hits the cache and shares the upgrade.
    let again = engine.compile(&g).unwrap();
    assert!(std::sync::Arc::ptr_eq(
        again.upgrades[0].as_ref().unwrap(),
        upgrade
    ));
    assert_eq!(engine.stats().upgrades_started, 1);
}

#[test]
fn uncapped_kernels_and_untiered_engines_compile_once() {
    // The 3x3 median already takes the biggest step.
    let engine = Engine::new();
    let c = engine.compile(&median(3, &[1, 1, 16, 40])).unwrap();
    assert!(c.upgrades.iter().all(|u| u.is_none()));
    // Tiering off: the capped kernel stays as first compiled.
    let engine = Engine::new().with_tiering(false);
    let c = engine.compile(&median(5, &[1, 1, 16, 40])).unwrap();
    assert!(c.upgrades.iter().all(|u| u.is_none()));
    assert_eq!(engine.stats().upgrades_started, 0);
    assert!(c.wait_for_upgrades(Duration::ZERO));
}
