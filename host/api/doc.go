// Package api is wasmsched's HTTP JSON API and its operator web UI, served
// by `wasmsched serve --api-addr` and `wasmsched dev`.
//
// Routes are under /api/v1/namespaces/{ns}/ and documented in openapi.json
// (embedded, served at /api/v1/openapi.json; TestOpenAPI_routes holds the
// file and the routes together). Errors are JSON {"error", "code"} with the
// HTTP statuses users expect (400, 401, 403, 404, 409, 413, 422, 503).
//
// Auth: with a token file (Tokens), every request needs a token, as
// "Authorization: Bearer TOKEN" or the UI's HttpOnly cookie: none or an
// unknown one is 401, a read token on a write 403. Tokens compare in
// constant time. Without tokens the API is open (the CLI refuses that on a
// non-loopback address).
//
// The UI (/ui/) is static files embedded in the binary: no build step. It
// reads the same API and follows changes by server-sent events
// (/api/v1/namespaces/{ns}/events), which fan out from one Redis
// subscription per namespace.
package api
