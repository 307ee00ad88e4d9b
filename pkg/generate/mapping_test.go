package generate

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/catalog"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

func TestSanitizeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"general", "general"},
		{"Web_ASG.prod", "web-asg-prod"},
		{"--x--", "x"},
		{"eks-ng-ÄÖ-1", "eks-ng-1"},
		{strings.Repeat("a", 70), strings.Repeat("a", 54) + "-" + shortHash(strings.Repeat("a", 70))},
	}
	for _, tt := range tests {
		if got := sanitizeName(tt.in, maxNameLen); got != tt.want {
			t.Errorf("sanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := sanitizeName("___", maxNameLen); !dns1123Label.MatchString(got) {
		t.Errorf("sanitizeName of no usable character = %q, not a DNS-1123 label", got)
	}
	a := newNameAllocator()
	first, second := a.name("web_a", ""), a.name("Web-A", "")
	if first != "web-a" || second == first || !dns1123Label.MatchString(second) {
		t.Errorf("clashing names: %q and %q", first, second)
	}
	if got := a.name(strings.Repeat("b", 70), "-on-demand"); len(got) > maxNameLen || !strings.HasSuffix(got, "-on-demand") {
		t.Errorf("long name with suffix = %q (%d)", got, len(got))
	}
}

func FuzzSanitizeName(f *testing.F) {
	f.Add("Web_ASG.prod")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		got := sanitizeName(s, maxNameLen)
		if len(got) > maxNameLen || !dns1123Label.MatchString(got) {
			t.Fatalf("sanitizeName(%q) = %q", s, got)
		}
	})
}

func TestAliasVersion(t *testing.T) {
	tests := []struct{ family, release, want string }{
		{karpv1.AMIFamilyAL2023, "1.31.2-20241109", "v20241109"},
		{karpv1.AMIFamilyAL2, "1.29.10-20240817", "v20240817"},
		{karpv1.AMIFamilyBottlerocket, "1.20.1-7c3e9198", "v1.20.1"},
		{karpv1.AMIFamilyAL2023, "1.31.2", ""},
		{karpv1.AMIFamilyWindows2022, "2022.10.11", ""},
	}
	for _, tt := range tests {
		if got := aliasVersion(tt.family, tt.release); got != tt.want {
			t.Errorf("aliasVersion(%s, %s) = %q, want %q", tt.family, tt.release, got, tt.want)
		}
	}
}

func testPlan() *groupPlan { return &groupPlan{g: &inventory.NodeGroup{Name: "g"}} }

func TestChooseAMI(t *testing.T) {
	withUD := &inventory.LaunchTemplate{UserData: "#!/bin/sh\n/opt/join.sh\n"}
	tests := []struct {
		name    string
		g       inventory.NodeGroup
		keepAL2 bool
		want    string // alias or id
		family  string // amiFamily for id terms
		err     string
	}{
		{"al2023 pinned", inventory.NodeGroup{AMIType: "AL2023_ARM_64_STANDARD", ReleaseVersion: "1.31.2-20241109"}, false, "al2023@v20241109", "", ""},
		{"al2 moves to al2023", inventory.NodeGroup{AMIType: "AL2_x86_64_GPU", ReleaseVersion: "1.29.10-20240817"}, false, "al2023@latest", "", ""},
		{"al2 kept", inventory.NodeGroup{AMIType: "AL2_x86_64", ReleaseVersion: "1.29.10-20240817"}, true, "al2@v20240817", "", ""},
		{"bottlerocket", inventory.NodeGroup{AMIType: "BOTTLEROCKET_x86_64_NVIDIA", ReleaseVersion: "1.20.1-7c3e9198"}, false, "bottlerocket@v1.20.1", "", ""},
		{"windows", inventory.NodeGroup{AMIType: "WINDOWS_CORE_2022_x86_64", OS: "windows"}, false, "windows2022@latest", "", ""},
		{"eks ami by id", inventory.NodeGroup{AMIType: "AL2023_x86_64_STANDARD", AMIID: "ami-1"}, false, "ami-1", "AL2023", ""},
		{"custom al2", inventory.NodeGroup{AMIType: "CUSTOM", AMIID: "ami-2", LaunchTemplate: &inventory.LaunchTemplate{Bootstrap: &inventory.Bootstrap{Format: inventory.BootstrapAL2}}}, false, "ami-2", "AL2", ""},
		{"custom unknown with user data", inventory.NodeGroup{AMIType: "CUSTOM", AMIID: "ami-3", LaunchTemplate: withUD}, false, "ami-3", "Custom", ""},
		{"custom unknown without user data", inventory.NodeGroup{AMIType: "CUSTOM", AMIID: "ami-4"}, false, "", "", "runs custom AMI ami-4 with no user data"},
		{"windows custom", inventory.NodeGroup{AMIType: "CUSTOM", AMIID: "ami-5", OS: "windows"}, false, "", "", "custom Windows AMI ami-5"},
		{"custom without id", inventory.NodeGroup{AMIType: "CUSTOM"}, false, "", "", "without an AMI id"},
		{"nothing known", inventory.NodeGroup{}, false, "al2023@latest", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPlan()
			p.g = &tt.g
			p.os = groupOS(&tt.g)
			c, err := chooseAMI(&tt.g, p, &Options{KeepAL2: tt.keepAL2})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.terms[0].Alias + c.terms[0].ID
			if len(c.terms) != 1 || got != tt.want || c.amiFamily != tt.family {
				t.Errorf("terms %+v family %q, want %s / %q", c.terms, c.amiFamily, tt.want, tt.family)
			}
		})
	}
}

