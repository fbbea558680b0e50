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
	WorkerProfileSize            = 16 // version 5: after the parameters
	PreferHeaderSize             = 8  // version 6: n_prefer, reserved; after the profiles
	PreferenceSize               = 24 // version 6: run, weight, key, value
	SlotUsageSize                = 24
	AllocationDecisionHeaderSize = 16
)

// AllocationSnapshotSize is the length of s's encoding.
func AllocationSnapshotSize(s *abi.AllocationSnapshot) int {
	size := AllocationSnapshotHeaderSize + len(s.Runs)*AllocRunSize + len(s.Workers)*WorkerCapacitySize +
		len(s.Usage)*SlotUsageSize + len(s.Params)*LabelSize + labelBytes(s.Params)
	for i := range s.Runs {
		r := &s.Runs[i]
		size += len(r.ID) + len(r.Group) + (len(r.Labels)+len(r.Require))*LabelSize + labelBytes(r.Labels) + labelBytes(r.Require)
	}
	size += len(s.Workers)*WorkerProfileSize + PreferHeaderSize
	for i := range s.Runs {
		for _, p := range s.Runs[i].Prefer {
			size += PreferenceSize + len(p.Key) + len(p.Value)
		}
	}
	for i := range s.Workers {
		w := &s.Workers[i]
		size += len(w.Worker) + len(w.Labels)*LabelSize + labelBytes(w.Labels) + groupsLen(w.Groups)
	}
	for i := range s.Usage {
		size += len(s.Usage[i].Key) + len(s.Usage[i].Value)
	}
	return size
}

// groupsLen is the length of groups joined by ','.
func groupsLen(groups []string) int {
	n := max(len(groups)-1, 0)
	for _, g := range groups {
		n += len(g)
	}
	return n
}

