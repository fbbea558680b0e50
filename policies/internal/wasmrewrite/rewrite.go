// Package wasmrewrite decodes core wasm modules for the policy sandbox: it
// checks a module against static limits before anything compiles it
// (Check, check.go), and injects an inline termination check (Rewrite).
//
// Rewrite adds two mutable i32 globals, $stop (exported as StopExport, 0)
// and $budget (exported as BudgetExport, YieldEvery), two functions $yield
// and $charge, and a weighted check
//
//	global.get $budget
//	i32.const W
//	i32.sub
//	global.set $budget
//	global.get $budget
//	i32.const 0
//	i32.le_s
//	if (blocktype empty)
//	  call $yield
//	end
//
// at the start of every function body, right after every loop's block
// type, and before every call of an import (WASI), call_indirect and
// memory.grow. W is 1 plus one per 1<<WeightShift bytes from the check to
// the end of the body: in one frame execution only moves forward between
// two checks (backward branches target loops, which start with one), so
// that is a bound on the straight-line code a check pays for. Before every
// bulk memory or table instruction (memory.fill/copy/init, table.fill/
// copy/init/grow) Rewrite inserts `call $charge`, which takes the byte or
// element count on top of the stack, charges 1 + count>>ChargeShift and
// puts the count back. $yield is
//
//	global.get $stop
//	if unreachable end
//	i32.const YieldEvery
//	global.set $budget
//	i32.const 0
//	memory.grow 0   ;; result dropped
//
// The host stops a runaway call from another goroutine by setting $stop to
// 1 and then $budget to 0: the guest calls $yield at its next check and
// traps. ($budget is also written by the guest, so the host's 0 may be
// lost to a concurrent decrement; the guest then reaches $yield within
// YieldEvery units anyway, and $stop, written by the host only, is never
// lost.)
//
// Why $yield exists: compiled guest code cannot be preempted by the Go
// scheduler, so a guest that never leaves it blocks every stop-the-world
// (GC, ReadMemStats) forever, and with the world stopped the host's timer
// can never set $stop: a deadlock. memory.grow (even by 0 pages) is
// executed by wazero's compiler as an exit to Go, where the goroutine can
// be preempted; a guest therefore returns to Go whenever it has spent
// YieldEvery units, which the weights and charges keep to well under a
// millisecond of work whatever the code (a 32 MiB memory.fill is 8,192
// units by itself). A module without a memory gets an unexported 0-page
// one for it.
//
// The guest cannot name what Rewrite injects: it refuses a module whose
// code or exports use a global or function index the module does not
// declare (they would become the injected ones), and the runtime has
// wazero validate the module as given before rewriting it. The inserted
// code is stack-neutral and its if-blocks close immediately, so no
// existing label depth, function, global or type index changes (the new
// types, globals and functions are appended after every existing one).
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

// Export names of the injected globals.
const (
	StopExport   = "wasmsched_stop"
	BudgetExport = "wasmsched_budget"
)

