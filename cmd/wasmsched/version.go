package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// Set at link time by a release build:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/wasmsched
//
// Otherwise they come from the binary's build information (the module
// version under go install, the VCS revision when the build stamped it).
var (
	version = ""
	commit  = ""
)

func init() {
	commands = append(commands, withInterspersed(versionCommand()))
}

// buildInfoJSON is what `wasmsched version -o json` prints.
type buildInfoJSON struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
	Wazero  string `json:"wazero"`
}

func buildVersion() buildInfoJSON {
	v := buildInfoJSON{Version: version, Commit: commit, Go: runtime.Version(), Wazero: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && v.Commit == "" {
				v.Commit = s.Value
			}
			if s.Key == "vcs.modified" && s.Value == "true" && v.Commit != "" {
				v.Commit += "-dirty"
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				v.Wazero = d.Version
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func (v buildInfoJSON) String() string {
	return fmt.Sprintf("wasmsched %s (commit %s, %s, wazero %s)", v.Version, v.Commit, v.Go, v.Wazero)
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the version, commit, and the Go and wazero versions",
		ArgsUsage: " ",
		Description: `Same as wasmsched --version; -o json prints the fields.

Examples:
   wasmsched version
   wasmsched version -o json`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			v := buildVersion()
			return render(c, v, func(w io.Writer) { fmt.Fprintln(w, v.String()) })
		},
	}
}
