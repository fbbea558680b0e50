#!/usr/bin/env bash
# Builds the C example plugins (plugins/c/NAME/NAME.c -> NAME.wasm) with
# Debian's clang and lld: freestanding (no libc), wasm32, bulk memory, -O2,
# stripped. The committed .wasm files are what this prints; CI rebuilds them
# and fails if the bytes differ (plugins/guests_test.go).
set -euo pipefail
cd "$(dirname "$0")"
CC=${CC:-clang}
OUT=${OUT:-.} # CI writes elsewhere and compares
for name in wait discard priority reuse priority-first by-label zone-spread; do
  mkdir -p "$OUT/$name"
  "$CC" --target=wasm32-wasi -O2 -mbulk-memory -nostdlib -ffreestanding -fno-ident \
    -Wall -Wextra -Werror -I ../../abi/c \
    -Wl,--no-entry -Wl,--strip-debug -Wl,--export-dynamic -Wl,--no-export-dynamic \
    -o "$OUT/$name/$name.wasm" "$name/$name.c"
  # the custom section "wasmsched_sdk" = "c": the language policy inspect shows
  printf '\x00\x0f\x0dwasmsched_sdkc' >> "$OUT/$name/$name.wasm"
  chmod 644 "$OUT/$name/$name.wasm"
done
