// Command round-robin is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/round-robin -o round-robin.wasm
//
// or go generate (the committed round-robin.wasm, reproducible byte for byte).
package main

import (
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o round-robin.wasm .

// the parameters it reads, checked by the host at group set, push and
// activation (abi/params)
func init() {
	params.Declare(
		params.Param{Name: "key", Type: params.TypeString, Default: "tenant", Max: "64", Doc: "the label whose values take turns"},
	)
	sdk.Register(policy{})
}

func main() {}
