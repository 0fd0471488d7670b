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
