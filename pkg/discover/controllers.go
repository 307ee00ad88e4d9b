package discover

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// caBoolFlags are Cluster Autoscaler's boolean flags: given bare they mean
// true and never take the next argument as their value (pflag semantics).
var caBoolFlags = map[string]bool{
	"alsologtostderr": true, "aws-use-static-instance-list": true, "balance-similar-node-groups": true,
	"cordon-node-before-terminating": true, "daemonset-eviction-for-empty-nodes": true,
	"daemonset-eviction-for-occupied-nodes": true, "emit-per-nodegroup-metrics": true,
	"enforce-node-group-min-size": true, "force-ds": true, "ignore-daemonsets-utilization": true,
	"ignore-mirror-pods-utilization": true, "leader-elect": true, "logtostderr": true,
	"parallel-drain": true, "scale-down-enabled": true, "skip-nodes-with-custom-controller-pods": true,
	"skip-nodes-with-local-storage": true, "skip-nodes-with-system-pods": true,
	"write-status-configmap": true, "scale-up-from-zero": true, "enable-proactive-scaleup": true,
}

// parseCAArgs reads Cluster Autoscaler's command line (command then args):
// --flag=value, --flag value and bare boolean flags, with one or two
// dashes. The binary name and anything that is not a flag are skipped.
func parseCAArgs(ca *inventory.ClusterAutoscaler, args []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "" {
			continue
		}
		if !hasVal {
			val = "true"
			if !caBoolFlags[name] && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				val = args[i+1]
				i++
			}
		}
		switch name {
		case "node-group-auto-discovery":
			ca.AutoDiscovery = append(ca.AutoDiscovery, val)
		case "nodes":
			ca.Nodes = append(ca.Nodes, val)
		default:
			if ca.Flags == nil {
				ca.Flags = map[string]string{}
			}
			ca.Flags[name] = val
		}
	}
}

// isClusterAutoscaler recognises the Cluster Autoscaler container of a
// Deployment by its image or by the labels the upstream manifest and the
// Helm chart set.
func isClusterAutoscaler(dep *appsv1.Deployment, c corev1.Container) bool {
	if strings.Contains(imageName(c.Image), "cluster-autoscaler") {
		return true
	}
	l := dep.Labels
	byLabel := l["app"] == "cluster-autoscaler" || l["k8s-app"] == "cluster-autoscaler" ||
		l["app.kubernetes.io/name"] == "aws-cluster-autoscaler" || l["app.kubernetes.io/name"] == "cluster-autoscaler"
	// A labelled Deployment may carry sidecars: take the container that runs the autoscaler.
	return byLabel && (len(dep.Spec.Template.Spec.Containers) == 1 || strings.Contains(c.Name, "autoscaler") ||
		strings.Contains(strings.Join(c.Command, " "), "cluster-autoscaler"))
}

// imageName is an image reference without its registry path, tag or digest.
func imageName(img string) string {
	img, _, _ = strings.Cut(img, "@")
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		img = img[:i]
	}
	return img[strings.LastIndex(img, "/")+1:]
}

// nodePoolVersions are the karpenter.sh versions that serve NodePools,
// newest first.
var nodePoolVersions = []string{"v1", "v1beta1"}

// nodePools lists the names of the NodePools of the newest karpenter.sh
// version the server serves. It reads object metadata only, page by page,
// through the clientset's discovery REST client; a clientset without one
// (client-go's fake) lists none.
func (d *run) nodePools(ctx context.Context, served map[string]bool) error {
	rc := d.src.Kube.Discovery().RESTClient()
	if rc == nil {
		return nil
	}
	for _, v := range nodePoolVersions {
		if !served["nodepools.karpenter.sh/"+v] {
			continue
		}
		var names []string
		cont := ""
		for {
			req := rc.Get().AbsPath("/apis/karpenter.sh", v, "nodepools").
				SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json").
				Param("limit", "500")
			if cont != "" {
				req = req.Param("continue", cont)
			}
			raw, err := req.DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("list karpenter.sh/%s NodePools: %w", v, err)
			}
			var list metav1.PartialObjectMetadataList
			if err := json.Unmarshal(raw, &list); err != nil {
				return fmt.Errorf("list karpenter.sh/%s NodePools: decode: %w", v, err)
			}
			for _, it := range list.Items {
				names = append(names, it.Name)
			}
			if cont = list.Continue; cont == "" {
				break
			}
		}
		sort.Strings(names)
		d.inv.Karpenter.NodePools = names
		return nil
	}
	return nil
}
