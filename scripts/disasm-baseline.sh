#!/usr/bin/env bash
# Dumps the generated machine code (Cranelift's disassembly after register allocation, via
# KILN_DISASM) of every CPU kernel of the bench workloads (`kiln bench --list`), for the
# first compile (default options) and the tiered background compile's step budget (3000),
# one file per workload and budget, so that a refactor of codegen/src/cpu can be checked to
# leave the machine code byte-identical.
#
#   scripts/disasm-baseline.sh DIR            # write DIR/<workload>.<budget>.s
#   scripts/disasm-baseline.sh DIR BASE_DIR   # write DIR, then compare with BASE_DIR
#
# Stages compile on several threads, so the functions are printed in any order: each
# function's block is kept whole and the blocks are sorted. Heap addresses baked into the
# code (the cells through which row functions find their border functions) differ from run
# to run and are replaced by `$ADDR`. Exit status 1 if a comparison
# finds a difference.
set -euo pipefail
out=${1:?usage: disasm-baseline.sh DIR [BASE_DIR]}
base=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --quiet --manifest-path "$root/Cargo.toml" --bin kiln
kiln="$root/target/debug/kiln"
mkdir -p "$out"
n=0
while read -r line; do
    name=$(awk '{print $1}' <<<"$line")
    op=$(awk '{print $2}' <<<"$line")
    shape=$(sed 's/.*\[\(.*\)\].*/\1/; s/ //g' <<<"$line")
    head=${line%%[*}
    read -r -a f <<<"$head"
    dtype=${f[-1]}
    params=()
    for ((i = 2; i < ${#f[@]} - 1; i++)); do params+=(--param "${f[$i]}"); done
    for budget in default 3000; do
        extra=()
        [ "$budget" = default ] || extra=(--step-budget "$budget")
        KILN_DISASM=1 "$kiln" dump "$op" "${params[@]}" --shape "$shape" --dtype "$dtype" \
            "${extra[@]}" 2>"$out/.raw" >/dev/null
        # One block per function (starts at "; name"), sorted.
        awk 'BEGIN{RS="\n; "} {sub(/\n+$/,""); gsub(/\n/,"\\n")}
                 NR>1{print "; " $0} NR==1 && /^; /{print}' \
            "$out/.raw" | sed 's/\$0x[5-7][0-9a-f]\{11\}\b/$ADDR/g' | sort | sed 's/\\n/\n/g' \
            >"$out/$name.$budget.s"
        n=$((n + 1))
    done
done < <("$kiln" bench --list)
rm -f "$out/.raw"
echo "dumped $n kernel sets ($(cat "$out"/*.s | grep -c '^; ') functions) into $out"
if [ -n "$base" ]; then
    if diff -r -q "$base" "$out"; then
        echo "machine code identical to $base"
    else
        echo "machine code DIFFERS from $base"
        exit 1
    fi
fi
