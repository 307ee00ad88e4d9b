package testenv_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

const karpenterTaint = "testenv.karpenter-migrate.io/karpenter"

// karpenterObjects is a KWOKNodeClass and a NodePool whose nodes carry a
// taint, so that only pods tolerating it make Karpenter launch nodes.
var karpenterObjects = fmt.Sprintf(`
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
spec:
  nodeRegistrationDelay: 1s
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: testenv
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.kwok.sh
        kind: KWOKNodeClass
        name: default
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
      taints:
        - key: %s
          value: "true"
          effect: NoSchedule
      expireAfter: Never
  limits:
    cpu: "100"
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 10s
`, karpenterTaint)

var nodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// TestKarpenterLaunchesAndConsolidates runs the real Karpenter (kwok
// provider) on its own control plane: pending pods that select its NodePool
// get new nodes, and once the pods are gone the empty nodes are removed after
// consolidateAfter.
func TestKarpenterLaunchesAndConsolidates(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Karpenter: true, InstanceTypesFile: writeInstanceTypes(t)})
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()

	// A node-group node for everything that is not Karpenter's.
	if _, err := env.CreateKwokNode(ctx, testenv.NodeSpec{Name: "legacy-0", NodeGroup: "legacy"}); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitForNodesReady(ctx, "legacy-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.ApplyYAML(ctx, "", []byte(karpenterObjects)); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)

	const replicas = 5
	inflate := deployment("inflate", replicas, "", "1")
	inflate.Spec.Template.Spec.NodeSelector = map[string]string{"karpenter.sh/nodepool": "testenv"}
	inflate.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: karpenterTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	began := time.Now()
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, inflate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := env.WaitForPodsRunning(ctx, ns, "app=inflate", replicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pending pods Running on Karpenter's nodes %s after creation", replicas, time.Since(began).Round(time.Millisecond))

	launched := karpenterNodes(ctx, t, env)
	if len(launched) < 2 {
		t.Fatalf("Karpenter launched %d nodes for %d 1-CPU pods, want at least 2 (no type in the file has 5 CPUs)", len(launched), replicas)
	}
	var launchedTypes []string
	for name, node := range launched {
		it := node.Labels[corev1.LabelInstanceTypeStable]
		launchedTypes = append(launchedTypes, it)
		if _, ok := instanceTypes[it]; !ok {
			t.Errorf("node %s has instance type %q, want one of the instance types file", name, it)
		}
		if zone := node.Labels[corev1.LabelTopologyZone]; !strings.HasPrefix(zone, "us-east-1") {
			t.Errorf("node %s is in zone %q, want a us-east-1 zone of the file", name, zone)
		}
	}
	for _, p := range pods {
		if _, ok := launched[p.Spec.NodeName]; !ok {
			t.Errorf("pod %s runs on %s, not on a node Karpenter launched (%v)", p.Name, p.Spec.NodeName, launched)
		}
	}
	claims, err := env.Dynamic.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != len(launched) {
		t.Errorf("%d NodeClaims for %d launched nodes", len(claims.Items), len(launched))
	}
	t.Logf("Karpenter launched %d nodes (%v) for %d pods", len(launched), launchedTypes, replicas)

	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "inflate", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitForPodsRunning(ctx, ns, "app=inflate", 0); err != nil {
		t.Fatal(err)
	}
	emptied := time.Now()

	// Karpenter v1.14.1 re-evaluates consolidation only on a cluster-state
	// change or every 5 minutes; a pod binding elsewhere is such a change.
	nudges := 0
	err = env.WaitFor(ctx, "Karpenter to remove its empty nodes", func(ctx context.Context) (bool, error) {
		claims, err := env.Dynamic.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(claims.Items) == 0 && len(karpenterNodes(ctx, t, env)) == 0 {
			return true, nil
		}
		if time.Since(emptied) > time.Duration(nudges+1)*10*time.Second {
			nudges++
			return false, nudge(ctx, env, ns, nudges)
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("empty nodes removed %s after the pods were gone (consolidateAfter 10s, %d nudges)", time.Since(emptied).Round(time.Millisecond), nudges)
}

// karpenterNodes returns the nodes of the testenv NodePool by name.
func karpenterNodes(ctx context.Context, t *testing.T, env *testenv.Env) map[string]corev1.Node {
	t.Helper()
	list, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool=testenv"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]corev1.Node{}
	for _, n := range list.Items {
		nodes[n.Name] = n
	}
	return nodes
}

// instanceType is one entry of the instance types file: AWS shapes and
// us-east-1 on-demand prices (spot at 40%).
type instanceType struct {
	cpu, memory, pods string
	onDemand          float64
}

var instanceTypes = map[string]instanceType{
	"m5.large":  {"2", "8Gi", "29", 0.096},
	"m5.xlarge": {"4", "16Gi", "58", 0.192},
	"c5.xlarge": {"4", "8Gi", "58", 0.17},
}

// writeInstanceTypes writes instanceTypes in the format of Karpenter's
// kwok/examples/aws_instance_types.json (INSTANCE_TYPES_FILE_PATH), offered
// on demand and as spot in three us-east-1 zones, and returns its path.
func writeInstanceTypes(t *testing.T) string {
	t.Helper()
	var types []testenv.KwokInstanceType
	for name, it := range instanceTypes {
		types = append(types, testenv.SimpleKwokType(name, it.cpu, it.memory, it.pods, it.onDemand, []string{"us-east-1a", "us-east-1b", "us-east-1c"}))
	}
	path := filepath.Join(t.TempDir(), "instance-types.json")
	if err := testenv.WriteInstanceTypes(path, types); err != nil {
		t.Fatal(err)
	}
	return path
}

// nudge binds a tiny pod to the legacy node and deletes it again, a cluster
// state change that makes Karpenter look at consolidation again.
func nudge(ctx context.Context, env *testenv.Env, ns string, i int) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nudge-%d", i)},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: "legacy-0"},
			Containers:   []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create nudge pod: %w", err)
	}
	err := env.WaitFor(ctx, "nudge pod scheduled", func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
	if err != nil {
		return err
	}
	zero := int64(0)
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return fmt.Errorf("delete nudge pod: %w", err)
	}
	return nil
}
