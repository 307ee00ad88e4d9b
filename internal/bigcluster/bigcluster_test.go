package bigcluster_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/internal/bigcluster"
	"github.com/karpenter-migrate/karpenter-migrate/internal/sandbox"
)

// The sandbox loads a replicated demo: each copy's Deployment gets a
// ReplicaSet of its own (the copies' kube-system pods named
// "<pod>-r2" once gave two copies' ReplicaSets one name) and every pod
// of the snapshot runs.
func TestReplicaLoadsInSandbox(t *testing.T) {
	ctx := context.Background()
	demoInv, err := bigcluster.DemoSnapshot(ctx, bigcluster.DemoSeed)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := bigcluster.Replicate(*demoInv, 3, bigcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Options{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Load(ctx, inv); err != nil {
		t.Fatalf("load the demo replicated 3 times: %v", err)
	}
	cl, ctx, cancel := sb.Clients(ctx)
	defer cancel()
	rs, err := cl.Kube.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deps, err := cl.Kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Items) != len(deps.Items) || len(deps.Items) == 0 {
		t.Errorf("%d ReplicaSets for %d Deployments, want one each", len(rs.Items), len(deps.Items))
	}
	pods, err := cl.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(inv.Pods) {
		t.Errorf("%d pods loaded, the snapshot has %d", len(pods.Items), len(inv.Pods))
	}
}
