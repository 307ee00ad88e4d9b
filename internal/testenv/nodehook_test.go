package testenv

import (
	"context"
	"slices"
	"strings"
	"testing"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
)

// TestNodeHook: every InService instance of a group gets the node Node
// makes (none for a group it declines), a node whose instance left its
// group is deleted with its pods, Karpenter's nodes are left alone, and a
// pod bound to a deleted node afterwards is deleted too. Lost names the
// pods that ran on a node when it went, but a DaemonSet's.
func TestNodeHook(t *testing.T) {
	inst := func(id string, state astypes.LifecycleState) astypes.Instance {
		return astypes.Instance{InstanceId: ptr.To(id), AvailabilityZone: ptr.To("us-east-1a"), InstanceType: ptr.To("m5.large"), LifecycleState: state}
	}
	acct := &awsfake.Account{ID: "111122223333", Region: "us-east-1"}
	acct.AutoScaling.Groups = []astypes.AutoScalingGroup{
		{AutoScalingGroupName: ptr.To("apps"), Instances: []astypes.Instance{
			inst("i-1", astypes.LifecycleStateInService), inst("i-2", astypes.LifecycleStateInService), inst("i-3", astypes.LifecycleStatePending)}},
		{AutoScalingGroupName: ptr.To("other"), Instances: []astypes.Instance{inst("i-4", astypes.LifecycleStateInService)}},
	}
	aws := awsfake.New(acct)
	defer aws.Close()

	node := func(name, id string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id}}
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	daemon := func(name, node string) *corev1.Pod {
		p := pod(name, node)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}
		return p
	}
	cs := fake.NewClientset(
		node("karpenter-a", "i-k", map[string]string{"karpenter.sh/nodepool": "default"}),
		node("old", "i-9", nil),
		pod("on-old", "old"), pod("on-karpenter", "karpenter-a"), daemon("agent-old", "old"),
	)
	var asked []string
	h := &NodeHook{Client: cs, AWS: aws, Node: func(in ASGInstance) (*corev1.Node, error) {
		asked = append(asked, in.ASG+"/"+in.ID)
		if in.ASG != "apps" {
			return nil, nil
		}
		if in.Zone != "us-east-1a" || in.InstanceType != "m5.large" {
			t.Errorf("instance %+v: want zone us-east-1a, type m5.large", in)
		}
		return KwokNode(NodeSpec{Name: "apps-" + strings.TrimPrefix(in.ID, "i-"), ProviderID: "aws:///" + in.Zone + "/" + in.ID})
	}}
	ctx := context.Background()
	names := func(nodes bool) string {
		t.Helper()
		var out []string
		if nodes {
			l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range l.Items {
				out = append(out, n.Name)
			}
		} else {
			l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range l.Items {
				out = append(out, p.Name)
			}
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}

	if err := h.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := names(true), "apps-1,apps-2,karpenter-a"; got != want {
		t.Errorf("nodes after the first sync = %s, want %s", got, want)
	}
	if got, want := names(false), "on-karpenter"; got != want {
		t.Errorf("pods after the first sync = %s, want %s", got, want)
	}
	if got, want := strings.Join(h.Lost(), ","), "app/on-old on old"; got != want {
		t.Errorf("Lost after the first sync = %q, want %q", got, want)
	}
	if got, want := strings.Join(asked, ","), "apps/i-1,apps/i-2,other/i-4"; got != want {
		t.Errorf("Node asked for %s, want %s (InService instances without a node, in order)", got, want)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "apps-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations[KwokAnnotation] != "fake" {
		t.Errorf("node apps-1 annotations %v: not marked for kwok", n.Annotations)
	}

	// i-2 terminated: its node goes; a pod bound to it afterwards too.
	aws.Account(func(a *awsfake.Account) {
		a.AutoScaling.Groups[0].Instances = slices.DeleteFunc(a.AutoScaling.Groups[0].Instances, func(in astypes.Instance) bool { return *in.InstanceId == "i-2" })
	})
	asked = nil
	if err := h.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := names(true), "apps-1,karpenter-a"; got != want {
		t.Errorf("nodes after i-2 left = %s, want %s", got, want)
	}
	if _, err := cs.CoreV1().Pods("app").Create(ctx, pod("late", "apps-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted, err := h.DeletePodsOnGoneNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deleted, ","); got != "app/late" {
		t.Errorf("DeletePodsOnGoneNodes deleted %q, want app/late", got)
	}
	if got, want := names(false), "on-karpenter"; got != want {
		t.Errorf("pods at the end = %s, want %s", got, want)
	}
	if got, want := strings.Join(h.Lost(), ","), "app/on-old on old"; got != want {
		t.Errorf("Lost at the end = %q, want %q (apps-2 had no pod when it went)", got, want)
	}
}
