package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/readiness"
)

// PlanRequest is what the plan command, and apply --replan, ask MakePlan for.
type PlanRequest struct {
	Environment string
	Config      config.Config
	Steps       []PlannedStep
	// Inventory reads the cluster: a snapshot file or a live discovery
	// (pkg/discover).
	Inventory func(ctx context.Context) (*inventory.Inventory, error)
	// Dir is the tree pkg/generate wrote; its overlays/<env> gives the
	// NodePools and which groups they replace. Empty generates them in
	// memory with the config's generate options (what `generate` would
	// write), which apply cannot apply: it needs --dir.
	Dir string
	// PoolForGroup overrides the NodePool replacing a group.
	PoolForGroup map[string]string
	// ControllerNodeGroup is the legacy group kept for the Karpenter
	// controller (plan --controller-nodegroup); empty lets the config, the
	// live controller or generate's Helm values decide.
	ControllerNodeGroup string
	// IAM plans the IAM steps with these options; nil leaves them out.
	IAM *IAMOptions
	// KarpenterChart is the chart the Karpenter step installs (plan
	// --karpenter-chart: a local directory or tarball, or a URL; empty:
	// the official OCI chart) at KarpenterVersion (empty: the IAM options'
	// version, else desired.DefaultKarpenterVersion).
	KarpenterChart, KarpenterVersion string
	// SkipKarpenter leaves installing Karpenter to the user.
	SkipKarpenter bool
	// Catalog prices and sizes the nodes; nil builds it from the inventory
	// (catalog.ForInventory: its region's recorded prices, or the embedded
	// ones with a warning finding).
	Catalog *catalog.Catalog
	Now     time.Time
	// Progress, if set, is told each wave's prediction and each pass of
	// the consolidation forecast as they start (a large cluster's plan
	// takes seconds).
	Progress func(PlanProgress)
}

// readinessJudgedByPlan are readiness checks the plan makes itself, with
// the rollout's remedies in mind (a surge restart moves a pod whose PDB
// allows no disruption; the runbook scales Cluster Autoscaler down; the
// engine reports pods that fit no NodePool).
var readinessJudgedByPlan = []string{
	readiness.IDPDBZeroDisruptions, readiness.IDPDBZeroMoved, readiness.IDNoController, readiness.IDLocalData, readiness.IDSafeToEvictFalse,
	readiness.IDCARunning, readiness.IDPodTooLarge,
}

// MakePlan reads the inventory, finds the environment's NodePools and
// plans the rollout (BuildPlan) with pkg/readiness's findings added. A
// cancelled ctx stops it before the next wave or forecast pass with the
// context's error.
func MakePlan(ctx context.Context, req PlanRequest) (*Plan, error) {
	if req.Inventory == nil {
		return nil, errors.New("plan: no inventory source (give --snapshot or --cluster)")
	}
	inv, err := req.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	var findings []Finding
	cat, prices := req.Catalog, (*inventory.PriceSource)(nil)
	if cat == nil {
		if cat, err = catalog.ForInventory(inv); err != nil {
			return nil, err
		}
		used := catalog.PricesUsed(inv)
		prices = &used
		if w := catalog.PriceWarning(inv); w != "" {
			findings = append(findings, Finding{Severity: "warning", Object: "prices", Message: w})
		}
	}
	var pools Pools
	ctrl := ControllerOptions{NodeGroup: req.ControllerNodeGroup}
	if req.Dir != "" {
		objs, err := OverlayDir{Dir: req.Dir, Env: req.Environment}.Objects(ctx)
		if err != nil {
			return nil, fmt.Errorf("NodePools of environment %s: %w", req.Environment, err)
		}
		if pools, err = PoolsFromObjects(objs); err != nil {
			return nil, fmt.Errorf("%s overlays/%s: %w", req.Dir, req.Environment, err)
		}
		if slices.ContainsFunc(inv.NodeGroups, func(g inventory.NodeGroup) bool { return len(pools.ForGroup[g.Name]) == 0 }) {
			if pools.Unmapped, err = generate.Unmapped(inv, req.generateOptions(cat)); err != nil {
				return nil, err
			}
		}
		// Named from the tree's base name: the plan (and its hash) must not
		// depend on where the tree is checked out.
		ctrl.ValuesFrom = filepath.Join(filepath.Base(req.Dir), generate.HelmValues)
		if ctrl.Values, err = generate.ReadHelmValues(req.Dir); errors.Is(err, fs.ErrNotExist) {
			ctrl.ValuesFrom = "" // an older tree: the chart's defaults
		} else if err != nil {
			return nil, err
		}
	} else {
		res, err := generate.Generate(inv, req.generateOptions(cat))
		if err != nil {
			return nil, fmt.Errorf("generate the NodePools to plan with (or pass --dir with a generated tree): %w", err)
		}
		pools = PoolsFromGenerate(res)
		ctrl.Values, ctrl.ValuesFrom = res.HelmValues, "generate's Helm values"
	}
	for _, f := range readiness.Evaluate(inv, pools.ReadinessOptions(inv, cat)).Findings {
		if slices.Contains(readinessJudgedByPlan, f.ID) || slices.Contains(req.Config.Readiness.Acknowledge, f.ID) {
			continue
		}
		findings = append(findings, Finding{Severity: string(f.Severity), Object: objects(f.Objects), Message: fmt.Sprintf("%s (%s): %s Fix: %s", f.Title, f.ID, f.Why, f.Fix)})
	}
	if req.Dir == "" {
		findings = append(findings, Finding{Severity: "info", Message: "NodePools predicted from generate's defaults for this config; apply needs --dir with the tree `karpenter-migrate generate` writes"})
	}
	karpenter, why := req.karpenter(ctrl)
	if why != "" {
		findings = append(findings, Finding{Severity: "warning", Object: "Karpenter", Message: why})
	}
	return BuildPlan(inv, PlanOptions{
		Environment: req.Environment, Config: req.Config, Steps: req.Steps, Pools: &pools, PoolForGroup: req.PoolForGroup,
		Catalog: cat, PriceSource: prices, IAM: req.IAM, Controller: ctrl, Karpenter: karpenter, Findings: findings, Now: req.Now,
		Progress: func(pp PlanProgress) error {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("plan stopped before %s: %w", pp, err)
			}
			if req.Progress != nil {
				req.Progress(pp)
			}
			return nil
		},
	})
}

