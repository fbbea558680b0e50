package limits

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
)

// Labels and parameters (ABI v4): a run carries up to abi.MaxLabels
// labels, a group up to abi.MaxParams policy parameters, each a key of 1
// to abi.MaxKeyLen bytes of [a-z0-9_.-] and a value of at most
// abi.MaxValueLen bytes with no control character.

// ValidLabel checks one label against the bounds.
func ValidLabel(key, value string) error { return validPair("label", key, value) }

// validPair checks a key=value pair of what ("label", "parameter").
func validPair(what, key, value string) error {
	if key == "" || len(key) > abi.MaxKeyLen {
		return fmt.Errorf("%s %q: the key must be 1 to %d bytes", what, clip(key), abi.MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("%s %q: the key may hold only a-z, 0-9, '_', '.' and '-' (byte %d is %q)", what, clip(key), i, c)
		}
	}
	if len(value) > abi.MaxValueLen {
		return fmt.Errorf("%s %s: the value is %d bytes, at most %d", what, key, len(value), abi.MaxValueLen)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s %s: the value holds a control character (byte %d)", what, key, i)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// ParseLabel parses "key=value" as a label (the value may be empty).
func ParseLabel(s string) (abi.Label, error) { return parsePair("label", s) }

// ParseParam parses "key=value" as a policy parameter.
func ParseParam(s string) (abi.Label, error) { return parsePair("parameter", s) }

func parsePair(what, s string) (abi.Label, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return abi.Label{}, fmt.Errorf("%s %q: want key=value", what, clip(s))
	}
	if err := validPair(what, k, v); err != nil {
		return abi.Label{}, err
	}
	return abi.Label{Key: k, Value: v}, nil
}

// NormalizeLabels checks ls (what: "labels" or "params", at most max of
// them, every key once) and returns them sorted by key.
func NormalizeLabels(what string, ls []abi.Label, max int) ([]abi.Label, error) {
	if len(ls) > max {
		return nil, fmt.Errorf("%d %s, at most %d", len(ls), what, max)
	}
	out := slices.Clone(ls)
	pair := "label"
	switch what {
	case "params":
		pair = "parameter"
	case "requirements":
		pair = "requirement"
	}
	for _, l := range out {
		if err := validPair(pair, l.Key, l.Value); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b abi.Label) int { return strings.Compare(a.Key, b.Key) })
	for i := 1; i < len(out); i++ {
		if out[i].Key == out[i-1].Key {
			return nil, fmt.Errorf("%s: key %s given twice", what, out[i].Key)
		}
	}
	return out, nil
}

// LabelsMap returns ls as a map (nil when empty), for records.
func LabelsMap(ls []abi.Label) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Key] = l.Value
	}
	return m
}

// LabelsFromMap returns m's entries as labels sorted by key.
func LabelsFromMap(m map[string]string) []abi.Label {
	out := make([]abi.Label, 0, len(m))
	for k, v := range m {
		out = append(out, abi.Label{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b abi.Label) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// ParsePreference parses "key=value:weight" (the weight an integer 1 to
// MaxWeight after the last ':'; "key=value" weighs 1). A value that ends
// in ":digits" itself must be given a weight.
func ParsePreference(s string) (abi.Preference, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return abi.Preference{}, fmt.Errorf("preference %q: want key=value[:weight]", clip(s))
	}
	w := uint64(1)
	if i := strings.LastIndexByte(v, ':'); i >= 0 && i+1 < len(v) && allDigits(v[i+1:]) {
		n, err := strconv.ParseUint(v[i+1:], 10, 32)
		if err != nil || n < 1 || n > MaxWeight {
			return abi.Preference{}, fmt.Errorf("preference %q: the weight must be an integer 1..%d", clip(s), MaxWeight)
		}
		v, w = v[:i], n
	}
	if err := validPair("preference", k, v); err != nil {
		return abi.Preference{}, err
	}
	return abi.Preference{Key: k, Value: v, Weight: uint32(w)}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// NormalizePreferences checks ps (at most abi.MaxLabels, every key once,
// weights 1 to MaxWeight) and returns them sorted by key.
func NormalizePreferences(ps []abi.Preference) ([]abi.Preference, error) {
	if len(ps) > abi.MaxLabels {
		return nil, fmt.Errorf("%d preferences, at most %d", len(ps), abi.MaxLabels)
	}
	out := slices.Clone(ps)
	for _, p := range out {
		if err := validPair("preference", p.Key, p.Value); err != nil {
			return nil, err
		}
		if p.Weight < 1 || p.Weight > MaxWeight {
			return nil, fmt.Errorf("preference %s=%s: weight %d, want 1..%d", p.Key, clip(p.Value), p.Weight, MaxWeight)
		}
	}
	slices.SortFunc(out, func(a, b abi.Preference) int { return strings.Compare(a.Key, b.Key) })
	for i := 1; i < len(out); i++ {
		if out[i].Key == out[i-1].Key {
			return nil, fmt.Errorf("preferences: key %s given twice", out[i].Key)
		}
	}
	return out, nil
}

// FormatPreference is p as ParsePreference reads it ("key=value:weight").
func FormatPreference(p abi.Preference) string {
	return p.Key + "=" + p.Value + ":" + strconv.FormatUint(uint64(p.Weight), 10)
}
