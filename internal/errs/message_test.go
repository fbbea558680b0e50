package errs_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/internal/errs"
)

func TestUserMessage(t *testing.T) {
	var body struct {
		Priority int `json:"priority"`
	}
	jsonErr := json.Unmarshal([]byte(`{"priority": "high"}`), &body)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("storage: set group: group g: max_active 0 is outside 1 to 10000: %w", errs.ErrInvalid),
			"set group: group g: max_active 0 is outside 1 to 10000"},
		{fmt.Errorf("client: stop: storage: stop: run r is SUCCEEDED: it can no longer be stopped: %w", errs.ErrBadState),
			"stop: stop: run r is SUCCEEDED: it can no longer be stopped"},
		{fmt.Errorf("storage: get: run r: %w", errs.ErrNotFound), "get: run r: not found"}, // not a quiet sentinel
		{jsonErr, "got a JSON string for field priority, want a number"},
	} {
		if got := errs.UserMessage(tc.err); got != tc.want {
			t.Errorf("UserMessage(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func ExampleUserMessage() {
	err := fmt.Errorf("storage: submit: group g: slots 0: want 1..1024: %w", errs.ErrInvalid)
	fmt.Println(errs.UserMessage(err))
	// Output: submit: group g: slots 0: want 1..1024
}
