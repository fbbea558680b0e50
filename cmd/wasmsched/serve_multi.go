package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// serveMulti is `serve --namespaces LIST`: one host.Multi competing for
// every namespace of LIST ("all" = the registry storage.NamespacesKey, read
// once at start) with one identity, one Redis client, one wasm runtime and
// one admin server, balancing leadership across hosts (host.BalanceConfig).
func serveMulti(c *cli.Context, rdb redis.UniversalClient, o serveOptions, adv string, log *slog.Logger, admin net.Listener) error {
	list := strings.TrimSpace(c.String("namespaces"))
	var names []string
	if list == "all" {
		var err error
		if names, err = storage.ListNamespaces(c.Context, rdb); err != nil {
			return err
		}
		if len(names) == 0 {
			return usageErrorf("serve: --namespaces all: no namespace registered (%s is empty); list them instead", storage.NamespacesKey)
		}
	} else {
		seen := map[string]bool{}
		for _, n := range strings.Split(list, ",") {
			n = strings.TrimSpace(n)
			if err := limits.ValidateName("namespace", n); err != nil {
				return usageErrorf("serve: --namespaces %q: %v", list, err)
			}
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slack := c.Int("balance-slack")
	if slack < -1 {
		return usageErrorf("serve: --balance-slack must be >= -1, got %d", slack)
	}
	first, err := storage.New(rdb, names[0])
	if err != nil {
		return asUsage(err)
	}
	apiSrv, err := startAPI(c, first, names[1:], log)
	if err != nil {
		return err
	}
	defer apiSrv.Stop()
	rc := o.runtimeConfig()
	m, err := host.NewMulti(c.Context, host.MultiConfig{
		Client:     rdb,
		Namespaces: names,
		Host: host.Config{
			Advertise: adv,
			LeaseTTL:  o.LeaseTTL,
			Logger:    log,
			Engine:    rc,
		},
		Admin:   admin,
		Balance: host.BalanceConfig{Disabled: slack < 0, Slack: max(slack, 0)},
	})
	if err != nil {
		return asUsage(fmt.Errorf("serve: --namespaces: %w", err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), 5*time.Second)
		defer cancel()
		_ = m.Close(cctx)
	}()
	return m.Run(c.Context)
}
