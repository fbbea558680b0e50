// Package csdk holds the C SDK's header (wasmsched.h) for tools: `wasmsched
// policy build` of a C plugin puts it on the include path. C authors use
// the file itself.
package csdk

import _ "embed"

// Header is wasmsched.h.
//
//go:embed wasmsched.h
var Header []byte
