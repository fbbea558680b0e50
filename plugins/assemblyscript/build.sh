#!/usr/bin/env bash
# Builds the AssemblyScript example plugins (plugins/assemblyscript/NAME,
# entry NAME/assembly/index.ts -> NAME/NAME.wasm) with `wasmsched policy
# build`, the same build a user runs: the SDK abi/assemblyscript/index.ts
# (embedded in the command) and the compiler pinned by
# abi/assemblyscript/package-lock.json (npm ci there first; scripts/test
# does). The committed .wasm files are what this prints; CI rebuilds them
# and fails if the bytes differ (plugins/guests_test.go).
set -euo pipefail
cd "$(dirname "$0")"
ASC=${ASC:-$PWD/../../abi/assemblyscript/node_modules/.bin/asc}
OUT=${OUT:-.} # CI writes elsewhere and compares
WASMSCHED=${WASMSCHED:-}
if [ -z "$WASMSCHED" ]; then
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  WASMSCHED=$bin/wasmsched
  (cd ../.. && go build -o "$WASMSCHED" ./cmd/wasmsched)
fi
for name in wait discard priority priority-first; do
  mkdir -p "$OUT/$name"
  "$WASMSCHED" policy build "$name" --lang assemblyscript --asc "$ASC" --out "$OUT/$name/$name.wasm" >/dev/null
  chmod 644 "$OUT/$name/$name.wasm"
done
