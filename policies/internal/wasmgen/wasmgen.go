// Package wasmgen builds small wasm modules byte by byte for tests: the
// bombs of the hostile-plugin suite (a function declaring 2^32-1 locals,
// 100k nested blocks, an oversize module), which no text format or
// toolchain produces conveniently and which are too large, or too
// dangerous, to commit.
package wasmgen

// Header is the magic and version of a core module.
var Header = []byte("\x00asm\x01\x00\x00\x00")

// U32 appends v as an unsigned LEB128. (The same nine lines as
// wasmrewrite's appendU32: wasmrewrite's tests use this package, so it
// cannot import wasmrewrite.)
func U32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// Section returns section id with body.
func Section(id byte, body []byte) []byte {
	return append(U32([]byte{id}, uint32(len(body))), body...)
}

// Vec returns a vector of the entries (count, then the entries).
func Vec(entries ...[]byte) []byte {
	b := U32(nil, uint32(len(entries)))
	for _, e := range entries {
		b = append(b, e...)
	}
	return b
}

// Module concatenates the header and the sections.
func Module(sections ...[]byte) []byte {
	b := append([]byte(nil), Header...)
	for _, s := range sections {
		b = append(b, s...)
	}
	return b
}

// Body is a function body: its local groups (count, valtype) and code
// (which must end with 0x0B).
func Body(locals [][2]uint32, code []byte) []byte {
	b := U32(nil, uint32(len(locals)))
	for _, l := range locals {
		b = append(U32(b, l[0]), byte(l[1]))
	}
	b = append(b, code...)
	return append(U32(nil, uint32(len(b))), b...)
}

// Funcs returns a module of n functions of type () -> () with the given
// body each.
func Funcs(n int, body []byte) []byte {
	types := Section(1, Vec([]byte{0x60, 0, 0}))
	idx := make([][]byte, n)
	bodies := make([][]byte, n)
	for i := range n {
		idx[i] = []byte{0}
		bodies[i] = body
	}
	return Module(types, Section(3, Vec(idx...)), Section(10, Vec(bodies...)))
}

// Nested returns code of depth nested empty blocks (then the final end).
func Nested(depth int) []byte {
	b := make([]byte, 0, 3*depth+1)
	for range depth {
		b = append(b, 0x02, 0x40)
	}
	for range depth {
		b = append(b, 0x0B)
	}
	return append(b, 0x0B)
}

// Custom returns a custom section named name with size bytes of payload.
func Custom(name string, size int) []byte {
	body := U32(nil, uint32(len(name)))
	body = append(body, name...)
	body = append(body, make([]byte, size)...)
	return Section(0, body)
}
