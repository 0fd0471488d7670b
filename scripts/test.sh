#!/usr/bin/env bash
# The README's test command: every suite of kiln, in one run.
#
#   bash scripts/test.sh            # Rust, Python, C, valgrind, aarch64 (each says what it ran)
#   KILN_TEST_PARTS="rust c" bash scripts/test.sh
#
# Parts: rust (cargo test --workspace), python (scripts/ci-python.sh: venv, maturin build,
# pytest against scipy), c (scripts/ci-c.sh: the C ABI under AddressSanitizer), valgrind
# (scripts/ci-valgrind.sh: JIT code under memcheck, bounded), and aarch64
# (scripts/ci-aarch64.sh: cross-builds a bounded subset and the fuzzer for aarch64 and runs
# them under qemu-user, then an x86-built bundle's aarch64 entries; installs its toolchain
# with apt-get and rustup when missing, see docs/AARCH64.md). All parts share one
# cargo profile (dev, opt-level 2) and the repository's target/ directory (aarch64 under
# target/aarch64-unknown-linux-gnu), so each is built once.
# A part whose script is missing fails; a part cannot pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."
parts=${KILN_TEST_PARTS:-"rust python c valgrind aarch64"}
start=$(date +%s)
stamp() { echo "== [test.sh $(( $(date +%s) - start ))s] $*"; }
failed=()
for part in $parts; do
    case "$part" in
        rust)
            stamp "rust: cargo test --workspace"
            cargo test --workspace || failed+=(rust) ;;
        python|c|valgrind|aarch64)
            script="scripts/ci-$part.sh"
            stamp "$part: $script"
            if [ ! -f "$script" ]; then
                echo "test.sh: $script is missing" >&2
                failed+=("$part")
            else
                bash "$script" || failed+=("$part")
            fi ;;
        *)
            echo "test.sh: unknown part '$part' (rust, python, c, valgrind, aarch64)" >&2
            exit 2 ;;
    esac
done
if [ ${#failed[@]} -gt 0 ]; then
    stamp "FAILED parts: ${failed[*]}"
    exit 1
fi
stamp "all parts passed: $parts"
