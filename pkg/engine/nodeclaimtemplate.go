package engine

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

type pool struct {
	idx          int
	name         string
	weight       int32
	reqs         Requirements
	taints       []corev1.Taint
	types        []*itype // compatible with the pool, by cheapest price
	maxAlloc     vec
	limited      bool
	limitMask    vec // 1 where a limit applies
	hasNodeLimit bool
	pos          int // in the scheduler's pools, for its uses
	zones        []string
	ds           vec
	limit        vec // spec.limits as given (with limitMask)
	nodeLimitMax int64
	minValues    []Requirement // requirements with minValues (minvalues.go)
	// sufMin[i] is the component-wise minimum allocatable of types[i:]:
	// a claim whose used fits it is held by every later type (dropOutgrown).
	sufMin    []vec
	allCompat []bool // true for every type: keysCompat's answer when no type fails
}

// poolUse is what one solve's claims took of a pool: the pools themselves
// stay as buildPools left them, so the Solves of a Cluster share them.
type poolUse struct {
	remaining vec // of the limits
	nodeLimit int64
	seq       int // claims named so far
}

// use is the pool's use, made on the first claim.
func (s *scheduler) use(p *pool) *poolUse {
	u := s.uses[p.pos]
	if u == nil {
		u = &poolUse{remaining: p.limit, nodeLimit: p.nodeLimitMax}
		s.uses[p.pos] = u
	}
	return u
}

// claimsNamed is how many claims of the pool were named so far.
func (s *scheduler) claimsNamed(p *pool) int {
	if u := s.uses[p.pos]; u != nil {
		return u.seq
	}
	return 0
}

// preparedPools is what buildPools derives from an Input, kept for many
// Solves of the same NodePools (Cluster): with hundreds of NodePools,
// preparing the catalogue for each is most of a simulation.
type preparedPools struct {
	ri                  *resourceIndex
	pools               []*pool
	zones               []domainSource
	anyPreferNoSchedule bool
}

// prepared keeps what buildPools derived; call it before any scheduling.
func (s *scheduler) prepared() *preparedPools {
	return &preparedPools{ri: s.ri.clone(), pools: s.pools, zones: slices.Clone(s.universe[catalog.LabelZone]),
		anyPreferNoSchedule: s.anyPreferNoSchedule}
}

// usePrepared is buildPools from what an earlier one derived: the pools
// are shared, read-only (what claims take of them is in s.uses).
func (s *scheduler) usePrepared(pre *preparedPools) {
	s.ri = pre.ri.clone()
	s.pools = slices.Clone(pre.pools)
	s.uses = make([]*poolUse, len(s.pools))
	if len(pre.zones) > 0 {
		// Clipped: the existing nodes' zones are appended to a copy.
		s.universe[catalog.LabelZone] = slices.Clip(pre.zones)
	}
	s.anyPreferNoSchedule = pre.anyPreferNoSchedule
}

func (s *scheduler) buildPools(in Input) error {
	catTypes := map[string][]InstanceType{}
	for i := range in.NodePools {
		np := &in.NodePools[i]
		p, err := s.newPool(i, np)
		if err != nil {
			return err
		}
		types, err := poolTypes(in, np, catTypes)
		if err != nil {
			return err
		}
		dsOverhead, err := s.daemonOverhead(in.DaemonSets, p)
		if err != nil {
			return err
		}
		p.ds = dsOverhead
		if err := s.addTypes(p, types); err != nil {
			return fmt.Errorf("nodePool %s: %w", np.Name, err)
		}
		if err := s.setLimits(p, np); err != nil {
			return fmt.Errorf("nodePool %s: spec.limits: %w", np.Name, err)
		}
		s.pools = append(s.pools, p)
	}
	sort.SliceStable(s.pools, func(i, j int) bool {
		if s.pools[i].weight != s.pools[j].weight {
			return s.pools[i].weight > s.pools[j].weight
		}
		return s.pools[i].name < s.pools[j].name
	})
	for i, p := range s.pools {
		p.pos = i
	}
	s.uses = make([]*poolUse, len(s.pools))
	return nil
}

// newPool is the NodePool's name, weight, requirements and taints.
func (s *scheduler) newPool(i int, np *NodePool) (*pool, error) {
	if np.Name == "" {
		return nil, fmt.Errorf("nodePools[%d]: name is required", i)
	}
	p := &pool{idx: i, name: np.Name, weight: 0, reqs: Requirements{}}
	if np.Spec.Weight != nil {
		p.weight = *np.Spec.Weight
	}
	for j, r := range np.Spec.Template.Spec.Requirements {
		req, err := NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			return nil, fmt.Errorf("nodePool %s: spec.template.spec.requirements[%d]: %w", np.Name, j, err)
		}
		if r.MinValues != nil {
			req.MinValues = *r.MinValues
		}
		p.reqs.Add(req)
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		p.reqs.Add(mustIn(k, v))
	}
	p.reqs.Add(mustIn(catalog.LabelNodePool, np.Name))
	p.minValues = minValueReqs(p.reqs)
	p.taints = np.Spec.Template.Spec.Taints
	for _, t := range p.taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			s.anyPreferNoSchedule = true
		}
	}
	return p, nil
}

