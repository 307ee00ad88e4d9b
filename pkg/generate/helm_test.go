package generate

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
	res, err := Generate(loadFixture(t, "all"), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Write(context.Background(), res, TreeOptions{Dir: dir, Envs: []string{"dev"}}); err != nil {
		t.Fatal(err)
	}
	values, err := ReadHelmValues(dir)
	if err != nil {
		t.Fatal(err)
	}
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
