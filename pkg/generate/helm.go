package generate

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// ReservedTaint reserves the node group kept for the Karpenter controller
// for it and critical add-ons (EKS's convention, which the chart's
// controller tolerates), so that workload pods move to Karpenter.
var ReservedTaint = corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// KeptLabel (value KeptLabelValue) marks the nodes of the kept group that
// stay for the Karpenter controller, beside ReservedTaint; the plan's Helm
// values require it (OnKeptNodes), so the chart's pods run only there and
// never on a node of that group a later wave drains.
const (
	KeptLabel      = "karpenter-migrate.io/karpenter-controller"
	KeptLabelValue = "true"
)

// ControllerLabels are the controller pod's selector labels when the chart
// is installed as release "karpenter" (a Fargate profile may select them).
var ControllerLabels = map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}

// chartDefaults are the Karpenter chart's scheduling values (from
// aws/karpenter-provider-aws charts/karpenter/values.yaml, v1.12.0) that
// apply when the values file leaves a key out.
var chartDefaults = map[string]any{
	"replicas":          2,
	"priorityClassName": "system-cluster-critical",
	"nodeSelector":      map[string]any{corev1.LabelOSStable: "linux"},
	"affinity": map[string]any{
		"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": karpv1.NodePoolLabelKey, "operator": "DoesNotExist"}}}},
		}},
		"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"topologyKey": corev1.LabelHostname}}},
	},
	"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": corev1.LabelTopologyZone, "whenUnsatisfiable": "DoNotSchedule"}},
	"tolerations":               []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}},
}

// ControllerPodSpec is the scheduling part of the controller pod the
// chart renders from values (generate's, or a values file): nodeSelector,
// affinity, topology spread, tolerations and priority class, with the
// chart's defaults for keys left out and, as its template does, the pod's
// selector labels (ControllerLabels) on anti-affinity and spread terms
// that name none. It also returns the replicas.
func ControllerPodSpec(values map[string]any) (corev1.PodSpec, int32, error) {
	var spec corev1.PodSpec
	var v struct {
		Replicas                  int32                             `json:"replicas"`
		PriorityClassName         string                            `json:"priorityClassName"`
		NodeSelector              map[string]string                 `json:"nodeSelector"`
		Affinity                  *corev1.Affinity                  `json:"affinity"`
		TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
		Tolerations               []corev1.Toleration               `json:"tolerations"`
	}
	merged := map[string]any{}
	for k, d := range chartDefaults {
		merged[k] = d
		if x, ok := values[k]; ok {
			merged[k] = x
		}
	}
	b, err := json.Marshal(merged)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		return spec, 0, fmt.Errorf("the controller's scheduling in the Helm values does not read as a pod spec: %w", err)
	}
	sel := &metav1.LabelSelector{MatchLabels: ControllerLabels}
	if a := v.Affinity; a != nil && a.PodAntiAffinity != nil {
		for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t := &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]; t.LabelSelector == nil {
				t.LabelSelector = sel.DeepCopy()
			}
		}
	}
	for i := range v.TopologySpreadConstraints {
		if t := &v.TopologySpreadConstraints[i]; t.LabelSelector == nil {
			t.LabelSelector = sel.DeepCopy()
		}
	}
	spec.NodeSelector, spec.Affinity, spec.TopologySpreadConstraints, spec.Tolerations, spec.PriorityClassName =
		v.NodeSelector, v.Affinity, v.TopologySpreadConstraints, v.Tolerations, v.PriorityClassName
	return spec, v.Replicas, nil
}

// OnKeptNodes returns a copy of values whose controller may run only on a
// node labelled KeptLabel: the requirement "KeptLabel Exists" is added to
// every nodeSelectorTerm of the required node affinity (terms are ORed,
// a term's expressions ANDed). Parts of the affinity the values leave out
// are the chart's defaults (Helm merges the values' maps into the chart's),
// made explicit so that the chart and ControllerPodSpec read the same.
func OnKeptNodes(values map[string]any) (map[string]any, error) {
	var out, defaults map[string]any
	b, err := json.Marshal(values)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err == nil {
		b, err = json.Marshal(chartDefaults)
	}
	if err == nil {
		err = json.Unmarshal(b, &defaults)
	}
	if err != nil {
		return nil, fmt.Errorf("the Helm values: %w", err)
	}
	if out == nil {
		out = map[string]any{}
	}
	path := ""
	m, def := out, defaults
	for _, key := range []string{"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"} {
		path += key
		d, _ := def[key].(map[string]any)
		v, given := m[key]
		if !given && d != nil {
			v = d
		}
		if v == nil { // left out with no default, or null: Helm drops the default
			v, d = map[string]any{}, nil
		}
		next, isMap := v.(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("%s in the Helm values is not a map but %v", path, v)
		}
		m[key] = next
		m, def = next, d
		path += "."
	}
	v, given := m["nodeSelectorTerms"]
	if !given && def != nil {
		v = def["nodeSelectorTerms"]
	}
	terms, ok := v.([]any)
	if v != nil && !ok {
		return nil, fmt.Errorf("%snodeSelectorTerms in the Helm values is not a list but %v", path, v)
	}
	if len(terms) == 0 {
		terms = []any{map[string]any{}}
	}
	want := map[string]any{"key": KeptLabel, "operator": string(corev1.NodeSelectorOpExists)}
	for i, t := range terms {
		term, isMap := t.(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("%snodeSelectorTerms[%d] in the Helm values is not a map but %v", path, i, t)
		}
		exprs, isList := term["matchExpressions"].([]any)
		if term["matchExpressions"] != nil && !isList {
			return nil, fmt.Errorf("%snodeSelectorTerms[%d].matchExpressions in the Helm values is not a list but %v", path, i, term["matchExpressions"])
		}
		if !slices.ContainsFunc(exprs, func(e any) bool { return reflect.DeepEqual(e, want) }) {
			exprs = append(exprs, maps.Clone(want))
		}
		term["matchExpressions"] = exprs
	}
	m["nodeSelectorTerms"] = terms
	return out, nil
}

