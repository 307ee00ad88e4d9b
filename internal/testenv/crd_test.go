package testenv_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var ec2NodeClasses = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}

const validNodePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    metadata:
      labels:
        team: platform
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: general
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand", "spot"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: topology.kubernetes.io/zone
          operator: In
          values: ["us-east-1a", "us-east-1b"]
      taints:
        - key: dedicated
          value: platform
          effect: NoSchedule
      expireAfter: 720h
  limits:
    cpu: "1000"
    memory: 1000Gi
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: 10%
`

const validEC2NodeClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: general
spec:
  role: KarpenterNodeRole-my-cluster
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
  blockDeviceMappings:
    - deviceName: /dev/xvda
      ebs:
        volumeSize: 100Gi
        volumeType: gp3
        encrypted: true
  tags:
    team: platform
`

// TestCRDsValidateKarpenterV1 checks the official v1 CRDs as the API server
// enforces them: valid objects pass a server-side dry-run, invalid ones are
// rejected with the server's own message.
func TestCRDsValidateKarpenterV1(t *testing.T) {
	t.Parallel()
	env := cluster.Env(t)

	valid := []byte(validNodePool + "---" + validEC2NodeClass)
	if err := env.ServerDryRun(t.Context(), valid); err != nil {
		t.Fatalf("valid NodePool and EC2NodeClass: %v", err)
	}
	// Objects that already exist are checked as updates.
	if _, err := env.ApplyYAML(t.Context(), "", []byte(validEC2NodeClass)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Dynamic.Resource(ec2NodeClasses).Delete(context.Background(), "general", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete EC2NodeClass: %v", err)
		}
	})
	if err := env.ServerDryRun(t.Context(), valid); err != nil {
		t.Fatalf("valid NodePool and existing EC2NodeClass: %v", err)
	}

	tests := []struct {
		name     string
		yaml     string
		wantCode int32
		wantMsg  []string
	}{
		{
			name:     "consolidationPolicy Sometimes",
			yaml:     strings.Replace(validNodePool, "consolidationPolicy: WhenEmptyOrUnderutilized", "consolidationPolicy: Sometimes", 1),
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  []string{`spec.disruption.consolidationPolicy: Unsupported value: "Sometimes"`, `"WhenEmpty"`, `"WhenEmptyOrUnderutilized"`},
		},
		{
			name:     "nodeClassRef without group",
			yaml:     strings.Replace(validNodePool, "        group: karpenter.k8s.aws\n", "", 1),
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  []string{"spec.template.spec.nodeClassRef.group: Required value"},
		},
		{
			name:     "v1beta1 expireAfter under disruption",
			yaml:     strings.Replace(validNodePool, "    consolidateAfter: 1m\n", "    consolidateAfter: 1m\n    expireAfter: 720h\n", 1),
			wantCode: http.StatusBadRequest,
			wantMsg:  []string{`strict decoding error: unknown field "spec.disruption.expireAfter"`},
		},
		{
			name:     "existing EC2NodeClass with an invalid update",
			yaml:     strings.Replace(validEC2NodeClass, "volumeType: gp3", "volumeType: gp9", 1),
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  []string{`spec.blockDeviceMappings[0].ebs.volumeType: Unsupported value: "gp9"`},
		},
		{
			name:     "EC2NodeClass without amiSelectorTerms",
			yaml:     strings.Replace(validEC2NodeClass, "  amiSelectorTerms:\n    - alias: al2023@latest\n", "", 1),
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  []string{"spec.amiSelectorTerms: Required value"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.ServerDryRun(t.Context(), []byte(tt.yaml))
			var status *apierrors.StatusError
			if !errors.As(err, &status) {
				t.Fatalf("ServerDryRun error = %v, want a rejection from the API server", err)
			}
			if got := status.ErrStatus.Code; got != tt.wantCode {
				t.Errorf("HTTP status = %d, want %d (%v)", got, tt.wantCode, err)
			}
			for _, want := range tt.wantMsg {
				if !strings.Contains(status.ErrStatus.Message, want) {
					t.Errorf("server message %q does not contain %q", status.ErrStatus.Message, want)
				}
			}
		})
	}
}
