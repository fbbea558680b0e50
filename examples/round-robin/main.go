// Command round-robin is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/round-robin -o round-robin.wasm
//
// or go generate (the committed round-robin.wasm, reproducible byte for byte).
package main

import "github.com/wasmsched/wasmsched/abi/sdk"

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o round-robin.wasm .

func init() { sdk.Register(policy{}) }

func main() {}
