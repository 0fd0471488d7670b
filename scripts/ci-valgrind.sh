#!/usr/bin/env bash
# Runs a bounded, border-heavy subset of kiln's JIT tests under valgrind memcheck and fails on
# any memory error (invalid read/write, use of uninitialised values in a branch, bad free).
#
# Scope: the CPU backend's border tests (every border mode, width and offset; in-range tests;
# strided and stride-0 rows; multi-stage kernels; border columns compiled as separate
# functions), i.e. the JIT code paths that compute addresses near the edges of a buffer.
# valgrind sees the Cranelift-generated code like any other code (--smc-check=all-non-file
# covers code written into anonymous mappings). Leak checking is off: the test harness and
# rayon's global pool keep memory until exit by design.
#
# Limits: a bounded subset, not the whole suite (valgrind runs code 20-50x slower); the
# budget (KILN_VALGRIND_TIMEOUT, default 240 s) keeps it under ~4 minutes on 2 cores.
# In CI valgrind is installed with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

budget="${KILN_VALGRIND_TIMEOUT:-240}"

if ! command -v valgrind >/dev/null 2>&1; then
    if [ -n "${CI:-}" ]; then
        echo "valgrind not found: installing it with apt-get"
        sudo_cmd=""
        if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
        $sudo_cmd apt-get update -qq
        $sudo_cmd apt-get install -y -qq valgrind
    else
        echo "ci-valgrind: valgrind is not installed (apt-get install valgrind)" >&2
        exit 2
    fi
fi

# <package> <test target> [test name filter...]
suites=(
    "kiln-codegen cpu_border"
    "kiln-codegen cpu_split_border"
    "kiln border_functions"
)

# Build (or find, after `cargo test --workspace`) every binary first: the budget is for
# valgrind alone.
exes=()
for entry in "${suites[@]}"; do
    read -r pkg target _ <<<"$entry"
    exe=$(cargo test -p "$pkg" --test "$target" --no-run 2>&1 |
        sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -n 1)
    if [ -z "$exe" ] || [ ! -x "$exe" ]; then
        echo "ci-valgrind: could not build $pkg --test $target" >&2
        exit 2
    fi
    exes+=("$exe")
done

start=$(date +%s)
total_errors=0
ran=0
for i in "${!suites[@]}"; do
    read -r pkg target filter <<<"${suites[$i]}"
    exe=${exes[$i]}
    left=$((budget - ($(date +%s) - start)))
    if [ "$left" -le 10 ]; then
        echo "ci-valgrind: time budget of ${budget}s used up before $target" >&2
        exit 1
    fi
    log=$(mktemp)
    echo "== valgrind memcheck: $pkg $target (${left}s left)"
    set +e
    # One test thread: valgrind serialises threads anyway, and the log stays readable.
    timeout "$left" valgrind --tool=memcheck --error-exitcode=99 --leak-check=no \
        --smc-check=all-non-file --track-origins=no --log-file="$log" \
        "$exe" ${filter:+"$filter"} --test-threads=1 -q
    rc=$?
    set -e
    errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -n 1)
    errors=${errors:-unknown}
    echo "   $target: exit $rc, memcheck errors: $errors"
    if [ "$rc" = 124 ]; then
        echo "ci-valgrind: $target ran past the time budget" >&2
        exit 1
    fi
    if [ "$rc" != 0 ] || [ "$errors" != 0 ]; then
        grep -v '^==[0-9]*== *$' "$log" | head -n 80 >&2
        echo "ci-valgrind: FAILED ($target: exit $rc, $errors memcheck errors)" >&2
        exit 1
    fi
    rm -f "$log"
    total_errors=$((total_errors + errors))
    ran=$((ran + 1))
done
echo "ci-valgrind: ${ran} test binaries under memcheck, ${total_errors} errors, $(( $(date +%s) - start ))s"
