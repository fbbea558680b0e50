package host

import "github.com/wasmsched/wasmsched/host/internal/engine"

// Status is the JSON of the admin server's /status.
type Status struct {
	Namespace string                `json:"namespace"`
	Identity  string                `json:"identity"`
	Leading   bool                  `json:"leading"`
	Epoch     int64                 `json:"epoch"` // this host's term, 0 while standing by
	Ready     bool                  `json:"ready"`
	Runtime   *engine.RuntimeStatus `json:"runtime,omitempty"`
}
