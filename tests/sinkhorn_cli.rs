//! `kiln run sinkhorn` with three `--input`s and four `--output`s, eager and fused: the
//! outputs agree bit for bit and the iteration counts are POT's (tests/golden/sinkhorn).
use std::path::Path;
use std::process::Command;

use kiln::runtime::npy::read_npy;
use kiln::runtime::Storage;

fn run(exec: &str, case: &Path, out: &Path) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln"));
    cmd.arg("run").arg("sinkhorn");
    for n in ["a", "b", "cost"] {
        cmd.arg("--input").arg(case.join(format!("{n}.npy")));
    }
    for n in ["cost", "f", "g", "niter"] {
        cmd.arg("--output").arg(out.join(format!("{exec}_{n}.npy")));
    }
    let params = std::fs::read_to_string(case.join("params.txt")).unwrap();
    for l in params.lines().filter(|l| !l.is_empty()) {
        cmd.arg("--param").arg(l);
    }
    cmd.arg("--exec").arg(exec);
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn kiln_run_sinkhorn_eager_and_fused() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/sinkhorn/tiles_log_f64");
    let out = std::env::temp_dir().join(format!("kiln_sinkhorn_cli_{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    run("eager", &case, &out);
    run("fused", &case, &out);
    for n in ["cost", "f", "g", "niter"] {
        let e = read_npy(out.join(format!("eager_{n}.npy"))).unwrap();
        let f = read_npy(out.join(format!("fused_{n}.npy"))).unwrap();
        let (Storage::F64(e), Storage::F64(f)) = (e.contiguous_storage(), f.contiguous_storage())
        else {
            panic!("{n}: not f64");
        };
        let eb: Vec<u64> = e.iter().map(|x| x.to_bits()).collect();
        let fb: Vec<u64> = f.iter().map(|x| x.to_bits()).collect();
        assert_eq!(eb, fb, "{n}: eager vs fused");
        if n == "niter" {
            let want = read_npy(case.join("out_niter.npy"))
                .unwrap()
                .contiguous_storage();
            assert_eq!(Storage::F64(e), want, "POT's iteration counts");
        }
    }
    std::fs::remove_dir_all(&out).ok();
}

/// `kiln run sinkhorn --param grid_axes=2` with the per-axis table `[g, g]` as the cost input
/// gives the dense run's iteration counts and costs (to 1e-12) on the dense matrix it stands
/// for, `M[(y, x), (y', x')] = C[y, y'] + C[x, x']`.
#[test]
fn kiln_run_sinkhorn_grid_axes_matches_the_dense_cost() {
    use kiln::runtime::npy::write_npy;
    use kiln::runtime::Tensor;
    let (g, batch) = (4usize, 2usize);
    let n = g * g;
    let out = std::env::temp_dir().join(format!("kiln_sinkhorn_grid_cli_{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let hist = |seed: usize| -> Vec<f64> {
        let mut v = Vec::new();
        for s in 0..batch {
            let w: Vec<f64> = (0..n)
                .map(|k| 1.0 + ((k * 7 + s * 3 + seed) % 11) as f64)
                .collect();
            let t: f64 = w.iter().sum();
            v.extend(w.iter().map(|x| x / t));
        }
        v
    };
    let c1: Vec<f64> = (0..g * g)
        .map(|e| ((e / g) as f64 - (e % g) as f64).powi(2) / 9.0)
        .collect();
    let mut dense = Vec::with_capacity(n * n);
    for p in 0..n {
        for q in 0..n {
            dense.push(c1[(p / g) * g + q / g] + c1[(p % g) * g + q % g]);
        }
    }
    let save = |name: &str, v: Vec<f64>, shape: &[usize]| {
        let t = Tensor::from_storage(Storage::F64(v), shape).unwrap();
        write_npy(out.join(name), &t).unwrap();
    };
    save("a.npy", hist(1), &[batch, n]);
    save("b.npy", hist(5), &[batch, n]);
    save("c1.npy", c1, &[g, g]);
    save("dense.npy", dense, &[n, n]);
    let run = |cost: &str, tag: &str, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln"));
        cmd.arg("run").arg("sinkhorn");
        for i in ["a.npy", "b.npy", cost] {
            cmd.arg("--input").arg(out.join(i));
        }
        for o in ["cost", "f", "g", "niter"] {
            cmd.arg("--output").arg(out.join(format!("{tag}_{o}.npy")));
        }
        for p in ["eps=0.2", "max_iter=500", "tol=1e-11"].iter().chain(extra) {
            cmd.arg("--param").arg(p);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run("dense.npy", "dense", &[]);
    run("c1.npy", "grid", &["grid_axes=2"]);
    let read = |name: &str| match read_npy(out.join(name)).unwrap().contiguous_storage() {
        Storage::F64(v) => v,
        _ => panic!("{name}: not f64"),
    };
    assert_eq!(read("grid_niter.npy"), read("dense_niter.npy"));
    for (x, y) in read("grid_cost.npy").iter().zip(&read("dense_cost.npy")) {
        assert!(
            (x - y).abs() <= 1e-12 * y.abs(),
            "grid cost {x} vs dense {y}"
        );
    }
    std::fs::remove_dir_all(&out).ok();
}
