// Package engine predicts what Karpenter launches for a set of pending pods
// and does it faster and cheaper: a pure provisioning scheduler with
// Karpenter's vocabulary (Requirements, topology groups, NodeClaims filled
// in flight, existing nodes, a retrying queue) and semantics, an improvement
// pass, a lower bound on the fleet's price, and an independent checker.
//
// # API
//
//	res, err := engine.Solve(engine.Input{
//		Pods:          pending,            // []inventory.Pod
//		ExistingNodes: nodes,              // nodes and in-flight claims, with their pods
//		NodePools:     []engine.NodePool{engine.NodePoolFromV1(np, nodeClass)},
//		DaemonSets:    inv.DaemonSets,
//		Catalog:       catalog.Default(),
//	})
//	res.NodeClaims     // new nodes: NodePool, cheapest type/zone/capacity type, options, pods
//	res.Placements     // pods bound to existing nodes
//	res.Unschedulable  // per pod, a reason per NodePool
//	res.Cost, res.KarpenterCost, res.LowerBound   // $/h
//	errs := engine.Check(in, res)                 // independent re-verification
//
// Solve takes plain values and has no clients, clocks or globals; the same
// input gives the same result. Consolidation simulates "scheduling without
// these nodes" by passing the remaining nodes as ExistingNodes and the
// candidates' pods as Pods; a rollout planner sizes a wave's
// pre-provisioning from res.NodeClaims; a sandbox stand-in launches them.
//
// # Files
//
// Named for the concepts of Karpenter v1.14's scheduler
// (pkg/controllers/provisioning/scheduling, "K:" below), so a Karpenter
// contributor finds each where they would look for it:
//
//	scheduler.go         Solve, the scheduler's state, add-then-relax and commit    K: scheduler.go
//	queue.go             the pod order and the retry until no progress              K: queue.go
//	pod.go               podData, the scheduler's view of a pod                     K: scheduler.go (PodData)
//	preferences.go       relaxation order                                           K: preferences.go
//	nodeclaimtemplate.go a NodePool as the scheduler sees it (pool, limits, DS)     K: nodeclaimtemplate.go
//	nodeclaim.go         a claim being filled: open, pick, canAddClaim              K: nodeclaim.go
//	existingnode.go      existing nodes: build, count, canAddExisting               K: existingnode.go
//	topology.go          domains, counting, the topology a placement must pass      K: topology.go
//	topologygroup.go     topologyGroup, one term shared by the pods declaring it    K: topologygroup.go
//	requirements.go      Requirement(s): set algebra on label requirements          K: pkg/scheduling/requirement(s).go
//	offerings.go         instance types as a pool sees them, cheapest offerings     K: pkg/cloudprovider/types.go
//	taints.go            tolerations                                                K: pkg/scheduling/taints.go
//	volumes.go           volume topology and attach limits                          K: volumetopology.go, pkg/scheduling/volumeusage.go
//	minvalues.go         minValues on claims and launch options                     K: nodeclaim.go, instance_selection
//	resources.go         resource vectors                                           K: pkg/utils/resources
//	roomindex.go         claims by room left (best fit; ours)
//	claimindex.go        claims by zone (partitions) and the few a hostname term leaves (ours)
//	repack.go            the improvement pass; repackclass.go (classes, dual prices), repackfill.go (top-up, new bins),
//	                     repackmove.go (the tightening pass: claims drop to cheaper types by moving pods to paid-for room)
//	finalize.go          the Result's NodeClaims; bound.go the lower bounds
//	cluster.go           Cluster: one prepared cluster for many simulations
//	check.go             Check, independent of all the above; checkmatch.go, checktopology.go
//
// # Semantics (Karpenter v1.14, pkg/controllers/provisioning/scheduling)
//
//   - Pods are queued by CPU then memory, descending (then namespace/name,
//     since the inventory has no creation time or UID); a pod that fails is
//     retried until a full pass makes no progress.
//   - Each pod goes to the first existing node that fits, else an in-flight
//     NodeClaim (fewest pods first), else a new NodeClaim from the NodePools
//     in weight order. Requirements: nodeSelector + the active required
//     node-affinity term (OR terms are tried in turn) + the heaviest
//     preferred term; In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte;
//     custom labels must be defined by the NodePool, well-known ones may be
//     left to the instance types.
//   - Relaxation order: required node-affinity OR terms, preferred pod
//     affinity (heaviest first), preferred anti-affinity, preferred node
//     affinity, ScheduleAnyway spreads, then PreferNoSchedule taints.
//     IgnorePreferences drops preferences up front.
//   - Taints: NoSchedule and NoExecute must be tolerated, startup taints
//     need not be. Host ports may not collide on a node.
//   - Topology spread (any key; maxSkew, minDomains, whenUnsatisfiable,
//     nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys) uses
//     count + self − min ≤ maxSkew over every domain a NodePool or node can
//     provide; for hostname the minimum is 0. Required and (respected)
//     preferred pod affinity and anti-affinity on any key; required
//     anti-affinity is also enforced in reverse.
//   - DaemonSet overhead per NodePool (DaemonSets that tolerate its taints
//     and are compatible with its requirements) is reserved on every new
//     node. NodePool limits are charged with the largest option of each new
//     claim, as Karpenter does; a "nodes" limit counts claims.
//   - A NodeClaim keeps every feasible type; the result lists them by price
//     (MaxInstanceTypes, default 60) and names the cheapest offering as the
//     predicted launch.
//   - Volumes (volumes.go): a pod's claim volumes carry what Karpenter's
//     volumetopology.go reads (inventory.ResolveVolumes: a bound PV's
//     node affinity zones, an unbound claim's StorageClass
//     allowedTopologies); their requirements (the cross product of each
//     volume's terms, compatible combinations first) narrow the node the
//     pod goes to but not the domains its own topology spread counts.
//     Attach limits (volumeusage.go): an existing node with CSINode limits
//     takes a pod only while the distinct claims per CSI driver stay within
//     the driver's limit; new NodeClaims have no limit, as in Karpenter.
//   - minValues (minvalues.go): a claim of a pool whose requirements carry
//     minValues keeps, among its remaining types, at least minValues
//     distinct values of each such key. A pod that would narrow a claim
//     below that does not join it; a claim whose fitting types fall short
//     is not opened, and the pod's reason names minValues.
//
// # Where this differs from Karpenter, on purpose
//
//   - Improvement (unless Options.KarpenterOnly): in the greedy pass a pod
//     first goes to the in-flight claim whose current cheapest type already
//     has room for it (best fit through an index of claims by free CPU, no
//     extra cost) before Karpenter's fewest-pods-first rule. Then a re-pack
//     (repack.go) takes every "movable" pod (no host ports, no topology
//     terms but pod affinity in a zone its claim has chosen, counted by no
//     pod affinity but in such a zone) off the claims, shrinks each claim
//     to the cheapest type holding what is left, and packs the movable pods
//     again with the LP's dual prices of CPU and memory: first into room the
//     remaining claims already pay for (least used claims first), then into bigger types for them when
//     that gives more value per dollar, then into new claims, each opened on
//     the type (one candidate per size and CPU:memory band) whose balanced
//     fill has the most value per dollar (a claim with no zone requirement
//     takes a moved pod's zone). Moved pods keep their zone for every
//     zone-keyed group that counts them or that they declare and their
//     place in the order, so every constraint judged at placement time
//     still holds. The re-pack
//     is kept only when the fleet is cheaper without more nodes (or at least
//     5 % cheaper); when it needs more nodes, the pods of the claims it
//     opened beyond the greedy's count go to grown claims, and only when that
//     is not cheaper with no more nodes does a second re-pack grow existing
//     claims first. Then a tightening pass (repackmove.go), one sweep over
//     the claims: a claim drops to the cheapest type it can reach by handing
//     a few of its pods (those the re-pack moves, and zone-spread pods) to
//     room other claims' current types already have, in the same pool and
//     zone pins, so no other claim changes type and no zone count changes.
//     KarpenterCost is the cost after the greedy pass, before
//     the re-pack; Options.KarpenterOnly gives Karpenter's own greedy result.
//   - Among in-flight claims with as many pods, the order is zone by zone
//     (the parts of claimindex.go), then the order they reached that count;
//     Karpenter's sort by pod count is unstable there.
//   - A claim's zone is pinned as soon as a pod that a zone-keyed group
//     counts lands on it, so the counts are exact; Karpenter leaves such pods
//     uncounted until the node exists.
//   - Inventory pods already on existing nodes are assumed to include their
//     DaemonSet pods; DaemonSet overhead is not added to existing nodes.
//   - Namespace selectors on affinity terms are honoured only when empty
//     (all namespaces); DRA and reserved capacity are not modelled.
//   - A pod whose volumes give several topology alternatives keeps one
//     requirement set: their union when every alternative is one In
//     requirement on the same key (a volume's zones, a class's allowed
//     zones: the same nodes), else the first alternative; Karpenter tries
//     each in turn. A bound PV is read by its zones only (discover records
//     the zone keys of its node affinity); an unbound claim of an Immediate
//     class, which Karpenter does not schedule, is treated like one of a
//     WaitForFirstConsumer class.
//   - minValues is enforced as --min-values-policy Strict (the default);
//     BestEffort relaxation is not modelled. When the output is truncated
//     to MaxInstanceTypes, the options are taken cheapest first but, once
//     the slots left only just cover the values still missing, only types
//     that add a missing value are taken; Karpenter truncates by price
//     alone and fails the claim if that breaks minValues. The re-pack is
//     undone when it would leave a claim short of minValues.
//
// # Lower bound
//
// LowerBound groups the pods placed on new claims into components that can
// share no instance type and, per component, takes the larger of the LP
// relaxation over CPU and memory (fractional nodes of the allowed types,
// solved through its two-variable dual) and the single-resource bounds
// (total request × cheapest price per unit of allocatable, DaemonSet
// overhead already taken out of allocatable). Pods are classed by their
// requirements, tolerations and the extended resources they request; a
// class may use only types big enough for its smallest pod, which keeps GPU
// pods from being priced on CPU-only types. No placement can be cheaper.
//
// TopologyLowerBound adds what required topology forces: pods that a
// required hostname anti-affinity term keeps one per node (they declare the
// term and match its selector) need at least as many nodes as the largest
// such group has pods, each a type that holds one of them. Per component the
// LP gets that row (Σ x_t ≥ k over those types; its dual has a third
// variable, found by a ternary search around lpDual), and the larger of the
// two is taken. Preferences force nothing (BenchmarkPreferences keeps its
// cost/lb of 2), nor does hostname spread (its skew counts against the
// emptiest node, which may hold pods too). Not charged per pod: a node that
// holds a forced pod may hold others for free, so "cheapest type per forced
// pod plus the LP over the rest" would not be a bound. The dual is searched
// coarsely (about 50 LPs) and at z's upper end; every z it tries is a
// feasible dual, so a coarser search can lower the bound but never make it
// invalid. TestLowerBoundsAreLowerBounds checks both bounds against the
// brute-force optimum of 400 small random instances (and that the same
// check rejects the per-pod charge above).
//
// Both bounds read only which pods the queue put on claims, which the
// re-pack keeps (it moves pods from claim to claim), so Solve works them
// out on another core while improve and finalize run
// (TestImproveKeepsThePodsOnClaims).
//
// # Shortcuts
//
// For speed (#20) the scheduler keeps, per form, what many pods or claims
// would work out alike, and skips what cannot change an answer; each gives
// the slow path's answer, and shortcuts_test.go (with
// TestFewClaimsListGivesTheScansAnswer in check_test.go) holds each to it:
// topology groups by the term as written, the groups selecting a pod by
// its namespace and labels, a new claim's fitting types by pod shape
// (fitFor, kept while the pool's limits hold the largest), the types
// compatible with a claim's requirements and those offered under a zone /
// capacity-type filter (reqsCompat, offeredUnder), resource checks over
// the slots in use (fitsIn), the second re-pack from a snapshot of the
// prepared state, a top-up's candidate types filled only when the pods
// left could make them win, and each band's best candidate read from the
// pool's types by band and efficiency.
//
// # Benchmarks
//
// go test -run x -bench . -benchmem ./pkg/engine/... reports pods/s (wall),
// pods/cpu-s and cpu-ms/op (user+system CPU of the process, which on a
// shared machine says more than wall time), nodes, $/h, karpenter$/h
// (after the greedy pass), lb$/h, topo-lb$/h and cost/lb (against the
// topology-aware bound), and runs Check on the result. `make
// bench-karpenter` runs Karpenter's own BenchmarkScheduling5000 beside
// BenchmarkKarpenterMix5000 and prints the ratio. BenchmarkRealCatalogue's
// workload (realisticMix in bench_test.go, 2,000 pods): web 30 % (250m /
// 512Mi, zone spread maxSkew 1), API 25 % (500m / 1Gi), workers 20 % (1 /
// 2Gi), batch 19 % (2 / 4Gi), caches 5 % (500m / 8Gi), GPU 1 % (3 / 12Gi +
// 1 nvidia.com/gpu, tolerating the gpu pool's taint); NodePools "general"
// (c/m/r, generation > 4, amd64, spot + on-demand) and "gpu" (g, on-demand,
// tainted).
package engine
