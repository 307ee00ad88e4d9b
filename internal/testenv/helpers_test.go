package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// groupLabel ties a test's pods to the kwok nodes it created, so tests that
// share a control plane never schedule onto each other's nodes.
const groupLabel = "testenv.karpenter-migrate.io/group"

// createNodes creates n Ready kwok nodes named <group>-<first>,
// <group>-<first+1>, ... in node group group, labelled with groupLabel, and
// deletes them when the test ends.
func createNodes(t *testing.T, env *testenv.Env, group string, first, n int) []string {
	t.Helper()
	ctx := t.Context()
	var names []string
	for i := first; i < first+n; i++ {
		name := fmt.Sprintf("%s-%d", group, i)
		_, err := env.CreateKwokNode(ctx, testenv.NodeSpec{
			Name:      name,
			Zone:      []string{"us-east-1a", "us-east-1b", "us-east-1c"}[i%3],
			NodeGroup: group,
			Labels:    map[string]string{groupLabel: group},
		})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		t.Cleanup(func() {
			if err := env.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete node %s: %v", name, err)
			}
		})
	}
	if err := env.WaitForNodesReady(ctx, names...); err != nil {
		t.Fatal(err)
	}
	return names
}

// deployment is a pause Deployment of replicas pods (app=name) that each
// request cpu and run only on the nodes of group.
func deployment(name string, replicas int32, group, cpu string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{groupLabel: group},
					Containers: []corev1.Container{{
						Name:  "pause",
						Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
						},
					}},
				},
			},
		},
	}
}

// createPDB creates a PodDisruptionBudget over app=name with minAvailable.
func createPDB(t *testing.T, env *testenv.Env, ns, name string, minAvailable int) {
	t.Helper()
	min := intstr.FromInt(minAvailable)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		},
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PDB: %v", err)
	}
}

// waitPDB waits until the disruption controller has observed the PDB's
// latest spec and allows exactly allowed disruptions.
func waitPDB(ctx context.Context, t *testing.T, env *testenv.Env, ns, name string, allowed int32) {
	t.Helper()
	err := env.WaitFor(ctx, fmt.Sprintf("PDB %s allowing %d disruptions", name, allowed), func(ctx context.Context) (bool, error) {
		pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// logWriter sends drain's progress output to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
