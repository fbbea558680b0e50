package abicodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/wasmsched/wasmsched/abi"
)

// Record tags: the first u32 of every record. See ABI.md.
const (
	TagSerialSnapshot uint32 = 1
	TagSerialDecision uint32 = 2
	TagReuseRequest   uint32 = 3
	TagReuseDecision  uint32 = 4
)

// Fixed record sizes in bytes. See ABI.md for the field layout.
const (
	SerialSnapshotHeaderSize = 48
	RunSize                  = 48
	SerialDecisionHeaderSize = 16
	ActionSize               = 20
	ReuseRequestHeaderSize   = 80 // includes the embedded abi.Run at offset 32
	TaskSlotSize             = 32
	ReuseDecisionHeaderSize  = 24
)

// DecisionRunIndex is bit 0 of a serial decision's flags (header bytes 8
// to 12, ABI v3): its actions of kinds 1 to 3 name their run by its index
// in the snapshot (active runs first, then waiting) in a u32 at action
// bytes 4 to 8, instead of by id. No other flag bit is defined.
const DecisionRunIndex uint32 = 1

// MaxRecordSize bounds every encoded record (and so the guest's buffers).
const MaxRecordSize = 64 << 20

// ErrMalformed is returned (wrapped) by every decoder for bytes that are not a
// well-formed record of the expected type.
var ErrMalformed = errors.New("abi: malformed record")

var le = binary.LittleEndian

func put32(b []byte, off int, v uint32) { le.PutUint32(b[off:off+4], v) }
func put64(b []byte, off int, v uint64) { le.PutUint64(b[off:off+8], v) }

// grow returns dst extended by n zero bytes, and the offset where they start.
func grow(dst []byte, n int) ([]byte, int) {
	start := len(dst)
	if cap(dst)-start < n {
		nb := make([]byte, start, start+n)
		copy(nb, dst)
		dst = nb
	}
	dst = dst[:start+n]
	clear(dst[start:])
	return dst, start
}

// putStr writes the (offset, length) reference of s at b[at:] and copies s
// to b[next:]; offsets are relative to base. It returns the new next.
func putStr(b []byte, base, at, next int, s string) int {
	le.PutUint64(b[at:at+8], uint64(next-base)|uint64(len(s))<<32)
	if n := len(s); n >= 8 && n <= 16 {
		// most ids: two overlapping 8-byte moves instead of a memmove call
		dst, src := b[next:next+n], unsafe.Slice(unsafe.StringData(s), n)
		le.PutUint64(dst, le.Uint64(src))
		le.PutUint64(dst[n-8:], le.Uint64(src[n-8:]))
		return next + n
	}
	return next + copy(b[next:], s)
}

// putRun writes r's record at b[at:] (every byte: reserved ones zeroed)
// and its id at b[next:]; offsets are relative to b[0]. It returns the new
// next.
func putRun(b []byte, at, next int, r *abi.Run) int {
	rec := b[at : at+RunSize]
	le.PutUint64(rec[0:8], r.Seq)
	le.PutUint64(rec[8:16], uint64(r.SubmittedAt))
	le.PutUint64(rec[16:24], uint64(r.StartedAt))
	le.PutUint32(rec[24:28], uint32(r.Priority))
	le.PutUint32(rec[28:32], r.Slots)
	// state and the 7 reserved bytes, in one store
	le.PutUint64(rec[40:48], uint64(r.State))
	return putStr(b, 0, at+32, next, r.ID)
}

// AppendSerialSnapshot appends the encoding of s to dst.
func AppendSerialSnapshot(dst []byte, s *abi.SerialSnapshot) []byte {
	b, base := grow(dst, SerialSnapshotSize(s))
	PutSerialSnapshot(b[base:], s)
	return b
}

// SerialSnapshotSize is the length of s's encoding.
func SerialSnapshotSize(s *abi.SerialSnapshot) int {
	size := SerialSnapshotHeaderSize + (len(s.Active)+len(s.Waiting))*RunSize + len(s.Group) + len(s.Policy)
	for i := range s.Active {
		size += len(s.Active[i].ID)
	}
	for i := range s.Waiting {
		size += len(s.Waiting[i].ID)
	}
	return size
}

