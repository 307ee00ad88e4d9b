package discover

import (
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func TestJoinTakesCapacityTypeFromTheInstance(t *testing.T) {
	d := &run{
		inv: &inventory.Inventory{
			NodeGroups: []inventory.NodeGroup{{Name: "apps", ASGName: "apps-asg"}},
			Nodes: []inventory.Node{
				{Name: "spot-node", InstanceID: "i-spot"},
				{Name: "od-node", InstanceID: "i-od"},
				{Name: "labelled", InstanceID: "i-spot2", CapacityType: inventory.CapacityOnDemand},
				{Name: "unknown", InstanceID: "i-gone"},
				{Name: "by-label", Labels: map[string]string{"eks.amazonaws.com/nodegroup": "apps"}},
				// keepNodegroupLabel: a Karpenter node keeps the group's label.
				{Name: "karpenter", InstanceID: "i-karp", Labels: map[string]string{"eks.amazonaws.com/nodegroup": "apps", "karpenter.sh/nodepool": "apps"}},
			},
		},
		groupByASG: map[string]int{"apps-asg": 0},
		asgOfInst:  map[string]string{"i-spot": "apps-asg", "i-od": "apps-asg", "i-spot2": "apps-asg"},
		instances: map[string]ec2types.Instance{
			"i-spot":  {InstanceLifecycle: ec2types.InstanceLifecycleTypeSpot},
			"i-od":    {},
			"i-spot2": {InstanceLifecycle: ec2types.InstanceLifecycleTypeSpot},
		},
	}
	d.join()
	want := map[string]struct{ group, capacity string }{
		"spot-node": {"apps", inventory.CapacitySpot},
		"od-node":   {"apps", inventory.CapacityOnDemand},
		"labelled":  {"apps", inventory.CapacityOnDemand}, // a node's own label wins
		"unknown":   {"", ""},
		"by-label":  {"apps", ""},
		"karpenter": {"", ""},
	}
	for _, n := range d.inv.Nodes {
		if w := want[n.Name]; n.NodeGroup != w.group || n.CapacityType != w.capacity {
			t.Errorf("%s: group %q capacity %q, want %q %q", n.Name, n.NodeGroup, n.CapacityType, w.group, w.capacity)
		}
	}
}
