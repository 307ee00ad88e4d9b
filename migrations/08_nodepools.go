package migrations

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

func init() {
	register(rollout.Step{
		ID:      "08_nodepools",
		Purpose: "server-side apply the environment's NodePools and node classes (the built overlay)",
		Check: func(ctx context.Context, s *rollout.Session) (bool, string, error) {
			if s.Overlay == nil {
				return true, "not run: no overlay given (pass --dir with the generated tree)", nil
			}
			return run{s}.OverlayApplied(ctx)
		},
		Up: func(ctx context.Context, s *rollout.Session) error { return run{s}.ApplyOverlay(ctx) },
		// Down keeps the NodePools until their nodes are drained.
		Down: func(ctx context.Context, s *rollout.Session) error { return run{s}.RemoveOverlay(ctx) },
	})
}

func (s run) applier() *kube.Applier {
	return &kube.Applier{Dynamic: s.Dynamic, Mapper: s.Mapper, Environment: s.Plan.Environment, DryRun: s.Options.DryRun}
}

// ApplyOverlay server-side applies the environment's NodePools and node
// classes and records what it applied.
func (s run) ApplyOverlay(ctx context.Context) error {
	objs, err := s.Overlay.Objects(ctx)
	if err != nil {
		return fmt.Errorf("build the environment's overlay: %w", err)
	}
	// Node classes first: NodePools reference them.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return boolInt(a.GetKind() == "NodePool") - boolInt(b.GetKind() == "NodePool")
	})
	a := s.applier()
	for _, o := range objs {
		s.Change("apply %s %s", o.GetKind(), o.GetName())
		if _, err := a.Apply(ctx, o); err != nil {
			return err
		}
		ref := rollout.ObjectRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), Namespace: o.GetNamespace()}
		if !s.Options.DryRun && !slices.Contains(s.Journal.Recorded.Objects, ref) {
			s.Journal.Recorded.Objects = append(s.Journal.Recorded.Objects, ref)
			if err := s.Save(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// OverlayApplied reports whether every overlay object exists and is ours.
func (s run) OverlayApplied(ctx context.Context) (bool, string, error) {
	objs, err := s.Overlay.Objects(ctx)
	if err != nil {
		return false, "", fmt.Errorf("build the environment's overlay: %w", err)
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return false, "", fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var ri = s.Dynamic.Resource(m.Resource)
		var cur *unstructured.Unstructured
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			cur, err = ri.Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		} else {
			cur, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return false, "", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("get %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if cur.GetLabels()[kube.LabelManagedBy] != kube.FieldManager {
			return false, "", nil
		}
	}
	return true, fmt.Sprintf("%d objects already applied", len(objs)), nil
}

// RemoveOverlay undoes ApplyOverlay: it stops our NodePools from
// launching (limits cpu 0) and disrupting (budget nodes 0), drains their nodes (PDB-safe, pods go back to
// the legacy nodes), then deletes the objects that carry our label.
func (s run) RemoveOverlay(ctx context.Context) error {
	var pools []string
	for _, o := range s.Journal.Recorded.Objects {
		if o.Kind == "NodePool" {
			pools = append(pools, o.Name)
		}
	}
	np := s.Dynamic.Resource(kube.NodePoolGVK.GroupVersion().WithResource("nodepools"))
	for _, p := range pools {
		// Budget nodes 0 as well: otherwise Karpenter keeps consolidating
		// its nodes while the rollback drains them, moving their pods onto
		// other Karpenter nodes the drain then moves again.
		s.Change("set NodePool %s limits.cpu=0 and disruption budget nodes=0 (no new nodes, and Karpenter disrupts none while the rollback drains them)", p)
		if !s.Options.DryRun {
			_, err := np.Patch(ctx, p, types.MergePatchType, []byte(`{"spec":{"limits":{"cpu":"0"},"disruption":{"budgets":[{"nodes":"0"}]}}}`), metav1.PatchOptions{FieldManager: kube.FieldManager})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("limit NodePool %s: %w", p, err)
			}
		}
	}
	if len(pools) > 0 {
		nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool in (" + strings.Join(pools, ",") + ")"})
		if err != nil {
			return fmt.Errorf("list Karpenter nodes: %w", err)
		}
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
			s.Change("cordon and drain Karpenter node %s", n.Name)
			if !s.Options.DryRun {
				if err := kube.Cordon(ctx, s.Kube, n.Name, true); err != nil {
					return err
				}
			}
		}
		if !s.Options.DryRun && len(names) > 0 {
			d := &kube.Drainer{Client: s.Kube, Clock: s.Clock, Options: s.DrainOptions(), OnEvent: s.drainEvents(0, nil)}
			counted, err := s.drainStarted(ctx, 0, names, 0, d)
			if err != nil {
				return err
			}
			// A pod whose PDB allows no disruption moves back by a surge
			// restart, as in the waves.
			var replaced map[string]bool
			if s.Plan.Budget.RestartBlocked {
				budgets, err := s.listBudgets(ctx)
				if err != nil {
					return err
				}
				if replaced, err = s.restartBlocked(ctx, []int{0}, [][]podOn{counted}, budgets, []*placeholderRelease{nil}); err != nil {
					return err
				}
			}
			res, err := d.DrainNodes(ctx, names, s.Plan.Budget.Concurrency)
			if err != nil {
				return fmt.Errorf("drain Karpenter nodes: %w", err)
			}
			for _, r := range res {
				if !r.Complete() {
					return &rollout.PausedError{Step: s.Journal.Current.Step, Reason: fmt.Sprintf("node %s still has pods that may not be evicted: %v; NodePools are kept until their nodes are empty", r.Node, r.Skipped)}
				}
			}
			s.drainEnded(0, counted, res, replaced)
		}
	}
	a := s.applier()
	refs := slices.Clone(s.Journal.Recorded.Objects)
	slices.SortStableFunc(refs, func(x, y rollout.ObjectRef) int { return boolInt(x.Kind != "NodePool") - boolInt(y.Kind != "NodePool") })
	for _, o := range refs {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.APIVersion)
		u.SetKind(o.Kind)
		u.SetName(o.Name)
		u.SetNamespace(o.Namespace)
		s.Change("delete %s %s", o.Kind, o.Name)
		if err := a.Delete(ctx, u); err != nil {
			return err
		}
	}
	if !s.Options.DryRun {
		s.Journal.Recorded.Objects = nil
		return s.Save(ctx)
	}
	return nil
}
