package engine

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// A non-nil built[i] is in.ExistingNodes[i] as this loop would build it,
// minus its pods (see Cluster.built).
func (s *scheduler) buildExisting(in Input, built []*node) error {
	for i := range in.ExistingNodes {
		if built != nil && built[i] != nil {
			s.useBuilt(built[i])
			continue
		}
		en := &in.ExistingNodes[i]
		if en.Node.Unschedulable {
			continue
		}
		alloc, err := s.ri.vec(en.Node.Allocatable)
		if err != nil {
			return fmt.Errorf("existing node %s: %w", en.Node.Name, err)
		}
		lbl := existingLabels(en)
		n := &node{id: s.nextID, name: en.Node.Name, existing: true, labels: lbl, taints: en.Node.Taints, free: alloc, ports: map[inventory.HostPort]bool{}, bucket: -1, room: -1,
			vols: newAttached(en.Node.VolumeLimits)}
		s.nextID++
		for j := range en.Pods {
			p := &en.Pods[j]
			pd := s.newPodData(p, -1)
			if pd.invalid != nil {
				return fmt.Errorf("existing node %s: pod %s: %w", n.name, pd.ref, pd.invalid)
			}
			if err := s.buildTopology(pd); err != nil {
				return fmt.Errorf("existing node %s: pod %s: %w", n.name, pd.ref, err)
			}
			n.free = n.free.sub(pd.req)
			for _, hp := range p.HostPorts {
				n.ports[hp] = true
			}
			n.vols.add(p)
			n.pods = append(n.pods, pd)
		}
		for k, v := range lbl {
			if k != catalog.LabelHostname {
				s.universe[k] = append(s.universe[k], domainSource{domain: v, taints: n.taints})
			}
		}
		s.existing = append(s.existing, n)
	}
	return nil
}

// existingLabels are an existing node's labels for scheduling, with its
// hostname label when the node lacks one.
func existingLabels(en *ExistingNode) map[string]string {
	lbl := maps.Clone(en.Node.Labels)
	if lbl == nil {
		lbl = map[string]string{}
	}
	if _, ok := lbl[catalog.LabelHostname]; !ok {
		lbl[catalog.LabelHostname] = en.Node.Name
	}
	return lbl
}

// useBuilt adds a copy of a node built earlier: its room and host ports
// change as pods are placed; its labels and taints are only read. Built
// nodes come only with pods that declare no topology, so its labels are
// not added to the universe of domains: only topology reads it.
func (s *scheduler) useBuilt(b *node) {
	n := *b
	n.id = s.nextID
	s.nextID++
	n.ports = maps.Clone(b.ports)
	n.vols = b.vols.clone()
	s.existing = append(s.existing, &n)
}

// canAddExisting is canAdd's part for an existing node: volume attach
// limits, room, labels and topology.
func (s *scheduler) canAddExisting(pd *podData, n *node) bool {
	if n.vols.exceeds(pd.pod) || !pd.req.fits(n.free) {
		return false
	}
	for k, r := range pd.reqs {
		v, ok := n.labels[k]
		if ok && !r.Has(v) {
			return false
		}
		if !ok {
			if op := r.Operator(); op != corev1.NodeSelectorOpNotIn && op != corev1.NodeSelectorOpDoesNotExist {
				return false
			}
		}
	}
	_, ok := s.topology(pd, n, nil)
	return ok
}

// countExisting counts the pods already bound to existing nodes.
func (s *scheduler) countExisting() {
	for _, n := range s.existing {
		for _, pd := range n.pods {
			s.computeSelected(pd)
			s.record(pd, n, 1)
		}
	}
}
