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
//
// # Where this differs from Karpenter, on purpose
//
//   - Improvement (unless Options.KarpenterOnly): a pod first goes to the
//     in-flight claim whose current cheapest type already has room for it
//     (best fit, no extra cost) before Karpenter's fewest-pods-first rule;
//     afterwards pods that declare no topology terms are moved off claims
//     into room other claims already pay for, keeping a move only when the
//     source claim gets cheaper or empty. KarpenterCost reports Karpenter's
//     own greedy result for comparison.
//   - A claim's zone is pinned as soon as a pod that a zone-keyed group
//     counts lands on it, so the counts are exact; Karpenter leaves such pods
//     uncounted until the node exists.
//   - Inventory pods already on existing nodes are assumed to include their
//     DaemonSet pods; DaemonSet overhead is not added to existing nodes.
//   - Namespace selectors on affinity terms are honoured only when empty
//     (all namespaces); volume topology, DRA and reserved capacity are not
//     modelled. minValues is parsed but not enforced.
//
// # Lower bound
//
// LowerBound groups the pods placed on new claims into components that can
// share no instance type and, per component, takes the larger of the LP
// relaxation over CPU and memory (fractional nodes of the allowed types,
// solved through its two-variable dual) and the single-resource bounds
// (total request × cheapest price per unit of allocatable, DaemonSet
// overhead already taken out of allocatable). No placement can be cheaper.
package engine
