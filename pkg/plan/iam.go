package plan

import (
	"fmt"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/iam/desired"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// IAMOptions are the choices for the IAM steps, as desired.Options, in
// the plan's spelling.
type IAMOptions struct {
	KarpenterVersion   string `json:"karpenterVersion,omitempty"`
	Identity           string `json:"identity,omitempty"`
	InstanceProfile    bool   `json:"instanceProfile,omitempty"`
	CreateOIDCProvider bool   `json:"createOIDCProvider,omitempty"`
	Adopt              bool   `json:"adopt,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	ServiceAccount     string `json:"serviceAccount,omitempty"`
}

func (o IAMOptions) iam() desired.Options {
	return desired.Options{KarpenterVersion: o.KarpenterVersion, Identity: desired.Identity(o.Identity), InstanceProfile: o.InstanceProfile,
		CreateOIDCProvider: o.CreateOIDCProvider, Adopt: o.Adopt, Namespace: o.Namespace, ServiceAccount: o.ServiceAccount}
}

// PlanIAM is the IAM part of a plan: the cluster facts the desired IAM
// state (pkg/iam/desired) is built from, the options, and a summary of
// what the steps create.
type PlanIAM struct {
	Target  desired.Target `json:"target"`
	Options IAMOptions     `json:"options"`
	// Error says why the IAM steps cannot run (facts missing from the
	// inventory); the other summary fields are then empty.
	Error          string `json:"error,omitempty"`
	Identity       string `json:"identity,omitempty"`
	NodeRole       string `json:"nodeRole,omitempty"`
	ControllerRole string `json:"controllerRole,omitempty"`
	Queue          string `json:"queue,omitempty"`
	NodeAccess     string `json:"nodeAccess,omitempty"`
}

func planIAM(inv *inventory.Inventory, o IAMOptions) *PlanIAM {
	p := &PlanIAM{Options: o}
	t, err := desired.TargetFromInventory(inv)
	p.Target = t
	if err != nil {
		p.Error = err.Error()
		return p
	}
	d, err := desired.Build(t, o.iam())
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.Identity, p.NodeRole, p.ControllerRole, p.Queue, p.NodeAccess = string(d.Identity), d.NodeRole, d.ControllerRole, d.Queue, d.NodeAccess
	return p
}

// Desired builds the desired IAM state from the plan.
func (p *PlanIAM) Desired() (*desired.State, error) {
	if p.Error != "" {
		return nil, fmt.Errorf("the plan cannot run the IAM steps: %s", p.Error)
	}
	return desired.Build(p.Target, p.Options.iam())
}
