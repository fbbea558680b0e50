// Package params is how a policy declares the group parameters it reads
// (`group set G --param k=v`): name, type, default, bounds and a line of
// doc. The host reads the declaration when it loads the module and checks
// a group's parameters against it at group set, at push and when a version
// is activated (exit 2 / HTTP 400 naming the parameter), so a mistyped
// value is refused instead of being read as the policy's default.
//
// A Go plugin declares them in an init function:
//
//	func init() {
//		params.Declare(
//			params.Int("limit", 1, 1, 64, "launches per period"),
//			params.Duration("period", "1s", "1ms", "24h", "the window"),
//		)
//		sdk.Register(throttle{})
//	}
//
// Importing the package exports wasmsched_params (a function of no
// argument returning ptr<<32|len of the encoding, Encode), which the host
// calls once at load. A module without the export declares nothing, and
// its groups' parameters are not checked. The package imports only abi;
// the host uses Decode and Check.
package params