func TestWithoutBootstrap(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "#!/bin/bash\necho hi\n/etc/eks/bootstrap.sh c --b64-cluster-ca x\n", "#!/bin/bash\necho hi\n"},
		{"continued", "#!/bin/bash\n/etc/eks/bootstrap.sh c \\\n  --kubelet-extra-args '--max-pods=29' \\\n  --use-max-pods false\necho after\n", "#!/bin/bash\necho after\n"},
		{"only bootstrap", "#!/bin/bash\nset -ex\n/etc/eks/bootstrap.sh c\n", "#!/bin/bash\nset -ex\n"},
		{"nothing but bootstrap", "#!/bin/bash\n/etc/eks/bootstrap.sh c\n", ""},
		{"no bootstrap", "yum install -y x\n", "yum install -y x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withoutBootstrap(tt.in, testPlan()); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestShellScript(t *testing.T) {
	mime := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-config\n\npackages: [jq]\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho one\n--B--\n"
	p := testPlan()
	if got := shellScript(mime, p); got != "#!/bin/bash\necho one" {
		t.Errorf("shell part = %q", got)
	}
	if len(p.warnings) != 1 || !strings.Contains(p.warnings[0].Message, "text/cloud-config was not carried") {
		t.Errorf("warnings = %v, want one about the cloud-config part", p.warnings)
	}
	if got := shellScript("#!/bin/bash\necho two\n", testPlan()); got != "#!/bin/bash\necho two\n" {
		t.Errorf("plain script = %q", got)
	}
}

