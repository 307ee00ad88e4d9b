package testenv_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// TestEvictionHonoursPDB checks the Eviction API against a real
// PodDisruptionBudget: 429 while it allows no disruption, 201 once it allows
// one, and the ReplicaSet's replacement lands on another, uncordoned node.
func TestEvictionHonoursPDB(t *testing.T) {
	t.Parallel()
	env := cluster.Env(t)
	ns := env.Namespace(t)
	ctx := t.Context()

	createNodes(t, env, ns, 0, 3)
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, deployment("web", 2, ns, "500m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := env.WaitForPodsRunning(ctx, ns, "app=web", 2)
	if err != nil {
		t.Fatal(err)
	}
	createPDB(t, env, ns, "web", 2)
	waitPDB(ctx, t, env, ns, "web", 0)

	victim := pods[0]
	cordon(t, env, victim.Spec.NodeName)

	code, err := evict(ctx, env, ns, victim.Name)
	if code != http.StatusTooManyRequests {
		t.Fatalf("eviction with 0 disruptions allowed: HTTP %d (%v), want 429", code, err)
	}
	if want := "Cannot evict pod as it would violate the pod's disruption budget."; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("eviction error = %v, want %q", err, want)
	}

	patch := []byte(`{"spec":{"minAvailable":null,"maxUnavailable":1}}`)
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDB(ctx, t, env, ns, "web", 1)
	if code, err := evict(ctx, env, ns, victim.Name); code != http.StatusCreated {
		t.Fatalf("eviction with 1 disruption allowed: HTTP %d (%v), want 201", code, err)
	}

	// The eviction deleted the victim, so it no longer counts as running.
	names := []string{pods[0].Name, pods[1].Name}
	if pods, err = env.WaitForPodsRunning(ctx, ns, "app=web", 2); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if slices.Contains(names, p.Name) {
			continue
		}
		if p.Spec.NodeName == victim.Spec.NodeName {
			t.Errorf("replacement %s landed on the cordoned node %s", p.Name, p.Spec.NodeName)
		}
		node, err := env.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.Unschedulable {
			t.Errorf("replacement %s landed on unschedulable node %s", p.Name, node.Name)
		}
		t.Logf("replacement %s runs on %s (victim was on %s)", p.Name, p.Spec.NodeName, victim.Spec.NodeName)
	}
}

// evict posts an Eviction for the pod and returns the HTTP status code. It
// does not retry, so that a 429 reaches the caller as it was sent.
func evict(ctx context.Context, env *testenv.Env, ns, pod string) (int, error) {
	body, err := json.Marshal(&policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
	})
	if err != nil {
		return 0, err
	}
	var code int
	err = env.Client.CoreV1().RESTClient().Post().
		Namespace(ns).Resource("pods").Name(pod).SubResource("eviction").
		SetHeader("Content-Type", "application/json").Body(body).
		MaxRetries(0).Do(ctx).StatusCode(&code).Error()
	return code, err
}

// cordon marks a node unschedulable.
func cordon(t *testing.T, env *testenv.Env, node string) {
	t.Helper()
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cordon %s: %v", node, err)
	}
}
