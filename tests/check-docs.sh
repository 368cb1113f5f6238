#!/usr/bin/env bash
# The references in docs/ are generated from qapi/ at build time; the
# committed copies must be what the schema gives, so that the manual read
# on the web is never older than the code.
#   tests/check-docs.sh BUILD_DIR
set -u
build=${1:?usage: check-docs.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0
for doc in block-options.md qmp-reference.md; do
    generated=$build/qapi/$doc
    if diff -u "$src/docs/$doc" "$generated"; then
        echo "ok docs/$doc matches the schema"
        pass=$((pass + 1))
    else
        echo "FAIL docs/$doc is stale: cp $generated docs/"
        fail=$((fail + 1))
    fi
done
echo "docs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
