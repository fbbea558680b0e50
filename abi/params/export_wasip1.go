//go:build wasip1

package params

import "unsafe"

//go:wasmexport wasmsched_params
func exportParams() uint64 {
	if len(declared) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(declared))))<<32 | uint64(len(declared))
}
