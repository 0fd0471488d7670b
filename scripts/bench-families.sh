#!/usr/bin/env bash
# The morphology, distance and Sinkhorn families (issues 28, 29, 30) against their peers, for a
# quiet window (no other builds or benchmarks on the machine): builds kiln --release, runs
# benches/peers/compare.py on exactly the family rows, writes benches/results_families.json
# and prints the goal table (workload, goal, kiln ms, peer ms, ratio, verdict) as Markdown for
# benches/RESULTS.md.
#
#   scripts/bench-families.sh            # the real run: 2048² images, d = 1024 (~10-15 min on 2 cores)
#   scripts/bench-families.sh --smoke    # tiny sizes (64² images, 16³ volume, d = 64, 8x8 grid):
#   KILN_BENCH_SMOKE=1 scripts/bench-families.sh   # checks the whole path in about a minute
#
# Threads: the rows whose peers are cheap run at 2 and 1 threads; the Sinkhorn rows (POT takes
# tens of seconds per call) at 2 only. Timing: --min-time 0.3 s per timed side; scipy on these
# rows is timed with ONE cold call, POT's sinkhorn_log too (both
# single-threaded), POT's sinkhorn and the numpy reference with one warm-up then until
# --min-time (at least 3 calls). Peers are installed into a venv of this script's own
# (target/bench-venv, or $KILN_BENCH_VENV): numpy, scipy 1.17, opencv-python-headless, POT
# 0.9.7, threadpoolctl (to hold numpy's BLAS to the row's thread count).
# Environment: KILN_BENCH_NO_BUILD=1 skips the cargo build (an existing target/release/kiln),
# KILN_BENCH_OUT=FILE writes the JSON elsewhere (the smoke run writes under target/).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
smoke=${KILN_BENCH_SMOKE:-0}
[ "${1:-}" = "--smoke" ] && smoke=1
venv=${KILN_BENCH_VENV:-$root/target/bench-venv}
python=${PYTHON:-python3}
start=$(date +%s)
stamp() { echo "== [bench-families $(($(date +%s) - start))s] $*"; }

stamp "venv $venv"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "numpy<2.4" "scipy==1.17.*" opencv-python-headless pot==0.9.7.post1 threadpoolctl

if [ "${KILN_BENCH_NO_BUILD:-0}" != 1 ]; then
    stamp "cargo build --release --bin kiln"
    cargo build --release --bin kiln
fi
kiln=$root/target/release/kiln
[ -x "$kiln" ] || { echo "bench-families: $kiln missing (build it or unset KILN_BENCH_NO_BUILD)" >&2; exit 1; }

# The rows (src/bench/mod.rs: workloads() and family_workloads()).
cheap=white_tophat15_2048,u8_morph_gradient3_2048,median3_i16_ct,median31_u16_2048,fill_holes_2048,propagation_2048,edt_2048,edt_indices_2048,cdt_taxicab_2048,edt_128cube,signed_distance_2048
costly=sinkhorn_d1024_b16,sinkhorn_log_d1024_b16
grids=sinkhorn_grid32_b1_1000it,sinkhorn_grid32_axes_b1_1000it
if [ "$smoke" = 1 ]; then
    out=${KILN_BENCH_OUT:-$root/target/results_families_smoke.json}
    min_time=0.05
    # --sizes resizes each row by its Scale: images 64², the volume 16³, d = 64 (grid 8x8).
    size_cheap=(--sizes 64)
    size_costly=(--sizes 64)
    size_grid=(--sizes 8)
else
    out=${KILN_BENCH_OUT:-$root/benches/results_families.json}
    min_time=0.3
    size_cheap=()
    size_costly=()
    size_grid=()
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-families-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

run() { # json threads ops [size args]
    local json=$1 threads=$2 ops=$3
    shift 3
    stamp "compare.py --threads $threads --ops $ops $*"
    "$venv/bin/python" benches/peers/compare.py --kiln "$kiln" --threads "$threads" --ops "$ops" \
        --min-time "$min_time" --json "$json" --goals 2 "$@"
}
run "$tmp/cheap.json" 2,1 "$cheap" "${size_cheap[@]}"
run "$tmp/sink.json" 2 "$costly" "${size_costly[@]}"
run "$tmp/grid.json" 2 "$grids" "${size_grid[@]}"

stamp "merging into $out"
"$venv/bin/python" - "$out" "$tmp/cheap.json" "$tmp/sink.json" "$tmp/grid.json" <<'PY'
import json, sys
sys.path.insert(0, "benches/peers")
import families

out, parts = sys.argv[1], sys.argv[2:]
docs = [json.load(open(p)) for p in parts]
results = [r for d in docs for r in d["results"]]
meta = docs[0]["metadata"]
meta["runs"] = [d["metadata"].get("min_time_s") for d in docs]
goals = families.goal_rows(results, 2)
with open(out, "w") as f:
    json.dump({"metadata": meta, "results": results, "goals": goals}, f, indent=1)
head = ["workload", "goal", "kiln ms", "peer ms", "ratio", "verdict"]
print()
print(f"machine: {meta['machine']} ({meta['cores']} cores), kiln {meta['kiln_commit'][:12]}"
      f"{' (dirty)' if meta.get('kiln_dirty') else ''}, loadavg at start {meta.get('loadavg_at_start')}")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for c in goals:
    print("| " + " | ".join(x.replace("|", "/") for x in c) + " |")
bad = [r["kiln"]["name"] for r in results if r["kiln"]["status"] == "error"]
diff = [(r["kiln"]["name"], l, c) for r in results for l, c in r.get("checks", {}).items()
        if c.startswith("DIFF") or c.startswith("error")]
for d in diff:
    print("check failed:", *d)
sys.exit(1 if bad or diff else 0)
PY
stamp "done: $out"
