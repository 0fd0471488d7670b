//! The Sinkhorn lane passes on CUDA (`CudaEngine::sinkhorn_pass`, PTX from
//! `kiln_codegen::ptx::render_sinkhorn`) against the CPU lane kernels
//! (`kiln_ops::sinkhorn::lane_pass`), bit for bit (NaN compared canonicalised: the host
//! makes NaN outputs canonical), every pass, f32 and f64, with NaN, ±inf, -0 and subnormal
//! entries. Needs `--features cuda` and a GPU: without either it prints a visible
//! `SKIP: ...` line (and fails when `KILN_REQUIRE_GPU` is set). `scripts/gpu-check.sh` runs
//! it on the GPU machine.

/// A deterministic stream of values with specials.
#[cfg(feature = "cuda")]
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|k| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            match k % 89 {
                3 => f64::NAN,
                5 => f64::NEG_INFINITY,
                7 => f64::INFINITY,
                11 => -0.0,
                13 => 1e-310,
                _ => 4.0 * u - 2.0,
            }
        })
        .collect()
}

fn skip_or_fail(msg: &str) {
    if std::env::var_os("KILN_REQUIRE_GPU").is_some() {
        panic!("{msg} (KILN_REQUIRE_GPU is set)");
    }
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("SKIP: {msg}\n").as_bytes());
}

#[cfg(not(feature = "cuda"))]
#[test]
fn sinkhorn_passes_on_cuda_match_the_cpu() {
    skip_or_fail("sinkhorn_cuda: built without --features cuda");
}

#[cfg(feature = "cuda")]
#[test]
fn sinkhorn_passes_on_cuda_match_the_cpu() {
    use kiln::codegen::ptx::SinkhornPass;
    use kiln::ir::DType;
    use kiln::ops::sinkhorn::{lane_pass, Isa, Real};
    use kiln::runtime::cuda::CudaEngine;
    use kiln::runtime::{Storage, Tensor};

    let engine = match CudaEngine::new(0) {
        Ok(e) => e,
        Err(e) => return skip_or_fail(&format!("sinkhorn_cuda: {e}")),
    };
    fn check<T: Real>(engine: &CudaEngine, d: DType, wrap: fn(Vec<f64>) -> Storage) {
        let (rows, width, samples) = (67, 256, 5);
        let mat = values(rows * width, 1);
        let ws: Vec<Vec<f64>> = (0..samples).map(|q| values(rows, 10 + q as u64)).collect();
        let ss: Vec<Vec<f64>> = (0..samples).map(|q| values(width, 20 + q as u64)).collect();
        let cast = |v: &[f64]| -> Vec<T> { v.iter().map(|&x| T::from_f64(x)).collect() };
        let (mt, wt, st): (Vec<T>, Vec<Vec<T>>, Vec<Vec<T>>) = (
            cast(&mat),
            ws.iter().map(|v| cast(v)).collect(),
            ss.iter().map(|v| cast(v)).collect(),
        );
        let w: Vec<&[T]> = wt.iter().map(|v| v.as_slice()).collect();
        let s: Vec<&[T]> = st.iter().map(|v| v.as_slice()).collect();
        let flat = |v: &[Vec<f64>]| v.concat();
        let tensor = |v: Vec<f64>, shape: &[usize]| Tensor::from_storage(wrap(v), shape).unwrap();
        let mat_t = tensor(mat.clone(), &[rows, width]);
        let w_t = tensor(flat(&ws), &[samples, rows]);
        let s_t = tensor(flat(&ss), &[samples, width]);
        for pass in SinkhornPass::ALL {
            let cpu = lane_pass::<T>(pass, Isa::host(), (&mt, rows, width), &w, &s).unwrap();
            let gpu = engine
                .sinkhorn_pass(pass, &mat_t, &w_t, Some(&s_t))
                .unwrap_or_else(|e| panic!("{pass:?} {d}: {e}"));
            let got: Vec<u64> = match gpu.contiguous_storage() {
                Storage::F32(v) => v.iter().map(|x| x.canon().bits()).collect(),
                Storage::F64(v) => v.iter().map(|x| x.canon().bits()).collect(),
                _ => panic!("dtype"),
            };
            let want: Vec<u64> = cpu.concat().iter().map(|x| x.canon().bits()).collect();
            let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(bad, 0, "{pass:?} {d}: {bad} of {} lanes differ", want.len());
            eprintln!(
                "sinkhorn_cuda: {pass:?} {d}: {} lanes bit-identical",
                want.len()
            );
        }
    }
    check::<f32>(&engine, DType::F32, |v| {
        Storage::F32(v.into_iter().map(|x| x as f32).collect())
    });
    check::<f64>(&engine, DType::F64, Storage::F64);
}
