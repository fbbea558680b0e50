package params_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/params"
)

var decls = []params.Param{
	params.Int("limit", 1, 1, 64, "launches per period"),
	params.Duration("period", "1s", "1ms", "24h", "the window"),
	params.Bool("strict", false, "refuse instead of waiting"),
	{Name: "key", Type: params.TypeString, Default: "ref", Max: "8", Doc: "a label"},
}

func TestEncodeDecode(t *testing.T) {
	got, err := params.Decode(params.Encode(decls))
	if err != nil || len(got) != len(decls) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	for i := range decls {
		if got[i] != decls[i] {
			t.Fatalf("param %d: %+v, want %+v", i, got[i], decls[i])
		}
	}
	if got, err := params.Decode(nil); err != nil || len(got) != 0 {
		t.Fatalf("decode of nothing = %+v, %v", got, err)
	}
	doc := params.Encode([]params.Param{params.Int("n", 1, 0, 9, "tab\there, line\nthere")})
	if got, err := params.Decode(doc); err != nil || got[0].Doc != "tab here, line there" {
		t.Fatalf("a doc with tabs and newlines: %+v, %v", got, err)
	}
}

func TestDecode_refuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"fields", "limit\tint\t1\n", "3 fields, want 6"},
		{"bad-name", "Limit\tint\t1\t\t\t\n", `parameter "Limit": a name is`},
		{"bad-type", "limit\tfloat\t1\t\t\t\n", `type "float"`},
		{"twice", "a\tint\t\t\t\t\na\tint\t\t\t\t\n", "declared twice"},
		{"bad-min", "a\tint\t\tx\t\t\n", `min "x"`},
		{"default-out", "a\tint\t9\t1\t5\t\n", "default: 9 is above the maximum 5"},
		{"bool-bounds", "a\tbool\t\t\t1\t\n", "a bool has no max"},
		{"string-min", "a\tstring\t\t1\t\t\n", "a string's max is a length"},
		{"too-big", strings.Repeat("x", params.MaxEncoded+1), "at most 16384"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := params.Decode([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decode = %v, want an error naming %q", err, c.want)
			}
		})
	}
	var many []params.Param
	for i := range abi.MaxParams + 1 {
		many = append(many, params.Int("p"+string(rune('a'+i%26))+string(rune('a'+i/26)), 0, 0, 1, ""))
	}
	if _, err := params.Decode(params.Encode(many)); err == nil || !strings.Contains(err.Error(), "at most 32") {
		t.Fatalf("33 parameters: %v", err)
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		ps   []abi.Label
		want string // "" = accepted
	}{
		{"none", nil, ""},
		{"all-valid", []abi.Label{{Key: "key", Value: "main"}, {Key: "limit", Value: "64"}, {Key: "period", Value: "1500"}, {Key: "strict", Value: "true"}}, ""},
		{"duration-form", []abi.Label{{Key: "period", Value: "1m30s"}}, ""},
		{"unknown", []abi.Label{{Key: "perod", Value: "1s"}}, "parameter perod is not one the policy declares (limit, period, strict, key)"},
		{"not-int", []abi.Label{{Key: "limit", Value: "ten"}}, `parameter limit: "ten" is not an integer`},
		{"below", []abi.Label{{Key: "limit", Value: "0"}}, "parameter limit: 0 is below the minimum 1"},
		{"above", []abi.Label{{Key: "period", Value: "25h"}}, "parameter period: 25h is above the maximum 24h"},
		{"not-duration", []abi.Label{{Key: "period", Value: "notaduration"}}, "is not a duration"},
		{"not-bool", []abi.Label{{Key: "strict", Value: "yes"}}, `"yes" is not true or false`},
		{"too-long", []abi.Label{{Key: "key", Value: "refs/heads/main"}}, "15 bytes, at most 8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := params.Check(decls, c.ps)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("check = %v, want accepted", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, params.ErrInvalid)):
				t.Fatalf("check = %v, want ErrInvalid naming %q", err, c.want)
			}
		})
	}
	if err := params.Check(nil, []abi.Label{{Key: "anything", Value: "goes"}}); err != nil {
		t.Fatalf("a policy that declares nothing refused %v", err)
	}
}

func TestDeclare(t *testing.T) {
	params.Declare(decls...)
	got, err := params.Declared()
	if err != nil || len(got) != len(decls) || got[0] != decls[0] {
		t.Fatalf("declared = %+v, %v", got, err)
	}
}
