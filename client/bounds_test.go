package client_test

import (
	"errors"
	"testing"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/storage"
)

// TestClient_boundsAndErrors: the client's bounds are the store's, and its
// sentinels are the values storage returns (errors.Is matches across).
func TestClient_boundsAndErrors(t *testing.T) {
	if client.MaxGetRuns != storage.MaxGetRuns {
		t.Errorf("client.MaxGetRuns %d, storage.MaxGetRuns %d", client.MaxGetRuns, storage.MaxGetRuns)
	}
	if client.RetentionDefault != storage.RetentionDefault {
		t.Errorf("client.RetentionDefault %v, storage.RetentionDefault %v", client.RetentionDefault, storage.RetentionDefault)
	}
	for _, c := range []struct {
		name     string
		cl, stor error
	}{
		{"not found", client.ErrNotFound, storage.ErrNotFound},
		{"invalid", client.ErrInvalid, storage.ErrInvalid},
		{"exists", client.ErrExists, storage.ErrDuplicate},
		{"conflict", client.ErrConflict, storage.ErrConflict},
		{"bad state", client.ErrBadState, storage.ErrBadState},
		{"out of memory", client.ErrOutOfMemory, storage.ErrOutOfMemory},
		{"not replicated", client.ErrNotReplicated, storage.ErrNotReplicated},
	} {
		if !errors.Is(c.stor, c.cl) {
			t.Errorf("%s: storage's error does not match the client's", c.name)
		}
	}
}
