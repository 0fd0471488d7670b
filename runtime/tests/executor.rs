//! The one executor and its pieces outside the conformance suite: the kernel cache of
//! `Executor`, code images of compiled kernels (the CPU machine code as emitted), and the
//! `Tuning` that the engine's `with_*` knobs set.

use kiln_codegen::CompileOptions;
use kiln_ir::{Border, DType, Footprint, Graph, GraphBuilder, ReduceOp};
use kiln_runtime::backend::cpu::CpuBackend;
use kiln_runtime::backend::{Backend, CodeImage};
use kiln_runtime::executor::Executor;
use kiln_runtime::fused::Engine;
use kiln_runtime::{Tensor, Tuning};

/// A scan feeding a window max (two groups).
fn graph(shape: &[usize]) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let s = b.scan(x, 3, ReduceOp::Sum).unwrap();
    let fp = Footprint::scipy_box(&[3, 3], &[0, 0]);
    let m = b
        .window_reduce(s, ReduceOp::Max, &fp, Border::Reflect)
        .unwrap();
    b.finish(&[m, x]).unwrap()
}

#[test]
fn the_executor_caches_kernels_across_shapes_and_matches_eager() {
    let exec = Executor::new(CpuBackend::default());
    let g = graph(&[1, 2, 5, 6]);
    let p = exec.compile(&g).unwrap();
    assert_eq!(p.artifacts.len(), 2);
    assert_eq!(exec.backend().stats().kernels_compiled, 2);
    // Another shape of the same rank: the same kernel forms, served from the cache.
    let g2 = graph(&[2, 1, 7, 3]);
    let x = Tensor::from_f32(
        (0..42).map(|i| (i as f32 * 0.7).sin()).collect(),
        &[2, 1, 7, 3],
    )
    .unwrap();
    let got = exec.run(&g2, std::slice::from_ref(&x)).unwrap();
    assert_eq!(exec.backend().stats().kernels_compiled, 2);
    let want = kiln_runtime::eager::run(&g2, std::slice::from_ref(&x)).unwrap();
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(kiln_runtime::tensor::first_difference(w, g), None);
    }
    // The graph input returned as an output is a copy, not the caller's storage.
    assert!(!std::sync::Arc::ptr_eq(got[1].storage(), x.storage()));
}

#[test]
fn code_images_hold_the_emitted_machine_code() {
    let engine = Engine::new().with_tiering(false);
    let compiled = engine.compile(&graph(&[1, 2, 5, 6])).unwrap();
    let images = compiled.code_images();
    assert_eq!(images.len(), compiled.kernel_count());
    for (i, im) in images.iter().enumerate() {
        let k = &compiled.kernels[i];
        let funcs = k.machine_code();
        assert!(!funcs.is_empty(), "kernel {i} kept no machine code");
        assert_eq!(im.target, "cpu");
        assert_eq!(im.symbols.len(), funcs.len());
        for f in funcs {
            assert!(!f.bytes.is_empty(), "{} is empty", f.name);
            let got = im.function(&f.name).unwrap();
            assert_eq!(got.len(), f.bytes.len(), "{}", f.name);
            // Bytes outside the patched call displacements are the emitted ones.
            let patched = |k: usize| {
                f.relocs
                    .iter()
                    .any(|r| (r.offset as usize..r.offset as usize + 4).contains(&k))
            };
            for (k, (a, b)) in got.iter().zip(&f.bytes).enumerate() {
                assert!(patched(k) || a == b, "{} byte {k}", f.name);
            }
        }
        // Calls between a kernel's functions are resolved: the image runs at any address.
        assert!(im.is_relocation_free(), "kernel {i}: {:?}", im.relocs);
        assert!(im
            .symbols
            .iter()
            .all(|s| s.offset % kiln_runtime::backend::FUNCTION_ALIGN == 0));
        assert_eq!(CodeImage::from_bytes(&im.to_bytes()).as_ref(), Ok(im));
        assert_eq!(compiled.code_image(i).as_ref(), Some(im));
    }
    assert_eq!(compiled.code_image(images.len()), None);
    // Compiling again (a fresh engine, no cache) emits the same bytes.
    let again = Engine::new()
        .with_tiering(false)
        .compile(&graph(&[1, 2, 5, 6]))
        .unwrap();
    assert_eq!(again.code_images(), images);
    // The scan kernel (a line body) names its one entry point.
    let names: Vec<&str> = images
        .iter()
        .flat_map(|im| im.symbols.iter().map(|s| s.name.as_str()))
        .collect();
    assert!(names.contains(&"line"), "{names:?}");
    // The backend gives the same image for the same kernel.
    let backend = CpuBackend::default();
    let a = backend.compile(&compiled.kernels[0].kernel).unwrap();
    assert_eq!(backend.code_image(&a).unwrap(), images[0]);
}

#[test]
fn the_engine_knobs_set_its_tuning() {
    let engine = Engine::new()
        .with_scratch_budget(1)
        .with_inline_work(7)
        .with_window_doubling(false)
        .with_window_bounds(kiln_ir::passes::WindowBounds {
            clip: false,
            chains: true,
        })
        .with_tiering(false)
        .with_threads(1);
    let want = Tuning {
        threads: Some(1),
        inline_work: Some(7),
        scratch_budget: 1,
        window_doubling: false,
        window_bounds: kiln_ir::passes::WindowBounds {
            clip: false,
            chains: true,
        },
        tiering: false,
        compile: CompileOptions::default(),
    };
    assert_eq!(engine.tuning(), &want);
    assert_eq!(Engine::with_tuning(want.clone()).tuning(), &want);
    assert_eq!(Engine::new().tuning(), &Tuning::default());
    assert_eq!(engine.threads(), 1);
    let opts = CompileOptions {
        no_edge_vectors: true,
        ..Default::default()
    };
    assert_eq!(Engine::with_options(opts.clone()).options(), &opts);
}
