package plan

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// A budget at zero only while one of its pods is replaced is waited for;
// one that can never allow a disruption (one replica, minAvailable 1) is
// worked around by a surge restart when its pod is a Deployment's, as the
// drain does since #19, and is a blocker when it is a StatefulSet's: the
// drain would wait on it until the PDB gate paused the rollout, and the
// plan called that a warning.
func TestBudgetFindingSaysWhatTheDrainDoes(t *testing.T) {
	one := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	inv := &inventory.Inventory{
		PDBs: []inventory.PDB{
			{Namespace: "shop", Name: "web", CurrentHealthy: 2, DesiredHealthy: 3, ExpectedPods: 4},
			{Namespace: "shop", Name: "api", Selector: one("api"), CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1},
			{Namespace: "shop", Name: "db", Selector: one("db"), CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1},
		},
		Pods: []inventory.Pod{
			{Namespace: "shop", Name: "api-7d9-x2x", Labels: map[string]string{"app": "api"}, OwnerKind: inventory.OwnerDeployment, OwnerName: "api"},
			{Namespace: "shop", Name: "db-0", Labels: map[string]string{"app": "db"}, OwnerKind: inventory.OwnerStatefulSet, OwnerName: "db"},
		},
	}
	got := map[string]Finding{}
	for _, f := range planFindings(inv, nil, nil, Budget{RestartBlocked: true}) {
		got[f.Object] = f
	}
	if f := got["PodDisruptionBudget shop/web"]; f.Severity != "warning" || !strings.Contains(f.Message, "the drain waits until it allows one") || strings.Contains(f.Message, "surge") {
		t.Errorf("web (short now, 4 expected for 3 needed): %+v; want a warning that the drain waits", f)
	}
	if f := got["PodDisruptionBudget shop/api"]; f.Severity != "warning" || !strings.Contains(f.Message, "surge rollout restart") {
		t.Errorf("api (a Deployment's, 1 expected, 1 needed): %+v; want a warning naming the surge restart", f)
	}
	if f := got["PodDisruptionBudget shop/db"]; f.Severity != "blocker" || !strings.Contains(f.Message, "no surge restart replaces its pods") {
		t.Errorf("db (a StatefulSet's, 1 expected, 1 needed): %+v; want a blocker", f)
	}
}
