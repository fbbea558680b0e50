// Package wasmrewrite injects an inline termination check into a core wasm
// module: a new exported mutable i32 global (the stop flag) and, at the
// start of every function body and right after every loop's block type,
//
//	global.get $stop
//	if (blocktype empty)
//	  unreachable
//	end
//
// The host sets the flag from another goroutine when a call's deadline
// passes; the guest traps at its next function entry or loop iteration.
// The inserted if-block closes immediately, so no existing label depth,
// function, global or type index changes (the new global is appended after
// every imported and defined global).
//
// The instruction decoder knows the MVP opcodes plus sign extension
// (0xC0-0xC4), the 0xFC prefix (saturating truncation, bulk memory, table
// ops), reference types (0xD0-0xD2, typed select, table.get/set) and the
// type-index block type. It refuses anything else (SIMD, threads, tail
// calls, exceptions, GC) instead of guessing.
package wasmrewrite

import (
	"bytes"
	"errors"
	"fmt"
)

// StopExport is the export name of the injected stop global.
const StopExport = "wasmsched_stop"

// Section ids.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secTable    = 4
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10
	secData     = 11
	secDataCnt  = 12
)

// order is each known section's position in the binary's required order.
var order = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5,
	secGlobal: 6, secExport: 7, secStart: 8, secElement: 9, secDataCnt: 10,
	secCode: 11, secData: 12,
}

// Stats describes a rewrite.
type Stats struct {
	StopGlobal uint32 // index of the injected global
	Functions  int    // bodies instrumented (one check each at entry)
	Loops      int    // loop checks inserted
	HasStart   bool   // the module has a start section (runs at instantiation)
}

// Error is a rewrite failure: a malformed or unsupported module.
type Error struct {
	Offset int // byte offset in the input where it was found
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("wasmrewrite: at byte %d: %s", e.Offset, e.Msg) }

// ErrUnsupported is wrapped by errors about an opcode or construct the
// decoder does not know.
var ErrUnsupported = errors.New("unsupported")

type unsupportedError struct{ e *Error }

func (u unsupportedError) Error() string { return u.e.Error() }
func (u unsupportedError) Unwrap() error { return ErrUnsupported }

type section struct {
	id   byte
	body []byte // contents, without id and size
	off  int    // offset of body in the input
}

// Rewrite returns a copy of wasm with the stop global and the checks
// injected. It does not validate the module beyond what it must decode;
// the runtime's compiler does that on the result. DWARF custom sections
// (".debug_*") are dropped: their code offsets would no longer be right.
func Rewrite(wasm []byte) ([]byte, Stats, error) {
	var st Stats
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return nil, st, &Error{0, "not a core wasm module (magic/version)"}
	}
	r := &reader{b: wasm, pos: 8}
	var secs []section
	last := 0
	for r.pos < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return nil, st, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, st, err
		}
		if int(size) > len(r.b)-r.pos {
			return nil, st, r.errf("section %d of %d bytes overruns the module", id, size)
		}
		if id != secCustom {
			o, ok := order[id]
			if !ok {
				return nil, st, r.unsupported("section id %d", id)
			}
			if o <= last {
				return nil, st, r.errf("section %d out of order or duplicated", id)
			}
			last = o
		}
		secs = append(secs, section{id: id, body: r.b[r.pos : r.pos+int(size)], off: r.pos})
		r.pos += int(size)
	}

	var importedGlobals, definedGlobals uint32
	for _, s := range secs {
		switch s.id {
		case secImport:
			n, err := countImportedGlobals(s)
			if err != nil {
				return nil, st, err
			}
			importedGlobals = n
		case secGlobal:
			sr := &reader{b: s.body, base: s.off}
			n, err := sr.u32()
			if err != nil {
				return nil, st, err
			}
			definedGlobals = n
		case secExport:
			if err := checkExportNames(s); err != nil {
				return nil, st, err
			}
		case secStart:
			st.HasStart = true
		}
	}
	stop := importedGlobals + definedGlobals
	st.StopGlobal = stop

	// the new global: i32, mutable, init i32.const 0
	newGlobal := []byte{0x7F, 0x01, 0x41, 0x00, 0x0B}
	newExport := appendName(nil, StopExport)
	newExport = append(newExport, 0x03)
	newExport = appendU32(newExport, stop)
	check := []byte{0x23}
	check = appendU32(check, stop)
	check = append(check, 0x04, 0x40, 0x00, 0x0B)

	out := make([]byte, 0, len(wasm)+len(wasm)/8+64)
	out = append(out, wasm[:8]...)
	var haveGlobal, haveExport bool
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	// emitMissing adds a global/export section before the first known
	// section that must follow it, if the module has none.
	emitMissing := func(before int) {
		if !haveGlobal && before > order[secGlobal] {
			haveGlobal = true
			emit(secGlobal, append([]byte{1}, newGlobal...))
		}
		if !haveExport && before > order[secExport] {
			haveExport = true
			emit(secExport, append([]byte{1}, newExport...))
		}
	}
	for _, s := range secs {
		if s.id != secCustom {
			emitMissing(order[s.id])
		}
		switch s.id {
		case secCustom:
			sr := &reader{b: s.body, base: s.off}
			name, err := sr.name()
			if err != nil {
				return nil, st, err
			}
			if bytes.HasPrefix(name, []byte(".debug_")) {
				continue
			}
			emit(s.id, s.body)
		case secGlobal:
			haveGlobal = true
			emit(s.id, appendVec(s, newGlobal))
		case secExport:
			haveExport = true
			emit(s.id, appendVec(s, newExport))
		case secCode:
			body, err := rewriteCode(s, check, &st)
			if err != nil {
				return nil, st, err
			}
			emit(s.id, body)
		default:
			emit(s.id, s.body)
		}
	}
	emitMissing(1 << 30)
	return out, st, nil
}

