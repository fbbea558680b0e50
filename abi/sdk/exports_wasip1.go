//go:build wasip1

package sdk

import (
	"os"
	"unsafe"
)

// The ABI exports (version abi.Version, or the policy's Versioned
// choice) (see abi/ABI.md). A plugin gets them by importing this package;
// it must not declare any go:wasmexport of its own.

//go:wasmexport wasmsched_abi_version
func exportABIVersion() uint32 { return version }

//go:wasmexport wasmsched_kind
func exportKind() uint32 { return uint32(Kind()) }

//go:wasmexport wasmsched_input
func exportInput(size uint32) unsafe.Pointer {
	b := input(int(size))
	if b == nil {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

//go:wasmexport wasmsched_decide
func exportDecide(n uint32) uint64 {
	out, err := decide(int(n))
	if err != nil {
		os.Stderr.WriteString("wasmsched sdk: " + err.Error() + "\n")
		return 1 // ptr 0, code 1: bad input
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}
