package abicodec

import (
	"github.com/wasmsched/wasmsched/abi"
)

// Allocation records (kind 3). ABI.md "Allocation snapshot".
const (
	TagAllocationSnapshot uint32 = 6
	TagAllocationDecision uint32 = 7
)

// Sizes of the allocation records, in bytes.
const (
	AllocationSnapshotHeaderSize = 48
	AllocRunSize                 = 48
	WorkerCapacitySize           = 16
	SlotUsageSize                = 24
	AllocationDecisionHeaderSize = 16
)

// AllocationSnapshotSize is the length of s's encoding.
func AllocationSnapshotSize(s *abi.AllocationSnapshot) int {
	size := AllocationSnapshotHeaderSize + len(s.Runs)*AllocRunSize + len(s.Workers)*WorkerCapacitySize +
		len(s.Usage)*SlotUsageSize + len(s.Params)*LabelSize + labelBytes(s.Params)
	for i := range s.Runs {
		r := &s.Runs[i]
		size += len(r.ID) + len(r.Group) + len(r.Labels)*LabelSize + labelBytes(r.Labels)
	}
	for i := range s.Workers {
		size += len(s.Workers[i].Worker)
	}
	for i := range s.Usage {
		size += len(s.Usage[i].Key) + len(s.Usage[i].Value)
	}
	return size
}

// AppendAllocationSnapshot appends the encoding of s to dst.
func AppendAllocationSnapshot(dst []byte, s *abi.AllocationSnapshot) []byte {
	nl := 0
	for i := range s.Runs {
		nl += len(s.Runs[i].Labels)
	}
	b, base := grow(dst, AllocationSnapshotSize(s))
	rec := b[base:]
	put32(rec, 0, TagAllocationSnapshot)
	put32(rec, 4, uint32(len(s.Runs)))
	put64(rec, 8, uint64(s.Now))
	put32(rec, 16, s.Free)
	put32(rec, 20, s.Total)
	put32(rec, 24, s.LaunchedTotal)
	put32(rec, 28, s.Oldest)
	put32(rec, 32, uint32(len(s.Workers)))
	put32(rec, 36, uint32(len(s.Usage)))
	put32(rec, 40, uint32(nl))
	put32(rec, 44, uint32(len(s.Params)))
	at := AllocationSnapshotHeaderSize
	wAt := at + len(s.Runs)*AllocRunSize
	uAt := wAt + len(s.Workers)*WorkerCapacitySize
	lAt := uAt + len(s.Usage)*SlotUsageSize
	pAt := lAt + nl*LabelSize
	next := pAt + len(s.Params)*LabelSize
	label := 0
	for i := range s.Runs {
		r := &s.Runs[i]
		put64(rec, at, r.Seq)
		put64(rec, at+8, uint64(r.LaunchedAt))
		put32(rec, at+16, uint32(r.Priority))
		put32(rec, at+20, r.Slots)
		next = putStr(rec, 0, at+24, next, r.ID)
		next = putStr(rec, 0, at+32, next, r.Group)
		put32(rec, at+40, uint32(label))
		rec[at+44], rec[at+45] = byte(len(r.Labels)), byte(len(r.Labels)>>8)
		for j := range r.Labels {
			o := lAt + label*LabelSize
			next = putStr(rec, 0, o, next, r.Labels[j].Key)
			next = putStr(rec, 0, o+8, next, r.Labels[j].Value)
			label++
		}
		at += AllocRunSize
	}
	for i := range s.Workers {
		w := &s.Workers[i]
		next = putStr(rec, 0, wAt, next, w.Worker)
		put32(rec, wAt+8, w.Slots)
		put32(rec, wAt+12, w.Free)
		wAt += WorkerCapacitySize
	}
	for i := range s.Usage {
		u := &s.Usage[i]
		next = putStr(rec, 0, uAt, next, u.Key)
		next = putStr(rec, 0, uAt+8, next, u.Value)
		put32(rec, uAt+16, u.Slots)
		put32(rec, uAt+20, u.Runs)
		uAt += SlotUsageSize
	}
	for i := range s.Params {
		next = putStr(rec, 0, pAt, next, s.Params[i].Key)
		next = putStr(rec, 0, pAt+8, next, s.Params[i].Value)
		pAt += LabelSize
	}
	return b
}

// DecodeAllocationSnapshot decodes b into s, reusing s's slices; strings
// are copied.
func DecodeAllocationSnapshot(b []byte, s *abi.AllocationSnapshot) error {
	return decodeAllocationSnapshot(b, s, false)
}

// DecodeAllocationSnapshotView is DecodeAllocationSnapshot with strings
// aliasing b (the guest SDK's form: valid while b is).
func DecodeAllocationSnapshotView(b []byte, s *abi.AllocationSnapshot) error {
	return decodeAllocationSnapshot(b, s, true)
}

