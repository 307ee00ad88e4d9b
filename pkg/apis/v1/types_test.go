package v1_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/internal/schematest"
	v1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

func TestTypesCoverCRD(t *testing.T) {
	crds, err := testenv.CRDDir("v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		spec any
	}{
		{"karpenter.sh_nodepools.yaml", v1.NodePoolSpec{}},
		{"karpenter.k8s.aws_ec2nodeclasses.yaml", v1.EC2NodeClassSpec{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			diff, err := schematest.Diff(filepath.Join(crds, tc.file), "v1", tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diff {
				t.Error(d)
			}
		})
	}
}

func TestNodePoolMarshalMinimal(t *testing.T) {
	np := v1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.NodePoolKind},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.NodePoolSpec{
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}}},
				NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.EC2NodeClassKind, Name: "default"},
			}},
			Disruption: v1.Disruption{ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: v1.NewNillableDuration(time.Minute)},
			Limits:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")},
		},
	}
	got, err := yaml.Marshal(np)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  disruption:
    consolidateAfter: 1m0s
    consolidationPolicy: WhenEmptyOrUnderutilized
  limits:
    cpu: 1k
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values:
        - spot
`
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestNillableDuration(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: `"Never"`, want: `"Never"`},
		{in: `"1m"`, want: `"1m0s"`},
		{in: `"720h"`, want: `"720h0m0s"`},
		{in: `"abc"`, err: "want a duration"},
		{in: `30`, err: "want a duration string"},
	} {
		var d v1.NillableDuration
		err := d.UnmarshalJSON([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		b, _ := d.MarshalJSON()
		if string(b) != tc.want {
			t.Errorf("%s: got %s want %s", tc.in, b, tc.want)
		}
	}
}
