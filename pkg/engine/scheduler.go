package engine

import (
	"slices"
	"sort"
	"unsafe"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

type scheduler struct {
	opts                Options
	ri                  *resourceIndex
	wellKnown           map[string]bool
	pools               []*pool
	uses                []*poolUse // by pool position; nil: nothing taken yet
	existing            []*node
	claims              []*node
	byCount             [][][]countEntry // part, pod count
	maxCount            int              // 1 + the most pods in a bucket so far
	partKey             string           // the partition key (partition.go), "" for none
	partOf              map[string]int   // its domains' parts
	parts               int
	zeroGroups          []*topologyGroup // groups keeping their claims with hc 0
	scratch             []candidate
	repackScratch       repackScratch
	fitBuf              []*itype // newClaim's and commit's scratch
	fits                map[fitKey]*fitEntry
	keysCache           map[string][]bool
	keyBuf              []byte // scratch for cache keys
	groups              []*topologyGroup
	groupsByID          map[string]*topologyGroup
	groupsByRaw         map[string]*topologyGroup   // group's cache by the term as written
	selectedByForm      map[string][]*topologyGroup // computeSelected's, by namespace and labels
	nsSets              map[string]map[string]bool  // podNamespace's
	universe            map[string][]domainSource
	univ                map[string][]string
	anyPreferNoSchedule bool
	seq                 int
	nextID              int
	compat              map[compatKey]*compatEntry
	domCache            map[domKey][]string
	rooms               []roomIndex // per part
	typePreps           map[typeSource]*typePrep
	result              Result
}

func wellKnownSet() map[string]bool {
	m := map[string]bool{catalog.LabelZone: true, catalog.LabelCapacityType: true, catalog.LabelNodePool: true,
		"node.kubernetes.io/windows-build": true, catalog.LabelHostname: true}
	for _, k := range catalog.WellKnownLabels() {
		m[k] = true
	}
	return m
}

func newScheduler(opts Options) *scheduler {
	s := &scheduler{opts: opts, ri: newResourceIndex(), wellKnown: wellKnownSet(), groupsByID: map[string]*topologyGroup{}, universe: map[string][]domainSource{},
		compat: map[compatKey]*compatEntry{}, domCache: map[domKey][]string{}, typePreps: map[typeSource]*typePrep{}, keysCache: map[string][]bool{}}
	if s.opts.MaxInstanceTypes == 0 {
		s.opts.MaxInstanceTypes = 60
	}
	return s
}

// Solve predicts what Karpenter launches for the pending pods, improves on
// its price without breaking a constraint, and explains every pod it cannot
// place. It is pure and deterministic.
func Solve(in Input) (Result, error) { return solve(in, nil, nil) }

// solve is Solve with the pools prepared once for in's NodePools,
// DaemonSets and Catalog (nil: prepare them) and, where built[i] is not
// nil, in.ExistingNodes[i] built once (buildExisting); built only when no
// pod, bound or to place, declares topology.
func solve(in Input, pre *preparedPools, built []*node) (Result, error) {
	s := newScheduler(in.Options)
	pods, err := s.queue(in, pre, built)
	if err != nil {
		return Result{}, err
	}
	// The bounds are a tenth of a large solve; they are worked out on
	// another core while improve and finalize run (see lowerBound).
	var bounds chan [2]float64
	if !s.opts.SkipLowerBounds {
		bounds = make(chan [2]float64, 1)
		onClaims := s.podsOnClaims(pods)
		go func() {
			lb, topo := s.lowerBound(onClaims)
			bounds <- [2]float64{lb, topo}
		}()
	}
	if !s.opts.KarpenterOnly {
		s.improve()
		s.tighten()
	}
	s.finalize()
	if bounds != nil {
		b := <-bounds
		s.result.LowerBound, s.result.TopologyLowerBound = b[0], b[1]
	}
	return s.result, nil
}

// queue builds the pools and existing nodes and places the pods as
// Karpenter's queue does: the result before improve, and the valid pods in
// queue order.
func (s *scheduler) queue(in Input, pre *preparedPools, built []*node) ([]*podData, error) {
	if pre != nil {
		s.usePrepared(pre)
	} else if err := s.buildPools(in); err != nil {
		return nil, err
	}
	if err := s.buildExisting(in, built); err != nil {
		return nil, err
	}
	pods, invalid := s.podsOf(in.Pods)
	s.countExisting()
	for _, pd := range pods {
		s.computeSelected(pd)
	}
	s.indexParts()
	sortQueue(pods)
	left, failures := s.schedule(pods)
	s.reportUnschedulable(invalid, left, failures)
	s.result.KarpenterCost = s.totalCost()
	return pods, nil
}

// domainsOf is the key's domains, sorted; false when no pool or node has
// the key. Only topology asks (most simulations never do), after the pools
// and existing nodes are built: the first call indexes every key.
func (s *scheduler) domainsOf(key string) ([]string, bool) {
	if s.univ == nil {
		s.univ = map[string][]string{}
		for key, srcs := range s.universe {
			var ds []string
			for _, src := range srcs {
				ds = append(ds, src.domain)
			}
			s.univ[key] = sortedUnique(ds)
		}
	}
	u, ok := s.univ[key]
	return u, ok
}

// reportUnschedulable lists the invalid pods and those the queue left, by
// name.
func (s *scheduler) reportUnschedulable(invalid, left []*podData, failures map[*podData]map[string]string) {
	for _, pd := range invalid {
		s.result.Unschedulable = append(s.result.Unschedulable, Unschedulable{Pod: pd.ref, Reasons: map[string]string{"": "invalid pod: " + pd.invalid.Error()}})
	}
	for _, pd := range left {
		s.result.Unschedulable = append(s.result.Unschedulable, Unschedulable{Pod: pd.ref, Reasons: failures[pd]})
	}
	sort.Slice(s.result.Unschedulable, func(i, j int) bool {
		return s.result.Unschedulable[i].Pod.String() < s.result.Unschedulable[j].Pod.String()
	})
}

// trySchedule is Karpenter's add-then-relax loop; nil on success, else the
// reasons per NodePool.
func (s *scheduler) trySchedule(pd *podData) map[string]string {
	for {
		reasons := s.add(pd)
		if reasons == nil {
			return nil
		}
		if !pd.relax(s) {
			return reasons
		}
	}
}

// add places the pod on an existing node, an in-flight claim, or a new
// claim, in that order.
func (s *scheduler) add(pd *podData) map[string]string {
	for _, n := range s.existing {
		if narrowed, ok := s.canAdd(pd, n); ok {
			s.commit(pd, n, narrowed)
			return nil
		}
	}
	if n, narrowed := s.pickClaim(pd); n != nil {
		s.commit(pd, n, narrowed)
		return nil
	}
	for _, p := range s.pools {
		if n, _ := s.newClaim(pd, p, false); n != nil {
			s.commit(pd, n, nil)
			return nil
		}
	}
	reasons := map[string]string{}
	if len(s.existing) > 0 || len(s.claims) > 0 {
		reasons[""] = "does not fit on any existing or in-flight node"
	}
	for _, p := range s.pools {
		_, reasons[p.name] = s.newClaim(pd, p, true)
	}
	if len(s.pools) == 0 {
		reasons[""] = "no NodePools and no existing node fits"
	}
	return reasons
}

// canAdd checks taints, host ports, resources, requirements and topology;
// for claims it returns the narrowed requirements.
func (s *scheduler) canAdd(pd *podData, n *node) (Requirements, bool) {
	if len(n.taints) > 0 {
		if _, ok := tolerates(pd.pod.Tolerations, n.taints, !pd.tolerateNS); !ok {
			return nil, false
		}
	}
	for _, hp := range pd.ports {
		if n.ports[hp] {
			return nil, false
		}
	}
	if !hostnameOK(pd, n) {
		return nil, false
	}
	if n.existing {
		return nil, s.canAddExisting(pd, n)
	}
	return s.canAddClaim(pd, n)
}

// commit places the pod.
func (s *scheduler) commit(pd *podData, n *node, narrowed Requirements) {
	s.seq++
	if n.existing {
		n.free = n.free.sub(pd.req)
		n.vols.add(pd.pod)
		s.result.Placements = append(s.result.Placements, Placement{Pod: pd.ref, Node: n.name, Seq: s.seq})
	} else {
		narrows := narrowed != nil && !sameMap(narrowed, n.reqs)
		var keys []string
		if narrows {
			keys = diffKeys(n.reqs, narrowed)
			narrows = len(keys) > 0
			n.reqs = narrowed
		}
		n.used = n.used.add(pd.req)
		// The narrowed keys drop the types compat rejects, unless it is the
		// pool's allCompat (the zone offers every type); they may change the
		// cheapest offering either way.
		var compat []bool
		if narrows {
			f := offerFilterOf(n.reqs)
			compat = s.keysCompat(n.pool, n.reqs, keys, &f)
		}
		filter := narrows && (!commitShortcuts || unsafe.SliceData(compat) != unsafe.SliceData(n.pool.allCompat))
		switch {
		case !filter && !n.used.fits(n.minAlloc) && s.dropOutgrown(n):
			n.cur = s.cheapestIndex(n)
		case filter || !n.used.fits(n.minAlloc):
			// A claim that owns its types filters them in place; one still on
			// fitFor's shared list gathers them in scratch and copies them.
			kept := n.types[:0]
			if !n.ownTypes {
				kept = s.fitBuf[:0]
			}
			dims := s.dims()
			b := newAllocBounds(dims)
			for _, t := range n.types {
				if n.used.fitsIn(&t.alloc, dims) && (!filter || compat[t.idx]) {
					kept = append(kept, t)
					if dims <= rExt {
						b.addCPUMem(&t.alloc)
						b.addPodsEph(&t.alloc)
					} else {
						b.add(&t.alloc)
					}
				}
			}
			if n.ownTypes {
				clear(n.types[len(kept):])
				n.types = kept
			} else {
				n.types, n.ownTypes = slices.Clone(kept), true
				s.fitBuf = kept[:0]
			}
			n.maxAlloc, n.minAlloc = b.result()
			n.cur = s.cheapestIndex(n)
		case narrows || !n.used.fits(n.types[n.cur].alloc):
			n.cur = s.cheapestIndex(n)
		}
		part := s.partOfClaim(n)
		s.moveBucket(n, len(n.pods), len(n.pods)+1, part)
		if !s.opts.KarpenterOnly {
			s.removeRoom(n)
			s.putRoom(n, part)
		}
	}
	for _, hp := range pd.ports {
		if n.ports == nil {
			n.ports = map[inventory.HostPort]bool{}
		}
		n.ports[hp] = true
	}
	n.pods = append(n.pods, pd)
	n.seqs = append(n.seqs, s.seq)
	s.record(pd, n, 1)
}

func (s *scheduler) totalCost() float64 {
	var c float64
	for _, n := range s.claims {
		if n.dead || len(n.pods) == 0 {
			continue
		}
		if o, ok := n.types[n.cur].cheapest(n.reqs); ok {
			c += o.Price
		}
	}
	return c
}
