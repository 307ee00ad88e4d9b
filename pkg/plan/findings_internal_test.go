package plan

import (
	"strings"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// A budget at zero only while one of its pods is replaced is waited for;
// only one that can never allow a disruption (one replica, minAvailable
// 1) is worked around by a surge restart, as the drain does since #19.
func TestBudgetFindingSaysWhatTheDrainDoes(t *testing.T) {
	inv := &inventory.Inventory{PDBs: []inventory.PDB{
		{Namespace: "shop", Name: "web", CurrentHealthy: 2, DesiredHealthy: 3, ExpectedPods: 4},
		{Namespace: "shop", Name: "db", CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1},
	}}
	got := map[string]string{}
	for _, f := range planFindings(inv, nil, nil, Budget{RestartBlocked: true}) {
		got[f.Object] = f.Message
	}
	if m := got["PodDisruptionBudget shop/web"]; !strings.Contains(m, "the drain waits until it allows one") || strings.Contains(m, "surge") {
		t.Errorf("web (short now, 4 expected for 3 needed): %q; want the drain to wait", m)
	}
	if m := got["PodDisruptionBudget shop/db"]; !strings.Contains(m, "surge rollout restart") {
		t.Errorf("db (1 expected, 1 needed): %q; want the surge restart", m)
	}
}