func FuzzUserData(f *testing.F) {
	f.Add("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n/etc/eks/bootstrap.sh c \\\n x\n--B--\n")
	f.Add("#!/bin/bash\n/etc/eks/bootstrap.sh\n")
	f.Fuzz(func(t *testing.T, ud string) {
		p := testPlan()
		s := withoutBootstrap(shellScript(ud, p), p)
		if strings.Contains(s, "/etc/eks/bootstrap.sh") {
			t.Fatalf("bootstrap call left in %q", s)
		}
		if _, err := al2023UserData([]string{"--a=b"}, s); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKubeletFrom(t *testing.T) {
	p := testPlan()
	k, extra := kubeletFrom(&inventory.Bootstrap{
		MaxPods:        ptr(int32(58)),
		KubeReserved:   map[string]string{"cpu": "100m", "gpu": "1"},
		EvictionSoft:   map[string]string{"memory.available": "500Mi", "nodefs.available": "15%"},
		EvictionHard:   map[string]string{"memory.available": "100Mi", "allocatableMemory.available": "1"},
		ExtraArgs:      []string{"--eviction-soft-grace-period=memory.available=1m30s", "--pods-per-core", "10", "--feature-gates=A=true", "--image-gc-high-threshold=high"},
		SystemReserved: nil,
	}, p)
	if *k.MaxPods != 58 || *k.PodsPerCore != 10 || k.KubeReserved["cpu"] != "100m" || len(k.KubeReserved) != 1 {
		t.Errorf("kubelet = %+v", k)
	}
	if len(k.EvictionSoft) != 1 || k.EvictionSoftGracePeriod["memory.available"].Duration.String() != "1m30s" {
		t.Errorf("soft eviction without a grace period must be dropped: %+v / %+v", k.EvictionSoft, k.EvictionSoftGracePeriod)
	}
	if len(k.EvictionHard) != 1 || k.ImageGCHighThresholdPercent != nil {
		t.Errorf("invalid keys and values must be dropped: %+v", k)
	}
	if !slices.Equal(extra, []string{"--feature-gates=A=true"}) {
		t.Errorf("extra flags = %v", extra)
	}
	var msgs []string
	for _, w := range p.warnings {
		msgs = append(msgs, w.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{`kubeReserved key "gpu"`, `evictionHard key "allocatableMemory.available"`, "evictionSoft nodefs.available has no grace period", "--image-gc-high-threshold=high is not valid"} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in:\n%s", want, all)
		}
	}
	if k, extra := kubeletFrom(&inventory.Bootstrap{Format: inventory.BootstrapNodeadm}, testPlan()); k != nil || extra != nil {
		t.Errorf("empty bootstrap gives %+v %v, want nothing", k, extra)
	}
}

func TestCapacityShares(t *testing.T) {
	tests := []struct {
		max, base, pct int32
		od, spot       int32
	}{
		{12, 2, 25, 5, 7},
		{10, 0, 0, 0, 10},
		{10, 20, 0, 10, 0},
		{10, 0, 50, 5, 5},
		{3, 1, 10, 2, 1}, // 10 % of 2 rounds up to one node
	}
	for _, tt := range tests {
		g := &inventory.NodeGroup{MaxSize: tt.max, Mixed: &inventory.MixedPolicy{OnDemandBaseCapacity: tt.base, OnDemandPercentageAboveBaseCapacity: tt.pct}}
		got := capacityShares(g, []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot})
		if got[karpv1.CapacityTypeOnDemand] != tt.od || got[karpv1.CapacityTypeSpot] != tt.spot {
			t.Errorf("max %d base %d pct %d: %v, want on-demand %d spot %d", tt.max, tt.base, tt.pct, got, tt.od, tt.spot)
		}
	}
	if got := capacityShares(&inventory.NodeGroup{MaxSize: 5}, []string{"spot"}); got != nil {
		t.Errorf("no policy: %v, want no split", got)
	}
}

func TestLabelAllowed(t *testing.T) {
	tests := []struct {
		key    string
		ok     bool
		silent bool
	}{
		{"team", true, true},
		{"example.com/team", true, true},
		{"node.kubernetes.io/lifecycle", true, true},
		{"node-restriction.kubernetes.io/secure", true, true},
		{"node-role.kubernetes.io/worker", false, false},
		{"kubernetes.io/role", false, false},
		{"k8s.io/x", false, false},
		{"karpenter.sh/capacity-type", false, true},
		{"karpenter.sh/nodepool", false, false},
		{"karpenter.k8s.aws/instance-family", false, false},
		{"eks.amazonaws.com/nodegroup", false, true},
		{"node.kubernetes.io/instance-type", false, true},
		{"topology.kubernetes.io/zone", false, true},
	}
	for _, tt := range tests {
		ok, why := labelAllowed(tt.key)
		if ok != tt.ok || (why == "") != tt.silent {
			t.Errorf("labelAllowed(%s) = %v %q, want %v (silent %v)", tt.key, ok, why, tt.ok, tt.silent)
		}
	}
}

// planFor generates one group with the given options and returns its first
// NodePool and the result.
func planFor(t *testing.T, g inventory.NodeGroup, opts Options) (*karpv1.NodePool, *Result) {
	t.Helper()
	inv := &inventory.Inventory{Cluster: inventory.Cluster{Name: "c", Region: "us-east-1"}, NodeGroups: []inventory.NodeGroup{g}}
	res, err := Generate(inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.NodePools[0], res
}

func requirement(np *karpv1.NodePool, key string, op corev1.NodeSelectorOperator) *karpv1.NodeSelectorRequirementWithMinValues {
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == key && r.Operator == op {
			return &np.Spec.Template.Spec.Requirements[i]
		}
	}
	return nil
}

func TestFlexibility(t *testing.T) {
	g := inventory.NodeGroup{Name: "g", Kind: inventory.Managed, MaxSize: 4, InstanceTypes: []string{"m5.xlarge", "m5.2xlarge"}, CapacityType: "spot", AMIType: "AL2023_x86_64_STANDARD", Zones: []string{"us-east-1a"}}
	allows := func(np *karpv1.NodePool, name string) bool {
		it, ok := catalog.Default().Get(name)
		if !ok {
			t.Fatalf("catalogue lacks %s", name)
		}
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key != corev1.LabelTopologyZone && r.Key != karpv1.CapacityTypeLabelKey && !satisfies(it.Labels, r) {
				return false
			}
		}
		return true
	}
	opts := DefaultOptions()

	opts.Flexibility = FlexibilityFamily
	np, _ := planFor(t, g, opts)
	if r := requirement(np, karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn); r == nil || !slices.Equal(r.Values, []string{"m5"}) {
		t.Errorf("family requirement = %+v", r)
	}
	if r := requirement(np, karpv1.LabelInstanceSize, corev1.NodeSelectorOpIn); r == nil || !slices.Equal(r.Values, []string{"2xlarge", "xlarge"}) {
		t.Errorf("size requirement = %+v", r)
	}

	opts.Flexibility = FlexibilitySimilar
	np, res := planFor(t, g, opts)
	for name, want := range map[string]bool{
		"m5.xlarge": true, "m6i.xlarge": true, "m7i.2xlarge": true, "m5.4xlarge": true, // same category, at least as large, within 2x
		"m5.large": false, "c5.xlarge": false, "m6g.xlarge": false, "m5.8xlarge": false, "m4.xlarge": false, // smaller, other category, arm64, too large, older
	} {
		if got := allows(np, name); got != want {
			t.Errorf("similar allows %s = %v, want %v", name, got, want)
		}
	}
	mv := requirement(np, karpv1.LabelInstanceFamily, corev1.NodeSelectorOpExists)
	if mv == nil || mv.MinValues == nil || *mv.MinValues != spotMinFamilies {
		t.Errorf("spot pool with similar types has no minValues on families: %+v", mv)
	}
	if res.Pools[0].InstanceTypes < 10 {
		t.Errorf("similar allows only %d types", res.Pools[0].InstanceTypes)
	}

	opts.Flexibility = FlexibilityExact
	_, res = planFor(t, g, opts)
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Message, "spot pool allows only 2 instance type(s)") {
		t.Errorf("warnings = %v, want the few-types warning", res.Warnings)
	}
}

