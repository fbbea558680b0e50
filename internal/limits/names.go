package limits

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/wasmsched/wasmsched/internal/errs"
)

// MaxNameLen is the longest accepted name.
const MaxNameLen = 128

// ValidateName checks a namespace, group, run, worker or policy name: not
// empty, at most MaxNameLen bytes, no '{', '}', '#', ',', whitespace or
// control characters. The error (ErrInvalid) names kind and value.
func ValidateName(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%s name is empty: %w", kind, errs.ErrInvalid)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s name %.20q... is %d bytes, max %d: %w", kind, s, len(s), MaxNameLen, errs.ErrInvalid)
	}
	for _, r := range s {
		switch {
		case r == '{' || r == '}' || r == '#' || r == ',':
			return fmt.Errorf("%s name %q contains %q: %w", kind, s, r, errs.ErrInvalid)
		case unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar:
			return fmt.Errorf("%s name %q contains whitespace or a control character: %w", kind, s, errs.ErrInvalid)
		}
	}
	return nil
}

// MaxWeight bounds one weight of AllocationSettings.Weights.
const MaxWeight = 1000

// ParseWeights parses "a=2,b=1".
func ParseWeights(s string) (map[string]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("weight %q: want value=weight", kv)
		}
		w, err := strconv.Atoi(v)
		if err != nil || w < 1 || w > MaxWeight {
			return nil, fmt.Errorf("weight %q: the weight must be an integer 1..%d", kv, MaxWeight)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("weight %q: value %q named twice", kv, k)
		}
		out[k] = w
	}
	return out, nil
}

// FormatWeights is the "a=2,b=1" form of w, sorted by value.
func FormatWeights(w map[string]int) string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(w[k]))
	}
	return b.String()
}

// ValidateGroups checks the groups a worker serves: at most
// MaxWorkerGroups, each a valid group name or a pattern ('*' matches any
// text, and is otherwise a name's character).
func ValidateGroups(gs []string) error {
	if len(gs) > MaxWorkerGroups {
		return fmt.Errorf("%d groups, at most %d: %w", len(gs), MaxWorkerGroups, errs.ErrInvalid)
	}
	for _, g := range gs {
		if err := ValidateName("group", g); err != nil {
			return err
		}
	}
	return nil
}
