package testhooks

import (
	"fmt"
	"sync"
)

var (
	mu    sync.RWMutex
	hooks = map[string]any{}
)

// Register keeps fn under name. A second registration of a name panics.
func Register(name string, fn any) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := hooks[name]; dup {
		panic("testhooks: " + name + " registered twice")
	}
	hooks[name] = fn
}

// Get returns the hook registered under name as an F. It panics when the
// name is unknown or its type is not F: a helper out of step with the
// package it wraps fails its first test, loudly.
func Get[F any](name string) F {
	mu.RLock()
	defer mu.RUnlock()
	fn, ok := hooks[name].(F)
	if !ok {
		panic(fmt.Sprintf("testhooks: %s is %T, not %T", name, hooks[name], *new(F)))
	}
	return fn
}