// PutSerialSnapshot encodes s into b, which must be SerialSnapshotSize(s)
// bytes long (it panics if b is shorter). Every byte of b is written
// (reserved bytes as zero), so b may hold anything before: the host
// encodes straight into a guest's input buffer.
func PutSerialSnapshot(b []byte, s *abi.SerialSnapshot) {
	n := len(s.Active) + len(s.Waiting)
	_ = b[SerialSnapshotHeaderSize+n*RunSize-1]
	next := putSnapshotHeader(b, TagSerialSnapshot, SerialSnapshotHeaderSize+n*RunSize, s)
	at := SerialSnapshotHeaderSize
	for i := range s.Active {
		next = putRun(b, at, next, &s.Active[i])
		at += RunSize
	}
	for i := range s.Waiting {
		next = putRun(b, at, next, &s.Waiting[i])
		at += RunSize
	}
}

// putSnapshotHeader writes the first 48 bytes of a serial snapshot header
// (tag 1's, which tag 5 extends), its strings from next on, and returns
// the new next.
func putSnapshotHeader(b []byte, tag uint32, next int, s *abi.SerialSnapshot) int {
	put32(b, 0, tag)
	put32(b, 4, s.MaxActive)
	put64(b, 8, uint64(s.Now))
	next = putStr(b, 0, 16, next, s.Group)
	next = putStr(b, 0, 24, next, s.Policy)
	put32(b, 32, uint32(len(s.Active)))
	put32(b, 36, uint32(len(s.Waiting)))
	put32(b, 40, s.WaitingTotal)
	put32(b, 44, s.WaitingOldest)
	return next
}

// AppendSerialDecision appends the encoding of d to dst. A nonzero d.Below
// is written as an action of kind abi.ActionDiscardBelow after the others,
// a nonzero d.Wake as one of kind abi.ActionWake last.
func AppendSerialDecision(dst []byte, d *abi.SerialDecision) []byte {
	return appendSerialDecision(dst, d, nil)
}

// AppendSerialDecisionRefs appends the encoding of d in the indexed form
// (DecisionRunIndex, ABI v3): action i names the run of index refs[i]
// (len(refs) == len(d.Actions)); the actions' abi.Run fields are not written.
func AppendSerialDecisionRefs(dst []byte, d *abi.SerialDecision, refs []uint32) []byte {
	if refs == nil {
		refs = []uint32{} // the indexed form, even with no action
	}
	return appendSerialDecision(dst, d, refs)
}

// appendSerialDecision: by id when refs is nil, else indexed.
func appendSerialDecision(dst []byte, d *abi.SerialDecision, refs []uint32) []byte {
	indexed := refs != nil
	n := len(d.Actions)
	if d.Below != 0 {
		n++
	}
	if d.Wake != 0 {
		n++
	}
	size := SerialDecisionHeaderSize + n*ActionSize + len(d.BelowReason)
	for i := range d.Actions {
		size += len(d.Actions[i].Reason)
		if !indexed {
			size += len(d.Actions[i].Run)
		}
	}
	b, base := grow(dst, size)
	next := base + SerialDecisionHeaderSize + n*ActionSize
	put32(b, base, TagSerialDecision)
	put32(b, base+4, uint32(n))
	if indexed {
		put32(b, base+8, DecisionRunIndex)
	}
	at := base + SerialDecisionHeaderSize
	for i := range d.Actions {
		a := &d.Actions[i]
		put32(b, at, uint32(a.Kind))
		if indexed {
			put32(b, at+4, refs[i])
		} else {
			next = putStr(b, base, at+4, next, a.Run)
		}
		next = putStr(b, base, at+12, next, a.Reason)
		at += ActionSize
	}
	if d.Below != 0 {
		put32(b, at, uint32(abi.ActionDiscardBelow))
		put64(b, at+4, d.Below)
		putStr(b, base, at+12, next, d.BelowReason)
		at += ActionSize
	}
	if d.Wake != 0 {
		put32(b, at, uint32(abi.ActionWake))
		put64(b, at+4, uint64(d.Wake))
	}
	return b
}

