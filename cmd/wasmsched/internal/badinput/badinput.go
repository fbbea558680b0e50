// Package badinput marks the errors a CLI user fixes by changing the
// command or its input (a malformed plugin or scenario file, an unknown
// name, a flag out of range): the CLI exits 2 for them, 1 for the rest.
package badinput

import (
	"errors"
	"fmt"
)

// Err is what every bad-input error matches (errors.Is).
var Err = errors.New("bad input")

type inputError struct{ err error }

func (e *inputError) Error() string   { return e.err.Error() }
func (e *inputError) Unwrap() []error { return []error{e.err, Err} }

// Wrap marks err (if not nil) as bad input.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &inputError{err: err}
}

// Errorf is a new bad-input error.
func Errorf(format string, a ...any) error { return &inputError{err: fmt.Errorf(format, a...)} }
