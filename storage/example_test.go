package storage_test

import (
	"context"
	"fmt"

	"github.com/wasmsched/wasmsched/internal/embedded"
	"github.com/wasmsched/wasmsched/storage"
)

// Submit two runs and read the group's snapshot, against the embedded store.
func Example() {
	srv, err := embedded.Start("")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := storage.Connect(ctx, srv.URL())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	s, err := storage.New(c, "demo")
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"nightly-1", "nightly-2"} {
		if _, err := s.Submit(ctx, storage.SubmitRequest{Group: "etl", ID: id}); err != nil {
			panic(err)
		}
	}
	sn, err := s.Snapshot(ctx, "etl")
	if err != nil {
		panic(err)
	}
	fmt.Println(sn.Group.Name, sn.Group.Policy, sn.Group.MaxActive, "version", sn.Group.Version)
	for _, r := range sn.Waiting {
		fmt.Println(r.Seq, r.ID, r.State)
	}
	// Output:
	// etl wait 1 version 2
	// 1 nightly-1 WAITING
	// 2 nightly-2 WAITING
}
