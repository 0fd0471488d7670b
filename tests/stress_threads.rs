//! Concurrency under load: 8+ threads share one `Engine` and run the same and different
//! graphs at once, so compiles race with runs, cache lookups race with cache inserts, and the
//! tiered background compiles land while other threads are mid-run. Every result is checked
//! bit for bit (`first_difference`) against eager, computed up front on the main thread.
//!
//! Bounded: the threads stop starting new runs after a fixed wall-clock budget (about 6 s),
//! and every thread does at least one full round over the graphs whatever the machine load.
//! Limits: a race that never shows up in this window is not found; the test is evidence,
//! not proof (the JIT code's memory safety is covered by `scripts/ci-valgrind.sh`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{f32_tensor, Data};
use kiln::ir::{DType, Graph, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine, Tensor};

const THREADS: usize = 8;
const BUDGET: Duration = Duration::from_secs(6);

/// A graph with its inputs and eager's outputs for each.
struct Case {
    name: String,
    graph: Graph,
    inputs: Vec<Tensor>,
    want: Vec<Vec<Tensor>>,
}

fn case(op: &str, params: &[(&str, &str)], shape: &[usize], seed: u64) -> Case {
    let ty = TensorType {
        dtype: DType::F32,
        shape: shape.to_vec(),
    };
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let graph = kiln::ops::build_op(op, &params, &ty).unwrap();
    let inputs: Vec<Tensor> = [Data::Uniform, Data::Ties, Data::Special]
        .into_iter()
        .enumerate()
        .map(|(i, d)| f32_tensor(shape, d, seed + i as u64))
        .collect();
    let want = inputs
        .iter()
        .map(|x| eager::run(&graph, std::slice::from_ref(x)).unwrap())
        .collect();
    Case {
        name: format!("{op} {params:?} {shape:?}"),
        graph,
        inputs,
        want,
    }
}

fn cases() -> Vec<Case> {
    vec![
        // Tiered: the 5x5 median's steps are capped, so a background compile follows.
        case("median_blur", &[("k", "5")], &[1, 2, 19, 45], 10),
        case("median_blur", &[("k", "3")], &[1, 1, 33, 70], 20),
        case("grey_opening", &[("size", "3")], &[1, 1, 24, 37], 30),
        case(
            "grey_erosion",
            &[("size", "5,3"), ("mode", "wrap")],
            &[2, 1, 9, 40],
            40,
        ),
        case(
            "gradient_magnitude",
            &[("mode", "constant"), ("cval", "0.1")],
            &[1, 1, 31, 29],
            50,
        ),
        case("grey_closing", &[("size", "2,4")], &[1, 3, 5, 6], 60),
    ]
}

fn check(c: &Case, input: usize, got: &[Tensor]) {
    assert_eq!(got.len(), c.want[input].len(), "{}", c.name);
    for (w, g) in c.want[input].iter().zip(got) {
        if let Some(d) = first_difference(w, g) {
            panic!("{} input {input}: fused differs from eager: {d:?}", c.name);
        }
    }
}

#[test]
fn many_threads_on_one_engine_agree_with_eager() {
    let cases = cases();
    let engine = Engine::new();
    let runs = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (cases, engine, runs) = (&cases, &engine, &runs);
            s.spawn(move || {
                let mut round = 0usize;
                while round == 0 || start.elapsed() < BUDGET {
                    for k in 0..cases.len() {
                        // Threads start on different graphs; even threads also share one.
                        let c = &cases[if t.is_multiple_of(2) {
                            k
                        } else {
                            (k + t) % cases.len()
                        }];
                        let input = (t + round + k) % c.inputs.len();
                        let x = std::slice::from_ref(&c.inputs[input]);
                        let got = if (t + round).is_multiple_of(3) {
                            // A compiled graph reused for several runs while upgrades land.
                            let compiled = engine.compile(&c.graph).unwrap();
                            for i in 0..c.inputs.len() {
                                let xi = std::slice::from_ref(&c.inputs[i]);
                                check(c, i, &compiled.run(engine, xi).unwrap());
                            }
                            compiled.run(engine, x).unwrap()
                        } else {
                            engine.run(&c.graph, x).unwrap()
                        };
                        check(c, input, &got);
                        runs.fetch_add(1, Ordering::Relaxed);
                    }
                    round += 1;
                }
            });
        }
    });
    let n = runs.load(Ordering::Relaxed);
    assert!(n >= THREADS * cases.len(), "{n} runs");
    let stats = engine.stats();
    assert!(
        stats.upgrades_started >= 1,
        "no background compile started: {stats:?}"
    );
    // After the storm, once the upgrades have landed, the results still match.
    for c in &cases {
        let compiled = engine.compile(&c.graph).unwrap();
        assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
        for (i, x) in c.inputs.iter().enumerate() {
            check(
                c,
                i,
                &compiled.run(&engine, std::slice::from_ref(x)).unwrap(),
            );
        }
    }
    println!(
        "{n} checked runs on {THREADS} threads in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}
