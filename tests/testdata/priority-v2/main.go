// Command priority-v2 is a second build of the built-in "priority" policy for
// the hot-swap tests (tests/hotswap_test.go): policy.go is a copy of
// plugins/priority/policy.go (same semantics, same reasons); only the build
// differs (another package path and the tag below), so its sha256 differs.
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w -X main.tag=v2" -o tests/testdata/priority-v2/priority-v2.wasm ./tests/testdata/priority-v2
package main

import "github.com/wasmsched/wasmsched/abi/sdk"

// tag is set with -ldflags -X; it only changes the bytes of the build.
var tag = "dev"

// Tag keeps tag in the binary.
//
//go:wasmexport wasmsched_test_tag_len
func Tag() int32 { return int32(len(tag)) }

func init() { sdk.Register(Priority{}) }

func main() {}
