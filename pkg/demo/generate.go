package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/sandbox"
)

// consolidateAfter is the generated NodePools' consolidation delay.
const consolidateAfter = time.Minute

// Generate maps each node group to one NodePool and one EC2NodeClass: the
// group's instance families, capacity types, zones, labels and taints; a
// weight that sends unconstrained pods to the largest group; a CPU limit of
// the group's max size; and, for managed groups, the
// eks.amazonaws.com/nodegroup label so pods selecting it still schedule.
// It stands in for pkg/generate in the demo.
func Generate(inv *inventory.Inventory, cat *sandbox.Catalog) ([]apisv1.NodePool, []apisv1.EC2NodeClass) {
	var pools []apisv1.NodePool
	var classes []apisv1.EC2NodeClass
	for _, g := range inv.NodeGroups {
		families := map[string]bool{}
		maxCPU := 0
		for _, t := range g.InstanceTypes {
			if it, ok := cat.Get(t); ok {
				families[it.Family] = true
				maxCPU = max(maxCPU, it.VCPU)
			}
		}
		capacity := []string{inventory.CapacityOnDemand}
		if g.CapacityType == inventory.CapacitySpot || g.Mixed != nil {
			capacity = []string{inventory.CapacitySpot, inventory.CapacityOnDemand}
		}
		labels := map[string]string{}
		for k, v := range g.Labels {
			labels[k] = v
		}
		if g.Kind == inventory.Managed {
			labels["eks.amazonaws.com/nodegroup"] = g.Name
		}
		reqs := []apisv1.NodeSelectorRequirementWithMinValues{
			{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: sortedKeys(families)},
			{Key: apisv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: capacity},
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{nonEmpty(g.Arch, "amd64")}},
		}
		if len(g.Zones) > 0 {
			reqs = append(reqs, apisv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: g.Zones})
		}
		weight := min(max(g.DesiredSize, 1), 100)
		pool := apisv1.NodePool{
			TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: apisv1.NodePoolKind},
			ObjectMeta: metav1.ObjectMeta{Name: g.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "karpenter-migrate", "karpenter-migrate.io/node-group": g.Name}},
			Spec: apisv1.NodePoolSpec{
				Template: apisv1.NodeClaimTemplate{
					ObjectMeta: apisv1.TemplateMetadata{Labels: labels},
					Spec: apisv1.NodeClaimTemplateSpec{
						Requirements: reqs, Taints: g.Taints,
						NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.EC2NodeClassKind, Name: g.Name},
					},
				},
				Disruption: apisv1.Disruption{ConsolidationPolicy: "WhenEmptyOrUnderutilized", ConsolidateAfter: apisv1.NewNillableDuration(consolidateAfter)},
				Limits:     corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(g.MaxSize)*int64(max(maxCPU, 1)), resource.DecimalSI)},
				Weight:     &weight,
			},
		}
		pools = append(pools, pool)
		alias := "al2023@latest"
		if strings.HasPrefix(g.AMIType, "BOTTLEROCKET") {
			alias = "bottlerocket@latest"
		}
		classes = append(classes, apisv1.EC2NodeClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: apisv1.EC2NodeClassKind},
			ObjectMeta: metav1.ObjectMeta{Name: g.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "karpenter-migrate"}},
			Spec: apisv1.EC2NodeClassSpec{
				Role:                       "KarpenterNodeRole-" + inv.Cluster.Name,
				AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: alias}},
				SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": inv.Cluster.Name}}},
				SecurityGroupSelectorTerms: []apisv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": inv.Cluster.Name}}},
				Tags:                       map[string]string{"karpenter-migrate.io/node-group": g.Name},
			},
		})
	}
	return pools, classes
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// writeTree writes the kustomize tree: base/{nodepools,ec2nodeclasses}
// with a kustomization each, and overlays/<env> pointing at base.
func writeTree(dir, env string, pools []apisv1.NodePool, classes []apisv1.EC2NodeClass) ([]string, error) {
	var written []string
	write := func(rel string, v any) error {
		var b []byte
		switch x := v.(type) {
		case []byte:
			b = x
		default:
			var err error
			if b, err = yaml.Marshal(v); err != nil {
				return fmt.Errorf("render %s: %w", rel, err)
			}
		}
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
		}
		if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		written = append(written, rel)
		return nil
	}
	var res []string
	for _, p := range pools {
		rel := "nodepools/" + p.Name + ".yaml"
		if err := write("base/"+rel, p); err != nil {
			return nil, err
		}
		res = append(res, rel)
	}
	for _, c := range classes {
		rel := "ec2nodeclasses/" + c.Name + ".yaml"
		if err := write("base/"+rel, c); err != nil {
			return nil, err
		}
		res = append(res, rel)
	}
	sort.Strings(res)
	kust := func(resources []string) map[string]any {
		return map[string]any{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}
	}
	if err := write("base/kustomization.yaml", kust(res)); err != nil {
		return nil, err
	}
	if err := write("overlays/"+env+"/kustomization.yaml", kust([]string{"../../base"})); err != nil {
		return nil, err
	}
	return written, nil
}

func (r *runner) stepGenerate(_ context.Context) (string, error) {
	r.pools, r.classes = Generate(&r.inv, r.sb.Catalog())
	dir := filepath.Join(r.opts.OutDir, "karpenter")
	files, err := writeTree(dir, r.inv.Cluster.Name, r.pools, r.classes)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(r.pools))
	for _, p := range r.pools {
		names = append(names, p.Name)
	}
	return fmt.Sprintf("%d NodePools (%s) and %d EC2NodeClasses, %d files in %s", len(r.pools), strings.Join(names, ", "), len(r.classes), len(files), dir), nil
}

// toUnstructured converts a typed object for the dynamic client.
func toUnstructured(v any) (*unstructured.Unstructured, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return nil, err
	}
	return u, nil
}