// AppendReuseRequest appends the encoding of r to dst.
func AppendReuseRequest(dst []byte, r *abi.ReuseRequest) []byte {
	size := ReuseRequestHeaderSize + len(r.Slots)*TaskSlotSize + len(r.Group) + len(r.Run.ID)
	for i := range r.Slots {
		size += len(r.Slots[i].Worker) + len(r.Slots[i].Token)
	}
	b, base := grow(dst, size)
	next := base + ReuseRequestHeaderSize + len(r.Slots)*TaskSlotSize
	put32(b, base, TagReuseRequest)
	put32(b, base+4, uint32(len(r.Slots)))
	put64(b, base+8, uint64(r.Now))
	next = putStr(b, base, base+16, next, r.Group)
	next = base + putRun(b[base:], 32, next-base, &r.Run)
	at := base + ReuseRequestHeaderSize
	for i := range r.Slots {
		t := &r.Slots[i]
		put32(b, at, t.Task)
		put32(b, at+4, t.Index)
		next = putStr(b, base, at+8, next, t.Worker)
		next = putStr(b, base, at+16, next, t.Token)
		var f byte
		if t.Alive {
			f |= 1
		}
		if t.Held {
			f |= 2
		}
		b[at+24] = f
		at += TaskSlotSize
	}
	return b
}

// AppendReuseDecision appends the encoding of d to dst.
func AppendReuseDecision(dst []byte, d *abi.ReuseDecision) []byte {
	size := ReuseDecisionHeaderSize + len(d.Verdicts) + len(d.Reason)
	b, base := grow(dst, size)
	next := base + ReuseDecisionHeaderSize + len(d.Verdicts)
	put32(b, base, TagReuseDecision)
	if d.Fail {
		put32(b, base+4, 1)
	}
	putStr(b, base, base+8, next, d.Reason)
	put32(b, base+16, uint32(len(d.Verdicts)))
	for i, v := range d.Verdicts {
		b[base+ReuseDecisionHeaderSize+i] = byte(v)
	}
	return b
}

// The decoders avoid per-field function calls: in a Go wasm guest every call
// pays a stack check and, under wazero's deadline checks, a termination
// check, so fields are read inline from one bounds-checked record slice.

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// str resolves the (u32 offset, u32 length) reference in ref[0:8] against b.
func str(b, ref []byte, view bool) (string, bool) {
	o, n := uint64(le.Uint32(ref[0:4])), uint64(le.Uint32(ref[4:8]))
	if o+n > uint64(len(b)) {
		return "", false
	}
	if n == 0 {
		return "", true
	}
	if view {
		return unsafe.String(&b[o], int(n)), true
	}
	return string(b[o : o+n]), true
}

func decodeRun(b, rec []byte, r *abi.Run, view bool) bool {
	rec = rec[:RunSize]
	r.Seq = le.Uint64(rec[0:8])
	r.SubmittedAt = int64(le.Uint64(rec[8:16]))
	r.StartedAt = int64(le.Uint64(rec[16:24]))
	r.Priority = int32(le.Uint32(rec[24:28]))
	r.Slots = le.Uint32(rec[28:32])
	r.State = abi.State(rec[40])
	r.Labels, r.NotBefore, r.Attempt, r.MaxAttempts = nil, 0, 0, 0 // v4's, set by its decoder
	// str, inlined by hand (hot path)
	o, n := uint64(le.Uint32(rec[32:36])), uint64(le.Uint32(rec[36:40]))
	switch {
	case o+n > uint64(len(b)):
		return false
	case n == 0:
		r.ID = ""
	case view:
		r.ID = unsafe.String(&b[o], int(n))
	default:
		r.ID = string(b[o : o+n])
	}
	return true
}

// header checks the tag and minimum size.
func header(b []byte, tag uint32, size int) error {
	if len(b) < size {
		return malformed("%d bytes, header needs %d", len(b), size)
	}
	if got := le.Uint32(b[0:4]); got != tag {
		return malformed("tag %d, want %d", got, tag)
	}
	return nil
}

