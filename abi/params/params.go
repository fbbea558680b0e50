package params

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/abi"
)

// Type is a parameter's type: how its value must parse.
type Type string

// The types a parameter may have.
const (
	TypeInt      Type = "int"      // a decimal integer (int64), within Min..Max when set
	TypeDuration Type = "duration" // a Go duration ("2s", "1m30s") or a bare number of ms, within Min..Max when set
	TypeBool     Type = "bool"     // true or false (strconv.ParseBool)
	TypeString   Type = "string"   // any value (a label value's bounds), at most Max bytes when set
)

// Param is one declared parameter. Default, Min and Max are written as
// values of the type ("" = none); Doc says what it does, in a line.
type Param struct {
	Name    string
	Type    Type
	Default string
	Min     string
	Max     string
	Doc     string
}

// Int declares an integer parameter with a default and bounds (min > max:
// no bounds).
func Int(name string, def, min, max int64, doc string) Param {
	p := Param{Name: name, Type: TypeInt, Default: strconv.FormatInt(def, 10), Doc: doc}
	if min <= max {
		p.Min, p.Max = strconv.FormatInt(min, 10), strconv.FormatInt(max, 10)
	}
	return p
}

// Duration declares a duration parameter: def, min and max as durations
// ("1s"; "" = none).
func Duration(name, def, min, max, doc string) Param {
	return Param{Name: name, Type: TypeDuration, Default: def, Min: min, Max: max, Doc: doc}
}

// String declares a string parameter.
func String(name, def, doc string) Param {
	return Param{Name: name, Type: TypeString, Default: def, Doc: doc}
}

// Bool declares a boolean parameter.
func Bool(name string, def bool, doc string) Param {
	return Param{Name: name, Type: TypeBool, Default: strconv.FormatBool(def), Doc: doc}
}

// MaxEncoded bounds a declaration's encoding (what the host reads of it).
const MaxEncoded = 16 << 10

// Encode writes declarations as the module serves them: one line a
// parameter, its fields tab-separated (name, type, default, min, max,
// doc). Tabs and newlines in a doc become spaces.
func Encode(ps []Param) []byte {
	var b strings.Builder
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	for _, p := range ps {
		for i, f := range []string{p.Name, string(p.Type), p.Default, p.Min, p.Max, p.Doc} {
			if i > 0 {
				b.WriteByte('\t')
			}
			b.WriteString(clean.Replace(f))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// Decode reads and checks an encoding (Encode): at most abi.MaxParams
// parameters, each a valid name once, a known type, and a default and
// bounds that parse as it (a default within the bounds).
func Decode(b []byte) ([]Param, error) {
	if len(b) > MaxEncoded {
		return nil, fmt.Errorf("the declaration is %d bytes, at most %d", len(b), MaxEncoded)
	}
	var out []Param
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" && len(b) == 0 {
			break
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			return nil, fmt.Errorf("parameter %d: %d fields, want 6 (name, type, default, min, max, doc)", i+1, len(f))
		}
		p := Param{Name: f[0], Type: Type(f[1]), Default: f[2], Min: f[3], Max: f[4], Doc: f[5]}
		if err := p.valid(); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(q Param) bool { return q.Name == p.Name }) {
			return nil, fmt.Errorf("parameter %s is declared twice", p.Name)
		}
		out = append(out, p)
	}
	if len(out) > abi.MaxParams {
		return nil, fmt.Errorf("%d parameters declared, at most %d", len(out), abi.MaxParams)
	}
	return out, nil
}

// valid checks a declaration.
func (p Param) valid() error {
	if p.Name == "" || len(p.Name) > abi.MaxKeyLen || strings.Trim(p.Name, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != "" {
		return fmt.Errorf("parameter %q: a name is 1 to %d bytes of a-z, 0-9, '_', '.' and '-'", p.Name, abi.MaxKeyLen)
	}
	switch p.Type {
	case TypeInt, TypeDuration, TypeBool, TypeString:
	default:
		return fmt.Errorf("parameter %s: type %q, want int, duration, bool or string", p.Name, p.Type)
	}
	for _, b := range []struct{ what, v string }{{"min", p.Min}, {"max", p.Max}} {
		if b.v == "" {
			continue
		}
		switch p.Type {
		case TypeBool:
			return fmt.Errorf("parameter %s: a bool has no %s", p.Name, b.what)
		case TypeString:
			if n, err := strconv.Atoi(b.v); err != nil || n < 0 || b.what == "min" {
				return fmt.Errorf("parameter %s: a string's max is a length in bytes (no min), got %s %q", p.Name, b.what, b.v)
			}
		default:
			if _, err := p.parse(b.v); err != nil {
				return fmt.Errorf("parameter %s: %s %q: %v", p.Name, b.what, b.v, err)
			}
		}
	}
	if p.Default != "" {
		if err := p.Check(p.Default); err != nil {
			return fmt.Errorf("parameter %s: default: %v", p.Name, err)
		}
	}
	return nil
}

// parse reads v as p's type: an int or a duration as int64 (ns).
func (p Param) parse(v string) (int64, error) {
	switch p.Type {
	case TypeInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	case TypeDuration:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return int64(time.Duration(n) * time.Millisecond), nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (e.g. 2s, 1m30s, or a number of ms)", v)
		}
		return int64(d), nil
	}
	return 0, nil
}

// Check reports whether v is a value of p: it parses as p's type, within
// its bounds.
func (p Param) Check(v string) error {
	switch p.Type {
	case TypeBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		return nil
	case TypeString:
		if p.Max != "" {
			if n, _ := strconv.Atoi(p.Max); len(v) > n {
				return fmt.Errorf("%d bytes, at most %d", len(v), n)
			}
		}
		return nil
	}
	n, err := p.parse(v)
	if err != nil {
		return err
	}
	if p.Min != "" {
		if lo, _ := p.parse(p.Min); n < lo {
			return fmt.Errorf("%s is below the minimum %s", v, p.Min)
		}
	}
	if p.Max != "" {
		if hi, _ := p.parse(p.Max); n > hi {
			return fmt.Errorf("%s is above the maximum %s", v, p.Max)
		}
	}
	return nil
}

// ErrInvalid is wrapped by Check's errors.
var ErrInvalid = errors.New("invalid parameter")

// Check checks a group's parameters against a policy's declarations: each
// must be declared and its value a value of its type within its bounds.
// No declarations (a policy that declares none) accept anything. The error
// names the parameter and wraps ErrInvalid.
func Check(decls []Param, ps []abi.Label) error {
	if len(decls) == 0 {
		return nil
	}
	for _, l := range ps {
		i := slices.IndexFunc(decls, func(p Param) bool { return p.Name == l.Key })
		if i < 0 {
			names := make([]string, len(decls))
			for j, d := range decls {
				names[j] = d.Name
			}
			return fmt.Errorf("parameter %s is not one the policy declares (%s): %w", l.Key, strings.Join(names, ", "), ErrInvalid)
		}
		if err := decls[i].Check(l.Value); err != nil {
			return fmt.Errorf("parameter %s: %v (%s %s): %w", l.Key, err, decls[i].Type, decls[i].describe(), ErrInvalid)
		}
	}
	return nil
}

// describe is a declaration's bounds and default in a few words.
func (p Param) describe() string {
	var parts []string
	if p.Min != "" {
		parts = append(parts, "min "+p.Min)
	}
	if p.Max != "" {
		parts = append(parts, "max "+p.Max)
	}
	if p.Default != "" {
		parts = append(parts, "default "+p.Default)
	}
	return strings.Join(parts, ", ")
}
