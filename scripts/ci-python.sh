#!/usr/bin/env bash
# Builds the Python package (python/, PyO3 + maturin) with the dev profile into the root's
# target/ and runs its pytest suite (scipy bit-for-bit and its 1.17 goldens, POT, kornia,
# fuse, errors, threads, Dask on a LocalCluster). Exits non-zero on any failure.
#
# CI time: the extension is built with CARGO_TARGET_DIR=<repo>/target, the same [profile.dev]
# as the root workspace and python/Cargo.lock pinned to the root's versions, so after
# `cargo test --workspace` only kiln's own crates (their cdylib flavour), pyo3 and numpy
# compile. The venv lives in target/py-venv (or $KILN_PY_VENV) and is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${KILN_PY_VENV:-$root/target/py-venv}
python=${PYTHON:-python3}
start=$(date +%s)
stamp() { echo "== [python $(($(date +%s) - start))s] $*"; }

stamp "venv $venv"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    maturin==1.8.3 numpy==2.2.4 scipy==1.15.2 pytest==8.3.5 "dask[distributed]==2025.3.0" \
    pot==0.9.7.post1

stamp "maturin develop (dev profile, shared target/)"
export CARGO_TARGET_DIR=$root/target CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
t0=$(date +%s)
# python/Cargo.lock pins the root's versions; when a root change added a dependency the lock
# lacks, cargo adds it here (and this says so) instead of failing the whole Python suite.
(cd python && VIRTUAL_ENV=$venv PATH="$venv/bin:$PATH" maturin develop --quiet)
if ! git diff --quiet -- python/Cargo.lock 2>/dev/null; then
    echo "ci-python: WARNING python/Cargo.lock was stale and has been updated; commit it"
fi
stamp "python extension built in $(($(date +%s) - t0))s"

stamp "pytest"
cd python
timeout 1200 "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider tests
stamp "done"