// AppendAllocationSnapshot appends the encoding of s to dst. The label
// table holds each run's labels followed by its requirements, then each
// worker's labels; the worker profiles (version 5) follow the parameters,
// and the preferences (version 6) the profiles.
func AppendAllocationSnapshot(dst []byte, s *abi.AllocationSnapshot) []byte {
	nl, npref := 0, 0
	for i := range s.Runs {
		nl += len(s.Runs[i].Labels) + len(s.Runs[i].Require)
		npref += len(s.Runs[i].Prefer)
	}
	for i := range s.Workers {
		nl += len(s.Workers[i].Labels)
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
	fAt := pAt + len(s.Params)*LabelSize
	qAt := fAt + len(s.Workers)*WorkerProfileSize
	next := qAt + PreferHeaderSize + npref*PreferenceSize
	put32(rec, qAt, uint32(npref))
	qAt += PreferHeaderSize
	label := 0
	putLabels := func(ls []abi.Label) {
		for j := range ls {
			o := lAt + label*LabelSize
			next = putStr(rec, 0, o, next, ls[j].Key)
			next = putStr(rec, 0, o+8, next, ls[j].Value)
			label++
		}
	}
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
		rec[at+46], rec[at+47] = byte(len(r.Require)), byte(len(r.Require)>>8)
		putLabels(r.Labels)
		putLabels(r.Require)
		for _, p := range r.Prefer {
			put32(rec, qAt, uint32(i))
			put32(rec, qAt+4, p.Weight)
			next = putStr(rec, 0, qAt+8, next, p.Key)
			next = putStr(rec, 0, qAt+16, next, p.Value)
			qAt += PreferenceSize
		}
		at += AllocRunSize
	}
	for i := range s.Workers {
		w := &s.Workers[i]
		next = putStr(rec, 0, wAt, next, w.Worker)
		put32(rec, wAt+8, w.Slots)
		put32(rec, wAt+12, w.Free)
		wAt += WorkerCapacitySize
		put32(rec, fAt, uint32(label))
		rec[fAt+4], rec[fAt+5] = byte(len(w.Labels)), byte(len(w.Labels)>>8)
		putLabels(w.Labels)
		put64(rec, fAt+8, uint64(next)|uint64(groupsLen(w.Groups))<<32)
		for j, g := range w.Groups {
			if j > 0 {
				rec[next] = ','
				next++
			}
			next += copy(rec[next:], g)
		}
		fAt += WorkerProfileSize
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
	end := uint64(AllocationSnapshotHeaderSize) + nr*AllocRunSize + nw*(WorkerCapacitySize+WorkerProfileSize) + nu*SlotUsageSize + (nl+np)*LabelSize
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
	fAt := pAt + np*LabelSize
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
		nq := uint64(rec[46]) | uint64(rec[47])<<8
		if first+n+nq > nl {
			return malformed("allocation run %d: labels %d+%d+%d beyond the label table of %d", i, first, n, nq, nl)
		}
		r.Labels, r.Require = nil, nil
		if n > 0 {
			r.Labels = labels[first : first+n : first+n]
		}
		if nq > 0 {
			r.Require = labels[first+n : first+n+nq : first+n+nq]
		}
		at += AllocRunSize
	}
	if err := decodeAllocWorkers(b, s, wAt, fAt, nw, labels, view); err != nil {
		return err
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
	return decodePreferences(b, s, fAt+nw*WorkerProfileSize, view)
}

// decodePreferences decodes the preference table (version 6) at b[at:]
// into the runs of s, each run's consecutive (runs ascending).
func decodePreferences(b []byte, s *abi.AllocationSnapshot, at uint64, view bool) error {
	for i := range s.Runs {
		s.Runs[i].Prefer = nil
	}
	if at+PreferHeaderSize > uint64(len(b)) {
		return malformed("allocation snapshot: no preference table at %d of %d bytes", at, len(b))
	}
	n := uint64(le.Uint32(b[at : at+4]))
	at += PreferHeaderSize
	if n > uint64(len(b)) || at+n*PreferenceSize > uint64(len(b)) {
		return malformed("allocation snapshot: %d preferences do not fit %d bytes", n, len(b))
	}
	all := make([]abi.Preference, n)
	last := -1
	for j := range all {
		rec := b[at : at+PreferenceSize]
		run := int(le.Uint32(rec[0:4]))
		if run >= len(s.Runs) || run < last {
			return malformed("allocation preference %d: run %d (of %d, after %d)", j, run, len(s.Runs), last)
		}
		p := &all[j]
		p.Weight = le.Uint32(rec[4:8])
		var ok1, ok2 bool
		p.Key, ok1 = str(b, rec[8:16], view)
		p.Value, ok2 = str(b, rec[16:24], view)
		if !ok1 || !ok2 {
			return errBadString
		}
		r := &s.Runs[run]
		if r.Prefer == nil {
			r.Prefer = all[j:j:len(all)]
		}
		r.Prefer = r.Prefer[:len(r.Prefer)+1]
		last = run
		at += PreferenceSize
	}
	for i := range s.Runs { // (no run's slice may grow into the next's)
		s.Runs[i].Prefer = s.Runs[i].Prefer[:len(s.Runs[i].Prefer):len(s.Runs[i].Prefer)]
	}
	return nil
}

// decodeAllocWorkers decodes the nw workers at b[wAt:] and their profiles
// (version 5) at b[fAt:] into s.Workers; labels is the label table.
func decodeAllocWorkers(b []byte, s *abi.AllocationSnapshot, wAt, fAt, nw uint64, labels []abi.Label, view bool) error {
	nl := uint64(len(labels))
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
		prof := b[fAt : fAt+WorkerProfileSize]
		first, n := uint64(le.Uint32(prof[0:4])), uint64(prof[4])|uint64(prof[5])<<8
		if first+n > nl {
			return malformed("allocation worker %d: labels %d+%d beyond the label table of %d", i, first, n, nl)
		}
		w.Labels, w.Groups = nil, nil
		if n > 0 {
			w.Labels = labels[first : first+n : first+n]
		}
		gs, ok := str(b, prof[8:16], view)
		if !ok {
			return errBadString
		}
		for gs != "" {
			j := 0
			for j < len(gs) && gs[j] != ',' {
				j++
			}
			w.Groups = append(w.Groups, gs[:j])
			gs = gs[min(j+1, len(gs)):]
		}
		fAt += WorkerProfileSize
	}
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

// AppendAllocationDecision appends the encoding of d to dst: the order,
// then (version 5, n_place = n_order) each entry's worker, HostChooses as
// 0xFFFFFFFF. Workers shorter than Order are padded with HostChooses; when
// it names no worker, there is no placement table (n_place 0).
func AppendAllocationDecision(dst []byte, d *abi.AllocationDecision) []byte {
	np := 0
	for _, w := range d.Workers {
		if w != abi.HostChooses {
			np = len(d.Order)
			break
		}
	}
	b, base := grow(dst, AllocationDecisionHeaderSize+4*(len(d.Order)+np))
	put32(b, base, TagAllocationDecision)
	put32(b, base+4, uint32(len(d.Order)))
	put32(b, base+8, uint32(np))
	at := base + AllocationDecisionHeaderSize
	for _, i := range d.Order {
		put32(b, at, i)
		at += 4
	}
	for j := 0; j < np; j++ {
		w := abi.HostChooses
		if j < len(d.Workers) {
			w = d.Workers[j]
		}
		put32(b, at, uint32(w))
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
	d.Order, d.Workers = d.Order[:0], d.Workers[:0]
	if err := header(b, TagAllocationDecision, AllocationDecisionHeaderSize); err != nil {
		return err
	}
	n, np := uint64(le.Uint32(b[4:8])), uint64(le.Uint32(b[8:12]))
	if np != 0 && np != n {
		return malformed("allocation decision: %d workers for an order of %d (want 0 or as many)", np, n)
	}
	if err := fits(b, AllocationDecisionHeaderSize, n+np, 4); err != nil {
		return err
	}
	d.Order = resize(d.Order, int(n))
	at := AllocationDecisionHeaderSize
	for i := range d.Order {
		d.Order[i] = le.Uint32(b[at : at+4])
		at += 4
	}
	if np > 0 {
		d.Workers = resize(d.Workers, int(np))
		for i := range d.Workers {
			d.Workers[i] = int32(le.Uint32(b[at : at+4]))
			at += 4
		}
	}
	return nil
}

// AllocationPlaces reports whether the decision in b names workers
// (n_place > 0): a version 4 plugin may not.
func AllocationPlaces(b []byte) bool {
	return len(b) >= AllocationDecisionHeaderSize && le.Uint32(b[8:12]) != 0
}