// Budget units. The guest exits to Go (and finds a set $stop) whenever it
// has spent YieldEvery units: a check at a function entry, loop header or
// before a call without a check of its own costs 1 plus one per
// 1<<WeightShift bytes of straight-line code it may lead to, and a bulk
// memory or table instruction 1 plus one per 1<<ChargeShift bytes or
// elements it touches.
const (
	YieldEvery  = 4096
	WeightShift = 10 // 1 KiB of code, a few hundred instructions
	ChargeShift = 12 // 4 KiB of memory.fill/copy/init
)

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
	StopGlobal   uint32 // index of the injected stop global
	BudgetGlobal uint32 // index of the injected budget global
	YieldFunc    uint32 // index of the injected $yield function
	ChargeFunc   uint32 // index of the injected $charge function
	AddedMemory  bool   // the module had no memory; a 0-page one was added
	Functions    int    // bodies instrumented (one check each at entry)
	Loops        int    // loop checks inserted
	Guards       int    // checks inserted before bulk memory/table instructions, memory.grow, WASI calls and call_indirect
	HasStart     bool   // the module has a start section (runs at instantiation)
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
// One function on purpose: one pass over the sections in order, each
// step feeding the next (function and global counts, the new indexes);
// split up it would hand a dozen values from piece to piece.
func Rewrite(wasm []byte) ([]byte, Stats, error) {
	var st Stats
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return nil, st, &Error{0, "not a core wasm module (magic/version)"}
	}
	secs, err := splitSections(wasm)
	if err != nil {
		return nil, st, err
	}
	m, err := scanSections(secs, &st)
	if err != nil {
		return nil, st, err
	}
	hasMemory := m.hasMemory || m.imp.memories > 0
	st.AddedMemory = !hasMemory
	stop := m.imp.globals + m.definedGlobals
	budget := stop + 1
	st.StopGlobal, st.BudgetGlobal = stop, budget
	st.YieldFunc = m.imp.funcs + m.definedFuncs
	st.ChargeFunc = st.YieldFunc + 1
	added := helpers(&st, m.types)
	if hasMemory {
		delete(added, secMemory)
	}
	return assemble(wasm, secs, m, added, &st)
}

// splitSections checks the section order of a module and returns its
// sections.
func splitSections(wasm []byte) ([]section, error) {
	r := &reader{b: wasm, pos: 8}
	var secs []section
	last := 0
	for r.pos < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if int(size) > len(r.b)-r.pos {
			return nil, r.errf("section %d of %d bytes overruns the module", id, size)
		}
		if id != secCustom {
			o, ok := order[id]
			if !ok {
				return nil, r.unsupported("section id %d", id)
			}
			if o <= last {
				return nil, r.errf("section %d out of order or duplicated", id)
			}
			last = o
		}
		secs = append(secs, section{id: id, body: r.b[r.pos : r.pos+int(size)], off: r.pos})
		r.pos += int(size)
	}
	return secs, nil
}

// moduleCounts is what Rewrite needs to know of a module before it
// rewrites it.
type moduleCounts struct {
	imp                                 imports
	definedGlobals, definedFuncs, types uint32
	hasMemory                           bool
}

// scanSections counts a module's imports, types, functions, globals and
// memories, and checks its exports against them.
func scanSections(secs []section, st *Stats) (moduleCounts, error) {
	var m moduleCounts
	for _, s := range secs {
		var n uint32
		var err error
		if s.id == secGlobal || s.id == secFunction || s.id == secType || s.id == secMemory {
			n, err = (&reader{b: s.body, base: s.off}).u32()
			if err != nil {
				return m, err
			}
		}
		switch s.id {
		case secImport:
			m.imp, err = countImports(s)
			if err != nil {
				return m, err
			}
		case secType:
			m.types = n
		case secFunction:
			m.definedFuncs = n
		case secMemory:
			m.hasMemory = m.hasMemory || n > 0
		case secGlobal:
			m.definedGlobals = n
		case secExport:
			// sections come in order: the import, function and global
			// counts are known here
			if err := checkExports(s, m.imp.funcs+m.definedFuncs, m.imp.globals+m.definedGlobals); err != nil {
				return m, err
			}
		case secStart:
			st.HasStart = true
		}
	}
	return m, nil
}

