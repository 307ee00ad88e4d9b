// Package version reports the build's module version, commit and Go version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version and Commit are set with -ldflags "-X" by `make build` and
// release builds (Commit ends in "-dirty" when the tree had uncommitted
// changes); otherwise they are read from what go build recorded.
var (
	Version = ""
	Commit  = ""
)

// Info describes the running binary.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// CommitTime is the commit's time as go build recorded it (RFC 3339),
	// when it did.
	CommitTime string `json:"commitTime,omitempty"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

// unknownCommit is the commit of a binary built without VCS information
// (go run, go build -buildvcs=false, a build outside the repository).
const unknownCommit = "unknown"

// Get returns the build information of the running binary.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(bi, Version, Commit)
}

// fromBuild is the Info of a binary stamped with version and commit
// (either may be empty) whose go build recorded bi (nil when it did not).
func fromBuild(bi *debug.BuildInfo, version, commit string) Info {
	info := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		vcs := map[string]string{}
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
		if info.Commit == "" && vcs["vcs.revision"] != "" {
			info.Commit = vcs["vcs.revision"]
			if vcs["vcs.modified"] == "true" {
				info.Commit += "-dirty"
			}
		}
		info.CommitTime = vcs["vcs.time"]
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Commit == "" {
		info.Commit = unknownCommit
	}
	return info
}

func (i Info) String() string {
	commit := "commit " + i.Commit
	switch {
	case i.Commit == unknownCommit:
		commit = "commit unknown: built without VCS information; make build stamps it"
	case i.CommitTime != "":
		commit += " of " + i.CommitTime
	}
	return fmt.Sprintf("karpenter-migrate %s (%s, %s, %s)", i.Version, commit, i.GoVersion, i.Platform)
}
