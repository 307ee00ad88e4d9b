package action

import (
	"fmt"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// Readiness evaluates an inventory against the NodePools generate would
// write with its defaults (generated in memory): their taints, zones,
// allowed instance types and the labels they keep. It is the one wiring of
// pkg/readiness: readiness, discover, the wizard and the demo report the
// same findings for the same inventory.
type Readiness struct {
	// Catalog prices and sizes instance types; nil: catalog.Default().
	Catalog *catalog.Catalog
}

// ReadinessResult is the report and, when generate cannot map the
// inventory, a note that the checks fell back on the current nodes.
type ReadinessResult struct {
	readiness.Report
	Note string
}

// Run evaluates inv.
func (a *Readiness) Run(inv *inventory.Inventory) ReadinessResult {
	opts := generate.DefaultOptions()
	opts.Catalog = a.Catalog
	res, err := generate.Generate(inv, opts)
	if err != nil {
		return ReadinessResult{
			Report: readiness.Evaluate(inv, readiness.Options{}),
			Note:   fmt.Sprintf("readiness checks taints, zones and instance sizes against the current nodes: no NodePools to compare with (%v)", err),
		}
	}
	return ReadinessResult{Report: readiness.Evaluate(inv, readiness.FromNodePools(inv, res.NodePools, res.NodeClasses, a.Catalog))}
}
