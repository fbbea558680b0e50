package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/policies"
)

// errorJSON is every error response.
type errorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// apiError is an error with its HTTP status and code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code, format string, a ...any) error {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, a...)}
}

// statusOf maps an error to its HTTP status and code.
func statusOf(err error) (int, string) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, errs.ErrInvalid):
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, errs.ErrNotFound), errors.Is(err, host.ErrUnknownGroup), errors.Is(err, host.ErrUnknownPolicy):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, errs.ErrDuplicate), errors.Is(err, errs.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, errs.ErrBadState):
		return http.StatusConflict, "bad_state"
	case errors.Is(err, host.ErrNotSerial), isLoadError(err):
		return http.StatusUnprocessableEntity, "unprocessable"
	case errors.Is(err, errs.ErrOutOfMemory):
		return http.StatusServiceUnavailable, "out_of_memory"
	case errors.Is(err, errs.ErrNotReplicated):
		return http.StatusServiceUnavailable, "not_replicated"
	}
	return http.StatusInternalServerError, "internal"
}

func isLoadError(err error) bool {
	for _, s := range []error{policies.ErrNotWasm, policies.ErrABIVersion, policies.ErrMissingExport, policies.ErrKind,
		policies.ErrInstantiate, policies.ErrConformance, policies.ErrLimit, policies.ErrCompileTimeout, policies.ErrInvalidSnapshot} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func writeError(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	msg := errs.UserMessage(err)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		msg = fmt.Sprintf("the request body is over %d bytes (%d KiB), the most this API reads", mbe.Limit, mbe.Limit>>10)
	}
	if status == http.StatusInternalServerError {
		msg = "internal error: " + msg
	}
	writeJSON(w, status, errorJSON{Error: msg, Code: code})
}

// writeJSON answers status with v as JSON. v is encoded before anything is
// written: a value that cannot be encoded is a 500 JSON error naming why,
// never a status with an empty or cut body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		b.Reset()
		status = http.StatusInternalServerError
		_ = enc.Encode(errorJSON{Error: "internal error: the answer could not be encoded as JSON: " + err.Error(), Code: "internal"})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// decodeBody reads a JSON body (at most maxBodyBytes; unknown fields are
// an error, so a typo is not silently ignored). An empty body is {}.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if err.Error() == "EOF" {
			return nil
		}
		var (
			mbe *http.MaxBytesError
			te  *json.UnmarshalTypeError
			se  *json.SyntaxError
		)
		switch {
		case errors.As(err, &mbe):
			return err
		case errors.As(err, &te):
			return errorf(http.StatusBadRequest, "invalid", "request body: field %s: want %s, got a JSON %s", te.Field, errs.JSONKind(te.Type.String()), te.Value)
		case errors.As(err, &se):
			return errorf(http.StatusBadRequest, "invalid", "request body: not valid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return errorf(http.StatusBadRequest, "invalid", "request body: unknown field %s (see /api/v1/openapi.json)", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return errorf(http.StatusBadRequest, "invalid", "request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid", "request body: more than one JSON value")
	}
	return nil
}
