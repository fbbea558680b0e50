package wasmrewrite

import (
	"bytes"
	"fmt"
)

// Limits are the static limits Check enforces on a module before anything
// compiles it. Every field must be set (policies fills them from its
// named constants); a value of 0 allows none of that thing.
type Limits struct {
	ModuleSize     uint64 // bytes of the whole module
	Functions      uint64 // functions, imported and defined
	BodySize       uint64 // bytes of one function body
	Locals         uint64 // locals declared by one function (parameters not counted)
	TotalLocals    uint64 // locals declared by all functions together
	NestingDepth   uint64 // nesting of block/loop/if in one function body
	Tables         uint64 // tables
	TableSize      uint64 // initial size of a table; also its maximum if the module uses table.grow
	Memories       uint64 // memories (1: the ABI's one exported memory)
	Globals        uint64 // globals, imported and defined
	Types          uint64 // function types
	TypeArity      uint64 // parameters plus results of one function type
	Imports        uint64 // imports
	Exports        uint64 // exports
	DataSegments   uint64 // data segments
	ElemSegments   uint64 // element segments
	Elements       uint64 // elements of all element segments together
	CustomSections uint64 // custom sections
}

// Info is what Check measured of a module (the largest value of each
// per-function quantity).
type Info struct {
	Size         int
	Functions    uint64 // imported + defined
	Imports      uint64
	MaxBodySize  uint64
	MaxLocals    uint64
	TotalLocals  uint64
	MaxNesting   uint64
	Tables       uint64
	MaxTableSize uint64
	Globals      uint64
	Types        uint64
	DataSegments uint64
	ElemSegments uint64
	Elements     uint64
	TableGrow    bool // the module uses table.grow
	HasStart     bool
}

// LimitError is a static limit a module exceeds.
type LimitError struct {
	Limit string // the limit's name, e.g. "MaxNestingDepth"
	Value uint64 // what the module has (a lower bound when Check stopped counting)
	Max   uint64 // the limit
	Where string // e.g. "function 12", "" for the module as a whole
}

func (e *LimitError) Error() string {
	where := ""
	if e.Where != "" {
		where = e.Where + ": "
	}
	return fmt.Sprintf("%s%s %d exceeds the limit %d (%s)", where, limitWhat[e.Limit], e.Value, e.Max, e.Limit)
}

var limitWhat = map[string]string{
	"MaxModuleSize":     "module size in bytes",
	"MaxFunctions":      "functions",
	"MaxBodySize":       "function body size in bytes",
	"MaxLocals":         "locals",
	"MaxTotalLocals":    "locals of all functions",
	"MaxNestingDepth":   "block nesting depth",
	"MaxTables":         "tables",
	"MaxTableSize":      "table size",
	"MaxMemories":       "memories",
	"MaxGlobals":        "globals",
	"MaxTypes":          "function types",
	"MaxTypeArity":      "parameters plus results",
	"MaxImports":        "imports",
	"MaxExports":        "exports",
	"MaxDataSegments":   "data segments",
	"MaxElemSegments":   "element segments",
	"MaxElements":       "table elements",
	"MaxCustomSections": "custom sections",
}

// WASIModule is the only module a policy may import from (functions only).
const WASIModule = "wasi_snapshot_preview1"

// checker carries Check's state.
type checker struct {
	l    Limits
	info Info
}

func (c *checker) limit(name string, v, max uint64, where string) error {
	if v > max {
		return &LimitError{Limit: name, Value: v, Max: max, Where: where}
	}
	return nil
}

