package storage

import (
	"strings"

	"github.com/wasmsched/wasmsched/abi"
)

// Labels and parameters (ABI v4): a run carries up to abi.MaxLabels
// labels, a group up to abi.MaxParams policy parameters, each a key of 1
// to abi.MaxKeyLen bytes of [a-z0-9_.-] and a value of at most
// abi.MaxValueLen bytes with no control character. Stored sorted by key in
// one hash field, "k=v" pairs 0x1d-separated (labelSep: the scripts'
// records use 0x1e and 0x1f around them); the waiting-run index carries a
// run's labels too, so a snapshot reads them with the run.

const labelSep = "\x1d"

// encodeLabels is the stored form of sorted, valid labels.
func encodeLabels(ls []abi.Label) string {
	if len(ls) == 0 {
		return ""
	}
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteString(labelSep)
		}
		b.WriteString(l.Key)
		b.WriteByte('=')
		b.WriteString(l.Value)
	}
	return b.String()
}

// decodeLabels parses the stored form (nil for ""; a malformed pair is
// skipped).
func decodeLabels(s string) []abi.Label {
	if s == "" {
		return nil
	}
	out := make([]abi.Label, 0, strings.Count(s, labelSep)+1)
	for p := range strings.SplitSeq(s, labelSep) {
		if k, v, ok := strings.Cut(p, "="); ok && k != "" {
			out = append(out, abi.Label{Key: k, Value: v})
		}
	}
	return out
}

// Label returns the value of r's label key ("" if it has none).
func (r *Run) Label(key string) string { return abi.LabelValue(r.Labels, key) }

// sameKey is the requirement flag of a run whose slots all go to one worker
// (SubmitRequest.SameWorker, GroupSettings.SameWorker): "@same=1" among its
// requirements in the scripts (_lib.lua parse_req), never a label (label
// keys do not start with '@').
const sameKey = "@same"

// withSame is req with the same-worker flag first when same (it sorts
// before every label key).
func withSame(req []abi.Label, same bool) []abi.Label {
	if !same {
		return req
	}
	return append([]abi.Label{{Key: sameKey, Value: "1"}}, req...)
}

// splitSame is req without the same-worker flag, and whether it held it.
func splitSame(req []abi.Label) ([]abi.Label, bool) {
	for i, l := range req {
		if l.Key == sameKey {
			out := append(req[:i:i], req[i+1:]...)
			if len(out) == 0 {
				out = nil
			}
			return out, true
		}
	}
	return req, false
}
