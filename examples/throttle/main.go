// Command throttle is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/throttle -o throttle.wasm
//
// or go generate (the committed throttle.wasm, reproducible byte for byte).
package main

import "github.com/wasmsched/wasmsched/abi/sdk"

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o throttle.wasm .

func init() { sdk.Register(policy{}) }

func main() {}
