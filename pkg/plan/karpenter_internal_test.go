package plan

import "testing"

// TestChartVersionHasNoV: --karpenter-version v1.14.1 pins the chart at
// 1.14.1, the tag Karpenter's OCI chart and its Chart.yaml carry; with the
// "v" kept, the pull asked for a tag that does not exist and a local
// chart was refused as "version 1.14.1 but the plan pins v1.14.1".
func TestChartVersionHasNoV(t *testing.T) {
	ctrl := ControllerOptions{Values: map[string]any{}}
	for _, tc := range []struct {
		req  PlanRequest
		want string
	}{
		{PlanRequest{KarpenterVersion: "v1.14.1"}, "1.14.1"},
		{PlanRequest{KarpenterVersion: "1.13.0"}, "1.13.0"},
		{PlanRequest{IAM: &IAMOptions{KarpenterVersion: "v1.12.3"}}, "1.12.3"},
	} {
		k, why := tc.req.karpenter(ctrl)
		if k == nil || k.Version != tc.want {
			t.Errorf("karpenter(%+v) = %+v (%s); want version %s", tc.req, k, why, tc.want)
		}
	}
}
