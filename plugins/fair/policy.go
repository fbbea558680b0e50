package main

import (
	"container/heap"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
)

// policy shares the slots across the values of one label (the parameter
// fair_label; without it, across groups) in proportion to their weights
// (the parameter weights, "value=weight,..."; a value not named weighs 1;
// runs without the label share as the value ""). Water filling: the next
// run to try is the oldest waiting run of the value whose share after
// taking it, (slots in use + ordered this pass + the run's slots) / weight,
// is smallest (the older head run first among equals): the largest share
// stays as small as it can.
type policy struct{}

type share struct {
	value  string
	weight float64
	used   float64  // slots in use plus ordered this pass
	runs   []uint32 // its runs in the snapshot, oldest first
	next   float64  // the slots of runs[0]
}

type byShare []*share

func (h byShare) Len() int { return len(h) }
func (h byShare) Less(i, j int) bool {
	a, b := (h[i].used+h[i].next)/h[i].weight, (h[j].used+h[j].next)/h[j].weight
	if a != b {
		return a < b
	}
	return h[i].runs[0] < h[j].runs[0]
}
func (h byShare) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *byShare) Push(x any)   { *h = append(*h, x.(*share)) }
func (h *byShare) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// weights parses "a=2,b=1"; a malformed entry is ignored (weight 1).
func weights(s string) map[string]float64 {
	out := map[string]float64{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		if w, err := strconv.ParseFloat(v, 64); err == nil && w > 0 {
			out[k] = w
		}
	}
	return out
}

func labelOf(ls []abi.Label, key string) string {
	for i := range ls {
		if ls[i].Key == key {
			return ls[i].Value
		}
	}
	return ""
}

func (policy) DecideAllocation(s *abi.AllocationSnapshot, d *abi.AllocationDecision) {
	label, byLabel := s.Param(abi.ParamFairLabel)
	byLabel = byLabel && label != ""
	ws, _ := s.Param(abi.ParamWeights)
	w := weights(ws)
	shares := map[string]*share{}
	var order []*share
	for i := range s.Runs {
		r := &s.Runs[i]
		v := r.Group
		if byLabel {
			v = labelOf(r.Labels, label)
		}
		sh := shares[v]
		if sh == nil {
			sh = &share{value: v, weight: 1}
			if x, ok := w[v]; ok {
				sh.weight = x
			}
			shares[v] = sh
			order = append(order, sh)
		}
		sh.runs = append(sh.runs, uint32(i))
	}
	key := ""
	if byLabel {
		key = label
	}
	for i := range s.Usage {
		u := &s.Usage[i]
		if u.Key == key {
			if sh := shares[u.Value]; sh != nil {
				sh.used = float64(u.Slots)
			}
		}
	}
	slots := func(i uint32) float64 { return float64(max(s.Runs[i].Slots, 1)) }
	for _, sh := range order {
		sh.next = slots(sh.runs[0])
	}
	h := byShare(order)
	heap.Init(&h)
	for h.Len() > 0 {
		sh := h[0]
		i := sh.runs[0]
		d.Order = append(d.Order, i)
		sh.runs = sh.runs[1:]
		sh.used += sh.next
		if len(sh.runs) > 0 {
			sh.next = slots(sh.runs[0])
		}
		if len(sh.runs) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
}
