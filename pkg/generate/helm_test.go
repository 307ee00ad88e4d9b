package generate

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// TestControllerPodSpec reads the controller's scheduling from generate's
// values written to a tree, as plan and the e2e install read it, and from
// values that leave everything to the chart.
func TestControllerPodSpec(t *testing.T) {
	values, dir := writtenValues(t)
	spec, replicas, err := ControllerPodSpec(values)
	if err != nil {
		t.Fatal(err)
	}
	if replicas != 2 || spec.PriorityClassName != "system-cluster-critical" || spec.NodeSelector[corev1.LabelOSStable] != "linux" {
		t.Errorf("replicas %d, priority %q, nodeSelector %v; want the chart's 2, system-cluster-critical, linux", replicas, spec.PriorityClassName, spec.NodeSelector)
	}
	req := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec})
	for labels, want := range map[*map[string]string]bool{
		{"eks.amazonaws.com/nodegroup": "system", corev1.LabelOSStable: "linux"}:                                    true,
		{"eks.amazonaws.com/nodegroup": "apps", corev1.LabelOSStable: "linux"}:                                      false,
		{"eks.amazonaws.com/nodegroup": "system", corev1.LabelOSStable: "linux", "karpenter.sh/nodepool": "system"}: false,
	} {
		if ok, _ := req.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: *labels}}); ok != want {
			t.Errorf("node %v admitted %t, want %t", *labels, ok, want)
		}
	}
	anti := spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(anti) != 1 || anti[0].LabelSelector == nil || anti[0].LabelSelector.MatchLabels["app.kubernetes.io/name"] != "karpenter" {
		t.Errorf("anti-affinity %+v; want one per host, selecting the controller's pods as the chart does", anti)
	}
	if tsc := spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != corev1.LabelTopologyZone || tsc[0].LabelSelector == nil {
		t.Errorf("topology spread %+v; want the chart's zone spread", tsc)
	}
	if !corev1helpers.TolerationsTolerateTaint(klog.Background(), spec.Tolerations, &ReservedTaint, false) {
		t.Errorf("tolerations %v do not tolerate %s", spec.Tolerations, ReservedTaint.ToString())
	}

	dep, pdb, err := ControllerObjects(values, "kube-system", "controller:test")
	if err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 2 || dep.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" ||
		dep.Spec.Template.Spec.Affinity == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "karpenter" {
		t.Errorf("controller objects %+v %+v; want the values' replicas, resources and scheduling, the chart's PDB", dep.Spec, pdb.Spec)
	}

	// Values that say nothing get the chart's defaults; a key given wins.
	spec, replicas, err = ControllerPodSpec(map[string]any{"replicas": 3, "tolerations": []any{}})
	if err != nil || replicas != 3 || len(spec.Tolerations) != 0 || spec.Affinity == nil || len(spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 {
		t.Errorf("defaults: %+v %d %v", spec, replicas, err)
	}
	if _, _, err := ControllerPodSpec(map[string]any{"affinity": "anywhere"}); err == nil {
		t.Error("an affinity that is not one was accepted")
	}
	if err := os.Remove(filepath.Join(dir, HelmValues)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHelmValues(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing values file: %v, want a not-exist error", err)
	}
}

// TestOnKeptNodes: the values OnKeptNodes returns admit a node only when it
// carries KeptLabel and the node was admitted before, in every
// nodeSelectorTerm (a term without it would admit any node of its own), with
// the chart's defaults for what the values leave out; the input is left as
// it was, a second pass changes nothing, and a part that is not what the
// chart reads is an error naming it.
func TestOnKeptNodes(t *testing.T) {
	written, _ := writtenValues(t)
	system := map[string]string{"eks.amazonaws.com/nodegroup": "system", corev1.LabelOSStable: "linux"}
	kept := map[string]string{"eks.amazonaws.com/nodegroup": "system", corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue}
	for _, c := range []struct {
		name   string
		values map[string]any
		terms  int
		// admits and refuses are node labels the result must admit and refuse.
		admits, refuses []map[string]string
	}{
		{"generate's values", written, 1, []map[string]string{kept},
			[]map[string]string{system, {"eks.amazonaws.com/nodegroup": "apps", corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue},
				{"eks.amazonaws.com/nodegroup": "system", corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue, "karpenter.sh/nodepool": "default"}}},
		{"two terms, ORed", map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{
				map[string]any{"matchExpressions": []any{map[string]any{"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": []any{"system"}}}},
				map[string]any{"matchExpressions": []any{map[string]any{"key": "role", "operator": "In", "values": []any{"infra"}}}},
			}}}}}, 2,
			[]map[string]string{kept, {"role": "infra", corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue}},
			[]map[string]string{system, {"role": "infra", corev1.LabelOSStable: "linux"}}},
		{"nothing: the chart's defaults", nil, 1, []map[string]string{{corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue}},
			[]map[string]string{{corev1.LabelOSStable: "linux"}, {corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue, "karpenter.sh/nodepool": "default"}}},
		{"anti-affinity only: the chart's node affinity", map[string]any{"affinity": map[string]any{"podAntiAffinity": map[string]any{}}}, 1,
			[]map[string]string{{corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue}},
			[]map[string]string{{corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue, "karpenter.sh/nodepool": "default"}, {corev1.LabelOSStable: "linux"}}},
		{"no affinity (null): the label alone", map[string]any{"affinity": nil}, 1,
			[]map[string]string{{corev1.LabelOSStable: "linux", KeptLabel: KeptLabelValue, "karpenter.sh/nodepool": "default"}},
			[]map[string]string{{corev1.LabelOSStable: "linux"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := json.Marshal(c.values)
			if err != nil {
				t.Fatal(err)
			}
			out, err := OnKeptNodes(c.values)
			if err != nil {
				t.Fatal(err)
			}
			if after, _ := json.Marshal(c.values); string(after) != string(before) {
				t.Errorf("the input changed:\n%s\nwas\n%s", after, before)
			}
			spec, _, err := ControllerPodSpec(out)
			if err != nil {
				t.Fatal(err)
			}
			terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != c.terms {
				t.Errorf("%d nodeSelectorTerms, want %d: %+v", len(terms), c.terms, terms)
			}
			for i, term := range terms {
				if !slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
					return r.Key == KeptLabel && r.Operator == corev1.NodeSelectorOpExists && len(r.Values) == 0
				}) {
					t.Errorf("nodeSelectorTerms[%d] %+v does not require %s", i, term, KeptLabel)
				}
			}
			req := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec})
			for _, l := range c.admits {
				if ok, _ := req.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: l}}); !ok {
					t.Errorf("node %v refused, want it admitted", l)
				}
			}
			for _, l := range c.refuses {
				if ok, _ := req.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: l}}); ok {
					t.Errorf("node %v admitted, want it refused", l)
				}
			}
			again, err := OnKeptNodes(out)
			if err != nil || !reflect.DeepEqual(again, out) {
				t.Errorf("a second pass changed the values (%v):\n%v\nwas\n%v", err, again, out)
			}
		})
	}
	for values, field := range map[*map[string]any]string{
		{"affinity": "anywhere"}: "affinity",
		{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": "x"}}}}:        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
		{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{"x"}}}}}: "nodeSelectorTerms[0]",
	} {
		if _, err := OnKeptNodes(*values); err == nil || !strings.Contains(err.Error(), field+" in the Helm values") {
			t.Errorf("OnKeptNodes(%v): %v, want an error naming %s", *values, err, field)
		}
	}
}

// writtenValues are generate's Helm values for the "all" fixture, written
// to a tree (dir) and read back as plan and the e2e install read them.
func writtenValues(t *testing.T) (values map[string]any, dir string) {
	t.Helper()
	res, err := Generate(loadFixture(t, "all"), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if _, err := Write(context.Background(), res, TreeOptions{Dir: dir, Envs: []string{"dev"}}); err != nil {
		t.Fatal(err)
	}
	if values, err = ReadHelmValues(dir); err != nil {
		t.Fatal(err)
	}
	return values, dir
}
