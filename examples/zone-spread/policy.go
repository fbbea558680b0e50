package main

import "github.com/wasmsched/wasmsched/abi"

// ZoneSpread gives slots in launch order and spreads the runs across the
// values of a worker label (the parameter zone_label, default "zone"):
// each run goes to the zone with the fewest slots in use (counting the
// runs this decision placed), ties to the zone that sorts first, and in
// it to the worker with the most free slots. Only workers that take the
// run (serve its group, carry its requirements) and have its slots free
// count; a worker without the label is the zone "". A run no worker can
// take now is left to the host (it waits, or fits when slots free).
type ZoneSpread struct{}

// DefaultZoneLabel is the worker label whose values are the zones.
const DefaultZoneLabel = "zone"

// The decision's scratch, reused across calls: no allocation on the hot
// path once they have grown. Zones are numbered (zoneOf: each worker's),
// so the inner loop compares integers, not strings.
var (
	free   []uint32 // each worker's slots not yet named
	zoneOf []int    // each worker's zone
	used   []uint32 // each zone's slots in use, counting this decision's
	names  []string // each zone's name
)

func (ZoneSpread) DecideAllocation(s *abi.AllocationSnapshot, d *abi.AllocationDecision) {
	label, ok := s.Param("zone_label")
	if !ok || label == "" {
		label = DefaultZoneLabel
	}
	free, zoneOf, used, names = free[:0], zoneOf[:0], used[:0], names[:0]
	for i := range s.Workers {
		w := &s.Workers[i]
		zone := abi.LabelValue(w.Labels, label)
		z := 0
		for z < len(names) && names[z] != zone {
			z++
		}
		if z == len(names) {
			names, used = append(names, zone), append(used, 0)
		}
		free, zoneOf = append(free, w.Free), append(zoneOf, z)
		used[z] += w.Slots - w.Free
	}
	for i := range s.Runs {
		r := &s.Runs[i]
		k := max(r.Slots, 1)
		best := abi.HostChooses
		for j := range s.Workers {
			if free[j] < k || best >= 0 && !better(j, int(best)) || !s.Workers[j].Takes(r) {
				continue
			}
			best = int32(j)
		}
		if best >= 0 {
			free[best] -= k
			used[zoneOf[best]] += k
		}
		d.Place(uint32(i), best)
	}
}

// better reports whether worker a is a better place than worker b: its
// zone has fewer slots in use (then sorts first), or it is in the same
// zone with more free slots.
func better(a, b int) bool {
	za, zb := zoneOf[a], zoneOf[b]
	if za != zb {
		if used[za] != used[zb] {
			return used[za] < used[zb]
		}
		return names[za] < names[zb]
	}
	return free[a] > free[b]
}
