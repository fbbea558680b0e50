package digest_test

import (
	"fmt"

	"github.com/wasmsched/wasmsched/internal/digest"
)

func ExampleSHA256() {
	sha := digest.SHA256([]byte("wasm"))
	fmt.Println(sha)
	fmt.Println(digest.Short(sha), digest.Short("abc"))
	// Output:
	// 336154bf67f765f8f75d16a0accee61b5ee5f6a75b2a2905703df913bd550f3e
	// 336154bf67f7 abc
}
