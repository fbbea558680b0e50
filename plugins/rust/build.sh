#!/usr/bin/env bash
# Builds the Rust example plugins (plugins/rust/NAME -> NAME/NAME.wasm) with
# Debian's rustc and cargo (wasm32-wasi target, libstd-rust-dev-wasm32),
# offline (no dependencies), release profile of Cargo.toml. The committed
# .wasm files are what this writes; CI rebuilds them and fails if the bytes
# differ (plugins/guests_test.go). Debian's cargo is run by its path: a
# rustup rustc earlier on PATH has no wasm32-wasi target.
set -euo pipefail
cd "$(dirname "$0")"
CARGO=${CARGO:-/usr/bin/cargo}
export RUSTC=${RUSTC:-/usr/bin/rustc}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(mktemp -d)}
export RUSTFLAGS="-C target-feature=+bulk-memory --remap-path-prefix=$PWD=plugins/rust --remap-path-prefix=$(cd ../../abi/rust && pwd)=abi/rust --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=cargo"
"$CARGO" build --offline --quiet --release --target wasm32-wasi
OUT=${OUT:-.} # CI writes elsewhere and compares
for name in wait discard priority reuse priority-first by-label zone-spread; do
  mkdir -p "$OUT/$name"
  cp "$CARGO_TARGET_DIR/wasm32-wasi/release/wasmsched_${name//-/_}.wasm" "$OUT/$name/$name.wasm"
  chmod 644 "$OUT/$name/$name.wasm"
done