func TestPatchCapacityPolicy(t *testing.T) {
	pool := func(values ...string) *karpv1.NodePool {
		np := &karpv1.NodePool{}
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: values},
		}
		return np
	}
	tests := []struct {
		policy CapacityPolicy
		in     []string
		want   []string // nil: requirements not patched
	}{
		{CapacityKeep, []string{"spot"}, nil},
		{CapacitySpotFirst, []string{"on-demand"}, []string{"on-demand", "spot"}},
		{CapacitySpotFirst, []string{"on-demand", "spot"}, nil},
		{CapacityOnDemandFallback, []string{"spot"}, []string{"on-demand", "spot"}},
		{CapacityOnDemandFallback, []string{"on-demand"}, nil},
	}
	for _, tt := range tests {
		d := patchDataFor(&Profile{Capacity: tt.policy}, pool(tt.in...))
		if tt.want == nil {
			if d.Requirements != nil {
				t.Errorf("%s on %v patches requirements: %+v", tt.policy, tt.in, d.Requirements)
			}
			continue
		}
		if len(d.Requirements) != 2 || d.Requirements[0].Key != corev1.LabelArchStable || !slices.Equal(d.Requirements[1].Values, tt.want) {
			t.Errorf("%s on %v = %+v, want capacity %v and the other requirements kept", tt.policy, tt.in, d.Requirements, tt.want)
		}
	}
}

