#!/usr/bin/env bash
# Cross-builds a bounded subset of kiln's tests for aarch64-unknown-linux-gnu and runs it under
# qemu-user, then runs the differential fuzzer (`kiln fuzz`) built for aarch64 under qemu.
# Fails on any failing test, any fuzzer mismatch, or the time budget running out.
#
# Scope (docs/AARCH64.md): the Cranelift CPU backend's own tests (border modes, every op
# family, no fused multiply-add, lines, comparator networks, byte lanes, min/max trees,
# guarded variants, split border functions), the runtime's CPU conformance suite (minus its
# long all-k sweeps), fused-vs-eager, line and raw-NaN tests, the kernel cache (entries
# loaded into fresh executable memory, instruction cache flushed), the guard-page tests (JIT
# code against inaccessible pages) and `kiln fuzz --cases 300 --seed 1` (the JIT on aarch64,
# every case against eager, bit for bit); then a bundle built by the x86_64 `kiln aot build
# --target aarch64-unknown-linux-gnu` is verified and run by the aarch64 binary: `kiln demo`
# from it must compile no kernel, load every one from the bundle and match eager bit for bit.
#
# Limits: qemu-user emulates the instruction set, not a particular core's timing, cache or
# memory model (a real aarch64 machine may still show weak-memory or icache bugs that qemu
# hides); timing tests are not part of the subset. The build uses its own target directory
# (target/aarch64-unknown-linux-gnu, by `--target`), so it never disturbs the host build.
# Budget: KILN_AARCH64_TIMEOUT (default 600 s) bounds the qemu runs; the first cross build
# is extra (see docs/AARCH64.md for measured times).
#
# Without the toolchain the script installs it with apt-get (as root or with sudo) and adds
# the rust target with rustup; when that is impossible outside CI it prints SKIP and exits 0,
# in CI (CI set) it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=aarch64-unknown-linux-gnu
budget="${KILN_AARCH64_TIMEOUT:-600}"
start=$(date +%s)
stamp() { echo "== [ci-aarch64 $(( $(date +%s) - start ))s] $*"; }

skip_or_fail() {
    if [ -n "${CI:-}" ]; then
        echo "ci-aarch64: FAILED: $*" >&2
        exit 1
    fi
    echo "SKIP ci-aarch64: $* (install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user;" \
        "rustup target add $TARGET)"
    exit 0
}

# 1. The toolchain: cross linker, aarch64 libc, qemu-user, the rust target.
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1 ||
    [ ! -d /usr/aarch64-linux-gnu/lib ]; then
    sudo_cmd=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo_cmd="sudo"
        else
            skip_or_fail "the cross toolchain is missing and apt-get needs root"
        fi
    fi
    stamp "installing gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user with apt-get"
    if ! { $sudo_cmd apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq \
            gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user; }; then
        skip_or_fail "apt-get could not install the cross toolchain"
    fi
fi
if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    stamp "rustup target add $TARGET"
    rustup target add "$TARGET" || skip_or_fail "rustup could not add $TARGET"
fi

# 2. One cross build of every binary (the linker and qemu runner come from .cargo/config.toml).
# One cargo invocation with all three packages, so features resolve once and nothing is
# built twice; building root's integration test also builds the `kiln` binary.
# <package> <test target> [test harness arguments: skips]. Skipped under qemu, for reasons of
# the emulator and not of aarch64: timing (qemu runs Cranelift 10-50x slower) and spawning
# the test binary as a child process (needs binfmt_misc).
# The conformance suite runs its cases minus the long all-k sweeps (they repeat the kept
# cases' code paths over more window sizes).
suites=(
    "kiln-codegen cpu_ops"
    "kiln-codegen cpu_no_fma"
    "kiln-codegen cpu_border"
    "kiln-codegen cpu_split_border"
    "kiln-codegen cpu_bytes"
    "kiln-codegen cpu_line"
    "kiln-codegen cpu_network --skip median_compile_time_and_speed"
    "kiln-codegen cpu_minmax_tree"
    "kiln-codegen cpu_guard"
    "kiln-codegen cpu_targets --skip every_op_and_dtype_compiles_for_every_target"
    "kiln-runtime aot_cache --skip concurrent_processes_warm_one_directory"
    "kiln-runtime line_ops"
    "kiln-runtime raw_nan"
    "kiln-runtime conformance_cpu --skip median_blur_all_k --skip median_filter_all_k_all_modes --skip grey_morphology_all_k_all_modes --skip grey_morphology_rectangular_and_origin --skip f64_operators --skip large_windows_take_the_decomposed_path --skip grey_opening_and_a_gather_of_it"
    "kiln-runtime fused_vs_eager"
    "kiln guard_pages"
)
build_args=(--target "$TARGET" --no-run -p kiln -p kiln-codegen -p kiln-runtime)
for entry in "${suites[@]}"; do
    read -r _ t _ <<<"$entry"
    build_args+=(--test "$t")
done
stamp "cargo test ${build_args[*]}"
log=$(mktemp)
if ! cargo test "${build_args[@]}" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "ci-aarch64: FAILED: the cross build" >&2
    exit 1
