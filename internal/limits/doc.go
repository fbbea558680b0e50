// Package limits holds what users may write and its bounds: the rules of
// names, labels and policy parameters, the size and time limits of runs,
// groups and schedules, and their defaults.
//
// Storage enforces them before a script runs, so nothing out of bounds is
// ever written; the client, the HTTP API and the CLI name them in help and
// messages and parse the same forms with the same functions. It is a leaf:
// it imports abi and internal/errs only, so every room can import it
// without importing storage, and none of it is public API.
package limits