func decodeAllocationSnapshot(b []byte, s *abi.AllocationSnapshot, view bool) error {
	s.Runs, s.Workers, s.Usage, s.Params = s.Runs[:0], s.Workers[:0], s.Usage[:0], s.Params[:0]
	if err := header(b, TagAllocationSnapshot, AllocationSnapshotHeaderSize); err != nil {
		return err
	}
	nr, nw, nu := uint64(le.Uint32(b[4:8])), uint64(le.Uint32(b[32:36])), uint64(le.Uint32(b[36:40]))
	nl, np := uint64(le.Uint32(b[40:44])), uint64(le.Uint32(b[44:48]))
	end := uint64(AllocationSnapshotHeaderSize) + nr*AllocRunSize + nw*WorkerCapacitySize + nu*SlotUsageSize + (nl+np)*LabelSize
	if end > uint64(len(b)) {
		return malformed("allocation snapshot: %d runs, %d workers, %d usage, %d labels, %d params do not fit %d bytes", nr, nw, nu, nl, np, len(b))
	}
	s.Now = int64(le.Uint64(b[8:16]))
	s.Free, s.Total = le.Uint32(b[16:20]), le.Uint32(b[20:24])
	s.LaunchedTotal, s.Oldest = le.Uint32(b[24:28]), le.Uint32(b[28:32])
	at := uint64(AllocationSnapshotHeaderSize)
	wAt := at + nr*AllocRunSize
	uAt := wAt + nw*WorkerCapacitySize
	lAt := uAt + nu*SlotUsageSize
	pAt := lAt + nl*LabelSize
	labels, err := decodeLabelTable(b, lAt, nl, view)
	if err != nil {
		return err
	}
	s.Runs = resize(s.Runs, int(nr))
	for i := range s.Runs {
		rec := b[at : at+AllocRunSize]
		r := &s.Runs[i]
		r.Seq = le.Uint64(rec[0:8])
		r.LaunchedAt = int64(le.Uint64(rec[8:16]))
		r.Priority = int32(le.Uint32(rec[16:20]))
		r.Slots = le.Uint32(rec[20:24])
		var ok1, ok2 bool
		r.ID, ok1 = str(b, rec[24:32], view)
		r.Group, ok2 = str(b, rec[32:40], view)
		if !ok1 || !ok2 {
			return errBadString
		}
		first, n := uint64(le.Uint32(rec[40:44])), uint64(rec[44])|uint64(rec[45])<<8
		if first+n > nl {
			return malformed("allocation run %d: labels %d+%d beyond the label table of %d", i, first, n, nl)
		}
		r.Labels = nil
		if n > 0 {
			r.Labels = labels[first : first+n : first+n]
		}
		at += AllocRunSize
	}
	s.Workers = resize(s.Workers, int(nw))
	for i := range s.Workers {
		rec := b[wAt : wAt+WorkerCapacitySize]
		w := &s.Workers[i]
		var ok bool
		if w.Worker, ok = str(b, rec[0:8], view); !ok {
			return errBadString
		}
		w.Slots, w.Free = le.Uint32(rec[8:12]), le.Uint32(rec[12:16])
		wAt += WorkerCapacitySize
	}
	s.Usage = resize(s.Usage, int(nu))
	for i := range s.Usage {
		rec := b[uAt : uAt+SlotUsageSize]
		u := &s.Usage[i]
		var ok1, ok2 bool
		u.Key, ok1 = str(b, rec[0:8], view)
		u.Value, ok2 = str(b, rec[8:16], view)
		if !ok1 || !ok2 {
			return errBadString
		}
		u.Slots, u.Runs = le.Uint32(rec[16:20]), le.Uint32(rec[20:24])
		uAt += SlotUsageSize
	}
	params, err := decodeLabelTable(b, pAt, np, view)
	if err != nil {
		return err
	}
	s.Params = append(s.Params, params...)
	return nil
}

// decodeLabelTable decodes n labels at b[at:] (checked to fit).
func decodeLabelTable(b []byte, at, n uint64, view bool) ([]abi.Label, error) {
	if n == 0 {
		return nil, nil
	}
	out := make([]abi.Label, n)
	for i := range out {
		rec := b[at : at+LabelSize]
		var ok1, ok2 bool
		out[i].Key, ok1 = str(b, rec[0:8], view)
		out[i].Value, ok2 = str(b, rec[8:16], view)
		if !ok1 || !ok2 {
			return nil, errBadString
		}
		at += LabelSize
	}
	return out, nil
}

// AppendAllocationDecision appends the encoding of d to dst.
func AppendAllocationDecision(dst []byte, d *abi.AllocationDecision) []byte {
	b, base := grow(dst, AllocationDecisionHeaderSize+4*len(d.Order))
	put32(b, base, TagAllocationDecision)
	put32(b, base+4, uint32(len(d.Order)))
	at := base + AllocationDecisionHeaderSize
	for _, i := range d.Order {
		put32(b, at, i)
		at += 4
	}
	return b
}

// AllocationOrderLen is the order length a decision claims (0 if b is too
// short to say): the host checks it against the snapshot before decoding.
func AllocationOrderLen(b []byte) uint64 {
	if len(b) < AllocationDecisionHeaderSize {
		return 0
	}
	return uint64(le.Uint32(b[4:8]))
}

// DecodeAllocationDecision decodes b into d, reusing d's slice. Indices are
// not checked against a snapshot here (validation does that).
func DecodeAllocationDecision(b []byte, d *abi.AllocationDecision) error {
	d.Order = d.Order[:0]
	if err := header(b, TagAllocationDecision, AllocationDecisionHeaderSize); err != nil {
		return err
	}
	n := uint64(le.Uint32(b[4:8]))
	if err := fits(b, AllocationDecisionHeaderSize, n, 4); err != nil {
		return err
	}
	d.Order = resize(d.Order, int(n))
	at := AllocationDecisionHeaderSize
	for i := range d.Order {
		d.Order[i] = le.Uint32(b[at : at+4])
		at += 4
	}
	return nil
}