// generateOptions are generate's options for the environment's config.
func (req PlanRequest) generateOptions(cat *catalog.Catalog) generate.Options {
	g := req.Config.Generate
	opts := generate.DefaultOptions()
	opts.Strategy, opts.Flexibility, opts.KeepNodeGroupLabel = generate.Strategy(g.Strategy), generate.Flexibility(g.Flexibility), g.KeepNodegroupLabel
	opts.Catalog = cat
	return opts
}

// karpenter is the release the Karpenter step installs, without its
// namespace and values (BuildPlan's), or nil: left out on request, or, with
// why, because the tree has no Helm values.
func (req PlanRequest) karpenter(ctrl ControllerOptions) (k *PlanKarpenter, why string) {
	switch {
	case req.SkipKarpenter:
		return nil, ""
	case ctrl.Values == nil:
		return nil, "the tree has no " + generate.HelmValues + ": the Karpenter step will not install Karpenter; run `karpenter-migrate generate` again to write them"
	}
	version := req.KarpenterVersion
	if version == "" && req.IAM != nil {
		version = req.IAM.KarpenterVersion
	}
	// The chart's version has no "v": Karpenter's OCI tags and Chart.yaml
	// say 1.14.1, while its releases (and --karpenter-version) may say v1.14.1.
	return &PlanKarpenter{Chart: req.KarpenterChart, Version: strings.TrimPrefix(cmp.Or(version, desired.DefaultKarpenterVersion), "v")}, ""
}

// KarpenterRelease is the Helm release MakePlan would record for req on
// inv (nil with SkipKarpenter), without planning the waves: the chart and
// version, the controller's namespace and the Helm values in req.Dir. The
// wizard's Karpenter screen shows what the step will do before the plan.
func KarpenterRelease(inv *inventory.Inventory, req PlanRequest) (*PlanKarpenter, error) {
	if req.SkipKarpenter {
		return nil, nil
	}
	if req.Dir == "" {
		return nil, errors.New("the Karpenter release is read from the generated tree's Helm values: give the tree (generate writes it)")
	}
	ctrl := ControllerOptions{NodeGroup: req.ControllerNodeGroup, ValuesFrom: filepath.Join(filepath.Base(req.Dir), generate.HelmValues)}
	values, err := generate.ReadHelmValues(req.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ctrl.Values = values
	k, why := req.karpenter(ctrl)
	if k == nil {
		return nil, errors.New(why)
	}
	cp, err := decideController(inv, req.Config, ctrl)
	if err != nil {
		return nil, fmt.Errorf("plan where the Karpenter controller lives: %w", err)
	}
	return k.at(cp.home, ctrl)
}

// at is k installed in the controller's namespace with ctrl's values; when
// a group is kept for the controller, the values require the label the
// rollout puts on the nodes it keeps (generate.OnKeptNodes): the chart's
// pods run there and on no other node of the group, which a wave drains.
func (k *PlanKarpenter) at(home *ControllerHome, ctrl ControllerOptions) (*PlanKarpenter, error) {
	values := ctrl.Values
	if home.Kept {
		var err error
		if values, err = generate.OnKeptNodes(values); err != nil {
			return nil, fmt.Errorf("%s: %w", cmp.Or(ctrl.ValuesFrom, "Helm values"), err)
		}
	}
	return &PlanKarpenter{Release: cmp.Or(k.Release, "karpenter"), Namespace: home.Namespace, Chart: cmp.Or(k.Chart, KarpenterChartOCI),
		Version: k.Version, Values: values, ValuesFrom: ctrl.ValuesFrom}, nil
}

func objects(objs []string) string {
	const show = 5
	if len(objs) <= show {
		return strings.Join(objs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(objs[:show], ", "), len(objs)-show)
}
