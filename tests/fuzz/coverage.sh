#!/usr/bin/env bash
# Per source file, the edges that a harness's corpus covers: replays the
# committed seeds and the corpus grown under BUILD_DIR/fuzz-corpus once,
# with libFuzzer's -print_coverage=1, and sums "edges: covered/total" of
# every function by file.  Files of the code under test only (block/,
# util/, hw/, migration/, storage-daemon/), those with any edge covered.
# Usage: coverage.sh BUILD_DIR HARNESS
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
h=$2
mkdir -p "$build/fuzz-corpus/$h"
"$build/tests/fuzz/$h" -runs=0 -print_coverage=1 \
    "$build/fuzz-corpus/$h" "$src/tests/fuzz/corpus/$h" 2>&1 |
awk '/^(UN)?COVERED_FUNC:/ {
        split($5, e, "/"); file = $NF; sub(/:[0-9]+$/, "", file);
        sub(/.*\.\.\//, "", file);
        if (file !~ /^(block|util|hw|migration|storage-daemon)\//) next;
        cov[file] += e[1]; tot[file] += e[2];
     }
     END { for (f in cov) if (cov[f] > 0)
               printf "%-40s %6d/%-6d %5.1f%%\n", f, cov[f], tot[f],
                      100 * cov[f] / tot[f] }' | sort
