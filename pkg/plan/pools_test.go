package plan

import (
	"testing"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// A pod pinned to a label the generated NodePools keep (role=web, not only
// eks.amazonaws.com/nodegroup) is not a readiness blocker of the plan.
func TestPoolsNodeLabelsClearPinnedPods(t *testing.T) {
	pool := func(name string, labels map[string]string) *apiv1.NodePool {
		np := &apiv1.NodePool{}
		np.Name = name
		np.Spec.Template.ObjectMeta.Labels = labels
		return np
	}
	pools := newPools([]*apiv1.NodePool{
		pool("web", map[string]string{"role": "web", "eks.amazonaws.com/nodegroup": "web"}),
		pool("batch", map[string]string{"team": "data"}),
		pool("bare", nil),
	}, nil)
	inv := &inventory.Inventory{
		Cluster:    inventory.Cluster{Name: "c"},
		NodeGroups: []inventory.NodeGroup{{Name: "web", Labels: map[string]string{"role": "web"}}},
		Nodes:      []inventory.Node{{Name: "n1", NodeGroup: "web", Labels: map[string]string{"role": "web"}}},
		Pods:       []inventory.Pod{{Namespace: "default", Name: "p", NodeName: "n1", OwnerKind: inventory.OwnerDeployment, OwnerName: "w", NodeSelector: map[string]string{"role": "web"}}},
	}
	pinned := func(pools []readiness.PoolNodes) bool {
		for _, f := range readiness.Evaluate(inv, readiness.Options{Pools: pools}).Findings {
			if f.ID == readiness.IDPinnedToNodeGroup {
				return true
			}
		}
		return false
	}
	if pinned(pools.ReadinessOptions(inv, nil).Pools) {
		t.Error("a pod pinned to role=web is reported although the web pool keeps role")
	}
	if !pinned([]readiness.PoolNodes{{NodePool: "web", Labels: map[string]string{"eks.amazonaws.com/nodegroup": "web"}}}) {
		t.Error("with only the nodegroup label kept, role=web should be reported as pinned (the test no longer exercises the finding)")
	}
	if !pinned([]readiness.PoolNodes{{NodePool: "other", Labels: map[string]string{"role": "batch"}}}) {
		t.Error("a pool keeping role with another value must not clear a pod pinned to role=web")
	}
}
