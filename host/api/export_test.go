package api

// Routes lists the API's routes as "METHOD PATH", for the OpenAPI check of
// the external tests (export_test.go: test builds only).
func Routes() []string {
	var out []string
	for _, r := range (&Server{}).routeTable() {
		out = append(out, r.pattern)
	}
	return out
}

// MaxBodyBytes is the request body bound, for the external tests.
const MaxBodyBytes = maxBodyBytes

// WriteJSON is the API's JSON answer, for the external tests.
var WriteJSON = writeJSON
