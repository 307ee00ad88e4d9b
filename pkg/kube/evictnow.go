package kube

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// EvictionPass is what one EvictNow pass did on a node.
type EvictionPass struct {
	Node string `json:"node"`
	// Evicted are the pods whose eviction the API server accepted.
	Evicted []string `json:"evicted,omitempty"`
	// Blocked are the pods it refused with 429 (a PodDisruptionBudget at
	// its minimum): the next pass asks again.
	Blocked []string `json:"blocked,omitempty"`
	// Skipped are the pods a drain leaves on the node, and why.
	Skipped []SkippedPod `json:"skipped,omitempty"`
}

// Drained reports whether the pass found no pod left to evict.
func (p EvictionPass) Drained() bool { return len(p.Evicted) == 0 && len(p.Blocked) == 0 }

// EvictNow is one pass of a drain that does not wait: it asks once to
// evict every pod of nodeName that Drain would (the pods Pods selects,
// through evictPod), one after another in Pods' order, and
// returns what the API server accepted and what it refused for a budget.
// It neither retries a 429 nor waits for an evicted pod to go: it is for a
// caller that moves time itself — the sandbox's Karpenter stand-in calls
// it every tick of its simulated clock until a pass finds the node
// Drained. Options.Timeout, PodConcurrency and Watch do not apply. Events
// are Evicting, Blocked and Skipped, as Drain's; Evicted is not, since the
// pass does not see the pod go.
func (d *Drainer) EvictNow(ctx context.Context, nodeName string) (EvictionPass, error) {
	pass := EvictionPass{Node: nodeName}
	pods, skipped, err := d.podsToEvict(ctx, nodeName)
	if err != nil {
		return pass, err
	}
	pass.Skipped = skipped
	for _, pod := range pods {
		name := pod.Namespace + "/" + pod.Name
		if ctx.Err() != nil {
			return pass, fmt.Errorf("evict %s: not started: %w", name, context.Cause(ctx))
		}
		d.emit(DrainEvent{Type: DrainEvicting, Node: nodeName, Pod: name, Attempt: 1})
		err := d.evictPod(ctx, pod)
		switch {
		case err == nil:
			pass.Evicted = append(pass.Evicted, name)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// gone already, or replaced under its name: nothing left to evict
		case apierrors.IsTooManyRequests(err):
			pass.Blocked = append(pass.Blocked, name)
			if d.OnEvent != nil { // the lookup lists the namespace's budgets
				d.emit(DrainEvent{Type: DrainBlocked, Node: nodeName, Pod: name, PDB: d.blockingPDB(ctx, &pod), Attempt: 1, Message: err.Error()})
			}
		default:
			return pass, fmt.Errorf("evict %s: %w", name, err)
		}
	}
	sort.Strings(pass.Evicted)
	sort.Strings(pass.Blocked)
	return pass, nil
}
