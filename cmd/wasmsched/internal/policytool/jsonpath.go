package policytool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// A small JSON reader for the files users write (scenarios, snapshots):
// every error names the field by its path (waiting[0].started_at) in JSON
// terms, and a malformed document by its line and column. encoding/json's
// own errors name Go types and struct fields instead.

// syntaxCheck reports a malformed JSON document with its position.
func syntaxCheck(b []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		return fmt.Errorf("trailing data after the JSON value at %s", position(b, dec.InputOffset()))
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at %s: %s", position(b, se.Offset), se.Error())
	case err != nil:
		return fmt.Errorf("malformed JSON at %s: %v", position(b, int64(len(b))), err)
	}
	return nil
}

// position is "line L, column C" of byte offset off in b.
func position(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// kindOf names the JSON value in raw.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// field decodes one value; its error is prefixed with the field's path.
type field func(raw json.RawMessage) error

// object decodes raw as an object with exactly the known fields (absent
// ones keep their value; null is absent).
func object(path string, raw json.RawMessage, fields map[string]field) error {
	if kindOf(raw) != "an object" {
		return fmt.Errorf("%s: want an object, got %s", path, kindOf(raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		f, ok := fields[k]
		if !ok {
			if path == "" {
				return fmt.Errorf("unknown field %q", k)
			}
			return fmt.Errorf("%s: unknown field %q", path, k)
		}
		if isNull(m[k]) {
			continue
		}
		if err := f(m[k]); err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
	}
	return nil
}

// list decodes raw as a list, calling each with the element's path.
func list(path string, raw json.RawMessage, each func(path string, raw json.RawMessage) error) error {
	if kindOf(raw) != "a list" {
		return fmt.Errorf("%s: want a list, got %s", path, kindOf(raw))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	for i, it := range items {
		if err := each(fmt.Sprintf("%s[%d]", path, i), it); err != nil {
			return err
		}
	}
	return nil
}

func strField(dst *string) field {
	return func(raw json.RawMessage) error {
		if kindOf(raw) != "a string" {
			return fmt.Errorf("want a string, got %s", kindOf(raw))
		}
		return json.Unmarshal(raw, dst)
	}
}

func boolField(dst *bool) field {
	return func(raw json.RawMessage) error {
		if kindOf(raw) != "true or false" {
			return fmt.Errorf("want true or false, got %s", kindOf(raw))
		}
		return json.Unmarshal(raw, dst)
	}
}

// intField decodes an integer within [lo, hi].
func intField(dst *int64, lo, hi int64) field {
	return func(raw json.RawMessage) error {
		if kindOf(raw) != "a number" {
			return fmt.Errorf("want a number, got %s", kindOf(raw))
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%s: want an integer in %d..%d", bytes.TrimSpace(raw), lo, hi)
		}
		*dst = n
		return nil
	}
}

// millisField decodes a time: unix ms, or an RFC 3339 string.
func millisField(dst *int64) field {
	return func(raw json.RawMessage) error {
		switch kindOf(raw) {
		case "a string":
			var s string
			_ = json.Unmarshal(raw, &s)
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return fmt.Errorf("%q: want unix ms or an RFC 3339 time", s)
			}
			*dst = t.UnixMilli()
			return nil
		case "a number":
			n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
			if err != nil {
				return fmt.Errorf("%s: want unix ms (an integer) or an RFC 3339 time", bytes.TrimSpace(raw))
			}
			*dst = n
			return nil
		}
		return fmt.Errorf("want unix ms or an RFC 3339 time, got %s", kindOf(raw))
	}
}
