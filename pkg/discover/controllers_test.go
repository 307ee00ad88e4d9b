package discover

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func TestParseCAArgs(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		args                 []string
		flags                map[string]string
		discovery, nodeSpecs []string
	}{
		{"upstream example", []string{"./cluster-autoscaler", "--v=4", "--stderrthreshold=info", "--cloud-provider=aws", "--skip-nodes-with-local-storage=false",
			"--expander=least-waste", "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"},
			map[string]string{"v": "4", "stderrthreshold": "info", "cloud-provider": "aws", "skip-nodes-with-local-storage": "false", "expander": "least-waste"},
			[]string{"asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"}, nil},
		{"bare booleans do not eat the next flag", []string{"--balance-similar-node-groups", "--scale-down-enabled", "--expander", "priority"},
			map[string]string{"balance-similar-node-groups": "true", "scale-down-enabled": "true", "expander": "priority"}, nil, nil},
		{"separate values, one dash, repeated flags", []string{"-scale-down-unneeded-time", "5m", "--nodes=1:10:a", "--nodes", "0:3:b", "--expander=random", "--expander=least-waste"},
			map[string]string{"scale-down-unneeded-time": "5m", "expander": "least-waste"}, nil, []string{"1:10:a", "0:3:b"}},
		{"no flags", []string{"cluster-autoscaler", "--", "-"}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ca inventory.ClusterAutoscaler
			parseCAArgs(&ca, tc.args)
			if !reflect.DeepEqual(ca.Flags, tc.flags) || !reflect.DeepEqual(ca.AutoDiscovery, tc.discovery) || !reflect.DeepEqual(ca.Nodes, tc.nodeSpecs) {
				t.Errorf("flags %v discovery %v nodes %v; want %v %v %v", ca.Flags, ca.AutoDiscovery, ca.Nodes, tc.flags, tc.discovery, tc.nodeSpecs)
			}
		})
	}
}

func TestIsClusterAutoscaler(t *testing.T) {
	dep := func(labels map[string]string, containers ...corev1.Container) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
		d.Spec.Template.Spec.Containers = containers
		return d
	}
	ca := corev1.Container{Name: "main", Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.1"}
	mirrored := corev1.Container{Name: "autoscaler", Image: "123.dkr.ecr.us-east-1.amazonaws.com/mirror/ca:v1.32.1"}
	sidecar := corev1.Container{Name: "proxy", Image: "envoy:1.30"}
	for _, tc := range []struct {
		name string
		dep  *appsv1.Deployment
		c    corev1.Container
		want bool
	}{
		{"by image", dep(nil, ca), ca, true},
		{"by chart label, mirrored image", dep(map[string]string{"app.kubernetes.io/name": "aws-cluster-autoscaler"}, mirrored, sidecar), mirrored, true},
		{"not its sidecar", dep(map[string]string{"app": "cluster-autoscaler"}, mirrored, sidecar), sidecar, false},
		{"unrelated", dep(map[string]string{"app": "web"}, sidecar), sidecar, false},
		{"image name only, not a path", dep(nil, corev1.Container{Image: "cluster-autoscaler-tools/helper:1"}), corev1.Container{Image: "cluster-autoscaler-tools/helper:1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isClusterAutoscaler(tc.dep, tc.c); got != tc.want {
				t.Errorf("got %t, want %t", got, tc.want)
			}
		})
	}
}