func TestGenerateErrorsAndOptions(t *testing.T) {
	good := inventory.NodeGroup{Name: "g", Kind: inventory.Managed, MaxSize: 2, InstanceTypes: []string{"m5.large"}, AMIType: "AL2023_x86_64_STANDARD",
		NodeRoleARN: "arn:aws:iam::1:role/path/node-role", SubnetIDs: []string{"subnet-b", "subnet-a"}, SecurityGroupIDs: []string{"sg-1"}}
	tests := []struct {
		name string
		inv  *inventory.Inventory
		opts Options
		want string
	}{
		{"nil inventory", nil, Options{}, "no inventory"},
		{"no cluster name", &inventory.Inventory{NodeGroups: []inventory.NodeGroup{good}}, Options{}, "cluster.name is empty"},
		{"no groups", &inventory.Inventory{Cluster: inventory.Cluster{Name: "c"}}, Options{}, "no node groups"},
		{"nothing mappable", &inventory.Inventory{Cluster: inventory.Cluster{Name: "c"}, NodeGroups: []inventory.NodeGroup{{Name: "w", OS: "windows", AMIType: "CUSTOM", AMIID: "ami-1", InstanceTypes: []string{"m5.large"}}}}, Options{}, "no node group could be mapped: w: no NodePool or EC2NodeClass written for this group: custom Windows AMI"},
		{"no instance types", &inventory.Inventory{Cluster: inventory.Cluster{Name: "c"}, NodeGroups: []inventory.NodeGroup{{Name: "e"}}}, Options{}, "e: no NodePool or EC2NodeClass written for this group: no instance types"},
		{"bad strategy", &inventory.Inventory{}, Options{Strategy: "all"}, `strategy "all"`},
		{"bad selectors", &inventory.Inventory{}, Options{Selectors: "names"}, `selectors "names"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Generate(tt.inv, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}

	opts := DefaultOptions()
	opts.NodeRole = NodeRoleFromNodeGroup
	opts.Selectors = SelectorsIDs
	_, res := planFor(t, good, opts)
	spec := res.NodeClasses[0].Spec
	if spec.Role != "node-role" {
		t.Errorf("role = %q, want the group's role name", spec.Role)
	}
	if len(spec.SubnetSelectorTerms) != 2 || spec.SubnetSelectorTerms[0].ID != "subnet-a" || len(spec.SecurityGroupSelectorTerms) != 1 || spec.SecurityGroupSelectorTerms[0].ID != "sg-1" {
		t.Errorf("selectors = %+v / %+v", spec.SubnetSelectorTerms, spec.SecurityGroupSelectorTerms)
	}
	opts.NodeRole = "MyRole"
	opts.Selectors = SelectorsTag
	_, res = planFor(t, good, opts)
	if spec := res.NodeClasses[0].Spec; spec.Role != "MyRole" || spec.SubnetSelectorTerms[0].Tags[DiscoveryTagKey] != "c" {
		t.Errorf("spec = %+v", spec)
	}
}

func TestStrategySingle(t *testing.T) {
	base := inventory.NodeGroup{Kind: inventory.Managed, MaxSize: 2, InstanceTypes: []string{"m5.large"}, AMIType: "AL2023_x86_64_STANDARD", Labels: map[string]string{"team": "a"}}
	a, b, c, d := base, base, base, base
	a.Name, b.Name, c.Name, d.Name = "a", "b", "c", "d"
	b.InstanceTypes = []string{"c5.large"}
	c.Taints = []corev1.Taint{{Key: "dedicated", Value: "c", Effect: corev1.TaintEffectNoSchedule}}
	inv := &inventory.Inventory{
		Cluster:    inventory.Cluster{Name: "cl"},
		NodeGroups: []inventory.NodeGroup{d, c, b, a},
		Nodes:      []inventory.Node{{Name: "n1", NodeGroup: "d"}},
		Pods:       []inventory.Pod{{Namespace: "ns", Name: "p", NodeName: "n1", NodeSelector: map[string]string{labelEKSNodeGroup: "d"}}},
	}
	opts := DefaultOptions()
	opts.Strategy = StrategySingle
	res, err := Generate(inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	var pools []string
	for _, p := range res.Pools {
		pools = append(pools, p.Name+"="+strings.Join(p.NodeGroups, "+"))
	}
	if got := strings.Join(pools, " "); got != "c=c d=d default=a+b" {
		t.Errorf("pools = %s", got)
	}
	notes := joinFindings(res.Notes)
	for _, want := range []string{
		"c: single: stays out of pool default (in pool c): taints differ (none vs dedicated=c:NoSchedule)",
		"d: single: stays out of pool default (in pool d): pods select eks.amazonaws.com/nodegroup=d (ns/p)",
		"default: merged pool does not carry eks.amazonaws.com/nodegroup",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	for _, np := range res.NodePools {
		_, has := np.Spec.Template.ObjectMeta.Labels[labelEKSNodeGroup]
		if has != (np.Name != "default") {
			t.Errorf("pool %s: node-group label present = %v", np.Name, has)
		}
		if np.Name == "default" {
			r := requirement(np, corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn)
			if !slices.Equal(r.Values, []string{"c5.large", "m5.large"}) {
				t.Errorf("merged instance types = %v", r.Values)
			}
			if np.Spec.Limits.Cpu().Value() != 8 {
				t.Errorf("merged limits = %v, want the sum of both groups (2×2 + 2×2 CPU)", np.Spec.Limits)
			}
		}
	}
}

func TestOverprovisioningAndHelm(t *testing.T) {
	opts := DefaultOptions()
	opts.Overprovisioning = true
	res, err := Generate(loadFixture(t, "all"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Overprovisioning); n != 2+len(res.NodePools) {
		t.Fatalf("%d over-provisioning objects, want a namespace, a priority class and one Deployment per pool", n)
	}
	pc := res.Overprovisioning[1]
	if pc["kind"] != "PriorityClass" || pc["value"].(int) >= 0 {
		t.Errorf("priority class = %v", pc)
	}
	for _, o := range res.Overprovisioning[2:] {
		meta := o["metadata"].(map[string]any)
		if meta["name"] != "overprovisioning-gpu" {
			continue
		}
		spec := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		req := spec["containers"].([]map[string]any)[0]["resources"].(map[string]any)["requests"].(map[string]any)
		if req["cpu"] != "3" || req["memory"] != "12Gi" {
			t.Errorf("gpu pause pod requests %v, want the largest pod on the group (3 CPU, 12Gi)", req)
		}
		tol := spec["tolerations"].([]map[string]any)
		if len(tol) != 1 || tol[0]["key"] != "nvidia.com/gpu" {
			t.Errorf("tolerations = %v", tol)
		}
	}

	terms := res.HelmValues["affinity"].(map[string]any)["nodeAffinity"].(map[string]any)["requiredDuringSchedulingIgnoredDuringExecution"].(map[string]any)["nodeSelectorTerms"].([]map[string]any)[0]["matchExpressions"].([]map[string]any)
	if len(terms) != 2 || terms[0]["operator"] != "DoesNotExist" || terms[1]["values"].([]string)[0] != "system" {
		t.Errorf("controller affinity = %v, want off Karpenter nodes and on the system group", terms)
	}

	inv := loadFixture(t, "gpu")
	inv.Cluster.AccountID, inv.Cluster.ARN, inv.Cluster.Region = "", "", "cn-north-1"
	opts = DefaultOptions()
	res, err = Generate(inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	arn := res.HelmValues["serviceAccount"].(map[string]any)["annotations"].(map[string]any)["eks.amazonaws.com/role-arn"]
	if arn != "arn:aws-cn:iam::ACCOUNT_ID:role/KarpenterControllerRole-shop" {
		t.Errorf("role ARN = %v", arn)
	}
	opts.ControllerNodeGroup = "gpu"
	if _, err := Generate(inv, opts); err != nil {
		t.Errorf("a managed group named by the option is accepted even if tainted: %v", err)
	}
}

func TestStrategySingleNothingMerges(t *testing.T) {
	a := inventory.NodeGroup{Name: "a", Kind: inventory.Managed, MaxSize: 1, InstanceTypes: []string{"m5.large"}, AMIType: "AL2023_x86_64_STANDARD"}
	b := a
	b.Name, b.CapacityType = "b", "spot"
	opts := DefaultOptions()
	opts.Strategy = StrategySingle
	res, err := Generate(&inventory.Inventory{Cluster: inventory.Cluster{Name: "c"}, NodeGroups: []inventory.NodeGroup{a, b}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pools) != 2 || res.Pools[0].Name != "a" || res.Pools[1].Name != "b" {
		t.Errorf("pools = %+v, want each group's own name when nothing merges", res.Pools)
	}
	if notes := joinFindings(res.Notes); !strings.Contains(notes, "b: single: stays out of pool a (in pool b): capacity types differ (on-demand vs spot)") {
		t.Errorf("notes = %s", notes)
	}
}

// TestPinnedGroupWithoutItsLabelWarns: pods selecting
// eks.amazonaws.com/nodegroup=<group> whose pool does not carry that label
// and value are a warning — a self-managed group (the label is kept for
// managed groups only), or any group with --keep-nodegroup-label=false — and
// a managed group whose pool keeps it is not.
func TestPinnedGroupWithoutItsLabelWarns(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind inventory.NodeGroupKind
		keep bool
		warn bool
	}{
		{"managed, label kept", inventory.Managed, true, false},
		{"managed, label not kept", inventory.Managed, false, true},
		{"self-managed", inventory.SelfManaged, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := inventory.NodeGroup{Name: "web", Kind: tc.kind, MaxSize: 2, InstanceTypes: []string{"m5.large"}, AMIType: "AL2023_x86_64_STANDARD"}
			inv := &inventory.Inventory{
				Cluster:    inventory.Cluster{Name: "c", Region: "us-east-1"},
				NodeGroups: []inventory.NodeGroup{g},
				Nodes:      []inventory.Node{{Name: "n1", NodeGroup: "web"}},
				Pods:       []inventory.Pod{{Namespace: "ns", Name: "p", NodeName: "n1", NodeSelector: map[string]string{labelEKSNodeGroup: "web"}}},
			}
			opts := DefaultOptions()
			opts.KeepNodeGroupLabel = tc.keep
			res, err := Generate(inv, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Contains(joinFindings(res.Warnings), "pods select eks.amazonaws.com/nodegroup=web (ns/p) but pool")
			if got != tc.warn {
				t.Fatalf("warned = %v, want %v: %s", got, tc.warn, joinFindings(res.Warnings))
			}
		})
	}
}

// TestCustomAMIWithoutUserDataSaysWhy: a group whose launch template runs
// a custom AMI with no user data (or user data the snapshot redacted) gets
// no NodePool, and generate says so for that group, why, and what to do.
func TestCustomAMIWithoutUserDataSaysWhy(t *testing.T) {
	good := inventory.NodeGroup{Name: "general", Kind: inventory.Managed, MaxSize: 2, InstanceTypes: []string{"m5.large"}, AMIType: "AL2023_x86_64_STANDARD",
		NodeRoleARN: "arn:aws:iam::1:role/node-role", SubnetIDs: []string{"subnet-a"}, SecurityGroupIDs: []string{"sg-1"}}
	for _, tc := range []struct {
		name string
		lt   inventory.LaunchTemplate
		want string
	}{
		{"no user data", inventory.LaunchTemplate{AMIID: "ami-0custom"}, "runs custom AMI ami-0custom with no user data"},
		{"redacted", inventory.LaunchTemplate{AMIID: "ami-0custom", UserDataRedacted: true}, "discovered with --include-user-data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			custom := good
			custom.Name, custom.Kind, custom.AMIType, custom.AMIID, custom.LaunchTemplate = "db", inventory.SelfManaged, "", "ami-0custom", &tc.lt
			inv := &inventory.Inventory{Cluster: inventory.Cluster{Name: "c"}, NodeGroups: []inventory.NodeGroup{good, custom}}
			res, err := Generate(inv, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, np := range res.NodePools {
				if strings.Contains(np.Annotations[nodeGroupsAnnotation], "db") {
					t.Fatalf("NodePool %s replaces db, want none", np.Name)
				}
			}
			why := res.Unmapped["db"]
			for _, want := range []string{NoPoolWritten, tc.want, "amiSelectorTerms id ami-0custom", nodeGroupsAnnotation + ": db", "nodeGroups.exclude"} {
				if !strings.Contains(why, want) {
					t.Errorf("why db has no pool = %q, want it to say %q", why, want)
				}
			}
			if !slices.Contains(res.Warnings, Finding{Subject: "db", Message: why}) {
				t.Errorf("warnings %v do not say why db has no pool", res.Warnings)
			}
			if got, err := Unmapped(inv, DefaultOptions()); err != nil || len(got) != 1 || got["db"] != why {
				t.Errorf("Unmapped = %v, %v; want only db, as Generate says", got, err)
			}
		})
	}
}