// helpers returns the entries Rewrite adds to each section: the stop and
// budget globals and their exports, the $yield and $charge functions and
// their types, and a memory (used when the module has none).
func helpers(st *Stats, types uint32) map[byte][]byte {
	stop, budget := st.StopGlobal, st.BudgetGlobal
	yieldType, chargeType := types, types+1
	// the new globals: i32, mutable, init i32.const 0 / YieldEvery
	newGlobals := []byte{0x7F, 0x01, 0x41, 0x00, 0x0B, 0x7F, 0x01, 0x41}
	newGlobals = appendS32(newGlobals, YieldEvery)
	newGlobals = append(newGlobals, 0x0B)
	newExports := appendName(nil, StopExport)
	newExports = append(newExports, 0x03)
	newExports = appendU32(newExports, stop)
	newExports = appendName(newExports, BudgetExport)
	newExports = append(newExports, 0x03)
	newExports = appendU32(newExports, budget)
	newTypes := []byte{0x60, 0x00, 0x00, 0x60, 0x01, 0x7F, 0x01, 0x7F} // () -> (); (i32) -> (i32)
	newFuncs := appendU32(appendU32(nil, yieldType), chargeType)       // function section entries
	newMemory := []byte{0x00, 0x00}                                    // limits: min 0, no max
	yield := []byte{0x00}                                              // no locals
	yield = appendU32(append(yield, 0x23), stop)                       // global.get $stop
	yield = append(yield, 0x04, 0x40, 0x00, 0x0B, 0x41)                // if unreachable end; i32.const
	yield = appendS32(yield, YieldEvery)
	yield = appendU32(append(yield, 0x24), budget)            // global.set $budget
	yield = append(yield, 0x41, 0x00, 0x40, 0x00, 0x1A, 0x0B) // i32.const 0; memory.grow 0; drop; end
	charge := []byte{0x00}                                    // no locals
	charge = appendU32(append(charge, 0x23), budget)          // global.get $budget
	charge = append(charge, 0x20, 0x00, 0x41, ChargeShift, 0x76, 0x41, 0x01, 0x6A, 0x6B, 0x24)
	// local.get 0; i32.const ChargeShift; i32.shr_u; i32.const 1; i32.add; i32.sub; global.set
	charge = appendU32(charge, budget)
	charge = appendU32(append(charge, 0x23), budget)       // global.get $budget
	charge = append(charge, 0x41, 0x00, 0x4C, 0x04, 0x40)  // i32.const 0; i32.le_s; if
	charge = appendU32(append(charge, 0x10), st.YieldFunc) // call $yield
	charge = append(charge, 0x0B, 0x20, 0x00, 0x0B)        // end; local.get 0; end
	newCode := appendU32(nil, uint32(len(yield)))
	newCode = append(newCode, yield...)
	newCode = appendU32(newCode, uint32(len(charge)))
	newCode = append(newCode, charge...)

	return map[byte][]byte{
		secType: newTypes, secFunction: newFuncs, secGlobal: newGlobals,
		secExport: newExports, secCode: newCode, secMemory: newMemory,
	}
}

// assemble writes the rewritten module: each section with the entries
// added to it (a section the module lacks is emitted in its place), the
// code rewritten, custom .debug_ sections dropped.
func assemble(wasm []byte, secs []section, m moduleCounts, added map[byte][]byte, st *Stats) ([]byte, Stats, error) {
	newCode := added[secCode]
	budget := st.BudgetGlobal
	imp, definedFuncs, definedGlobals := m.imp, m.definedFuncs, m.definedGlobals
	out := make([]byte, 0, len(wasm)+len(wasm)/8+128)
	out = append(out, wasm[:8]...)
	have := map[byte]bool{}
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	counts := map[byte]uint32{secType: 2, secFunction: 2, secGlobal: 2, secExport: 2, secCode: 2, secMemory: 1}
	// emitMissing adds, with only the new entries, each section that must
	// precede a section of order `before` and that the module lacks.
	emitMissing := func(before int) {
		for _, id := range []byte{secType, secFunction, secMemory, secGlobal, secExport, secCode} {
			if e, ok := added[id]; ok && !have[id] && before > order[id] {
				have[id] = true
				emit(id, append(appendU32(nil, counts[id]), e...))
			}
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
				return nil, *st, err
			}
			if bytes.HasPrefix(name, []byte(".debug_")) {
				continue
			}
			emit(s.id, s.body)
		case secType, secFunction, secMemory, secGlobal, secExport:
			if e, ok := added[s.id]; ok {
				have[s.id] = true
				emit(s.id, appendVec(s, counts[s.id], e))
			} else {
				emit(s.id, s.body)
			}
		case secCode:
			have[secCode] = true
			body, err := rewriteCode(s, &bodyCtx{budget: budget, yield: st.YieldFunc, charge: st.ChargeFunc, importedFuncs: imp.funcs,
				funcs: imp.funcs + definedFuncs, globals: imp.globals + definedGlobals}, newCode, st)
			if err != nil {
				return nil, *st, err
			}
			emit(s.id, body)
		default:
			emit(s.id, s.body)
		}
	}
	emitMissing(1 << 30)
	return out, *st, nil
}