// poolTypes is the NodePool's instance types: its own, or the catalogue's
// under its kubelet settings (built once per distinct kubelet).
func poolTypes(in Input, np *NodePool, catTypes map[string][]InstanceType) ([]InstanceType, error) {
	if np.InstanceTypes != nil {
		return np.InstanceTypes, nil
	}
	if in.Catalog == nil {
		return nil, fmt.Errorf("nodePool %s: no instance types: set Input.Catalog or NodePool.InstanceTypes", np.Name)
	}
	key := np.Kubelet.Key()
	if cached, ok := catTypes[key]; ok {
		return cached, nil
	}
	types, err := InstanceTypesFromCatalog(in.Catalog, np.Kubelet)
	if err != nil {
		return nil, fmt.Errorf("nodePool %s: EC2NodeClass kubelet: %w", np.Name, err)
	}
	catTypes[key] = types
	return types, nil
}

// addTypes prepares the types the pool allows, cheapest first, and adds
// the zones they are offered in to the universe.
func (s *scheduler) addTypes(p *pool, types []InstanceType) error {
	zones := map[string]bool{}
	for ti := range types {
		it, err := s.prepareType(&types[ti], p, p.ds)
		if err != nil {
			return fmt.Errorf("instance type %s: %w", types[ti].Name, err)
		}
		if it == nil {
			continue
		}
		p.types = append(p.types, it)
		for e := range p.maxAlloc {
			p.maxAlloc[e] = max(p.maxAlloc[e], it.alloc[e])
		}
		for _, o := range it.offerings {
			zones[o.Zone] = true
		}
	}
	sort.SliceStable(p.types, func(a, b int) bool { return p.types[a].offerings[0].Price < p.types[b].offerings[0].Price })
	for i, t := range p.types {
		t.idx = i
	}
	p.allCompat = make([]bool, len(p.types))
	for i := range p.allCompat {
		p.allCompat[i] = true
	}
	p.sufMin = make([]vec, len(p.types))
	for i := len(p.types) - 1; i >= 0; i-- {
		m := p.types[i].alloc
		if i+1 < len(p.types) {
			for e := range m {
				m[e] = min(m[e], p.sufMin[i+1][e])
			}
		}
		p.sufMin[i] = m
	}
	for z := range zones {
		p.zones = append(p.zones, z)
	}
	sort.Strings(p.zones)
	for _, z := range p.zones {
		s.universe[catalog.LabelZone] = append(s.universe[catalog.LabelZone], domainSource{domain: z, taints: p.taints})
	}
	return nil
}

// setLimits reads spec.limits; "nodes" counts claims.
func (s *scheduler) setLimits(p *pool, np *NodePool) error {
	lim := np.Spec.Limits
	if len(lim) == 0 {
		return nil
	}
	p.limited = true
	for name, q := range lim {
		if name == "nodes" {
			p.hasNodeLimit, p.nodeLimitMax = true, q.Value()
			continue
		}
		slot, err := s.ri.slot(name)
		if err != nil {
			return err
		}
		p.limit[slot] = qval(slot, q)
		p.limitMask[slot] = 1
	}
	return nil
}

// daemonOverhead sums the requests of DaemonSets whose pods would run on the
// pool's nodes (taints tolerated, node selector and required affinity
// compatible with the pool).
func (s *scheduler) daemonOverhead(dss []inventory.DaemonSet, p *pool) (vec, error) {
	var total vec
	for _, ds := range dss {
		if _, ok := tolerates(ds.Tolerations, p.taints, false); !ok {
			continue
		}
		reqs := Requirements{}
		for k, v := range ds.NodeSelector {
			reqs.Add(mustIn(k, v))
		}
		compatible := true
		if a := ds.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			compatible = false
			for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				rs, err := FromNodeSelectorTerm(term.MatchExpressions)
				if err != nil {
					return total, fmt.Errorf("daemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
				}
				for _, r := range reqs {
					rs.Add(r)
				}
				if p.reqs.compatible(rs, s.wellKnown) {
					compatible = true
					break
				}
			}
		} else if !p.reqs.compatible(reqs, s.wellKnown) {
			compatible = false
		}
		if !compatible {
			continue
		}
		v, err := s.ri.vec(ds.Requests)
		if err != nil {
			return total, fmt.Errorf("daemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		v[rPods]++
		total = total.add(v)
	}
	return total, nil
}

func (s *scheduler) withinLimits(p *pool, t *itype) bool {
	return s.withinLimitsCap(p, &t.capacity)
}

// withinLimitsCap reports whether a type of this capacity is within what
// the pool's limits leave.
func (s *scheduler) withinLimitsCap(p *pool, capacity *vec) bool {
	if !p.limited {
		return true
	}
	remaining := &p.limit
	if u := s.uses[p.pos]; u != nil {
		remaining = &u.remaining
	}
	for e := range capacity {
		if p.limitMask[e] == 1 && capacity[e] > remaining[e] {
			return false
		}
	}
	return true
}
