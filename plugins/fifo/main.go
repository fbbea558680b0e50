// Command fifo is the built-in "fifo" allocation policy plugin. See policy.go
// for its semantics and ../README.md for the build.
package main

import "github.com/wasmsched/wasmsched/abi/sdk"

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o fifo.wasm .

func init() { sdk.Register(policy{}) }

func main() {}