// Check decodes wasm far enough to enforce l: the section structure, every
// section's counts, every function body instruction by instruction (locals,
// body size, nesting depth), imports (functions of WASIModule only; no
// imported table, memory or global) and tables (a module that uses
// table.grow must declare a maximum of at most l.TableSize for every
// table). Its work and memory are linear in len(wasm) whatever the module
// declares: counts are compared before anything is allocated for them. It
// is not a validator (wazero validates the module afterwards); it bounds
// what decoding, validating and compiling the module may cost.
//
// One function on purpose: one pass over the sections, a case each.
func Check(wasm []byte, l Limits) (Info, error) {
	c := &checker{l: l}
	c.info.Size = len(wasm)
	if err := c.limit("MaxModuleSize", uint64(len(wasm)), l.ModuleSize, ""); err != nil {
		return c.info, err
	}
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return c.info, &Error{0, "not a core wasm module (magic/version)"}
	}
	r := &reader{b: wasm, pos: 8}
	last := 0
	var customs uint64
	var tables []tableLimits
	for r.pos < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return c.info, err
		}
		size, err := r.u32()
		if err != nil {
			return c.info, err
		}
		if int(size) > len(r.b)-r.pos {
			return c.info, r.errf("section %d of %d bytes overruns the module", id, size)
		}
		s := &reader{b: r.b[r.pos : r.pos+int(size)], base: r.pos}
		r.pos += int(size)
		if id == secCustom {
			customs++
			if err := c.limit("MaxCustomSections", customs, l.CustomSections, ""); err != nil {
				return c.info, err
			}
			continue
		}
		o, ok := order[id]
		if !ok {
			return c.info, s.unsupported("section id %d", id)
		}
		if o <= last {
			return c.info, s.errf("section %d out of order or duplicated", id)
		}
		last = o
		if err := c.section(id, s, &tables); err != nil {
			return c.info, err
		}
		if id != secCode && s.pos != len(s.b) {
			return c.info, s.errf("%d trailing bytes in section %d", len(s.b)-s.pos, id)
		}
	}
	if c.info.TableGrow {
		for i, t := range tables {
			if !t.hasMax || t.max > l.TableSize {
				max := uint64(1 << 32)
				if t.hasMax {
					max = t.max
				}
				return c.info, &LimitError{Limit: "MaxTableSize", Value: max, Max: l.TableSize,
					Where: fmt.Sprintf("table %d (the module uses table.grow, so the table's declared maximum counts)", i)}
			}
		}
	}
	return c.info, nil
}

// section checks one non-custom section's entries against the limits.
func (c *checker) section(id byte, s *reader, tables *[]tableLimits) error {
	var err error
	switch id {
	case secType:
		err = c.types(s)
	case secImport:
		err = c.imports(s)
	case secFunction:
		err = c.vec(s, "MaxFunctions", &c.info.Functions, c.l.Functions, func() error { _, err := s.u32(); return err })
	case secTable:
		*tables, err = c.tables(s)
	case secMemory:
		var n uint64
		err = c.vec(s, "MaxMemories", &n, c.l.Memories, s.limits)
	case secGlobal:
		err = c.vec(s, "MaxGlobals", &c.info.Globals, c.l.Globals, func() error {
			if _, err := s.bytes(2); err != nil { // valtype, mutability
				return err
			}
			return s.constExpr()
		})
	case secExport:
		var n uint64
		err = c.vec(s, "MaxExports", &n, c.l.Exports, func() error {
			if _, err := s.name(); err != nil {
				return err
			}
			if _, err := s.byte(); err != nil {
				return err
			}
			_, err := s.u32()
			return err
		})
	case secStart:
		c.info.HasStart = true
		_, err = s.u32()
	case secElement:
		err = c.elements(s)
	case secDataCnt:
		_, err = s.u32()
	case secCode:
		err = c.code(s)
	case secData:
		err = c.data(s)
	}
	return err
}

