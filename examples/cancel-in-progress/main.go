// Command cancel-in-progress is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/cancel-in-progress -o cancel-in-progress.wasm
//
// or go generate (the committed cancel-in-progress.wasm, reproducible byte for byte).
package main

import "github.com/wasmsched/wasmsched/abi/sdk"

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o cancel-in-progress.wasm .

func init() { sdk.Register(policy{}) }

func main() {}
