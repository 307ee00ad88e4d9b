package plan

import "fmt"

// KarpenterChartOCI is the official Karpenter chart, installed at the
// plan's pinned version unless plan --karpenter-chart names another.
const KarpenterChartOCI = "oci://public.ecr.aws/karpenter/karpenter"

// PlanKarpenter is the Helm release of Karpenter the runbook's Karpenter
// step installs (helm upgrade --install): the chart, its version and the
// values, read from the Helm values generate wrote when the plan was made.
type PlanKarpenter struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Chart is an OCI reference, a chart repository URL of a tarball, or a
	// local chart directory or tarball (air-gapped clusters, tests).
	Chart   string `json:"chart"`
	Version string `json:"version"`
	// Values are the chart values; ValuesFrom names their file.
	Values     map[string]any `json:"values"`
	ValuesFrom string         `json:"valuesFrom,omitempty"`
	// Room are the pods the step is expected to evict from the kept nodes
	// for the controller's room, as the snapshot has them (which pods of
	// equal size go may differ: the step takes the newest).
	Room []RoomEviction `json:"room,omitempty"`
}

// String names the release and chart in one line.
func (k *PlanKarpenter) String() string {
	return fmt.Sprintf("release %s/%s: chart %s version %s", k.Namespace, k.Release, k.Chart, k.Version)
}
