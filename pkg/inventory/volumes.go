package inventory

import (
	corev1 "k8s.io/api/core/v1"
)

// EBSCSIDriver is the CSI driver of EBS volumes, the in-tree
// kubernetes.io/aws-ebs plugin's CSI name.
const EBSCSIDriver = "ebs.csi.aws.com"

// inTreeEBS is the in-tree EBS provisioner, which CSI translation maps to
// EBSCSIDriver (Karpenter's driverFromSC through csi-translation-lib).
const inTreeEBS = "kubernetes.io/aws-ebs"

// CSIDriverOf is the CSI driver a StorageClass's provisioner names: the
// provisioner itself, or its CSI name for the in-tree EBS plugin.
func CSIDriverOf(provisioner string) string {
	if provisioner == inTreeEBS {
		return EBSCSIDriver
	}
	return provisioner
}

// ZoneTerms are a volume's zones as node selector terms: one term, the
// zone label In the zones (nil without zones).
func ZoneTerms(zones []string) []corev1.NodeSelectorTerm {
	if len(zones) == 0 {
		return nil
	}
	return []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: append([]string(nil), zones...)}}}}
}

// ClassTerms are a StorageClass's allowedTopologies as node selector terms
// (each term ORed, each expression In), as Karpenter's volume topology
// reads them for an unbound claim.
func ClassTerms(sc StorageClass) []corev1.NodeSelectorTerm {
	var out []corev1.NodeSelectorTerm
	for _, t := range sc.AllowedTopologies {
		var term corev1.NodeSelectorTerm
		for _, e := range t.MatchLabelExpressions {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
		}
		if len(term.MatchExpressions) > 0 {
			out = append(out, term)
		}
	}
	return out
}

// ResolveVolumes fills each pod's claim volumes with what Karpenter reads
// of them (sigs.k8s.io/karpenter v1.14 provisioning/scheduling's
// volumetopology.go and scheduling's volumeusage.go): a claim bound to a
// volume takes the volume's zones and driver; an unbound claim takes its
// StorageClass's allowedTopologies and provisioner. A claim the inventory
// knows nothing about (no claim, volume or class recorded) keeps what the
// pod already says. Snapshots older than Claims find a volume by its
// claimRef. Discover and ParseSnapshot call it; it is idempotent.
func (inv *Inventory) ResolveVolumes() {
	if len(inv.PersistentVolumes)+len(inv.Claims) == 0 {
		return
	}
	type key struct{ ns, name string }
	claims := make(map[key]*PersistentVolumeClaim, len(inv.Claims))
	for i := range inv.Claims {
		c := &inv.Claims[i]
		claims[key{c.Namespace, c.Name}] = c
	}
	pvs := make(map[string]*PersistentVolume, len(inv.PersistentVolumes))
	byClaim := make(map[key]*PersistentVolume, len(inv.PersistentVolumes))
	for i := range inv.PersistentVolumes {
		pv := &inv.PersistentVolumes[i]
		pvs[pv.Name] = pv
		if pv.ClaimName != "" {
			byClaim[key{pv.ClaimNamespace, pv.ClaimName}] = pv
		}
	}
	classes := make(map[string]StorageClass, len(inv.StorageClasses))
	for _, sc := range inv.StorageClasses {
		classes[sc.Name] = sc
	}
	for i := range inv.Pods {
		p := &inv.Pods[i]
		for j := range p.Volumes {
			v := &p.Volumes[j]
			if v.Kind != VolumePVC || v.ClaimName == "" {
				continue
			}
			k := key{p.Namespace, v.ClaimName}
			c, known := claims[k]
			var pv *PersistentVolume
			switch {
			case known && c.VolumeName != "":
				pv = pvs[c.VolumeName]
			case !known:
				pv = byClaim[k]
			}
			switch {
			case pv != nil:
				v.Topology, v.Driver = ZoneTerms(pv.Zones), pv.Driver
			case known && c.VolumeName == "":
				sc, ok := classes[c.StorageClass]
				if ok {
					v.Topology, v.Driver = ClassTerms(sc), CSIDriverOf(sc.Provisioner)
				}
			}
		}
	}
}

// VolumesConstrain reports whether a volume of the pod limits where it may run:
// a zone or other topology, or an attach counted against a node's limit.
func (p *Pod) VolumesConstrain() bool {
	for _, v := range p.Volumes {
		if len(v.Topology) > 0 || v.Driver != "" {
			return true
		}
	}
	return false
}
