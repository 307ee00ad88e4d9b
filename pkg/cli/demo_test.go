package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoJSON(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := run(t, "demo", "--seed", "3", "--out", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("demo -o json is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"nodesBefore", "nodesAfter", "costPerHourBefore", "costPerHourAfter", "moves", "pdbViolations", "longestWaitForNodeSeconds", "steps"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if sum["pdbViolations"].(float64) != 0 {
		t.Errorf("pdbViolations = %v", sum["pdbViolations"])
	}
	// Every stage of the demo is done; the runbook steps inside apply may
	// also be "skipped" (their Check found the work done, e.g. IAM that the
	// demo's iam-apply stage created), never anything else.
	status := map[string]any{}
	for _, s := range sum["steps"].([]any) {
		st := s.(map[string]any)
		id, _ := st["id"].(string)
		status[id] = st["status"]
		if id == "" || (st["status"] != "done" && st["status"] != "skipped") {
			t.Errorf("step %v", st)
		}
	}
	for _, id := range []string{"discover", "readiness", "generate", "iam-plan", "iam-apply", "plan", "apply", "final-state"} {
		if status[id] != "done" {
			t.Errorf("stage %s: status %v, want done", id, status[id])
		}
	}
	if !strings.Contains(errOut, "wave-1-") || !strings.Contains(errOut, "final-state") {
		t.Errorf("with -o json, progress lines should go to stderr; got %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "plan.yaml")); err != nil {
		t.Error(err)
	}
}

func TestDemoBadSnapshot(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "snap.json")
	if err := os.WriteFile(bad, []byte("{\"kind\": \"InventorySnapshot\",\n\"apiVersion\": 3}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "demo", "--snapshot", bad)
	if code == 0 || !strings.Contains(errOut, "--snapshot") || !strings.Contains(errOut, bad) {
		t.Fatalf("exit %d, stderr %q; want an error naming --snapshot and the file", code, errOut)
	}
}
