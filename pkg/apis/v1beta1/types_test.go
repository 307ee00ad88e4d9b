package v1beta1_test

import (
	"path/filepath"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/internal/schematest"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1beta1"
)

func TestTypesCoverCRD(t *testing.T) {
	crds, err := testenv.CRDDir("v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		spec any
	}{
		{"karpenter.sh_nodepools.yaml", v1beta1.NodePoolSpec{}},
		{"karpenter.k8s.aws_ec2nodeclasses.yaml", v1beta1.EC2NodeClassSpec{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			diff, err := schematest.Diff(filepath.Join(crds, tc.file), "v1beta1", tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diff {
				t.Error(d)
			}
		})
	}
}