// appendVec returns a vector section's body with k more entries.
func appendVec(s section, k uint32, entries []byte) []byte {
	sr := &reader{b: s.body, base: s.off}
	n, _ := sr.u32() // already read once by the caller's pass
	b := appendU32(nil, n+k)
	b = append(b, s.body[sr.pos:]...)
	return append(b, entries...)
}

type imports struct{ funcs, memories, globals uint32 }

func countImports(s section) (imports, error) {
	var c imports
	r := &reader{b: s.body, base: s.off}
	n, err := r.u32()
	if err != nil {
		return c, err
	}
	for range n {
		if _, err := r.name(); err != nil {
			return c, err
		}
		if _, err := r.name(); err != nil {
			return c, err
		}
		kind, err := r.byte()
		if err != nil {
			return c, err
		}
		switch kind {
		case 0: // func: type index
			c.funcs++
			_, err = r.u32()
		case 1: // table: reftype, limits
			if _, err = r.byte(); err == nil {
				err = r.limits()
			}
		case 2: // memory: limits
			c.memories++
			err = r.limits()
		case 3: // global: valtype, mutability
			c.globals++
			_, err = r.bytes(2)
		default:
			return c, r.unsupported("import kind %d", kind)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// checkExports refuses the injected export names and exports of functions
// or globals the module does not have (which the injected ones would
// become after the rewrite).
func checkExports(s section, funcs, globals uint32) error {
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
		if string(name) == StopExport || string(name) == BudgetExport {
			return r.errf("module already exports %q", name)
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		idx, err := r.u32()
		if err != nil {
			return err
		}
		if (kind == 0 && idx >= funcs) || (kind == 3 && idx >= globals) {
			return r.errf("export %q names %s %d, which the module does not have", trunc(name), map[byte]string{0: "function", 3: "global"}[kind], idx)
		}
	}
	return nil
}

// bodyCtx is what rewriteBody needs to know of the module.
type bodyCtx struct {
	budget        uint32 // the $budget global
	yield, charge uint32 // the $yield and $charge functions
	importedFuncs uint32 // functions below this index are imports (WASI)
	funcs         uint32 // the module's own functions (imported + defined)
	globals       uint32 // the module's own globals (imported + defined)
}

// appendCheck appends a check of weight w: $budget -= w, and $yield when
// it is exhausted.
func (bc *bodyCtx) appendCheck(out []byte, w uint32) []byte {
	out = appendU32(append(out, 0x23), bc.budget)               // global.get $budget
	out = appendS32(append(out, 0x41), int32(w))                // i32.const w
	out = appendU32(append(out, 0x6B, 0x24), bc.budget)         // i32.sub; global.set $budget
	out = appendU32(append(out, 0x23), bc.budget)               // global.get $budget
	out = append(out, 0x41, 0x00, 0x4C, 0x04, 0x40)             // i32.const 0; i32.le_s; if
	return append(appendU32(append(out, 0x10), bc.yield), 0x0B) // call $yield; end
}

// rewriteCode instruments every body of the code section and appends the
// extra (already encoded) entry.
func rewriteCode(s section, bc *bodyCtx, extra []byte, st *Stats) ([]byte, error) {
	r := &reader{b: s.body, base: s.off}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(make([]byte, 0, len(s.body)+len(s.body)/4+len(extra)), n+2)
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
		buf, err = rewriteBody(buf[:0], br, bc, st)
		if err != nil {
			return nil, err
		}
		out = appendU32(out, uint32(len(buf)))
		out = append(out, buf...)
	}
	if r.pos != len(r.b) {
		return nil, r.errf("%d trailing bytes in the code section", len(r.b)-r.pos)
	}
	return append(out, extra...), nil
}

// rewriteBody copies one function body with the checks injected. One
// function on purpose: a switch over the instruction set, a case each.
func rewriteBody(out []byte, r *reader, bc *bodyCtx, st *Stats) ([]byte, error) {
	if err := skipLocals(r); err != nil {
		return nil, err
	}
	// A check's weight bounds the straight-line code it pays for: in one
	// frame, execution only moves forward between two checks (a backward
	// branch targets a loop, which starts with a check), so from a check
	// at byte p it runs at most the bytes from p to the body's end.
	check := func(p int) {
		out = bc.appendCheck(out, 1+uint32((len(r.b)-p)>>WeightShift))
	}
	out = append(out, r.b[:r.pos]...)
	check(r.pos)
	st.Functions++
	copied := r.pos
	depth := 0
	// checkBefore inserts a check before the instruction at start (its
	// opcode already consumed): a WASI call or call_indirect, whose callee
	// has no check of its own, and memory.grow.
	checkBefore := func(start int) {
		out = append(out, r.b[copied:start]...)
		check(start)
		copied = start
		st.Guards++
	}
	// chargeBefore inserts `call $charge` before a bulk memory or table
	// instruction at start: the byte or element count on top of the stack
	// is charged to the budget (1 + count>>ChargeShift) and left in place.
	chargeBefore := func(start int) {
		out = append(out, r.b[copied:start]...)
		out = appendU32(append(out, 0x10), bc.charge)
		copied = start
		st.Guards++
	}
	for {
		if r.pos >= len(r.b) {
			return nil, r.errf("function body ends without its final end")
		}
		start := r.pos
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
				check(r.pos)
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
		case 0x10, 0xD2: // call, ref.func: the module's own functions only
			f, err := readIndex(r, start, "function", bc.funcs)
			if err != nil {
				return nil, err
			}
			if op == 0x10 && f < bc.importedFuncs { // a WASI call: no entry check inside
				checkBefore(start)
			}
		case 0x11, 0x40: // call_indirect (the callee may be an import), memory.grow (zeroes up to the memory cap)
			if err := r.skipImmediates(op); err != nil {
				return nil, err
			}
			checkBefore(start)
		case 0x23, 0x24: // global.get, global.set: the module's own globals only
			if _, err := readIndex(r, start, "global", bc.globals); err != nil {
				return nil, err
			}
		case 0xFC:
			sub, err := r.u32()
			if err != nil {
				return nil, err
			}
			r.pos = start + 1
			if err := r.skipImmediates(op); err != nil {
				return nil, err
			}
			switch sub {
			case 8, 10, 11, 12, 14, 15, 17: // memory.init/copy/fill, table.init/copy/grow/fill: count on top
				chargeBefore(start)
			}
		default:
			if err := r.skipImmediates(op); err != nil {
				return nil, err
			}
		}
	}
}

// skipLocals reads past a function body's local declarations.
func skipLocals(r *reader) error {
	groups, err := r.u32()
	if err != nil {
		return err
	}
	for range groups {
		if _, err := r.u32(); err != nil {
			return err
		}
		if _, err := r.byte(); err != nil {
			return err
		}
	}
	return nil
}

// readIndex reads the function or global index of the instruction at
// start, refusing one past the module's n.
func readIndex(r *reader, start int, what string, n uint32) (uint32, error) {
	x, err := r.u32()
	if err != nil {
		return 0, err
	}
	if x >= n {
		r.pos = start
		return 0, r.errf("%s index %d out of range (the module has %d)", what, x, n)
	}
	return x, nil
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

// appendS32 appends v as a signed LEB128 (an i32.const immediate).
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
