package sandbox

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Provision decides the NodeClaims for pending pods with pkg/engine, the
// project's model of Karpenter's provisioner. Pods it cannot place stay
// pending with the engine's reason, as they would under Karpenter.
func (s *Sandbox) Provision(req ProvisionRequest) ProvisionResult {
	in := engine.Input{Catalog: catalog.Default()}
	for i := range req.NodePools {
		np := &req.NodePools[i]
		if lim, ok := np.Spec.Limits[corev1.ResourceCPU]; ok && req.CPUInUse[np.Name] >= lim.Value() {
			continue
		}
		in.NodePools = append(in.NodePools, engine.NodePoolFromV1(np, nil))
	}
	if len(in.NodePools) == 0 {
		return ProvisionResult{Unschedulable: unschedulableAll(req.Pods, "every NodePool is at its limits")}
	}
	for _, p := range req.Pods {
		var vols map[string]*corev1.NodeSelector
		if req.Volumes != nil {
			vols = req.Volumes(p)
		}
		in.Pods = append(in.Pods, podRecord(p, vols))
	}
	in.DaemonSets = daemonSetRecords(req.DaemonSets)
	out, err := engine.Solve(in)
	if err != nil {
		return ProvisionResult{Unschedulable: unschedulableAll(req.Pods, "provisioning engine: "+err.Error())}
	}
	res := ProvisionResult{Unschedulable: map[string]string{}}
	for _, nc := range out.NodeClaims {
		if _, ok := s.cat.Get(nc.InstanceType); !ok {
			for _, p := range nc.Pods {
				res.Unschedulable[p.String()] = fmt.Sprintf("instance type %s is not in the sandbox's catalog", nc.InstanceType)
			}
			continue
		}
		c := Claim{NodePool: nc.NodePool, Offering: Offering{InstanceType: nc.InstanceType, Zone: nc.Zone, CapacityType: nc.CapacityType,
			Price: s.price(nc.InstanceType, nc.Zone, nc.CapacityType)}}
		for _, p := range nc.Pods {
			c.Pods = append(c.Pods, p.String())
		}
		res.Claims = append(res.Claims, c)
	}
	for _, u := range out.Unschedulable {
		res.Unschedulable[u.Pod.String()] = u.String()
	}
	return res
}

// daemonSetRecords are DaemonSets as the inventory records them: what
// their pods request on every node they run on.
func daemonSetRecords(dss []appsv1.DaemonSet) []inventory.DaemonSet {
	out := make([]inventory.DaemonSet, 0, len(dss))
	for _, ds := range dss {
		spec := ds.Spec.Template.Spec
		r := PodRequests(&corev1.Pod{Spec: spec})
		delete(r, corev1.ResourcePods)
		out = append(out, inventory.DaemonSet{Namespace: ds.Namespace, Name: ds.Name, Labels: ds.Spec.Template.Labels,
			Requests: r, NodeSelector: spec.NodeSelector, Affinity: spec.Affinity, Tolerations: spec.Tolerations})
	}
	return out
}

func unschedulableAll(pods []*corev1.Pod, why string) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		out[podKey(p)] = why
	}
	return out
}

// podRecord is the inventory form of a pod the engine reads; its claim
// volumes carry the node affinity of the PVs bound to them (vols, by claim
// name), which the engine reads as Karpenter's volume topology does.
func podRecord(p *corev1.Pod, vols map[string]*corev1.NodeSelector) inventory.Pod {
	r := PodRequests(p)
	delete(r, corev1.ResourcePods)
	ip := inventory.Pod{
		Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, Phase: p.Status.Phase, Labels: p.Labels,
		Requests: r, NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity.DeepCopy(), Tolerations: p.Spec.Tolerations,
		TopologySpreadConstraints: p.Spec.TopologySpreadConstraints, PriorityClassName: p.Spec.PriorityClassName, Priority: p.Spec.Priority,
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		vol := inventory.Volume{Name: v.Name, Kind: inventory.VolumePVC, ClaimName: v.PersistentVolumeClaim.ClaimName}
		if sel := vols[vol.ClaimName]; sel != nil {
			vol.Topology = sel.NodeSelectorTerms
		}
		ip.Volumes = append(ip.Volumes, vol)
	}
	return ip
}
