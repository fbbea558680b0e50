package abicodec

import (
	"unsafe"

	"github.com/wasmsched/wasmsched/abi"
)

// The serial snapshot of ABI v4 (tag TagSerialSnapshot4): the version 3
// header, three counts, then 64-byte runs, a label table, the group's
// parameters and its recent launches. ABI.md "Serial snapshot, version 4".
const TagSerialSnapshot4 uint32 = 5

// Sizes of the version 4 records, in bytes.
const (
	SerialSnapshot4HeaderSize = 64
	Run4Size                  = 64
	LabelSize                 = 16 // a label or a parameter: str key, str value
	LaunchSize                = 16 // i64 at, u32 first label, u32 labels
)

// SerialSnapshot4Size is the length of s's version 4 encoding.
func SerialSnapshot4Size(s *abi.SerialSnapshot) int {
	runs := len(s.Active) + len(s.Waiting)
	labels := 0
	size := SerialSnapshot4HeaderSize + runs*Run4Size + len(s.Params)*LabelSize + len(s.Launches)*LaunchSize +
		len(s.Group) + len(s.Policy)
	for _, rs := range [2][]abi.Run{s.Active, s.Waiting} {
		for i := range rs {
			size += len(rs[i].ID)
			labels += len(rs[i].Labels)
			size += labelBytes(rs[i].Labels)
		}
	}
	for i := range s.Launches {
		labels += len(s.Launches[i].Labels)
		size += labelBytes(s.Launches[i].Labels)
	}
	return size + labels*LabelSize + labelBytes(s.Params)
}

func labelBytes(ls []abi.Label) int {
	n := 0
	for i := range ls {
		n += len(ls[i].Key) + len(ls[i].Value)
	}
	return n
}

// AppendSerialSnapshot4 appends the version 4 encoding of s to dst.
func AppendSerialSnapshot4(dst []byte, s *abi.SerialSnapshot) []byte {
	b, base := grow(dst, SerialSnapshot4Size(s))
	PutSerialSnapshot4(b[base:], s)
	return b
}

// AppendSerialSnapshotFor appends the encoding of s that a plugin of ABI
// version v reads: version 4's for v >= 4, else the older one (whose
// readers ignore the fields version 4 adds).
func AppendSerialSnapshotFor(dst []byte, s *abi.SerialSnapshot, v uint32) []byte {
	if v >= 4 {
		return AppendSerialSnapshot4(dst, s)
	}
	return AppendSerialSnapshot(dst, s)
}

// PutSerialSnapshot4 encodes s into b, which must be SerialSnapshot4Size(s)
// bytes long; every byte is written (PutSerialSnapshot).
func PutSerialSnapshot4(b []byte, s *abi.SerialSnapshot) {
	nr := len(s.Active) + len(s.Waiting)
	nl := 0
	for _, rs := range [2][]abi.Run{s.Active, s.Waiting} {
		for i := range rs {
			nl += len(rs[i].Labels)
		}
	}
	for i := range s.Launches {
		nl += len(s.Launches[i].Labels)
	}
	labAt := SerialSnapshot4HeaderSize + nr*Run4Size
	parAt := labAt + nl*LabelSize
	lauAt := parAt + len(s.Params)*LabelSize
	next := lauAt + len(s.Launches)*LaunchSize
	_ = b[next-1]
	next = putSnapshotHeader(b, TagSerialSnapshot4, next, s)
	put32(b, 48, uint32(nl))
	put32(b, 52, uint32(len(s.Params)))
	put32(b, 56, uint32(len(s.Launches)))
	put32(b, 60, 0)
	at, first := SerialSnapshot4HeaderSize, 0
	putLabels := func(ls []abi.Label) {
		for i := range ls {
			next = putStr(b, 0, labAt+first*LabelSize, next, ls[i].Key)
			next = putStr(b, 0, labAt+first*LabelSize+8, next, ls[i].Value)
			first++
		}
	}
	for _, rs := range [2][]abi.Run{s.Active, s.Waiting} {
		for i := range rs {
			r := &rs[i]
			next = putRun(b, at, next, r)
			rec := b[at : at+Run4Size]
			le.PutUint16(rec[42:44], uint16(len(r.Labels)))
			le.PutUint32(rec[44:48], uint32(first))
			le.PutUint64(rec[48:56], uint64(r.NotBefore))
			le.PutUint32(rec[56:60], r.Attempt)
			le.PutUint32(rec[60:64], r.MaxAttempts)
			putLabels(r.Labels)
			at += Run4Size
		}
	}
	for i := range s.Launches {
		l := &s.Launches[i]
		rec := b[lauAt+i*LaunchSize : lauAt+(i+1)*LaunchSize]
		le.PutUint64(rec[0:8], uint64(l.At))
		le.PutUint32(rec[8:12], uint32(first))
		le.PutUint32(rec[12:16], uint32(len(l.Labels)))
		putLabels(l.Labels)
	}
	for i := range s.Params {
		next = putStr(b, 0, parAt+i*LabelSize, next, s.Params[i].Key)
		next = putStr(b, 0, parAt+i*LabelSize+8, next, s.Params[i].Value)
	}
}