// appendVec returns a vector section's body with one more entry.
func appendVec(s section, entry []byte) []byte {
	sr := &reader{b: s.body, base: s.off}
	n, _ := sr.u32() // already read once by the caller's pass
	b := appendU32(nil, n+1)
	b = append(b, s.body[sr.pos:]...)
	return append(b, entry...)
}

func countImportedGlobals(s section) (uint32, error) {
	r := &reader{b: s.body, base: s.off}
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	var globals uint32
	for range n {
		if _, err := r.name(); err != nil {
			return 0, err
		}
		if _, err := r.name(); err != nil {
			return 0, err
		}
		kind, err := r.byte()
		if err != nil {
			return 0, err
		}
		switch kind {
		case 0: // func: type index
			_, err = r.u32()
		case 1: // table: reftype, limits
			if _, err = r.byte(); err == nil {
				err = r.limits()
			}
		case 2: // memory: limits
			err = r.limits()
		case 3: // global: valtype, mutability
			globals++
			_, err = r.bytes(2)
		default:
			return 0, r.unsupported("import kind %d", kind)
		}
		if err != nil {
			return 0, err
		}
	}
	return globals, nil
}

func checkExportNames(s section) error {
	r := &reader{b: s.body, base: s.off}
	n, err := r.u32()
	if err != nil {
		return err
	}
	for range n {
		name, err := r.name()
		if err != nil {
			return err
		}
		if string(name) == StopExport {
			return r.errf("module already exports %q", StopExport)
		}
		if _, err := r.byte(); err != nil {
			return err
		}
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

func rewriteCode(s section, check []byte, st *Stats) ([]byte, error) {
	r := &reader{b: s.body, base: s.off}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(make([]byte, 0, len(s.body)+len(s.body)/8), n)
	var buf []byte
	for range n {
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if int(size) > len(r.b)-r.pos {
			return nil, r.errf("function body of %d bytes overruns the code section", size)
		}
		br := &reader{b: r.b[r.pos : r.pos+int(size)], base: r.base + r.pos}
		r.pos += int(size)
		buf, err = rewriteBody(buf[:0], br, check, st)
		if err != nil {
			return nil, err
		}
		out = appendU32(out, uint32(len(buf)))
		out = append(out, buf...)
	}
	if r.pos != len(r.b) {
		return nil, r.errf("%d trailing bytes in the code section", len(r.b)-r.pos)
	}
	return out, nil
}

func rewriteBody(out []byte, r *reader, check []byte, st *Stats) ([]byte, error) {
	groups, err := r.u32()
	if err != nil {
		return nil, err
	}
	for range groups {
		if _, err := r.u32(); err != nil {
			return nil, err
		}
		if _, err := r.byte(); err != nil {
			return nil, err
		}
	}
	out = append(out, r.b[:r.pos]...)
	out = append(out, check...)
	st.Functions++
	copied := r.pos
	depth := 0
	for {
		if r.pos >= len(r.b) {
			return nil, r.errf("function body ends without its final end")
		}
		op := r.b[r.pos]
		r.pos++
		switch op {
		case 0x02, 0x03, 0x04: // block, loop, if
			if err := r.blockType(); err != nil {
				return nil, err
			}
			depth++
			if op == 0x03 {
				out = append(out, r.b[copied:r.pos]...)
				out = append(out, check...)
				copied = r.pos
				st.Loops++
			}
		case 0x0B: // end
			if depth == 0 {
				if r.pos != len(r.b) {
					return nil, r.errf("%d bytes after the function's final end", len(r.b)-r.pos)
				}
				return append(out, r.b[copied:]...), nil
			}
			depth--
		default:
			if err := r.skipImmediates(op); err != nil {
				return nil, err
			}
		}
	}
}

// skipImmediates moves past the immediates of op (already consumed), for
// every opcode but the structured ones and end.
func (r *reader) skipImmediates(op byte) error {
	var err error
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0F, op == 0x1A, op == 0x1B, op == 0xD1:
		// unreachable nop else return drop select ref.is_null
	case op == 0x0C, op == 0x0D, op == 0x10, op == 0xD2: // br br_if call ref.func
		_, err = r.u32()
	case op == 0x0E: // br_table
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i <= n && err == nil; i++ {
				_, err = r.u32()
			}
		}
	case op == 0x11: // call_indirect typeidx tableidx
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x1C: // select t*
		var n uint32
		if n, err = r.u32(); err == nil {
			_, err = r.bytes(int(n))
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		_, err = r.u32()
	case op >= 0x28 && op <= 0x3E: // loads and stores: memarg
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x3F, op == 0x40: // memory.size, memory.grow
		_, err = r.u32()
	case op == 0x41:
		err = r.sleb(32)
	case op == 0x42:
		err = r.sleb(64)
	case op == 0x43:
		_, err = r.bytes(4)
	case op == 0x44:
		_, err = r.bytes(8)
	case op >= 0x45 && op <= 0xC4: // numeric, sign extension
	case op == 0xD0: // ref.null t
		_, err = r.byte()
	case op == 0xFC:
		var sub uint32
		if sub, err = r.u32(); err != nil {
			return err
		}
		switch {
		case sub <= 7: // saturating truncation
		case sub == 8: // memory.init data mem
			if _, err = r.u32(); err == nil {
				_, err = r.u32()
			}
		case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
			// data.drop, memory.fill, elem.drop, table.grow/size/fill: one index
			_, err = r.u32()
		case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
			if _, err = r.u32(); err == nil {
				_, err = r.u32()
			}
		default:
			r.pos--
			return r.unsupported("opcode 0xFC %d", sub)
		}
	default:
		r.pos--
		return r.unsupported("opcode 0x%02X", op)
	}
	return err
}

type reader struct {
	b    []byte
	pos  int
	base int // offset of b in the input, for errors
}

func (r *reader) errf(format string, args ...any) error {
	return &Error{r.base + r.pos, fmt.Sprintf(format, args...)}
}

func (r *reader) unsupported(format string, args ...any) error {
	return unsupportedError{&Error{r.base + r.pos, "unsupported " + fmt.Sprintf(format, args...)}}
}

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, r.errf("unexpected end")
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.pos {
		return nil, r.errf("unexpected end")
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if i == 4 && c > 0x0F {
			return 0, r.errf("u32 LEB128 overflows")
		}
		v |= uint32(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, r.errf("u32 LEB128 too long")
}

// sleb skips a signed LEB128 of at most bits bits.
func (r *reader) sleb(bits int) error {
	max := (bits + 6) / 7
	for i := 0; i < max; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return r.errf("s%d LEB128 too long", bits)
}

func (r *reader) name() ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	return r.bytes(int(n))
}

func (r *reader) limits() error {
	flag, err := r.byte()
	if err != nil {
		return err
	}
	switch flag {
	case 0, 2: // min (2: shared)
		_, err = r.u32()
	case 1, 3: // min, max
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	default:
		r.pos--
		return r.unsupported("limits flag %d", flag)
	}
	return err
}

// blockType skips a block type: empty (0x40), a value type, or a type
// index as a non-negative s33.
func (r *reader) blockType() error {
	if r.pos >= len(r.b) {
		return r.errf("unexpected end")
	}
	switch c := r.b[r.pos]; c {
	case 0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
		r.pos++
		return nil
	default:
		if c&0x40 != 0 && c&0x80 == 0 {
			return r.unsupported("block type 0x%02X", c)
		}
		return r.sleb(33)
	}
}

func appendU32(b []byte, v uint32) []byte {
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

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
