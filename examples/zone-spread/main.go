// Command zone-spread is a catalog policy (see README.md): an allocation
// policy that places (ABI version 5). Build it with
//
//	wasmsched policy build ./examples/zone-spread -o zone-spread.wasm
//
// or go generate (the committed zone-spread.wasm, reproducible byte for byte).
package main

import "github.com/wasmsched/wasmsched/abi/sdk"

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o zone-spread.wasm .

func init() { sdk.Register(ZoneSpread{}) }

func main() {}
