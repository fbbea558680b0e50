package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/host/api"
	"github.com/wasmsched/wasmsched/storage"
)

// apiFlags are the HTTP API flags of serve and dev.
func apiFlags(defaultAddr string) []cli.Flag {
	usage := "serve the HTTP API and the web UI on `ADDR` (/api/v1, /ui/); \"\" = off"
	return []cli.Flag{
		&cli.StringFlag{Name: "api-addr", Value: defaultAddr, Usage: usage},
		&cli.StringFlag{Name: "api-tokens", Usage: "API tokens `FILE`: one \"TOKEN SCOPE\" per line (scope read or admin); reloaded on SIGHUP. Without it the API is open (loopback only)"},
	}
}

// apiServer is a running API.
type apiServer struct {
	URL  string
	stop func()
}

// startAPI serves the API on c's --api-addr (nil when it is ""), for st's
// namespace and namespaces. Without --api-tokens, a non-loopback address
// is refused: an open API on the network is not a default.
func startAPI(c *cli.Context, st *storage.Store, namespaces []string, log *slog.Logger) (*apiServer, error) {
	return openAPI(c.Context, c.Command.Name, c.String("api-addr"), c.String("api-tokens"), st, namespaces, log)
}

// openAPI checks addr and the token file and starts the server; addr ""
// is off.
func openAPI(ctx context.Context, cmd, addr, tokens string, st *storage.Store, namespaces []string, log *slog.Logger) (*apiServer, error) {
	if addr == "" {
		if tokens != "" {
			return nil, usageErrorf("%s: --api-tokens without --api-addr: the API is off", cmd)
		}
		return nil, nil
	}
	var toks *api.Tokens
	if tokens != "" {
		t, err := api.LoadTokens(tokens)
		if err != nil {
			return nil, usageErrorf("%s: --api-tokens: %s", cmd, trimAPI(err))
		}
		toks = t
	} else if !api.IsLoopback(addr) {
		return nil, usageErrorf("%s: --api-addr %s is not a loopback address: give --api-tokens FILE (an open API is served on loopback only)", cmd, addr)
	}
	return startAPIServer(ctx, st, namespaces, addr, toks, log)
}

func trimAPI(err error) string {
	s := err.Error()
	if len(s) > 5 && s[:5] == "api: " {
		return s[5:]
	}
	return s
}

func startAPIServer(ctx context.Context, st *storage.Store, namespaces []string, addr string, toks *api.Tokens, log *slog.Logger) (*apiServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, listenError("--api-addr", err)
	}
	srv, err := api.New(ctx, api.Config{Store: st, Namespaces: namespaces, Tokens: toks, Logger: log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("api server failed", "err", err)
		}
	}()
	hup := make(chan os.Signal, 1)
	if toks != nil {
		signal.Notify(hup, syscall.SIGHUP)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					if err := toks.Reload(); err != nil {
						log.Error("api tokens not reloaded; the old ones stay", "err", err)
					} else {
						log.Info("api tokens reloaded", "tokens", toks.Len())
					}
				}
			}
		}()
	}
	url := "http://" + ln.Addr().String()
	log.Info("api server listening", "addr", ln.Addr().String(), "ui", url+"/ui/", "auth", toks != nil)
	return &apiServer{URL: url, stop: func() {
		signal.Stop(hup)
		cancel()
		<-done
		_ = srv.Close(context.Background())
	}}, nil
}

// Stop stops the server (nil-safe).
func (a *apiServer) Stop() {
	if a != nil {
		a.stop()
	}
}
