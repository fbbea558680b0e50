// Package errs defines wasmsched's sentinel errors once, so that storage,
// which returns them, and client, which applications check them against,
// name the same values without the client's API naming storage (the
// pattern of io/fs's errors re-exported by os). Check them with errors.Is
// through the package you import: storage.ErrNotFound and
// client.ErrNotFound are the same value.
package errs
