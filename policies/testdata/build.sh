#!/bin/sh
# Rebuilds the fault-test plugins. Run from the repository root.
set -e
cd policies/testdata
for f in badversion badkind missing badsig loop oob calls sleep v1below echo-v2 echo-v3 echo-v4 farwake params params-bad; do wat2wasm "$f.wat" -o "$f.wasm"; done
cd ../..
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o policies/testdata/faulty/faulty.wasm ./policies/testdata/faulty
policies/testdata/hostile/gen.sh
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o policies/testdata/hostile-alloc/hostile-alloc.wasm ./policies/testdata/hostile-alloc