// ControllerEnv are the controller's environment variables the Karpenter
// chart sets from settings (its deployment.yaml): the runbook reads an
// installed controller's settings from them.
var ControllerEnv = map[string]string{"clusterName": "CLUSTER_NAME", "clusterEndpoint": "CLUSTER_ENDPOINT", "interruptionQueue": "INTERRUPTION_QUEUE"}

// ControllerObjects are the controller Deployment and PodDisruptionBudget
// the Karpenter chart installs as release "karpenter" in namespace, as far
// as where and how its pods run goes: the values' replicas, scheduling
// (ControllerPodSpec), settings (ControllerEnv) and controller resources, the chart's rolling
// update (maxUnavailable 1) and PDB (maxUnavailable 1), one container
// running image. The sandbox and the end-to-end tests run it in place of
// a chart install.
func ControllerObjects(values map[string]any, namespace, image string) (*appsv1.Deployment, *policyv1.PodDisruptionBudget, error) {
	spec, replicas, err := ControllerPodSpec(values)
	if err != nil {
		return nil, nil, err
	}
	var ctrl struct {
		Resources corev1.ResourceRequirements `json:"resources"`
	}
	var settings struct {
		Settings map[string]any `json:"settings"`
	}
	if b, err := json.Marshal(values); err == nil {
		_ = json.Unmarshal(b, &settings) // settings of another shape set no variable
	}
	var env []corev1.EnvVar
	for _, k := range []string{"clusterName", "clusterEndpoint", "interruptionQueue"} {
		if v, ok := settings.Settings[k].(string); ok && v != "" {
			env = append(env, corev1.EnvVar{Name: ControllerEnv[k], Value: v})
		}
	}
	if c, ok := values["controller"]; ok {
		b, err := json.Marshal(c)
		if err == nil {
			err = json.Unmarshal(b, &ctrl)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("controller.resources in the Helm values: %w", err)
		}
	}
	spec.Containers = []corev1.Container{{Name: "controller", Image: image, Resources: ctrl.Resources, Env: env}}
	one := intstr.FromInt32(1)
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "karpenter", Namespace: namespace, Labels: maps.Clone(ControllerLabels)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(ControllerLabels)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(ControllerLabels)}, Spec: spec},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: "karpenter", Namespace: namespace, Labels: maps.Clone(ControllerLabels)},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(ControllerLabels)}},
	}
	return dep, pdb, nil
}

// ReadHelmValues reads the Karpenter chart values of a generated tree
// (dir/helm/karpenter-values.yaml). A missing file is an error wrapping
// fs.ErrNotExist.
func ReadHelmValues(dir string) (map[string]any, error) {
	path := filepath.Join(dir, HelmValues)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the Karpenter Helm values: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

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
		notes = append(notes, Finding{Subject: g.Name, Message: "the Karpenter controller stays on this legacy group (" + why + "): plan keeps it, at a small fixed size reserved with " + ReservedTaint.ToString() + ", when the others are scaled down"})
		if g.MaxSize < controllerReplicas {
			notes = append(notes, Finding{Subject: g.Name, Message: fmt.Sprintf("the controller's %d replicas need %d nodes here, one per node, but the group's max size is %d", controllerReplicas, controllerReplicas, g.MaxSize)})
		}
	} else {
		notes = append(notes, Finding{Message: "no untainted on-demand managed node group to keep the Karpenter controller on (" + why + "): it is only kept off Karpenter's nodes; pin it with --controller-nodegroup or run it on Fargate"})
	}
	resources := map[string]any{"cpu": controllerCPU, "memory": controllerMemory}
	return map[string]any{
		"settings": settings,
		"replicas": controllerReplicas,
		// The chart's default, spelled out: the rollout reserves the kept
		// group's nodes with ReservedTaint, which the controller must tolerate.
		"tolerations":    []map[string]any{{"key": ReservedTaint.Key, "operator": string(corev1.TolerationOpExists)}},
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