// decodeSerialSnapshot4 decodes a version 4 snapshot (tag checked by the
// caller, len(b) >= the header). The label table is one array: the
// parameters first, then the labels of runs and launches, which slice it
// (s.Params keeps the array's capacity for the next decode).
func decodeSerialSnapshot4(b []byte, s *abi.SerialSnapshot, view bool) error {
	h := b[:SerialSnapshot4HeaderSize]
	na, nw := uint64(le.Uint32(h[32:36])), uint64(le.Uint32(h[36:40]))
	nl, np, nh := uint64(le.Uint32(h[48:52])), uint64(le.Uint32(h[52:56])), uint64(le.Uint32(h[56:60]))
	nr := na + nw
	labAt := SerialSnapshot4HeaderSize + nr*Run4Size
	parAt := labAt + nl*LabelSize
	lauAt := parAt + np*LabelSize
	if nr > uint64(len(b)) || nl > uint64(len(b)) || np > uint64(len(b)) || nh > uint64(len(b)) ||
		lauAt+nh*LaunchSize > uint64(len(b)) {
		return malformed("%d runs, %d labels, %d params, %d launches beyond %d bytes", nr, nl, np, nh, len(b))
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
	tab := s.Params[:cap(s.Params)]
	tab = resize(tab, int(np+nl))
	for i := range tab {
		at := parAt + uint64(i)*LabelSize // the parameters, then the labels
		if uint64(i) >= np {
			at = labAt + (uint64(i)-np)*LabelSize
		}
		var ok1, ok2 bool
		tab[i].Key, ok1 = str(b, b[at:at+8], view)
		tab[i].Value, ok2 = str(b, b[at+8:at+16], view)
		if !ok1 || !ok2 {
			return errBadString
		}
	}
	s.Params = tab[:np]
	labels := tab[np:]
	slice := func(first, n uint64) ([]abi.Label, bool) {
		if first+n > nl {
			return nil, false
		}
		if n == 0 {
			return nil, true
		}
		return labels[first : first+n : first+n], true
	}
	s.Active = resize(s.Active, int(na))
	s.Waiting = resize(s.Waiting, int(nw))
	at := uint64(SerialSnapshot4HeaderSize)
	for _, rs := range [2][]abi.Run{s.Active, s.Waiting} {
		for i := range rs {
			r := &rs[i]
			if !decodeRun(b, b[at:], r, view) {
				return errBadString
			}
			rec := b[at : at+Run4Size]
			var ok bool
			if r.Labels, ok = slice(uint64(le.Uint32(rec[44:48])), uint64(le.Uint16(rec[42:44]))); !ok {
				return malformed("run %d: labels beyond the label table", i)
			}
			r.NotBefore = int64(le.Uint64(rec[48:56]))
			r.Attempt, r.MaxAttempts = le.Uint32(rec[56:60]), le.Uint32(rec[60:64])
			at += Run4Size
		}
	}
	s.Launches = resize(s.Launches, int(nh))
	for i := range s.Launches {
		rec := b[lauAt+uint64(i)*LaunchSize:][:LaunchSize]
		l := &s.Launches[i]
		l.At = int64(le.Uint64(rec[0:8]))
		var ok bool
		if l.Labels, ok = slice(uint64(le.Uint32(rec[8:12])), uint64(le.Uint32(rec[12:16]))); !ok {
			return malformed("launch %d: labels beyond the label table", i)
		}
	}
	return nil
}

// viewSerialSnapshot4 is DecodeSerialSnapshotView of a version 4 record
// (tag checked, len(b) >= the header): the same results as
// decodeSerialSnapshot4 with view (the fuzzer checks), written like the
// version 3 view decoder for a Go wasm guest: one size check, records
// read through array pointers, string references checked without a
// branch and the verdict taken once.
func viewSerialSnapshot4(b []byte, s *abi.SerialSnapshot) error {
	h := (*[SerialSnapshot4HeaderSize]byte)(b)
	na, nw := uint64(le.Uint32(h[32:36])), uint64(le.Uint32(h[36:40]))
	nl, np, nh := uint64(le.Uint32(h[48:52])), uint64(le.Uint32(h[52:56])), uint64(le.Uint32(h[56:60]))
	l := uint64(len(b))
	if na > l || nw > l || nl > l || np > l || nh > l ||
		SerialSnapshot4HeaderSize+(na+nw)*Run4Size+(nl+np+nh)*LabelSize > l {
		return decodeSerialSnapshot4(b, s, true) // for the error
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	s.MaxActive = le.Uint32(h[4:8])
	s.Now = int64(le.Uint64(h[8:16]))
	s.WaitingTotal, s.WaitingOldest = le.Uint32(h[40:44]), le.Uint32(h[44:48])
	var bad, b1, b2 uint64
	s.Group, b1 = viewRef(p, l, uint64(le.Uint32(h[16:20])), uint64(le.Uint32(h[20:24])))
	s.Policy, b2 = viewRef(p, l, uint64(le.Uint32(h[24:28])), uint64(le.Uint32(h[28:32])))
	bad |= b1 | b2
	labAt := SerialSnapshot4HeaderSize + (na+nw)*Run4Size
	parAt := labAt + nl*LabelSize
	lauAt := parAt + np*LabelSize
	tab := s.Params[:cap(s.Params)]
	if uint64(cap(tab)) < np+nl {
		tab = make([]abi.Label, np+nl)
	}
	tab = tab[:np+nl]
	viewLabels := func(at uint64, dst []abi.Label) uint64 {
		var bad uint64
		for i := range dst {
			rec := (*[LabelSize]byte)(unsafe.Add(p, at+uint64(i)*LabelSize))
			var b1, b2 uint64
			dst[i].Key, b1 = viewRef(p, l, uint64(le.Uint32(rec[0:4])), uint64(le.Uint32(rec[4:8])))
			dst[i].Value, b2 = viewRef(p, l, uint64(le.Uint32(rec[8:12])), uint64(le.Uint32(rec[12:16])))
			bad |= b1 | b2
		}
		return bad
	}
	bad |= viewLabels(parAt, tab[:np]) | viewLabels(labAt, tab[np:])
	s.Params = tab[:np]
	labels := tab[np:]
	if cap(s.Active) < int(na) {
		s.Active = make([]abi.Run, na)
	}
	if cap(s.Waiting) < int(nw) {
		s.Waiting = make([]abi.Run, nw)
	}
	s.Active, s.Waiting = s.Active[:na], s.Waiting[:nw]
	at := uint64(SerialSnapshot4HeaderSize)
	for _, rs := range [2][]abi.Run{s.Active, s.Waiting} {
		for i := range rs {
			rec := (*[Run4Size]byte)(unsafe.Add(p, at))
			r := &rs[i]
			r.Seq = le.Uint64(rec[0:8])
			r.SubmittedAt = int64(le.Uint64(rec[8:16]))
			r.StartedAt = int64(le.Uint64(rec[16:24]))
			r.Priority = int32(le.Uint32(rec[24:28]))
			r.Slots = le.Uint32(rec[28:32])
			r.State = abi.State(rec[40])
			r.NotBefore = int64(le.Uint64(rec[48:56]))
			r.Attempt, r.MaxAttempts = le.Uint32(rec[56:60]), le.Uint32(rec[60:64])
			var b1 uint64
			r.ID, b1 = viewRef(p, l, uint64(le.Uint32(rec[32:36])), uint64(le.Uint32(rec[36:40])))
			bad |= b1
			first, n := uint64(le.Uint32(rec[44:48])), uint64(le.Uint16(rec[42:44]))
			switch {
			case first+n > nl:
				return malformed("run %d: labels beyond the label table", i)
			case n == 0:
				if r.Labels != nil { // no pointer store (a write barrier) when already nil
					r.Labels = nil
				}
			default:
				r.Labels = labels[first : first+n : first+n]
			}
			at += Run4Size
		}
	}
	if cap(s.Launches) < int(nh) {
		s.Launches = make([]abi.Launch, nh)
	}
	s.Launches = s.Launches[:nh]
	for i := range s.Launches {
		rec := (*[LaunchSize]byte)(unsafe.Add(p, lauAt+uint64(i)*LaunchSize))
		ln := &s.Launches[i]
		ln.At = int64(le.Uint64(rec[0:8]))
		first, n := uint64(le.Uint32(rec[8:12])), uint64(le.Uint32(rec[12:16]))
		switch {
		case first+n > nl:
			return malformed("launch %d: labels beyond the label table", i)
		case n == 0:
			ln.Labels = nil
		default:
			ln.Labels = labels[first : first+n : first+n]
		}
	}
	if bad != 0 {
		return errBadString
	}
	return nil
}

// viewLabelsOK is a compile-time check that abi.Label stays two strings
// (the label table is decoded in place of them).
var _ = [1]struct{}{}[unsafe.Sizeof(abi.Label{})-2*unsafe.Sizeof("")]
