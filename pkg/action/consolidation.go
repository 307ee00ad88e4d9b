package action

import (
	"context"
	"fmt"
	"strings"
	"time"

	kjson "sigs.k8s.io/json"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/convert"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine/disruption"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// Consolidation runs Karpenter's disruption controller on a cluster that
// runs Karpenter: one pass, and with Settle every pass until nothing acts.
type Consolidation struct {
	Inventory *inventory.Inventory
	// NodePools and Proposed are files or directories of v1 NodePools and
	// EC2NodeClasses: the cluster's, and changed ones whose drift to report.
	NodePools []string
	Proposed  []string
	// Now is the time of the pass (zero: the configuration's clock).
	Now                       time.Time
	SpotToSpot, KarpenterOnly bool
	Settle                    bool
}

// ConsolidationReport is the pass's decision and, with Settle, the fleet
// the cluster settles into.
type ConsolidationReport struct {
	Decision disruption.Decision    `json:"decision"`
	Settled  *disruption.Settlement `json:"settled,omitempty"`
}

// Consolidation runs o, priced with the configuration's catalogue or the
// inventory's recorded prices.
func (c *Configuration) Consolidation(ctx context.Context, o Consolidation) (*ConsolidationReport, error) {
	pools, hashes, err := loadNodePools(ctx, o.NodePools)
	if err != nil {
		return nil, err
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("--nodepools %s: no karpenter.sh/v1 NodePool found", strings.Join(o.NodePools, ","))
	}
	cat := c.Catalog
	if cat == nil {
		if cat, err = catalog.ForInventory(o.Inventory); err != nil {
			return nil, err
		}
	}
	now := o.Now
	if now.IsZero() {
		now = c.now().UTC()
	}
	in := disruption.FromInventory(o.Inventory, pools, cat, now)
	in.Options = disruption.Options{SpotToSpot: o.SpotToSpot, KarpenterOnly: o.KarpenterOnly, ExplainAll: true, NodePoolHashes: hashes}
	if len(o.Proposed) > 0 {
		if in.Options.Proposed, _, err = loadNodePools(ctx, o.Proposed); err != nil {
			return nil, err
		}
	}
	rep := &ConsolidationReport{}
	if rep.Decision, err = disruption.Decide(in); err != nil {
		return nil, err
	}
	if o.Settle {
		s, err := disruption.Settle(in, disruption.SettleOptions{})
		if err != nil {
			return nil, err
		}
		rep.Settled = &s
	}
	return rep, nil
}

// loadNodePools reads v1 NodePools and EC2NodeClasses and pairs each pool
// with its class; it also returns the pools' karpenter.sh/nodepool-hash
// annotations for drift.
func loadNodePools(ctx context.Context, paths []string) ([]engine.NodePool, map[string]string, error) {
	docs, err := convert.Read(ctx, convert.ReadOptions{Filenames: paths, Recursive: true})
	if err != nil {
		return nil, nil, err
	}
	var nps []*apiv1.NodePool
	classes := map[string]*apiv1.EC2NodeClass{}
	for _, d := range docs {
		switch {
		case d.APIVersion == apiv1.APIVersion && d.Kind == apiv1.NodePoolKind:
			np := &apiv1.NodePool{}
			if err := decodeDoc(d, np); err != nil {
				return nil, nil, err
			}
			nps = append(nps, np)
		case d.APIVersion == apiv1.AWSAPIVersion && d.Kind == apiv1.EC2NodeClassKind:
			nc := &apiv1.EC2NodeClass{}
			if err := decodeDoc(d, nc); err != nil {
				return nil, nil, err
			}
			classes[nc.Name] = nc
		}
	}
	hashes := map[string]string{}
	var pools []engine.NodePool
	for _, np := range nps {
		var nc *apiv1.EC2NodeClass
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			nc = classes[ref.Name]
		}
		pools = append(pools, engine.NodePoolFromV1(np, nc))
		if h, ok := np.Annotations[apiv1.NodePoolHashAnnotationKey]; ok {
			hashes[np.Name] = h
		}
	}
	return pools, hashes, nil
}

func decodeDoc(d *convert.Document, v any) error {
	strict, err := kjson.UnmarshalStrict(d.JSON, v)
	if err == nil && len(strict) > 0 {
		err = strict[0]
	}
	if err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	return nil
}
