#!/usr/bin/env bash
# Regenerates fuzz-vmstate's seed: the stream that a real savevm of the
# harness's machine writes (without its trailer, which the harness adds).
# Usage: make-corpus-vmstate.sh [BUILD_DIR]   (default: build-fuzz)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build-fuzz}
out=$src/tests/fuzz/corpus/fuzz-vmstate
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT

mkdir -p "$out"
# -runs=0 runs the empty input once, which sets the machine up
FUZZ_VMSTATE_SEED=$out/savevm-stream \
    "$build/tests/fuzz/fuzz-vmstate" -runs=0 "$empty" >/dev/null 2>&1
test -s "$out/savevm-stream"
