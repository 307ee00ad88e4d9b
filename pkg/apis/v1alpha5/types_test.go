package v1alpha5_test

import (
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/internal/schematest"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1alpha5"
)

func TestTypesCoverCRD(t *testing.T) {
	for _, tc := range []struct {
		file, version string
		spec          any
	}{
		{"karpenter.sh_provisioners.yaml", "v1alpha5", v1alpha5.ProvisionerSpec{}},
		{"karpenter.k8s.aws_awsnodetemplates.yaml", "v1alpha1", v1alpha5.AWSNodeTemplateSpec{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			diff, err := schematest.Diff("../../../testdata/crds/v1alpha5/"+tc.file, tc.version, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diff {
				t.Error(d)
			}
		})
	}
}
