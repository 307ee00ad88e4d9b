package migrations

import (
	"strings"
	"testing"
)

func TestRunbookOrder(t *testing.T) {
	want := []string{"01_preflight", "02_discovery_tags", "03_node_role", "04_controller_role", "05_interruption_queue", "06_node_access",
		"07_karpenter", "08_nodepools", "09_cluster_autoscaler", "10_drain_waves", "11_scale_node_groups", "12_consolidation_check"}
	steps := All()
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(steps), len(want))
	}
	for i, s := range steps {
		if s.ID != want[i] {
			t.Errorf("step %d = %s, want %s", i, s.ID, want[i])
		}
		if s.Purpose == "" || s.Up == nil || s.Down == nil {
			t.Errorf("step %s lacks a purpose, Up or Down", s.ID)
		}
	}
	if !strings.Contains(IDs(), "10_drain_waves") {
		t.Errorf("IDs() = %q", IDs())
	}
}