fi
kiln_bin="target/$TARGET/debug/kiln"
[ -x "$kiln_bin" ] || { echo "ci-aarch64: FAILED: $kiln_bin was not built" >&2; exit 1; }
# "Executable tests/cpu_border.rs (target/.../deps/cpu_border-HASH)"
exes=()
for entry in "${suites[@]}"; do
    read -r pkg t _ <<<"$entry"
    exe=$(sed -n "s|.*Executable tests/${t}.rs (\(.*/${t}-[0-9a-f]*\)).*|\1|p" "$log" | tail -n 1)
    if [ -z "$exe" ] || [ ! -f "$exe" ]; then
        echo "ci-aarch64: FAILED: no test binary for $pkg $t" >&2
        exit 1
    fi
    exes+=("$exe")
done
rm -f "$log"
stamp "build done; running under qemu-aarch64 (budget ${budget}s)"

# 3. Run everything under qemu, bounded.
qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
run_start=$(date +%s)
left() { echo $((budget - ($(date +%s) - run_start))); }
passed_total=0
for i in "${!suites[@]}"; do
    read -r pkg t args <<<"${suites[$i]}"
    read -r -a extra <<<"${args:-}"
    [ -z "${args:-}" ] || echo "   $pkg $t: under qemu: ${args}"
    l=$(left)
    [ "$l" -gt 10 ] || { echo "ci-aarch64: FAILED: time budget of ${budget}s used up before $pkg $t" >&2; exit 1; }
    out=$(mktemp)
    set +e
    # The package's directory is the working directory, as under `cargo test`.
    dir=.
    case "$pkg" in kiln-codegen) dir=codegen ;; kiln-runtime) dir=runtime ;; esac
    (cd "$dir" && timeout "$l" "${qemu[@]}" "$OLDPWD/${exes[$i]}" -q ${extra[@]+"${extra[@]}"}) >"$out" 2>&1
    rc=$?
    set -e
    summary=$(grep '^test result:' "$out" | tail -n 1)
    n=$(sed -n 's/.* \([0-9]*\) passed.*/\1/p' <<<"$summary")
    echo "   $pkg $t: exit $rc; ${summary:-no summary}"
    if [ "$rc" != 0 ]; then
        tail -n 60 "$out" >&2
        [ "$rc" = 124 ] && echo "ci-aarch64: $pkg $t ran past the time budget" >&2
        echo "ci-aarch64: FAILED ($pkg $t)" >&2
        exit 1
    fi
    passed_total=$((passed_total + ${n:-0}))
    rm -f "$out"
done

l=$(left)
[ "$l" -gt 10 ] || { echo "ci-aarch64: FAILED: time budget used up before the fuzzer" >&2; exit 1; }
stamp "kiln fuzz --cases 300 --seed 1 under qemu-aarch64"
set +e
timeout "$l" "${qemu[@]}" "$kiln_bin" fuzz --cases 300 --seed 1
rc=$?
set -e
if [ "$rc" != 0 ]; then
    [ "$rc" = 124 ] && echo "ci-aarch64: the fuzzer ran past the time budget" >&2
    echo "ci-aarch64: FAILED (kiln fuzz exit $rc)" >&2
    exit 1
fi
# 4. An x86_64-built bundle's aarch64 entries, loaded and run by the aarch64 binary.
l=$(left)
[ "$l" -gt 10 ] || { echo "ci-aarch64: FAILED: time budget used up before the bundle" >&2; exit 1; }
stamp "kiln aot build --target aarch64-unknown-linux-gnu on the host, run under qemu-aarch64"
cargo build -q -p kiln --bin kiln
bundle=$(mktemp -d)
trap 'rm -rf "$bundle"' EXIT
KILN_CACHE=off target/debug/kiln aot build --manifest examples/aot/kernels.toml \
    --target aarch64-unknown-linux-gnu --target x86_64-unknown-linux-gnu --out "$bundle/b"
timeout "$l" "${qemu[@]}" "$kiln_bin" aot ls "$bundle/b" | grep -c 'aarch64-unknown-linux-gnu' |
    { read -r n; [ "$n" -ge 3 ] || { echo "ci-aarch64: FAILED: $n aarch64 entries" >&2; exit 1; }; }
timeout "$(left)" "${qemu[@]}" "$kiln_bin" aot verify "$bundle/b" ||
    { echo "ci-aarch64: FAILED: kiln aot verify (aarch64) of the x86-built bundle" >&2; exit 1; }
demo=$(KILN_CACHE_DIR="$bundle/b" timeout "$(left)" "${qemu[@]}" "$kiln_bin" demo --size 40) || {
    echo "$demo" >&2
    echo "ci-aarch64: FAILED: kiln demo from the bundle" >&2
    exit 1
}
echo "$demo" | grep -E 'kernels compiled|bit-exact'
if ! grep -q ': 0 kernels compiled, 3 loaded from the cache' <<<"$demo" ||
    ! grep -q 'bit-exact: yes' <<<"$demo" || grep -q 'bit-exact: NO' <<<"$demo"; then
    echo "ci-aarch64: FAILED: the demo compiled kernels or differed from eager" >&2
    exit 1
fi
stamp "ci-aarch64: ${#suites[@]} test binaries (${passed_total} tests), 300 fuzz cases and the x86-built bundle's aarch64 entries (0 compiles, bit-exact) passed under qemu-aarch64"
