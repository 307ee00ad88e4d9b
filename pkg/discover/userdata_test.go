package discover

import (
	"encoding/base64"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func i32(v int32) *int32 { return &v }

func TestParseUserData(t *testing.T) {
	al2 := `#!/bin/bash
set -ex
/etc/eks/bootstrap.sh prod --b64-cluster-ca abc --apiserver-endpoint https://x \
  --use-max-pods false \
  --kubelet-extra-args '--node-labels=team=data,tier=db --register-with-taints=dedicated=db:NoSchedule --max-pods=58 --kube-reserved=cpu=250m,memory=1Gi --eviction-hard=memory.available<200Mi --cpu-cfs-quota=false'
`
	nodeadm := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\n" +
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod\n  kubelet:\n    config:\n      maxPods: 110\n      systemReserved:\n        cpu: 100m\n      registerWithTaints:\n      - key: gpu\n        value: \"true\"\n        effect: NoSchedule\n    flags:\n    - --node-labels=team=ml\n" +
		"--BOUNDARY\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho hi\n--BOUNDARY--\n"
	bottlerocket := `[settings.kubernetes]
cluster-name = "prod"
max-pods = 29
[settings.kubernetes.node-labels]
"team" = "web"
[settings.kubernetes.node-taints]
"dedicated" = "web:NoSchedule"
[settings.kubernetes.eviction-hard]
"memory.available" = "15%"
`
	for _, tc := range []struct {
		name, in string
		want     *inventory.Bootstrap
	}{
		{"empty", "", nil},
		{"al2", al2, &inventory.Bootstrap{Format: inventory.BootstrapAL2, MaxPods: i32(58),
			NodeLabels:   map[string]string{"team": "data", "tier": "db"},
			Taints:       []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}},
			KubeReserved: map[string]string{"cpu": "250m", "memory": "1Gi"}, EvictionHard: map[string]string{"memory.available": "200Mi"},
			ExtraArgs: []string{"--cpu-cfs-quota=false"}}},
		{"al2 base64", base64.StdEncoding.EncodeToString([]byte("/etc/eks/bootstrap.sh prod --kubelet-extra-args --max-pods=17\n")),
			&inventory.Bootstrap{Format: inventory.BootstrapAL2, MaxPods: i32(17)}},
		{"al2 with extra commands", "yum install -y htop\n/etc/eks/bootstrap.sh prod\n", &inventory.Bootstrap{Format: inventory.BootstrapAL2, Custom: true}},
		{"nodeadm mime", nodeadm, &inventory.Bootstrap{Format: inventory.BootstrapNodeadm, MaxPods: i32(110), Custom: true,
			SystemReserved: map[string]string{"cpu": "100m"}, NodeLabels: map[string]string{"team": "ml"},
			Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}},
		{"bottlerocket", bottlerocket, &inventory.Bootstrap{Format: inventory.BootstrapBottlerocket, MaxPods: i32(29),
			NodeLabels: map[string]string{"team": "web"}, Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
			EvictionHard: map[string]string{"memory.available": "15%"}}},
		{"unknown", "#cloud-config\npackages: [htop]\n", &inventory.Bootstrap{Format: inventory.BootstrapUnknown, Custom: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseUserData(DecodeUserData(tc.in))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseUserData:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseUserData(f *testing.F) {
	f.Add("/etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=a=b --register-with-taints=k=v:NoSchedule'")
	f.Add("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--B--\n")
	f.Add("[settings.kubernetes]\nmax-pods = 3\n[settings.kubernetes.node-taints]\nk = [\"v:NoSchedule\"]\n")
	f.Fuzz(func(t *testing.T, s string) {
		b := ParseUserData(s) // must not panic
		if b != nil && b.Format == "" {
			t.Fatalf("format unset for %q", s)
		}
	})
}
