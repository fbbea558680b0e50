package errs

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

var (
	// "storage: ", "policies: ", ... at the start of an error or of a
	// wrapped part of it: the Go package that made it, not the user's
	// business.
	rePkgPrefix = regexp.MustCompile(`(^|: |\()(storage|policies|host|abi|abicodec|wasmrewrite|worker|client|api|engine): `)
	// encoding/json's type errors name Go types and struct fields.
	reJSONType = regexp.MustCompile(`json: cannot unmarshal (\w+) into Go (?:struct field (\S+) |value )of type (\S+)`)
	// sentinels whose words the message already says in full
	quietSentinels = []error{ErrInvalid, ErrBadState, ErrDuplicate, ErrConflict}
)

// UserMessage is err's message in a user's terms, as the CLI prints it and
// the HTTP API returns it: no Go package prefixes, no trailing sentinel
// word ("invalid", "bad state", ...: the message says what is wrong), no Go
// type or struct names from encoding/json.
func UserMessage(err error) string {
	msg := rePkgPrefix.ReplaceAllString(err.Error(), "$1")
	for _, s := range quietSentinels {
		if errors.Is(err, s) {
			msg = strings.ReplaceAll(msg, ": "+s.Error()+": ", ": ")
			msg = strings.TrimSuffix(msg, ": "+s.Error())
		}
	}
	return reJSONType.ReplaceAllStringFunc(msg, func(m string) string {
		p := reJSONType.FindStringSubmatch(m)
		field := ""
		if p[2] != "" {
			// "submitJSON.priority": the JSON path is after the struct name
			f := p[2]
			if i := strings.IndexByte(f, '.'); i >= 0 {
				f = f[i+1:]
			}
			field = " for field " + f
		}
		return fmt.Sprintf("got a JSON %s%s, want %s", p[1], field, JSONKind(p[3]))
	})
}

// JSONKind names the JSON value a Go type decodes from ("a number" for
// int64), for messages about a request or file of the wrong shape.
func JSONKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		return "an object"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.Contains(goType, "int"), strings.Contains(goType, "float"):
		return "a number"
	}
	return "another type"
}
