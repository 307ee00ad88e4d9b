package plan

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/engine/disruption"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// TestWithTypesSettlesTheSame: narrowing the catalogue to what each
// NodePool allows, once, changes nothing the waves' predictions or Settle
// decide — only how long they take. Each case's waves leave nodes Karpenter replaces, so the
// comparison is not between two empty forecasts.
func TestWithTypesSettlesTheSame(t *testing.T) {
	req := func(key string, op corev1.NodeSelectorOperator, v ...string) apiv1.NodeSelectorRequirementWithMinValues {
		return apiv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: v}
	}
	tests := map[string][]apiv1.NodeSelectorRequirementWithMinValues{
		"types and a zone": {req(catalog.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
			req(catalog.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large", "c5.xlarge"), req(catalog.LabelZone, corev1.NodeSelectorOpIn, "us-east-1a")},
		"families, one excluded size": {req(catalog.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
			req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5", "c5"), req(catalog.LabelInstanceType, corev1.NodeSelectorOpNotIn, "c5.large"),
			req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpLt, "9")},
	}
	cat := catalog.Default()
	for name, reqs := range tests {
		t.Run(name, func(t *testing.T) {
			np := &apiv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
			np.Spec.Template.Spec.Requirements = reqs
			np.Spec.Disruption = apiv1.Disruption{ConsolidationPolicy: apiv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter: apiv1.NewNillableDuration(time.Minute), Budgets: []apiv1.Budget{{Nodes: "100%"}}}
			pools := []engine.NodePool{engine.NodePoolFromV1(np, nil)}
			pr := newPredictor(pools, cat, nil)
			// The waves predicted on the whole catalogue, for comparison.
			wholePr := &predictor{pools: pools, typed: pools, catalog: cat, price: map[string]float64{}}
			// One 1.2-CPU pod per wave: each gets its own cheapest node.
			for i := range 3 {
				pod := inventory.Pod{Namespace: "app", Name: fmt.Sprintf("p-%d", i), Phase: corev1.PodRunning, OwnerKind: inventory.OwnerDeployment, OwnerName: "web",
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1200m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
				fast, _, err := pr.predict([]inventory.Pod{pod}, []string{"web"})
				if err != nil {
					t.Fatal(err)
				}
				whole, _, err := wholePr.predict([]inventory.Pod{pod}, []string{"web"})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(whole, fast) {
					t.Errorf("wave %d predicted differently:\nwhole catalogue %+v\nnarrowed        %+v", i+1, whole, fast)
				}
			}
			narrowed, err := withTypes(pr.pools, cat)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(narrowed[0].InstanceTypes); n == 0 || n >= len(cat.Types()) {
				t.Fatalf("narrowed to %d of %d catalogue types", n, len(cat.Types()))
			}
			settle := func(pools []engine.NodePool) disruption.Settlement {
				s, err := disruption.Settle(settleInput(pr, pools, nil), disruption.SettleOptions{})
				if err != nil {
					t.Fatal(err)
				}
				s.Final = disruption.Input{}
				return s
			}
			whole, fast := settle(pr.pools), settle(narrowed)
			if len(whole.Passes) == 0 {
				t.Fatalf("no command on the whole catalogue: the case tests nothing (%+v)", whole.After)
			}
			if !reflect.DeepEqual(whole, fast) {
				t.Errorf("settled differently:\nwhole catalogue %+v\nnarrowed        %+v", whole, fast)
			}
		})
	}
}
