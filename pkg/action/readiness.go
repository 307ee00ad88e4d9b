package action

import (
	"fmt"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// Readiness evaluates an inventory against the NodePools generate would
// write with its defaults (generated in memory): their taints, zones,
// allowed instance types and the labels they keep; and checks that the
// Karpenter controller keeps a home where plan would decide it. It is the
// one wiring of pkg/readiness: readiness, discover, the wizard and the demo
// report the same findings for the same inventory.
type Readiness struct {
	// Catalog sizes instance types; nil: the inventory's
	// (catalog.ForInventory).
	Catalog *catalog.Catalog
	// Config is the environment's migration config (its controller section
	// and node groups in scope); nil: the defaults.
	Config *config.Config
}

// ReadinessResult is the report and notes on what could not be checked
// (generate cannot map the inventory: the checks fell back on the current
// nodes; where the controller lives is unknown).
type ReadinessResult struct {
	readiness.Report
	Notes []string
}

// Run evaluates inv.
func (a *Readiness) Run(inv *inventory.Inventory) ReadinessResult {
	c := config.Default("")
	if a.Config != nil {
		c = *a.Config
	}
	cat := a.Catalog
	if cat == nil {
		// Readiness sizes instance types; it prices nothing, so no price
		// warning.
		var err error
		if cat, err = catalog.ForInventory(inv); err != nil {
			cat = catalog.Default()
		}
	}
	opts := generate.DefaultOptions()
	opts.Catalog, opts.ControllerNodeGroup = cat, c.Controller.NodeGroup
	res, err := generate.Generate(inv, opts)
	if err != nil {
		return ReadinessResult{
			Report: readiness.Evaluate(inv, readiness.Options{}),
			Notes:  []string{fmt.Sprintf("readiness checks taints, zones and instance sizes against the current nodes: no NodePools to compare with (%v)", err)},
		}
	}
	var out ReadinessResult
	ro := plan.PoolsFromGenerate(res).ReadinessOptions(inv, cat)
	if _, check, err := plan.DecideController(inv, c, plan.ControllerOptions{Values: res.HelmValues, ValuesFrom: "generate's Helm values"}); err != nil {
		out.Notes = append(out.Notes, "where the Karpenter controller lives is not checked: "+err.Error())
	} else {
		ro.Controller = &check
	}
	out.Report = readiness.Evaluate(inv, ro)
	return out
}
