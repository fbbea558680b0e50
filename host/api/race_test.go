//go:build race

package api_test

// raceEnabled: the browser test runs once, without the race detector (it
// drives chromium for a minute under it and adds nothing the API's own
// tests under -race do not cover).
const raceEnabled = true
