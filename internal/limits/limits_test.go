package limits_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"g1", true}, {"a.b-c_d:e/f", true}, {"", false}, {"a{b", false}, {"a}b", false}, {"a b", false},
		{"a\tb", false}, {"a\nb", false}, {"a#b", false}, {"a,b", false}, {"a\x00b", false},
		{strings.Repeat("x", limits.MaxNameLen), true}, {strings.Repeat("x", limits.MaxNameLen+1), false},
	} {
		err := limits.ValidateName("group", tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "group")) {
			t.Errorf("ValidateName(%q) = %v: want ErrInvalid naming the kind", tc.in, err)
		}
	}
}

func TestParseLabel(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "tenant=acme", want: "{tenant acme}"},
		{in: "tenant=", want: "{tenant }"},
		{in: "tenant", err: `label "tenant": want key=value`},
		{in: "=x", err: "the key must be 1 to"},
		{in: "Tenant=x", err: "the key may hold only a-z"},
		{in: "k=a\x01b", err: "control character"},
		{in: "k=" + strings.Repeat("v", abi.MaxValueLen+1), err: fmt.Sprintf("at most %d", abi.MaxValueLen)},
	} {
		l, err := limits.ParseLabel(tc.in)
		switch {
		case tc.err == "" && (err != nil || fmt.Sprint(l) != tc.want):
			t.Errorf("ParseLabel(%q) = %v, %v; want %s", tc.in, l, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseLabel(%q) = %v; want an error with %q", tc.in, err, tc.err)
		}
	}
	if _, err := limits.ParseParam("mode"); err == nil || !strings.HasPrefix(err.Error(), "parameter ") {
		t.Errorf("ParseParam: %v; want a parameter error", err)
	}
}

func TestParsePreference(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "region=eu:10", want: "{region eu 10}"},
		{in: "region=eu", want: "{region eu 1}"},
		{in: "host=a:b:1000", want: "{host a:b 1000}"},
		{in: "url=http://x", want: "{url http://x 1}"},
		{in: "region=eu:0", err: "weight must be an integer 1..1000"},
		{in: "region=eu:1001", err: "weight must be an integer 1..1000"},
		{in: "region=eu:99999999999", err: "weight must be an integer 1..1000"},
		{in: "region", err: `preference "region": want key=value[:weight]`},
		{in: "Region=eu:2", err: "the key may hold only a-z"},
	} {
		p, err := limits.ParsePreference(tc.in)
		switch {
		case tc.err == "" && (err != nil || fmt.Sprint(p) != tc.want):
			t.Errorf("ParsePreference(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePreference(%q) = %v; want an error with %q", tc.in, err, tc.err)
		case err == nil:
			if back, _ := limits.ParsePreference(limits.FormatPreference(p)); back != p {
				t.Errorf("FormatPreference(%v) reads back as %v", p, back)
			}
		}
	}
	ps, err := limits.NormalizePreferences([]abi.Preference{{Key: "z", Value: "1", Weight: 2}, {Key: "a", Value: "x", Weight: 1}})
	if err != nil || fmt.Sprint(ps) != "[{a x 1} {z 1 2}]" {
		t.Fatalf("NormalizePreferences = %v, %v; want sorted", ps, err)
	}
	for _, bad := range [][]abi.Preference{{{Key: "a", Weight: 0}}, {{Key: "a", Weight: 1}, {Key: "a", Weight: 2}}, {{Key: "A", Weight: 1}}} {
		if _, err := limits.NormalizePreferences(bad); err == nil {
			t.Errorf("NormalizePreferences(%v) passed", bad)
		}
	}
}

func TestNormalizeLabels(t *testing.T) {
	ls, err := limits.NormalizeLabels("labels", []abi.Label{{Key: "b", Value: "2"}, {Key: "a", Value: "1"}}, 2)
	if err != nil || fmt.Sprint(ls) != "[{a 1} {b 2}]" {
		t.Fatalf("NormalizeLabels = %v, %v; want sorted", ls, err)
	}
	if _, err := limits.NormalizeLabels("labels", []abi.Label{{Key: "a"}, {Key: "a"}}, 2); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("duplicate key: %v", err)
	}
	if _, err := limits.NormalizeLabels("params", []abi.Label{{Key: "a"}, {Key: "b"}}, 1); err == nil || !strings.Contains(err.Error(), "2 params, at most 1") {
		t.Errorf("too many: %v", err)
	}
	m := limits.LabelsMap(ls)
	if back := limits.LabelsFromMap(m); fmt.Sprint(back) != fmt.Sprint(ls) || limits.LabelsMap(nil) != nil {
		t.Errorf("LabelsMap/LabelsFromMap round trip: %v -> %v -> %v", ls, m, back)
	}
}

func TestParseWeights(t *testing.T) {
	w, err := limits.ParseWeights("b=1, a=2")
	if err != nil || limits.FormatWeights(w) != "a=2,b=1" {
		t.Fatalf("ParseWeights = %v, %v", w, err)
	}
	for in, want := range map[string]string{
		"a=2,b":    "want value=weight",
		"a=0":      fmt.Sprintf("1..%d", limits.MaxWeight),
		"a=1,a=2":  "named twice",
		"a=x":      "must be an integer",
		"a=100000": fmt.Sprintf("1..%d", limits.MaxWeight),
	} {
		if _, err := limits.ParseWeights(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWeights(%q) = %v; want an error with %q", in, err, want)
		}
	}
	if w, err := limits.ParseWeights(" "); w != nil || err != nil {
		t.Errorf("ParseWeights(blank) = %v, %v; want none", w, err)
	}
}

func TestValidateGroups(t *testing.T) {
	if err := limits.ValidateGroups([]string{"thumbnails", "reports-*", "*"}); err != nil {
		t.Fatalf("valid groups: %v", err)
	}
	many := make([]string, limits.MaxWorkerGroups+1)
	for i := range many {
		many[i] = fmt.Sprintf("g%d", i)
	}
	for _, gs := range [][]string{{"a b"}, {""}, many} {
		if err := limits.ValidateGroups(gs); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("ValidateGroups(%.40q) = %v, want ErrInvalid", gs, err)
		}
	}
}
