package testenv

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/aws/awsfake"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
)

// NodeHookInterval is how often the e2e tests and `demo --control-plane`
// run their NodeHook.
const NodeHookInterval = 250 * time.Millisecond

// ASGInstance is an InService instance of an Auto Scaling group in the AWS
// fake.
type ASGInstance struct {
	ASG, ID, Zone, InstanceType string
}

// NodeHook plays EC2 and the kubelet for the Auto Scaling groups of an AWS
// fake, for legacy node groups on a control plane where kwok runs the
// nodes: every InService instance has a node, and a node Karpenter did not
// launch whose instance left its group is deleted with its pods, as EC2's
// termination, the node lifecycle controller and the pod garbage collector
// would. A node's instance is the last segment of its providerID.
type NodeHook struct {
	Client kubernetes.Interface
	AWS    *awsfake.Server
	// Node is the node for an instance that has none, created as given
	// (MarkKwok it); nil for an instance the hook should leave without one.
	Node func(ASGInstance) (*corev1.Node, error)

	mu sync.Mutex
	// gone are the nodes the hook deleted: a DaemonSet controller whose
	// cache still lists one may bind a pod to it afterwards.
	gone map[string]bool
	// lost are the pods that were still running on a node the hook
	// deleted (kube.LostWithNode): gone without an eviction.
	lost []string
}

// Lost names the pods that were still running on a node when the hook
// deleted it, as namespace/name on node.
func (h *NodeHook) Lost() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lost)
}

// Sync makes the cluster's legacy nodes match the groups' instances once.
func (h *NodeHook) Sync(ctx context.Context) error {
	want := map[string]ASGInstance{}
	h.AWS.Account(func(a *awsfake.Account) {
		for _, g := range a.AutoScaling.Groups {
			for _, in := range g.Instances {
				if in.LifecycleState == astypes.LifecycleStateInService || in.LifecycleState == "" {
					id := ptr.Deref(in.InstanceId, "")
					want[id] = ASGInstance{ASG: ptr.Deref(g.AutoScalingGroupName, ""), ID: id,
						Zone: ptr.Deref(in.AvailabilityZone, ""), InstanceType: ptr.Deref(in.InstanceType, "")}
				}
			}
		}
	})
	nodes, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!karpenter.sh/nodepool"})
	if err != nil {
		return fmt.Errorf("node hook: list nodes: %w", err)
	}
	have := map[string]bool{}
	for _, n := range nodes.Items {
		id := InstanceID(n.Spec.ProviderID)
		if _, ok := want[id]; ok {
			have[id] = true
			continue
		}
		if err := h.recordLost(ctx, n.Name); err != nil {
			return err
		}
		if err := h.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node hook: delete node %s of instance %s: %w", n.Name, id, err)
		}
		h.mu.Lock()
		if h.gone == nil {
			h.gone = map[string]bool{}
		}
		h.gone[n.Name] = true
		h.mu.Unlock()
	}
	if _, err := h.DeletePodsOnGoneNodes(ctx); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if have[id] {
			continue
		}
		n, err := h.Node(want[id])
		if err != nil {
			return fmt.Errorf("node hook: instance %s of %s: %w", id, want[id].ASG, err)
		}
		if n == nil {
			continue
		}
		if _, err := h.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("node hook: create node %s of instance %s: %w", n.Name, id, err)
		}
	}
	return nil
}

// recordLost records the pods still running on a node about to be deleted.
func (h *NodeHook) recordLost(ctx context.Context, node string) error {
	pods, err := h.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return fmt.Errorf("node hook: list pods on node %s: %w", node, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName == node && kube.LostWithNode(p) {
			h.lost = append(h.lost, fmt.Sprintf("%s/%s on %s", p.Namespace, p.Name, node))
		}
	}
	return nil
}

// DeletePodsOnGoneNodes deletes (grace 0) the pods bound to nodes the hook
// deleted, and returns their names.
func (h *NodeHook) DeletePodsOnGoneNodes(ctx context.Context) ([]string, error) {
	h.mu.Lock()
	names := slices.Sorted(maps.Keys(h.gone))
	h.mu.Unlock()
	var deleted []string
	for _, node := range names {
		pods, err := h.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return nil, fmt.Errorf("node hook: list pods on deleted node %s: %w", node, err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != node {
				continue
			}
			deleted = append(deleted, p.Namespace+"/"+p.Name)
			if err := h.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("node hook: delete pod %s/%s of deleted node %s: %w", p.Namespace, p.Name, node, err)
			}
		}
	}
	return deleted, nil
}

// InstanceID is the EC2 instance ID at the end of a node's providerID
// (aws:///<zone>/<id>).
func InstanceID(providerID string) string {
	return providerID[strings.LastIndex(providerID, "/")+1:]
}

// MarkKwok annotates a node for kwok to run: kwok manages it, and the
// node's TTL annotation (which kwok does not set) is zero.
func MarkKwok(n *corev1.Node) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[KwokAnnotation] = "fake"
	n.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
}

// KWOKNodeClass is the kwok provider's node class the tests and the demo
// point NodePools at: nodes register a second after launch.
const KWOKNodeClass = `apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
spec:
  nodeRegistrationDelay: 1s
`

// KWOKNodeClassFile is the file PointNodePoolsAtKwok writes KWOKNodeClass to.
const KWOKNodeClassFile = "kwoknodeclass.yaml"

const kwokNodeClassPatch = `- op: replace
  path: /spec/template/spec/nodeClassRef
  value: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
`

// PointNodePoolsAtKwok adds KWOKNodeClass to the kustomization in overlay
// (as KWOKNodeClassFile beside it) with a patch pointing every NodePool at
// it: the kwok provider launches nodes only for its own node class, so the
// real Karpenter then launches exactly what the NodePools say.
func PointNodePoolsAtKwok(overlay string) error {
	path := filepath.Join(overlay, "kustomization.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("point the NodePools at the kwok provider: %w", err)
	}
	var k map[string]any
	if err := yaml.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if k == nil {
		return fmt.Errorf("%s: empty kustomization", path)
	}
	res, _ := k["resources"].([]any)
	k["resources"] = append(res, KWOKNodeClassFile)
	patches, _ := k["patches"].([]any)
	k["patches"] = append(patches, map[string]any{"target": map[string]any{"kind": "NodePool"}, "patch": kwokNodeClassPatch})
	out, err := yaml.Marshal(k)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.WriteFile(filepath.Join(overlay, KWOKNodeClassFile), []byte(KWOKNodeClass), 0o644); err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
