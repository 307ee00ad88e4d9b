package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes at a new directory with the given
// extra options and unmounts it at cleanup. Mounting needs root (CAP_SYS_ADMIN):
// elsewhere the test is skipped, saying why.
func mountTmpfs(t *testing.T, size, opts string) string {
	t.Helper()
	dir := t.TempDir()
	o := "size=" + size
	if opts != "" {
		o += "," + opts
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", o, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to make a read-only or full directory (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes to dir until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestChaosIAMApplyRefusesUnwritableDir is rung 9 of the chaos ladder
// (#19): when the directory of the local journal is read-only or full, iam
// apply refuses before it creates anything, and says which directory and
// why. (The aws-auth backup directory gets the same check when the plan
// edits aws-auth, which needs a cluster; this fixture has none.)
func TestChaosIAMApplyRefusesUnwritableDir(t *testing.T) {
	for _, tc := range []struct{ name, opts string }{{"read-only", "ro"}, {"full", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, snap := iamFixture(t)
			bad := mountTmpfs(t, "64k", tc.opts)
			if tc.opts == "" {
				fill(t, bad)
			}
			journal := filepath.Join(bad, "journal.json")
			_, stderr, err := runCLI(t, "iam", "apply", "--yes", "--snapshot", snap, "--endpoint-url", srv.URL(), "--journal", journal, "--identity", "pod-identity")
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("iam apply with the journal's directory %s: %v\n%s; want a refusal naming it", tc.name, err, stderr)
			}
			t.Logf("refused: %v", err)
			for _, op := range []string{"CreateRole", "CreatePolicy", "CreateInstanceProfile"} {
				if n := srv.Calls("iam", op); n != 0 {
					t.Errorf("refused apply called %s %d times", op, n)
				}
			}
			if n := srv.Calls("sqs", "CreateQueue") + srv.Calls("ec2", "CreateTags") + srv.Calls("eks", "CreatePodIdentityAssociation"); n != 0 {
				t.Errorf("refused apply made %d create calls", n)
			}
		})
	}
}