// fits checks that n records of size bytes fit in b from start.
func fits(b []byte, start int, n uint64, size int) error {
	if uint64(start)+n*uint64(size) > uint64(len(b)) {
		return malformed("%d records of %d bytes at %d beyond %d bytes", n, size, start, len(b))
	}
	return nil
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

var errBadString = malformed("string reference beyond the record")

func decodeSerialSnapshot(b []byte, s *abi.SerialSnapshot, view bool) error {
	s.Active, s.Waiting = s.Active[:0], s.Waiting[:0]
	s.Params, s.Launches = s.Params[:0], s.Launches[:0]
	if len(b) >= 4 && le.Uint32(b[0:4]) == TagSerialSnapshot4 {
		if err := header(b, TagSerialSnapshot4, SerialSnapshot4HeaderSize); err != nil {
			return err
		}
		return decodeSerialSnapshot4(b, s, view)
	}
	if err := header(b, TagSerialSnapshot, SerialSnapshotHeaderSize); err != nil {
		return err
	}
	h := b[:SerialSnapshotHeaderSize]
	na, nw := uint64(le.Uint32(h[32:36])), uint64(le.Uint32(h[36:40]))
	if err := fits(b, SerialSnapshotHeaderSize, na+nw, RunSize); err != nil {
		return err
	}
	s.MaxActive = le.Uint32(h[4:8])
	s.Now = int64(le.Uint64(h[8:16]))
	s.WaitingTotal, s.WaitingOldest = le.Uint32(h[40:44]), le.Uint32(h[44:48])
	var ok1, ok2 bool
	s.Group, ok1 = str(b, h[16:24], view)
	s.Policy, ok2 = str(b, h[24:32], view)
	if !ok1 || !ok2 {
		return errBadString
	}
	s.Active = resize(s.Active, int(na))
	s.Waiting = resize(s.Waiting, int(nw))
	at := SerialSnapshotHeaderSize
	for i := range s.Active {
		if !decodeRun(b, b[at:], &s.Active[i], view) {
			return errBadString
		}
		at += RunSize
	}
	for i := range s.Waiting {
		if !decodeRun(b, b[at:], &s.Waiting[i], view) {
			return errBadString
		}
		at += RunSize
	}
	return nil
}

// DecodeSerialSnapshot decodes b into s, reusing s's slices. Strings are
// copied. It reads both forms: tag TagSerialSnapshot (ABI v1 to v3) and
// TagSerialSnapshot4. It never panics; malformed input returns an error
// wrapping ErrMalformed.
func DecodeSerialSnapshot(b []byte, s *abi.SerialSnapshot) error {
	return decodeSerialSnapshot(b, s, false)
}

// DecodeSerialSnapshotView is DecodeSerialSnapshot without copying: strings
// in s alias b and are valid only while b is not modified. Used by the guest
// SDK for a zero-allocation hot path. A version 1 to 3 record leaves the
// runs' version 4 fields as they were (zero, unless s held a version 4
// snapshot before: decode each version into its own value).
//
// It accepts and rejects exactly what DecodeSerialSnapshot does (the fuzzer
// checks), but is written for a Go wasm guest, where every branch, call and
// bounds check is expensive: after one size check, runs are read through
// array pointers (no per-field bounds checks) and string references are
// checked arithmetically, the verdict taken once after the loop.
func DecodeSerialSnapshotView(b []byte, s *abi.SerialSnapshot) error {
	s.Active, s.Waiting = s.Active[:0], s.Waiting[:0]
	s.Params, s.Launches = s.Params[:0], s.Launches[:0]
	if len(b) >= SerialSnapshot4HeaderSize && le.Uint32(b[0:4]) == TagSerialSnapshot4 {
		return viewSerialSnapshot4(b, s)
	}
	if len(b) < SerialSnapshotHeaderSize || le.Uint32(b[0:4]) != TagSerialSnapshot {
		return decodeSerialSnapshot(b, s, true) // for the error
	}
	h := b[:SerialSnapshotHeaderSize]
	na, nw := uint64(le.Uint32(h[32:36])), uint64(le.Uint32(h[36:40]))
	if SerialSnapshotHeaderSize+(na+nw)*RunSize > uint64(len(b)) {
		return decodeSerialSnapshot(b, s, true)
	}
	p, l := unsafe.Pointer(unsafe.SliceData(b)), uint64(len(b))
	s.MaxActive = le.Uint32(h[4:8])
	s.Now = int64(le.Uint64(h[8:16]))
	s.WaitingTotal, s.WaitingOldest = le.Uint32(h[40:44]), le.Uint32(h[44:48])
	hp := (*[SerialSnapshotHeaderSize]byte)(h)
	var bad1, bad2 uint64
	s.Group, bad1 = viewRef(p, l, uint64(le.Uint32(hp[16:20])), uint64(le.Uint32(hp[20:24])))
	s.Policy, bad2 = viewRef(p, l, uint64(le.Uint32(hp[24:28])), uint64(le.Uint32(hp[28:32])))
	if cap(s.Active) < int(na) {
		s.Active = make([]abi.Run, na)
	}
	if cap(s.Waiting) < int(nw) {
		s.Waiting = make([]abi.Run, nw)
	}
	s.Active, s.Waiting = s.Active[:na], s.Waiting[:nw]
	bad := bad1 | bad2 |
		viewRuns(p, l, SerialSnapshotHeaderSize, s.Active) |
		viewRuns(p, l, SerialSnapshotHeaderSize+na*RunSize, s.Waiting)
	if bad != 0 {
		return errBadString
	}
	return nil
}

// viewRuns decodes len(runs) run records starting at byte at of the record
// at p of l bytes, strings aliasing the record. The caller has checked that
// the records fit: each one is read through a fixed-size array pointer, so
// the compiler emits no bounds check per field. In a Go wasm guest those
// checks (and the spills around their panic calls) were most of the cost:
// ~80 ns per run with slice-based access, ~20 ns with this. String
// references are checked without a branch (viewRef); it returns nonzero if
// any is bad.
func viewRuns(p unsafe.Pointer, l, at uint64, runs []abi.Run) uint64 {
	var bad uint64
	for i := range runs {
		rec := (*[RunSize]byte)(unsafe.Add(p, at+uint64(i)*RunSize))
		r := &runs[i]
		// the fields as in decodeRun, written out: a shared helper is over
		// the inlining budget, and a call per run is costly in a wasm guest
		r.Seq = le.Uint64(rec[0:8])
		r.SubmittedAt = int64(le.Uint64(rec[8:16]))
		r.StartedAt = int64(le.Uint64(rec[16:24]))
		r.Priority = int32(le.Uint32(rec[24:28]))
		r.Slots = le.Uint32(rec[28:32])
		r.State = abi.State(rec[40])
		// (v4's fields are not touched: a guest decodes records of one
		// version, and each store here costs a guest per run)
		var b uint64
		r.ID, b = viewRef(p, l, uint64(le.Uint32(rec[32:36])), uint64(le.Uint32(rec[36:40])))
		bad |= b
	}
	return bad
}

func decodeSerialDecision(b []byte, d *abi.SerialDecision, view bool, refs *[]uint32) (indexed bool, err error) {
	d.Reset()
	if err := header(b, TagSerialDecision, SerialDecisionHeaderSize); err != nil {
		return false, err
	}
	n := uint64(le.Uint32(b[4:8]))
	if err := fits(b, SerialDecisionHeaderSize, n, ActionSize); err != nil {
		return false, err
	}
	switch flags := le.Uint32(b[8:12]); {
	case flags == DecisionRunIndex && refs != nil:
		indexed = true
		*refs = resize(*refs, int(n))
	case flags == DecisionRunIndex:
		return false, malformed("the decision names its runs by index (ABI v3): decode it with DecodeSerialDecisionRefs")
	case flags != 0:
		return false, malformed("decision flags %#x (only %#x is defined)", flags, DecisionRunIndex)
	}
	d.Actions = resize(d.Actions, int(n))
	at, j := SerialDecisionHeaderSize, 0
	var wake int64
	defer func() { d.Wake = wake }()
	for i := range int(n) {
		rec := b[at : at+ActionSize]
		at += ActionSize
		k := le.Uint32(rec[0:4])
		if k > 255 {
			return false, malformed("action %d: kind %d", i, k)
		}
		if abi.ActionKind(k) == abi.ActionDiscardBelow {
			// the run reference's 8 bytes carry the seq (ABI.md)
			seq := le.Uint64(rec[4:12])
			if d.Below != 0 || seq == 0 {
				return false, malformed("action %d: discard_below %d: at most one, with a seq above 0", i, seq)
			}
			var ok bool
			if d.BelowReason, ok = str(b, rec[12:20], view); !ok {
				return false, errBadString
			}
			d.Below = seq
			continue
		}
		if abi.ActionKind(k) == abi.ActionWake {
			// the run reference's 8 bytes carry the time (ABI v4); a
			// time at or before 0 is in the past: the earliest wake
			if wake != 0 {
				return false, malformed("action %d: a second wake", i)
			}
			wake = max(int64(le.Uint64(rec[4:12])), 1)
			continue
		}
		a := &d.Actions[j]
		a.Kind = abi.ActionKind(k)
		var ok1, ok2 bool
		if indexed {
			(*refs)[j] = le.Uint32(rec[4:8])
			a.Run, ok1 = "", true
		} else {
			a.Run, ok1 = str(b, rec[4:12], view)
		}
		a.Reason, ok2 = str(b, rec[12:20], view)
		if !ok1 || !ok2 {
			return false, errBadString
		}
		j++
	}
	d.Actions = d.Actions[:j]
	if indexed {
		*refs = (*refs)[:j]
	}
	return indexed, nil
}

// DecodeSerialDecision decodes b into d, reusing d's slice; strings are
// copied. abi.Action kinds are not checked here (validation does that). A
// decision in the indexed form (DecisionRunIndex) is refused: its run ids
// are in the snapshot (DecodeSerialDecisionRefs).
func DecodeSerialDecision(b []byte, d *abi.SerialDecision) error {
	_, err := decodeSerialDecision(b, d, false, nil)
	return err
}

// DecodeSerialDecisionView is DecodeSerialDecision with strings aliasing b.
func DecodeSerialDecisionView(b []byte, d *abi.SerialDecision) error {
	_, err := decodeSerialDecision(b, d, true, nil)
	return err
}

// DecodeSerialDecisionRefs is DecodeSerialDecisionView for both forms of
// a decision. For one in the indexed form (DecisionRunIndex, ABI v3) it
// reports indexed, leaves each abi.Action.Run empty and sets (*refs)[i] to the
// snapshot index of the run action i names (unchecked: the index may be
// out of range), reusing *refs' array; for one naming runs by id it leaves
// *refs alone. The caller resolves and checks the indexes.
func DecodeSerialDecisionRefs(b []byte, d *abi.SerialDecision, refs *[]uint32) (indexed bool, err error) {
	return decodeSerialDecision(b, d, true, refs)
}

func decodeReuseRequest(b []byte, q *abi.ReuseRequest, view bool) error {
	q.Slots = q.Slots[:0]
	if err := header(b, TagReuseRequest, ReuseRequestHeaderSize); err != nil {
		return err
	}
	n := uint64(le.Uint32(b[4:8]))
	if err := fits(b, ReuseRequestHeaderSize, n, TaskSlotSize); err != nil {
		return err
	}
	if err := reuseHeader(b, q, view); err != nil {
		return err
	}
	q.Slots = resize(q.Slots, int(n))
	at := ReuseRequestHeaderSize
	for i := range q.Slots {
		rec := b[at : at+TaskSlotSize]
		t := &q.Slots[i]
		t.Task = le.Uint32(rec[0:4])
		t.Index = le.Uint32(rec[4:8])
		var ok1, ok2 bool
		t.Worker, ok1 = str(b, rec[8:16], view)
		t.Token, ok2 = str(b, rec[16:24], view)
		if !ok1 || !ok2 {
			return errBadString
		}
		t.Alive = rec[24]&1 != 0
		t.Held = rec[24]&2 != 0
		at += TaskSlotSize
	}
	return nil
}

// reuseHeader decodes a reuse request's now, group and run (b holds at
// least the header).
func reuseHeader(b []byte, q *abi.ReuseRequest, view bool) error {
	q.Now = int64(le.Uint64(b[8:16]))
	var ok bool
	if q.Group, ok = str(b, b[16:24], view); !ok {
		return errBadString
	}
	if !decodeRun(b, b[32:], &q.Run, view) {
		return errBadString
	}
	return nil
}

// DecodeReuseRequest decodes b into q, reusing q's slice; strings are copied.
func DecodeReuseRequest(b []byte, q *abi.ReuseRequest) error { return decodeReuseRequest(b, q, false) }

// DecodeReuseRequestView is DecodeReuseRequest with strings aliasing b. It
// accepts and rejects exactly what DecodeReuseRequest does (the fuzzer
// checks); like DecodeSerialSnapshotView it reads the task slot records
// through array pointers after one size check and checks their string
// references without a branch, for the guest SDK's hot path.
func DecodeReuseRequestView(b []byte, q *abi.ReuseRequest) error {
	if len(b) < ReuseRequestHeaderSize || le.Uint32(b[0:4]) != TagReuseRequest {
		return decodeReuseRequest(b, q, true) // for the error
	}
	n := uint64(le.Uint32(b[4:8]))
	if ReuseRequestHeaderSize+n*TaskSlotSize > uint64(len(b)) {
		return decodeReuseRequest(b, q, true)
	}
	q.Slots = q.Slots[:0]
	if err := reuseHeader(b, q, true); err != nil {
		return err
	}
	if cap(q.Slots) < int(n) {
		q.Slots = make([]abi.TaskSlot, n)
	}
	q.Slots = q.Slots[:n]
	p, l := unsafe.Pointer(unsafe.SliceData(b)), uint64(len(b))
	var bad uint64
	for i := range q.Slots {
		rec := (*[TaskSlotSize]byte)(unsafe.Add(p, ReuseRequestHeaderSize+uint64(i)*TaskSlotSize))
		t := &q.Slots[i]
		t.Task = le.Uint32(rec[0:4])
		t.Index = le.Uint32(rec[4:8])
		var b1, b2 uint64
		t.Worker, b1 = viewRef(p, l, uint64(le.Uint32(rec[8:12])), uint64(le.Uint32(rec[12:16])))
		t.Token, b2 = viewRef(p, l, uint64(le.Uint32(rec[16:20])), uint64(le.Uint32(rec[20:24])))
		t.Alive = rec[24]&1 != 0
		t.Held = rec[24]&2 != 0
		bad |= b1 | b2
	}
	if bad != 0 {
		q.Slots = q.Slots[:0]
		return errBadString
	}
	return nil
}

func decodeReuseDecision(b []byte, d *abi.ReuseDecision, view bool) error {
	d.Verdicts = d.Verdicts[:0]
	if err := header(b, TagReuseDecision, ReuseDecisionHeaderSize); err != nil {
		return err
	}
	f := le.Uint32(b[4:8])
	if f > 1 {
		return malformed("fail flag %d", f)
	}
	n := uint64(le.Uint32(b[16:20]))
	if err := fits(b, ReuseDecisionHeaderSize, n, 1); err != nil {
		return err
	}
	var ok bool
	if d.Reason, ok = str(b, b[8:16], view); !ok {
		return errBadString
	}
	d.Fail = f == 1
	d.Verdicts = resize(d.Verdicts, int(n))
	for i := range d.Verdicts {
		d.Verdicts[i] = abi.Verdict(b[ReuseDecisionHeaderSize+i])
	}
	return nil
}

// DecodeReuseDecision decodes b into d, reusing d's slice; strings are copied.
// abi.Verdict values are not checked here (validation does that).
func DecodeReuseDecision(b []byte, d *abi.ReuseDecision) error {
	return decodeReuseDecision(b, d, false)
}

// DecodeReuseDecisionView is DecodeReuseDecision with strings aliasing b.
func DecodeReuseDecisionView(b []byte, d *abi.ReuseDecision) error {
	return decodeReuseDecision(b, d, true)
}

// viewRef resolves the string reference (o, n) against the record at p of
// l > 0 bytes without a branch: bad is 1 if it lies outside the record (the
// string is then empty, its data pointer kept inside the record so the GC
// never sees a pointer past it). Small enough to be inlined: the view
// decoders call it per string field.
func viewRef(p unsafe.Pointer, l, o, n uint64) (s string, bad uint64) {
	bad = (l - (o + n)) >> 63 // o+n > l; all values < 2^33
	keep := -((-n) >> 63) & (bad - 1)
	return unsafe.String((*byte)(unsafe.Add(p, o&keep)), int(uint32(n&keep))), bad
}
