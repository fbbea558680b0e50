// Package storagetest has helpers for tests that drive storage by hand
// (playing the leader or a worker). Production code never imports it.
package storagetest
