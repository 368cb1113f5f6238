#!/usr/bin/env bash
# The option reference in docs/ is generated from qapi/ at build time; the
# committed copy must be what the schema gives, so that the manual read on
# the web is never older than the code.
#   tests/check-docs.sh BUILD_DIR
set -u
build=${1:?usage: check-docs.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0
generated=$build/qapi/block-options.md
if diff -u "$src/docs/block-options.md" "$generated"; then
    echo "ok docs/block-options.md matches the schema"
    pass=$((pass + 1))
else
    echo "FAIL docs/block-options.md is stale: cp $generated docs/"
    fail=$((fail + 1))
fi
echo "docs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
