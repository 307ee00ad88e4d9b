package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Finding is one readiness problem and what the migration does about it.
type Finding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Object   string `json:"object"`
	Message  string `json:"message"`
}

// Readiness checks an inventory for what commonly blocks or endangers a
// move, one finding per workload. It stands in for pkg/readiness.
func Readiness(inv *inventory.Inventory) []Finding {
	var out []Finding
	seen := map[string]bool{}
	add := func(id, sev, obj, msg string) {
		if seen[id+"|"+obj] {
			return
		}
		seen[id+"|"+obj] = true
		out = append(out, Finding{ID: id, Severity: sev, Object: obj, Message: msg})
	}
	zonal := map[string][]string{}
	for _, pv := range inv.PersistentVolumes {
		if len(pv.Zones) > 0 {
			zonal[pv.ClaimNamespace+"/"+pv.ClaimName] = pv.Zones
		}
	}
	for _, p := range inv.Pods {
		if p.OwnerKind == inventory.OwnerDaemonSet {
			continue
		}
		obj := p.Namespace + "/" + p.Name
		if p.OwnerName != "" {
			obj = fmt.Sprintf("%s %s/%s", p.OwnerKind, p.Namespace, p.OwnerName)
		}
		if p.OwnerKind == inventory.OwnerNone {
			add("bare-pod", "error", obj, "no controller recreates this pod after eviction; drain refuses it without --force")
		}
		if p.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false" {
			add("ca-safe-to-evict", "warning", obj, "Cluster Autoscaler's safe-to-evict=false is ignored by Karpenter; use karpenter.sh/do-not-disrupt (the drain still evicts it)")
		}
		if _, ok := p.NodeSelector["eks.amazonaws.com/nodegroup"]; ok {
			add("nodegroup-selector", "warning", obj, "selects eks.amazonaws.com/nodegroup; the generated NodePool keeps that label so it still schedules")
		}
		for _, v := range p.Volumes {
			switch v.Kind {
			case inventory.VolumeEmptyDir:
				add("local-storage", "warning", obj, fmt.Sprintf("emptyDir volume %q is lost when the pod moves", v.Name))
			case inventory.VolumePVC:
				if z := zonal[p.Namespace+"/"+v.ClaimName]; len(z) > 0 {
					add("zonal-volume", "info", obj, fmt.Sprintf("volume %s is pinned to %v; its NodePool must offer that zone", v.ClaimName, z))
				}
			}
		}
		if p.Requests.Cpu().IsZero() && p.Requests.Memory().IsZero() {
			add("no-requests", "warning", obj, "no CPU or memory requests: Karpenter cannot size nodes for it")
		}
	}
	for _, w := range inv.Workloads {
		if w.Kind == inventory.OwnerDeployment && w.Replicas == 1 {
			add("single-replica", "warning", fmt.Sprintf("Deployment %s/%s", w.Namespace, w.Name), "one replica: every move is an outage unless surged")
		}
	}
	for _, pdb := range inv.PDBs {
		if pdb.ExpectedPods > 0 && pdb.DesiredHealthy >= pdb.ExpectedPods {
			add("pdb-blocks-eviction", "error", fmt.Sprintf("PodDisruptionBudget %s/%s", pdb.Namespace, pdb.Name),
				fmt.Sprintf("allows no disruption (%d desired of %d); apply surges the workload by one replica while it drains", pdb.DesiredHealthy, pdb.ExpectedPods))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].Object < out[j].Object
	})
	return out
}

func (r *runner) stepReadiness(_ context.Context) (string, error) {
	fs := Readiness(&r.inv)
	kinds := map[string]int{}
	for _, f := range fs {
		kinds[f.ID]++
		r.sum.Findings = append(r.sum.Findings, fmt.Sprintf("%s: %s: %s", f.ID, f.Object, f.Message))
	}
	if err := writeJSON(filepath.Join(r.opts.OutDir, "readiness.json"), fs); err != nil {
		return "", err
	}
	var parts []string
	for _, k := range sortedKeys(kinds) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, kinds[k]))
	}
	return fmt.Sprintf("%d findings %v", len(fs), parts), nil
}
