package v1alpha5_test

import (
	"path/filepath"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/internal/schematest"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1alpha5"
)

func TestTypesCoverCRD(t *testing.T) {
	crds, err := testenv.CRDDir("v1alpha5")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, version string
		spec          any
	}{
		{"karpenter.sh_provisioners.yaml", "v1alpha5", v1alpha5.ProvisionerSpec{}},
		{"karpenter.k8s.aws_awsnodetemplates.yaml", "v1alpha1", v1alpha5.AWSNodeTemplateSpec{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			diff, err := schematest.Diff(filepath.Join(crds, tc.file), tc.version, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diff {
				t.Error(d)
			}
		})
	}
}
