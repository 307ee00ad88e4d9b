package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestCommitFromWhatGoBuildRecorded: a binary go build stamped says its
// commit, whether the tree was modified, and when the commit was made;
// -ldflags stamps win; one built without VCS information says how to get
// it rather than "(commit unknown)".
func TestCommitFromWhatGoBuildRecorded(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "14736e4c0ffee"},
		{Key: "vcs.time", Value: "2026-11-28T21:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name            string
		bi              *debug.BuildInfo
		version, commit string
		want            string
	}{
		{"go build", stamped, "", "", "karpenter-migrate (devel) (commit 14736e4c0ffee-dirty of 2026-11-28T21:00:00Z, "},
		{"make build", stamped, "", "abc123", "karpenter-migrate (devel) (commit abc123 of 2026-11-28T21:00:00Z, "},
		{"release", nil, "v1.2.0", "abc123", "karpenter-migrate v1.2.0 (commit abc123, "},
		{"go run", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "", "karpenter-migrate (devel) (commit unknown: built without VCS information; make build stamps it, "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuild(tc.bi, tc.version, tc.commit).String(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got  %q\nwant %q...", got, tc.want)
			}
		})
	}
}
