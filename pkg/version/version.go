// Package version reports the build's module version, commit and Go version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version and Commit are set with -ldflags "-X" by release builds; otherwise
// they are read from the module's build information.
var (
	Version = ""
	Commit  = ""
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information of the running binary.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Commit == "" {
				info.Commit = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

func (i Info) String() string {
	return fmt.Sprintf("karpenter-migrate %s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}
