package generate

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Controller defaults from Karpenter's "Migrating from Cluster Autoscaler" guide.
const (
	controllerRolePrefix = "KarpenterControllerRole-"
	controllerCPU        = "1"
	controllerMemory     = "1Gi"
	controllerReplicas   = 2
)

// helmValues writes the Karpenter chart values for the cluster: its name,
// interruption queue, controller role, and an affinity that keeps the
// controller on a legacy node group and never on a node it manages.
func helmValues(inv *inventory.Inventory, opts *Options) (map[string]any, []Finding, error) {
	c := inv.Cluster
	var notes []Finding
	account := c.AccountID
	if account == "" && c.ARN != "" {
		if parts := strings.Split(c.ARN, ":"); len(parts) > 4 {
			account = parts[4]
		}
	}
	if account == "" {
		account = "ACCOUNT_ID"
		notes = append(notes, Finding{Message: "the AWS account id is unknown: replace ACCOUNT_ID in the controller role ARN of the Helm values"})
	}
	settings := map[string]any{
		"clusterName":       c.Name,
		"interruptionQueue": c.Name,
	}
	if c.Endpoint != "" {
		settings["clusterEndpoint"] = c.Endpoint
	}
	terms := []map[string]any{{"key": karpv1.NodePoolLabelKey, "operator": string(corev1.NodeSelectorOpDoesNotExist)}}
	g, why, err := controllerGroup(inv, opts)
	if err != nil {
		return nil, nil, err
	}
	if g != nil {
		terms = append(terms, map[string]any{"key": labelEKSNodeGroup, "operator": string(corev1.NodeSelectorOpIn), "values": []string{g.Name}})
		notes = append(notes, Finding{Subject: g.Name, Message: "the Karpenter controller stays on this legacy group (" + why + "): keep it when the others are scaled down"})
		if g.MaxSize < controllerReplicas {
			notes = append(notes, Finding{Subject: g.Name, Message: fmt.Sprintf("the controller's %d replicas need %d nodes here, one per node, but the group's max size is %d", controllerReplicas, controllerReplicas, g.MaxSize)})
		}
	} else {
		notes = append(notes, Finding{Message: "no untainted on-demand managed node group to keep the Karpenter controller on (" + why + "): it is only kept off Karpenter's nodes; pin it with --controller-nodegroup or run it on Fargate"})
	}
	resources := map[string]any{"cpu": controllerCPU, "memory": controllerMemory}
	return map[string]any{
		"settings":       settings,
		"replicas":       controllerReplicas,
		"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": fmt.Sprintf("arn:%s:iam::%s:role/%s%s", partition(c), account, controllerRolePrefix, c.Name)}},
		"controller":     map[string]any{"resources": map[string]any{"requests": resources, "limits": resources}},
		"affinity": map[string]any{
			"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []map[string]any{{"matchExpressions": terms}},
			}},
			"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []map[string]any{
				{"topologyKey": corev1.LabelHostname},
			}},
		},
	}, notes, nil
}

func partition(c inventory.Cluster) string {
	if parts := strings.Split(c.ARN, ":"); len(parts) > 1 && strings.HasPrefix(parts[1], "aws") {
		return parts[1]
	}
	switch {
	case strings.HasPrefix(c.Region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(c.Region, "us-gov-"):
		return "aws-us-gov"
	}
	return "aws"
}

// controllerGroup picks the legacy group the controller stays on: the one
// named by opts, else an untainted, on-demand, Linux managed group,
// preferring one named or labelled for system workloads, then the largest
// minimum size.
func controllerGroup(inv *inventory.Inventory, opts *Options) (*inventory.NodeGroup, string, error) {
	if opts.ControllerNodeGroup != "" {
		g, ok := inv.NodeGroup(opts.ControllerNodeGroup)
		if !ok {
			var names []string
			for _, g := range inv.NodeGroups {
				names = append(names, g.Name)
			}
			sort.Strings(names)
			return nil, "", fmt.Errorf("controller node group %q is not in the inventory: known groups are %s", opts.ControllerNodeGroup, strings.Join(names, ", "))
		}
		if g.Kind != inventory.Managed {
			return nil, "", fmt.Errorf("controller node group %q is self-managed: its nodes carry no %s label to pin the controller by; name a managed group", g.Name, labelEKSNodeGroup)
		}
		return g, "chosen with --controller-nodegroup", nil
	}
	var cands []*inventory.NodeGroup
	for i := range inv.NodeGroups {
		g := &inv.NodeGroups[i]
		if g.Kind != inventory.Managed || groupOS(g) != "linux" || g.Mixed != nil ||
			(g.CapacityType != "" && strings.ReplaceAll(strings.ToLower(g.CapacityType), "_", "-") != karpv1.CapacityTypeOnDemand) {
			continue
		}
		tainted := false
		for _, t := range g.Taints {
			tainted = tainted || t.Effect != corev1.TaintEffectPreferNoSchedule
		}
		if !tainted {
			cands = append(cands, g)
		}
	}
	if len(cands) == 0 {
		return nil, "none is managed, on-demand, Linux and untainted", nil
	}
	system := func(g *inventory.NodeGroup) bool {
		s := strings.ToLower(g.Name + " " + labelsString(g.Labels))
		for _, w := range []string{"system", "core", "infra", "critical", "addon"} {
			if strings.Contains(s, w) {
				return true
			}
		}
		return false
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if system(a) != system(b) {
			return system(a)
		}
		if a.MinSize != b.MinSize {
			return a.MinSize > b.MinSize
		}
		return a.Name < b.Name
	})
	if system(cands[0]) {
		return cands[0], "named or labelled for system workloads", nil
	}
	return cands[0], "untainted on-demand managed group with the largest minimum size", nil
}
