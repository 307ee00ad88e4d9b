package testenv_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// TestKwokNodesRunDeployment checks that kwok nodes look like EKS node-group
// nodes and become Ready, and that the real scheduler places a Deployment's
// pods on them and they become Running.
func TestKwokNodesRunDeployment(t *testing.T) {
	t.Parallel()
	env := cluster.Env(t)
	ns := env.Namespace(t)
	ctx := t.Context()

	nodes := createNodes(t, env, ns, 0, 2)
	node, err := env.Client.CoreV1().Nodes().Get(ctx, nodes[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !testenv.NodeReady(node) {
		t.Errorf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
	}
	for key, want := range map[string]string{
		corev1.LabelTopologyZone:       "us-east-1a",
		corev1.LabelTopologyRegion:     "us-east-1",
		corev1.LabelInstanceTypeStable: "m5.xlarge",
		testenv.LabelNodeGroup:         ns,
		testenv.LabelEKSCapacityType:   "ON_DEMAND",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelOSStable:           "linux",
	} {
		if got := node.Labels[key]; got != want {
			t.Errorf("node label %s = %q, want %q", key, got, want)
		}
	}
	if !strings.HasPrefix(node.Spec.ProviderID, "aws:///us-east-1a/i-") {
		t.Errorf("providerID = %q, want aws:///us-east-1a/i-...", node.Spec.ProviderID)
	}

	began := time.Now()
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, deployment("web", 3, ns, "500m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := env.WaitForPodsRunning(ctx, ns, "app=web", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 pods Running %s after the Deployment was created", time.Since(began).Round(time.Millisecond))
	for _, p := range pods {
		if !slices.Contains(nodes, p.Spec.NodeName) {
			t.Errorf("pod %s on node %q, want one of %v", p.Name, p.Spec.NodeName, nodes)
		}
		if !podCondition(&p, corev1.PodScheduled) {
			t.Errorf("pod %s has no PodScheduled=True condition: %+v", p.Name, p.Status.Conditions)
		}
		if p.Status.PodIP == "" {
			t.Errorf("pod %s has no IP", p.Name)
		}
	}
}

func podCondition(p *corev1.Pod, c corev1.PodConditionType) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == c {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
