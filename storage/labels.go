package storage

import (
	"slices"
	"strconv"
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

// prefMark starts a preference's key among a run's requirements in the
// scripts: "~key=weight:value" (SubmitRequest.Prefer, GroupSettings.Prefer;
// _lib.lua parse_req). Label keys never start with '~', and it sorts after
// every one.
const prefMark = "~"

// preferLabels is ps in the scripts' form.
func preferLabels(ps []abi.Preference) []abi.Label {
	out := make([]abi.Label, len(ps))
	for i, p := range ps {
		out[i] = abi.Label{Key: prefMark + p.Key, Value: strconv.FormatUint(uint64(p.Weight), 10) + ":" + p.Value}
	}
	return out
}

// withPrefer is req followed by ps in the scripts' form.
func withPrefer(req []abi.Label, ps []abi.Preference) []abi.Label {
	if len(ps) == 0 {
		return req
	}
	return append(slices.Clip(req), preferLabels(ps)...)
}

// splitReq splits the stored form of a run's requirements into the labels
// it requires, the same-worker flag and its preferences.
func splitReq(ls []abi.Label) (req []abi.Label, same bool, prefer []abi.Preference) {
	for _, l := range ls {
		switch {
		case l.Key == sameKey:
			same = true
		case strings.HasPrefix(l.Key, prefMark):
			w, v, _ := strings.Cut(l.Value, ":")
			n, _ := strconv.ParseUint(w, 10, 32)
			prefer = append(prefer, abi.Preference{Key: l.Key[len(prefMark):], Value: v, Weight: uint32(n)})
		default:
			req = append(req, l)
		}
	}
	return req, same, prefer
}
