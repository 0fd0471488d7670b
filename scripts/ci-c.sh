#!/usr/bin/env bash
# Builds and runs kiln's C API checks: tests/c/test_kiln.c and examples/c/median.c, each built
# with the system C compiler against the shared (libkiln_capi.so) and the static
# (libkiln_capi.a) library, under AddressSanitizer and UBSan, and tests/c/aot_emit: the objects
# and headers of `kiln aot build --emit obj,h` linked into a C program that compares them with
# `kiln run --exec eager`. Prints "N passed, N failed" and exits non-zero on any failure.
#
# The libraries come from the same build as `cargo test --workspace` (dev profile, workspace
# feature set): run after it, the cargo step below compiles nothing and takes seconds.
# (`cargo build -p kiln-capi` alone would resolve features differently and rebuild the
# dependencies.)
set -euo pipefail
cd "$(dirname "$0")/.."

CC=${CC:-gcc}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
# `cargo test` builds the cdylib and staticlib but only `cargo build` copies them up to
# target/debug: take them where the test build leaves them.
LIBDIR="$TARGET_DIR/debug/deps"
OUT="$TARGET_DIR/c-api"
CFLAGS=(-std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -g -O1
        -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
        -Iinclude)
# What a Rust staticlib needs from the system on Linux (`rustc --print native-static-libs`).
STATIC_LIBS=(-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
# LeakSanitizer reports memory the Rust runtime keeps for the process's life (the global
# thread pool) as reachable, not leaked; real leaks still fail.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

start=$(date +%s)
cargo test --workspace --no-run --quiet 2>&1 | grep -v '^  Executable' || true
for f in "$LIBDIR/libkiln_capi.so" "$LIBDIR/libkiln_capi.a"; do
    [[ -f "$f" ]] || { echo "missing $f (did the cargo build fail?)"; echo "0 passed, 1 failed"; exit 1; }
done
echo "== cargo build step: $(( $(date +%s) - start ))s"

mkdir -p "$OUT"
passed=0
failed=0
note() { if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $*"; fi; }

build() { # name source kind
    local name=$1 src=$2 kind=$3
    if [[ $kind == shared ]]; then
        "$CC" "${CFLAGS[@]}" "$src" -o "$OUT/$name-shared" -L"$LIBDIR" -lkiln_capi \
            -Wl,-rpath,"$(cd "$LIBDIR" && pwd)" -pthread -lm
    else
        "$CC" "${CFLAGS[@]}" "$src" -o "$OUT/$name-static" "$LIBDIR/libkiln_capi.a" \
            "${STATIC_LIBS[@]}" -pthread
    fi
}

for kind in shared static; do
    echo "== test_kiln ($kind library)"
    if build test_kiln tests/c/test_kiln.c "$kind"; then
        log="$OUT/test_kiln-$kind.log"
        set +e
        "$OUT/test_kiln-$kind" >"$log" 2>&1
        rc=$?
        set -e
        tail -n 40 "$log"
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1 || true)
        if [[ -n $line ]]; then
            passed=$((passed + ${line%% passed*}))
            f=${line#*, }
            failed=$((failed + ${f%% failed*}))
        fi
        # A crash or sanitizer report (no summary line, or an exit code the counts do not
        # explain) is one more failure.
        if [[ -z $line ]] || { [[ $rc -ne 0 ]] && [[ ${f%% failed*} -eq 0 ]]; }; then
            failed=$((failed + 1))
            echo "FAILED: test_kiln-$kind exited with $rc"
        fi
    else
        failed=$((failed + 1))
        echo "FAILED: building test_kiln ($kind)"
    fi

    echo "== median example ($kind library)"
    if build median examples/c/median.c "$kind"; then
        note "$OUT/median-$kind"
    else
        failed=$((failed + 1))
        echo "FAILED: building median ($kind)"
    fi
done

# `kiln aot build --emit obj,h`: objects and headers linked by the C compiler into a test
# that compares every kernel set with `kiln run --exec eager` on the same images.
echo "== aot emit (objects + headers, tests/c/aot_emit)"
EMIT="$OUT/aot-emit"
KILN="$TARGET_DIR/debug/kiln"
rm -rf "$EMIT"
mkdir -p "$EMIT/data"
HOST=$(rustc -vV | sed -n 's/^host: //p')
emit_refs() { # writes DIR/<case>.expect.npy with kiln's eager oracle (tests/c/aot_emit/cases.txt)
    local name op ps p
    while read -r name op ps; do
        [[ -z $name || $name == \#* ]] && continue
        local args=()
        for p in $ps; do args+=(--param "$p"); done
        "$KILN" run "$op" --layout bcs --exec eager "${args[@]}" \
            --input "$1/$name.in.npy" --output "$1/$name.expect.npy" || return 1
    done <tests/c/aot_emit/cases.txt
}
if "$KILN" aot build --manifest tests/c/aot_emit/kernels.toml --target "$HOST" \
        --out "$EMIT/bundle" --emit obj,h >"$EMIT/build.log" 2>&1 \
    && "$CC" "${CFLAGS[@]}" -I"$EMIT/bundle" tests/c/aot_emit/test_aot_emit.c \
        "$EMIT"/bundle/*.o -o "$EMIT/test_aot_emit" \
    && "$EMIT/test_aot_emit" gen "$EMIT/data" && emit_refs "$EMIT/data"; then
    set +e
    "$EMIT/test_aot_emit" check "$EMIT/data" >"$EMIT/check.log" 2>&1
    rc=$?
    set -e
    cat "$EMIT/check.log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$EMIT/check.log" | tail -n 1 || true)
    if [[ -n $line ]]; then
        passed=$((passed + ${line%% passed*}))
        f=${line#*, }
        failed=$((failed + ${f%% failed*}))
    fi
    if [[ -z $line ]] || { [[ $rc -ne 0 ]] && [[ ${f%% failed*} -eq 0 ]]; }; then
        failed=$((failed + 1))
        echo "FAILED: test_aot_emit exited with $rc"
    fi
    # The check can fail: one flipped byte in one expected file must fail exactly that case.
    cp -r "$EMIT/data" "$EMIT/corrupt"
    f="$EMIT/corrupt/grey_opening_f32.expect.npy"
    at=$(( $(stat -c %s "$f") - 7 ))
    b=$(od -An -tu1 -j "$at" -N1 "$f" | tr -d ' ')
    printf "\\$(printf %03o $(( (b + 1) % 256 )))" | dd of="$f" bs=1 seek="$at" conv=notrunc status=none
    "$EMIT/test_aot_emit" check "$EMIT/corrupt" >"$EMIT/corrupt.log" 2>&1 || true
    if grep -q '^FAIL grey_opening_f32: first differing' "$EMIT/corrupt.log" \
        && grep -q '^[0-9]* passed, 1 failed$' "$EMIT/corrupt.log"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAILED: a corrupted expected file was not caught"
    fi
else
    tail -n 20 "$EMIT/build.log"
    failed=$((failed + 1))
    echo "FAILED: building or preparing the aot emit test"
fi

echo "== C API done in $(( $(date +%s) - start ))s"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
