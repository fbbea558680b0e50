// Package testhooks lets a package hand its test-only operations to the
// module's test helpers without putting them in its public API (the
// pattern of the standard library's internal/testlog). A package registers
// a function under a name in init; a helper such as internal/storagetest
// fetches it with its exact type. Production code never calls Get.
package testhooks
