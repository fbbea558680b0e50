package storage

import (
	"strings"
	"testing"
)

// TestLibFor: each script carries the helpers it calls (and theirs), no
// other: apply places runs (claim_slot -> new_token), expire calls none.
func TestLibFor(t *testing.T) {
	has := func(script, fn string) bool { return strings.Contains(scriptSrc[script], "local function "+fn+"(") }
	for _, tc := range []struct {
		script string
		want   []string
		not    []string
	}{
		{"apply", []string{"now_ms", "free_cursor", "claim_slot", "new_token", "join_assign", "publish_runs"}, []string{"release_slots", "pick_free", "parse_assign"}},
		{"expire", []string{"now_ms"}, []string{"claim_slot", "publish_runs", "parse_assign"}},
		{"report", []string{"parse_assign", "release_slots", "publish_runs", "now_ms"}, []string{"claim_slot", "free_cursor"}},
	} {
		for _, fn := range tc.want {
			if !has(tc.script, fn) {
				t.Errorf("%s lacks %s", tc.script, fn)
			}
		}
		for _, fn := range tc.not {
			if has(tc.script, fn) {
				t.Errorf("%s carries %s, which it does not call", tc.script, fn)
			}
		}
	}
}