// vec reads a vector's count into *total (added to what is there), checks
// it against max, then reads each entry with entry.
func (c *checker) vec(s *reader, limit string, total *uint64, max uint64, entry func() error) error {
	n, err := s.u32()
	if err != nil {
		return err
	}
	*total += uint64(n)
	if err := c.limit(limit, *total, max, ""); err != nil {
		return err
	}
	for range n {
		if err := entry(); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) types(s *reader) error {
	i := 0
	return c.vec(s, "MaxTypes", &c.info.Types, c.l.Types, func() error {
		if b, err := s.byte(); err != nil {
			return err
		} else if b != 0x60 {
			s.pos--
			return s.unsupported("type form 0x%02X", b)
		}
		var arity uint64
		for range 2 {
			n, err := s.u32()
			if err != nil {
				return err
			}
			arity += uint64(n)
			if err := c.limit("MaxTypeArity", arity, c.l.TypeArity, fmt.Sprintf("type %d", i)); err != nil {
				return err
			}
			if _, err := s.bytes(int(n)); err != nil {
				return err
			}
		}
		i++
		return nil
	})
}

func (c *checker) imports(s *reader) error {
	return c.vec(s, "MaxImports", &c.info.Imports, c.l.Imports, func() error {
		mod, err := s.name()
		if err != nil {
			return err
		}
		field, err := s.name()
		if err != nil {
			return err
		}
		kind, err := s.byte()
		if err != nil {
			return err
		}
		if kind != 0 {
			what := map[byte]string{1: "a table", 2: "a memory", 3: "a global"}[kind]
			if what == "" {
				what = fmt.Sprintf("import kind %d", kind)
			}
			return s.errf("import %q.%q is %s: a policy may import only %s functions", trunc(mod), trunc(field), what, WASIModule)
		}
		if string(mod) != WASIModule {
			return s.errf("import %q.%q: a policy may import only %s functions", trunc(mod), trunc(field), WASIModule)
		}
		c.info.Functions++
		if err := c.limit("MaxFunctions", c.info.Functions, c.l.Functions, ""); err != nil {
			return err
		}
		_, err = s.u32()
		return err
	})
}

type tableLimits struct {
	min, max uint64
	hasMax   bool
}

func (c *checker) tables(s *reader) ([]tableLimits, error) {
	var ts []tableLimits
	err := c.vec(s, "MaxTables", &c.info.Tables, c.l.Tables, func() error {
		if _, err := s.byte(); err != nil { // reftype
			return err
		}
		flag, err := s.byte()
		if err != nil {
			return err
		}
		var t tableLimits
		min, err := s.u32()
		if err != nil {
			return err
		}
		t.min = uint64(min)
		switch flag {
		case 0:
		case 1:
			max, err := s.u32()
			if err != nil {
				return err
			}
			t.max, t.hasMax = uint64(max), true
		default:
			s.pos--
			return s.unsupported("table limits flag %d", flag)
		}
		c.info.MaxTableSize = maxU(c.info.MaxTableSize, t.min)
		if err := c.limit("MaxTableSize", t.min, c.l.TableSize, fmt.Sprintf("table %d (initial size)", len(ts))); err != nil {
			return err
		}
		ts = append(ts, t)
		return nil
	})
	return ts, err
}

// elements reads the element section (all eight segment encodings).
func (c *checker) elements(s *reader) error {
	return c.vec(s, "MaxElemSegments", &c.info.ElemSegments, c.l.ElemSegments, func() error {
		flag, err := s.u32()
		if err != nil {
			return err
		}
		if flag > 7 {
			return s.errf("element segment flag %d", flag)
		}
		if flag&1 == 0 { // active
			if flag&2 != 0 { // explicit table index
				if _, err := s.u32(); err != nil {
					return err
				}
			}
			if err := s.constExpr(); err != nil {
				return err
			}
		}
		if flag&3 != 0 { // elemkind (0x00) or reftype
			if _, err := s.byte(); err != nil {
				return err
			}
		}
		n, err := s.u32()
		if err != nil {
			return err
		}
		c.info.Elements += uint64(n)
		if err := c.limit("MaxElements", c.info.Elements, c.l.Elements, ""); err != nil {
			return err
		}
		for range n {
			if flag&4 != 0 {
				err = s.constExpr()
			} else {
				_, err = s.u32()
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (c *checker) data(s *reader) error {
	return c.vec(s, "MaxDataSegments", &c.info.DataSegments, c.l.DataSegments, func() error {
		flag, err := s.u32()
		if err != nil {
			return err
		}
		switch flag {
		case 0:
			err = s.constExpr()
		case 1:
		case 2:
			if _, err = s.u32(); err == nil {
				err = s.constExpr()
			}
		default:
			return s.errf("data segment flag %d", flag)
		}
		if err != nil {
			return err
		}
		_, err = s.name() // the bytes: a length-prefixed vector, like a name
		return err
	})
}

func (c *checker) code(s *reader) error {
	n, err := s.u32()
	if err != nil {
		return err
	}
	if err := c.limit("MaxFunctions", c.info.Functions+uint64(n), c.l.Functions, ""); err != nil {
		return err
	}
	for i := range n {
		where := fmt.Sprintf("function %d", c.info.Imports+uint64(i))
		size, err := s.u32()
		if err != nil {
			return err
		}
		c.info.MaxBodySize = maxU(c.info.MaxBodySize, uint64(size))
		if err := c.limit("MaxBodySize", uint64(size), c.l.BodySize, where); err != nil {
			return err
		}
		if int(size) > len(s.b)-s.pos {
			return s.errf("function body of %d bytes overruns the code section", size)
		}
		br := &reader{b: s.b[s.pos : s.pos+int(size)], base: s.base + s.pos}
		s.pos += int(size)
		if err := c.body(br, where); err != nil {
			return err
		}
	}
	if s.pos != len(s.b) {
		return s.errf("%d trailing bytes in the code section", len(s.b)-s.pos)
	}
	return nil
}

func (c *checker) body(r *reader, where string) error {
	groups, err := r.u32()
	if err != nil {
		return err
	}
	var locals uint64
	for range groups {
		n, err := r.u32()
		if err != nil {
			return err
		}
		locals += uint64(n)
		if err := c.limit("MaxLocals", locals, c.l.Locals, where); err != nil {
			return err
		}
		if _, err := r.byte(); err != nil {
			return err
		}
	}
	c.info.MaxLocals = maxU(c.info.MaxLocals, locals)
	c.info.TotalLocals += locals
	if err := c.limit("MaxTotalLocals", c.info.TotalLocals, c.l.TotalLocals, ""); err != nil {
		return err
	}
	var depth uint64
	for {
		if r.pos >= len(r.b) {
			return r.errf("function body ends without its final end")
		}
		op := r.b[r.pos]
		r.pos++
		switch op {
		case 0x02, 0x03, 0x04: // block, loop, if
			if err := r.blockType(); err != nil {
				return err
			}
			depth++
			c.info.MaxNesting = maxU(c.info.MaxNesting, depth)
			if err := c.limit("MaxNestingDepth", depth, c.l.NestingDepth, where); err != nil {
				return err
			}
		case 0x0B: // end
			if depth == 0 {
				if r.pos != len(r.b) {
					return r.errf("%d bytes after the function's final end", len(r.b)-r.pos)
				}
				return nil
			}
			depth--
		case 0xFC:
			at := r.pos
			sub, err := r.u32()
			if err != nil {
				return err
			}
			if sub == 15 { // table.grow
				c.info.TableGrow = true
			}
			r.pos = at
			if err := r.skipImmediates(op); err != nil {
				return err
			}
		default:
			if err := r.skipImmediates(op); err != nil {
				return err
			}
		}
	}
}

// constExpr skips a constant expression up to and including its end.
func (r *reader) constExpr() error {
	for {
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0B:
			return nil
		case 0x02, 0x03, 0x04:
			return r.errf("block in a constant expression")
		}
		if err := r.skipImmediates(op); err != nil {
			return err
		}
	}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// trunc bounds a name quoted in an error.
func trunc(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
