package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// TestClientsServeTheRunner exercises, through Clients, what the rollout
// runner needs of a cluster that the fake clients do not do by themselves.
func TestClientsServeTheRunner(t *testing.T) {
	ctx := context.Background()
	s := load(t, smallInventory(3, nil, nil))
	c, ctx, cancel := s.Clients(ctx)
	defer cancel()

	t.Run("clock steps the simulation", func(t *testing.T) {
		before := c.Clock.Now()
		<-c.Clock.After(time.Millisecond)
		if got := c.Clock.Now().Sub(before); got != 5*time.Second {
			t.Errorf("a 1ms wait moved the clock %s, want one tick (5s)", got)
		}
		c.Clock.Sleep(12 * time.Second)
		if got := c.Clock.Now().Sub(before); got != 20*time.Second {
			t.Errorf("then a 12s sleep: %s in all, want 20s (whole ticks)", got)
		}
	})

	t.Run("settle reacts without time passing", func(t *testing.T) {
		pods, err := c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool {
			ref := metav1.GetControllerOf(&p)
			return ref != nil && ref.Kind == "ReplicaSet" && p.Spec.NodeName != ""
		})
		if i < 0 {
			t.Fatal("no ReplicaSet's pod bound to a node")
		}
		victim := pods.Items[i]
		owned := func() (all, bound int) {
			list, err := c.Kube.CoreV1().Pods(victim.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range list.Items {
				if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == metav1.GetControllerOf(&victim).UID {
					all++
					if p.Spec.NodeName != "" {
						bound++
					}
				}
			}
			return all, bound
		}
		want, _ := owned()
		before := c.Clock.Now()
		if err := c.Kube.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if all, _ := owned(); all != want-1 {
			t.Fatalf("after the delete, before settling: %d pods of its ReplicaSet, want %d (nothing reacts until then)", all, want-1)
		}
		c.Clock.Settle()
		if all, bound := owned(); all != want || bound != want {
			t.Errorf("settled: %d pods of its ReplicaSet, %d bound; want %d, all bound (its replacement created and placed)", all, bound, want)
		}
		if !c.Clock.Now().Equal(before) {
			t.Errorf("settling moved the clock from %s to %s", before, c.Clock.Now())
		}
	})

	t.Run("server-side apply creates then updates", func(t *testing.T) {
		np := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "p"},
			"spec": map[string]any{"limits": map[string]any{"cpu": "10"}},
		}}
		res := c.Dynamic.Resource(NodePoolGVR)
		first, err := res.Apply(ctx, "p", np, metav1.ApplyOptions{FieldManager: "t", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if first.GetUID() == "" {
			t.Error("a created NodePool has no UID")
		}
		_ = unstructured.SetNestedField(np.Object, "0", "spec", "limits", "cpu")
		second, err := res.Apply(ctx, "p", np, metav1.ApplyOptions{FieldManager: "t", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if cpu, _, _ := unstructured.NestedString(second.Object, "spec", "limits", "cpu"); cpu != "0" || second.GetUID() != first.GetUID() {
			t.Errorf("after the second apply: cpu %q, UID %s (was %s); want 0 and the same UID", cpu, second.GetUID(), first.GetUID())
		}
		if _, err := res.Patch(ctx, "p", types.MergePatchType, []byte(`{"spec":{"limits":{"cpu":"5"}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("merge patch: %v", err)
		}
		if _, err := res.Apply(ctx, "other", np, metav1.ApplyOptions{}); !apierrors.IsBadRequest(err) {
			t.Errorf("apply under another name: %v, want BadRequest", err)
		}
	})

	t.Run("scale subresource", func(t *testing.T) {
		d := c.Kube.AppsV1().Deployments("app")
		sc, err := d.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Spec.Replicas != 3 {
			t.Fatalf("scale of web = %d, want 3", sc.Spec.Replicas)
		}
		sc.Spec.Replicas = 1
		if _, err := d.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.Clock.Sleep(30 * time.Second)
		if n := len(pods(t, s, "app")); n != 1 {
			t.Errorf("%d web pods after scaling to 1, want 1", n)
		}
	})

	t.Run("placeholders take a priority and give way", func(t *testing.T) {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: -100, PreemptionPolicy: ptr(corev1.PreemptNever)}
		if _, err := c.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A 3-CPU placeholder on each m5.xlarge node (3.92 CPU allocatable):
		// web-0's node has 0.42 CPU left, the other 0.92.
		for _, name := range []string{"ph-0", "ph-1"} {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{"role": "placeholder"}},
				Spec: corev1.PodSpec{PriorityClassName: "low", Containers: []corev1.Container{{Name: "pause", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}
			got, err := c.Kube.CoreV1().Pods("app").Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.Priority == nil || *got.Spec.Priority != -100 || got.Spec.PreemptionPolicy == nil || *got.Spec.PreemptionPolicy != corev1.PreemptNever {
				t.Fatalf("placeholder priority %v, policy %v; want -100 and Never", got.Spec.Priority, got.Spec.PreemptionPolicy)
			}
		}
		c.Clock.Sleep(30 * time.Second)
		sc, err := c.Kube.AppsV1().Deployments("app").GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sc.Spec.Replicas = 3
		if _, err := c.Kube.AppsV1().Deployments("app").UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.Clock.Sleep(30 * time.Second)
		ready, placeholders := 0, 0
		for _, p := range pods(t, s, "app") {
			switch {
			case p.Labels["role"] == "placeholder":
				placeholders++
			case podutils.IsPodReady(&p):
				ready++
			}
		}
		// One new pod fits beside a placeholder; the other takes a
		// placeholder's room.
		if st := s.Stats(); ready != 3 || st.Preempted != 1 || placeholders != 1 {
			t.Errorf("%d web pods ready, %d preemptions, %d placeholders left; want 3, 1, 1", ready, st.Preempted, placeholders)
		}
	})

	t.Run("delete-collection by label", func(t *testing.T) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ph-2", Labels: map[string]string{"role": "placeholder"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause"}}}}
		if _, err := c.Kube.CoreV1().Pods("app").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Kube.CoreV1().Pods("app").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "role=placeholder"}); err != nil {
			t.Fatal(err)
		}
		web := 0
		for _, p := range pods(t, s, "app") {
			if p.Labels["role"] == "placeholder" {
				t.Errorf("pod %s survived the delete-collection", p.Name)
			}
			if p.Labels["app"] == "web" {
				web++
			}
		}
		if web != 3 {
			t.Errorf("%d web pods after deleting the placeholders, want 3 untouched", web)
		}
	})

	t.Run("rollout restart surges", func(t *testing.T) {
		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"restartedAt":"now"}}}}}`)
		if _, err := c.Kube.AppsV1().Deployments("app").Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// Never fewer than 3 ready pods (maxUnavailable 25% of 3 is 0),
		// never more than 4 pods (maxSurge 25% rounds up to 1).
		for range 24 {
			c.Clock.Sleep(5 * time.Second)
			ready, all := 0, 0
			for _, p := range pods(t, s, "app") {
				all++
				if podutils.IsPodReady(&p) {
					ready++
				}
			}
			if ready < 3 || all > 4 {
				t.Fatalf("at %s: %d ready of %d pods; want >= 3 ready, <= 4 pods", s.Now().Format(time.TimeOnly), ready, all)
			}
		}
		d, err := c.Kube.AppsV1().Deployments("app").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.UpdatedReplicas != 3 || d.Status.Replicas != 3 || d.Status.AvailableReplicas != 3 {
			t.Errorf("status %+v; want 3 updated, 3 replicas, 3 available", d.Status)
		}
		for _, p := range pods(t, s, "app") {
			if p.Annotations["restartedAt"] != "now" {
				t.Errorf("pod %s runs the old template", p.Name)
			}
		}
	})
	if err := c.Clock.Err(); err != nil {
		t.Fatalf("simulation: %v", err)
	}

	t.Run("counted requests are the counted client's", func(t *testing.T) {
		req := &kube.Requests{}
		counted := c.Counted(req)
		if _, err := c.Kube.CoreV1().Pods("app").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err) // not counted: another client
		}
		list, err := counted.CoreV1().Pods("app").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("list through the counted client: %d pods, %v", len(list.Items), err)
		}
		p := list.Items[0]
		if err := counted.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}); err != nil {
			t.Fatal(err)
		}
		w, err := counted.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		c.Clock.Sleep(time.Second) // the fakes forget their actions, not the counts
		if got, want := req.Counts().String(), "create pods/eviction 1; list pods 1; watch nodes 1"; got != want {
			t.Errorf("counted %q, want %q", got, want)
		}
	})
}
