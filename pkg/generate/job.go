package generate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// In the Job's pod, the plan and the packed tree are mounted here.
const (
	JobMountDir  = "/etc/karpenter-migrate"
	jobPlanKey   = "plan.yaml"
	jobConfigKey = "config.yaml"
)

// JobOptions describe the in-cluster Job that applies one environment's
// reviewed plan (`generate --job`).
type JobOptions struct {
	// Environment and Cluster come from the plan.
	Environment string
	Cluster     string
	// Namespace is the tool's namespace: journal, Lease, placeholders, and
	// where the Job and its ServiceAccount live.
	Namespace string
	// Image runs `karpenter-migrate apply --in-cluster`.
	Image string
	// Region is passed as AWS_REGION (empty: the pod's default chain).
	Region string
	// RoleARN, when set, annotates the ServiceAccount for IRSA
	// (eks.amazonaws.com/role-arn). Leave it empty with EKS Pod Identity:
	// the association is made in AWS, not in the manifest.
	RoleARN string
	// Plan is the reviewed plan file's bytes; PlanHash its content hash
	// (it names the Job, so a new plan is a new Job).
	Plan     []byte
	PlanHash string
	// Config, when set, is the environment's migration config; apply reads
	// its region, profile and maintenance window.
	Config []byte
	// TreeDir is the generated kustomize tree; base/ and
	// overlays/<Environment>/ are packed into the Job's ConfigMap.
	TreeDir string
	// ClusterAutoscaler, when the plan scales it, scopes the scale
	// permission to that one Deployment.
	ClusterAutoscaler *NamespacedName
	// Karpenter, when the plan installs Karpenter (step 07), is its Helm
	// release: the Job gets the permissions Helm needs for it
	// (KarpenterRules).
	Karpenter *KarpenterRelease
	// BackoffLimit is how often Kubernetes retries a failed pod; a retry
	// resumes from the journal once the dead run's Lease expires.
	BackoffLimit int32
	// LeaseDuration is passed to apply --lease-duration.
	LeaseDuration time.Duration
}

// NamespacedName names a namespaced object.
type NamespacedName struct{ Namespace, Name string }

// JobName is the Job's name for an environment and plan hash.
func JobName(env, planHash string) string {
	h := strings.TrimPrefix(planHash, "sha256:")
	if len(h) > 10 {
		h = h[:10]
	}
	return "karpenter-migrate-" + env + "-" + h
}

// JobServiceAccount is the ServiceAccount (and RBAC object) name of an
// environment's Job.
func JobServiceAccount(env string) string { return "karpenter-migrate-" + env }

// RunbookRule is one RBAC permission the runbook needs and the code that
// uses it, so the Role stays auditable against pkg/kube and pkg/rollout.
type RunbookRule struct {
	// Scope is "cluster" (ClusterRole), "namespace" (the tool's namespace),
	// "aws-auth" (kube-system, aws-auth only) or "cluster-autoscaler" (the
	// planned Cluster Autoscaler Deployment only).
	Scope    string
	Group    string
	Resource string // resource or resource/subresource
	Verbs    []string
	Why      string
}

// Rule scopes.
const (
	ScopeCluster           = "cluster"
	ScopeNamespace         = "namespace"
	ScopeAWSAuth           = "aws-auth"
	ScopeClusterAutoscaler = "cluster-autoscaler"
)

// RunbookRules lists every Kubernetes permission `apply` and `rollback`
// use, and nothing else: the Job's RBAC is built from it.
func RunbookRules() []RunbookRule {
	return []RunbookRule{
		{ScopeCluster, "", "nodes", []string{"get", "list", "patch"}, "preflight, drift and final checks list nodes; cordon/uncordon patch spec.unschedulable (kube.Cordon); the controller's kept nodes and the steered legacy nodes get taints (kube.SetTaint patches spec.taints)"},
		{ScopeCluster, "", "pods", []string{"get", "list", "watch"}, "drain lists and watches a node's pods and waits for evicted ones to go; the gate lists pending pods"},
		{ScopeCluster, "", "pods/eviction", []string{"create"}, "every move goes through the Eviction API (kube.Drainer)"},
		{ScopeCluster, "", "namespaces", []string{"get", "create"}, "the tool's namespace is created when missing (kube.EnsureNamespace)"},
		{ScopeCluster, "apps", "daemonsets", []string{"get"}, "kubectl's drain filter checks a DaemonSet pod's controller exists"},
		{ScopeCluster, "apps", "replicasets", []string{"get"}, "a pod's ReplicaSet leads to its Deployment (surge restart)"},
		{ScopeCluster, "apps", "deployments", []string{"get", "list", "patch"}, "the gate lists Deployments; a PDB-blocked Deployment is moved by a surge restart (patch)"},
		{ScopeCluster, "apps", "statefulsets", []string{"list"}, "the gate lists StatefulSets"},
		{ScopeCluster, "policy", "poddisruptionbudgets", []string{"list", "watch"}, "the gate and the surge restart read PDBs; the drain watches them to evict as soon as a budget allows (kube.DrainOptions.Watch)"},
		{ScopeCluster, "scheduling.k8s.io", "priorityclasses", []string{"create"}, "the placeholder pods' PriorityClass"},
		{ScopeCluster, "karpenter.sh", "nodepools", []string{"get", "list", "create", "patch", "delete"}, "preflight lists NodePools; step 07 server-side applies them (create+patch); rollback limits (patch) and deletes them"},
		{ScopeCluster, "karpenter.k8s.aws", "ec2nodeclasses", []string{"get", "create", "patch", "delete"}, "step 07 server-side applies node classes; rollback deletes them"},
		{ScopeNamespace, "", "configmaps", []string{"get", "list", "create", "update"}, "the journal ConfigMap (kube.StateStore) and the aws-auth backups"},
		{ScopeNamespace, "coordination.k8s.io", "leases", []string{"get", "create", "update"}, "the Lease that keeps two runs (or a retried Job) from interleaving"},
		{ScopeNamespace, "", "pods", []string{"create", "delete", "deletecollection"}, "placeholder pods that pre-provision Karpenter capacity, each released (delete) as the pods it holds room for are evicted"},
		{ScopeNamespace, "", "events", []string{"list"}, "a placeholder Karpenter refuses at its NodePool's limits is given up on its FailedScheduling event"},
		{ScopeAWSAuth, "", "configmaps", []string{"get", "update"}, "step 06 merges the node role into aws-auth (CONFIG_MAP authentication)"},
		{ScopeClusterAutoscaler, "apps", "deployments/scale", []string{"get", "update"}, "step 08 scales Cluster Autoscaler to zero; rollback restores its replicas"},
	}
}

var configMapKey = regexp.MustCompile(`[^-._a-zA-Z0-9]`)

// Job renders the Namespace, ServiceAccount, RBAC, the ConfigMap holding
// the plan and the tree, and the Job, as one multi-document YAML stream.
func Job(o JobOptions) ([]byte, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	name := JobName(o.Environment, o.PlanHash)
	sa := JobServiceAccount(o.Environment)
	labels := map[string]string{
		"app.kubernetes.io/name": "karpenter-migrate", "app.kubernetes.io/managed-by": "karpenter-migrate",
		"karpenter-migrate.io/environment": o.Environment,
	}
	meta := func(n, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels}
	}

	files, err := packTree(o.TreeDir, o.Environment)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(name, o.Namespace),
		Data: map[string]string{jobPlanKey: string(o.Plan)}}
	items := []corev1.KeyToPath{{Key: jobPlanKey, Path: jobPlanKey}}
	if len(o.Config) > 0 {
		cm.Data[jobConfigKey] = string(o.Config)
		items = append(items, corev1.KeyToPath{Key: jobConfigKey, Path: jobConfigKey})
	}
	for _, f := range files {
		key := "tree." + configMapKey.ReplaceAllString(strings.ReplaceAll(f.path, "/", "."), "_")
		if _, dup := cm.Data[key]; dup {
			return nil, fmt.Errorf("tree %s: files %s and another map to the same ConfigMap key %s; rename one", o.TreeDir, f.path, key)
		}
		cm.Data[key] = f.data
		items = append(items, corev1.KeyToPath{Key: key, Path: "tree/" + f.path})
	}
	var size int
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	if size > 900*1024 {
		return nil, fmt.Errorf("plan and tree are %d KiB, too large for one ConfigMap (1 MiB); reduce the tree to this environment or run apply from CI", size/1024)
	}

	rules := RunbookRules()
	if o.Karpenter != nil {
		rules = append(rules, KarpenterRules(*o.Karpenter)...)
	}
	policy := func(scope string, names ...string) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, r := range rules {
			if r.Scope == scope {
				out = append(out, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: r.Verbs, ResourceNames: names})
			}
		}
		return out
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: o.Namespace}}
	roleRef := func(kind, n string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: n}
	}
	rbacType := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
	}

	saObj := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(sa, o.Namespace)}
	if o.RoleARN != "" {
		saObj.Annotations = map[string]string{"eks.amazonaws.com/role-arn": o.RoleARN}
	}
	objs := []any{
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "karpenter-migrate"}}},
		saObj,
		&rbacv1.ClusterRole{TypeMeta: rbacType("ClusterRole"), ObjectMeta: meta(sa, ""), Rules: policy(ScopeCluster)},
		&rbacv1.ClusterRoleBinding{TypeMeta: rbacType("ClusterRoleBinding"), ObjectMeta: meta(sa, ""), Subjects: subject, RoleRef: roleRef("ClusterRole", sa)},
		&rbacv1.Role{TypeMeta: rbacType("Role"), ObjectMeta: meta(sa, o.Namespace), Rules: policy(ScopeNamespace)},
		&rbacv1.RoleBinding{TypeMeta: rbacType("RoleBinding"), ObjectMeta: meta(sa, o.Namespace), Subjects: subject, RoleRef: roleRef("Role", sa)},
		&rbacv1.Role{TypeMeta: rbacType("Role"), ObjectMeta: meta(sa+"-aws-auth", "kube-system"), Rules: policy(ScopeAWSAuth, "aws-auth")},
		&rbacv1.RoleBinding{TypeMeta: rbacType("RoleBinding"), ObjectMeta: meta(sa+"-aws-auth", "kube-system"), Subjects: subject, RoleRef: roleRef("Role", sa+"-aws-auth")},
	}
	if ca := o.ClusterAutoscaler; ca != nil {
		objs = append(objs,
			&rbacv1.Role{TypeMeta: rbacType("Role"), ObjectMeta: meta(sa+"-cluster-autoscaler", ca.Namespace), Rules: policy(ScopeClusterAutoscaler, ca.Name)},
			&rbacv1.RoleBinding{TypeMeta: rbacType("RoleBinding"), ObjectMeta: meta(sa+"-cluster-autoscaler", ca.Namespace), Subjects: subject, RoleRef: roleRef("Role", sa+"-cluster-autoscaler")},
		)
	}
	if k := o.Karpenter; k != nil {
		if k.Namespace != o.Namespace && k.Namespace != "kube-system" {
			// The Role below lives there; step 07 would create it anyway.
			objs = append(objs, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: k.Namespace}})
		}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: rbacType("Role"), ObjectMeta: meta(sa+"-karpenter", k.Namespace), Rules: policy(ScopeKarpenterNamespace)},
			&rbacv1.RoleBinding{TypeMeta: rbacType("RoleBinding"), ObjectMeta: meta(sa+"-karpenter", k.Namespace), Subjects: subject, RoleRef: roleRef("Role", sa+"-karpenter")},
		)
		// The chart's objects in other namespaces (kube-system).
		var others []string
		for _, r := range rules {
			if ns, ok := KarpenterRuleNamespace(r, k.Namespace); ok && ns != "" && ns != k.Namespace && !slices.Contains(others, ns) {
				others = append(others, ns)
			}
		}
		for _, ns := range others {
			objs = append(objs,
				&rbacv1.Role{TypeMeta: rbacType("Role"), ObjectMeta: meta(sa+"-karpenter", ns), Rules: policy(ScopeKarpenterNamespace + "/" + ns)},
				&rbacv1.RoleBinding{TypeMeta: rbacType("RoleBinding"), ObjectMeta: meta(sa+"-karpenter", ns), Subjects: subject, RoleRef: roleRef("Role", sa+"-karpenter")},
			)
		}
		if cluster := policy(ScopeKarpenterCluster); len(cluster) > 0 {
			objs = append(objs,
				&rbacv1.ClusterRole{TypeMeta: rbacType("ClusterRole"), ObjectMeta: meta(sa+"-karpenter", ""), Rules: cluster},
				&rbacv1.ClusterRoleBinding{TypeMeta: rbacType("ClusterRoleBinding"), ObjectMeta: meta(sa+"-karpenter", ""), Subjects: subject, RoleRef: roleRef("ClusterRole", sa+"-karpenter")},
			)
		}
	}
	objs = append(objs, cm, o.job(name, sa, labels, items))

	var out bytes.Buffer
	fmt.Fprintf(&out, "# karpenter-migrate in-cluster rollout of environment %s (cluster %s), plan %s.\n", o.Environment, o.Cluster, o.PlanHash)
	out.WriteString("# Apply with kubectl apply -f (or commit for your GitOps tool). A new plan makes a new Job;\n")
	out.WriteString("# a retried pod resumes from the journal once the previous run's Lease has expired.\n")
	for i, obj := range objs {
		if i > 0 {
			out.WriteString("---\n")
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("render %T: %w", obj, err)
		}
		out.Write(dropEmpty(b))
	}
	return out.Bytes(), nil
}

func (o JobOptions) job(name, sa string, labels map[string]string, items []corev1.KeyToPath) *batchv1.Job {
	args := []string{"apply", "--in-cluster", "--yes",
		"--plan", path.Join(JobMountDir, jobPlanKey), "--dir", path.Join(JobMountDir, "tree"),
		"--namespace", o.Namespace, "--log-format", "json",
		"--lease-duration", o.LeaseDuration.String()}
	if len(o.Config) > 0 {
		args = append(args, "--config", path.Join(JobMountDir, jobConfigKey))
	}
	var env []corev1.EnvVar
	if o.Region != "" {
		env = append(env, corev1.EnvVar{Name: "AWS_REGION", Value: o.Region})
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr(o.BackoffLimit),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sa,
					RestartPolicy:      corev1.RestartPolicyNever,
					// Keep the migration off the nodes it drains.
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist}}}},
					}}},
					// Let SIGTERM finish the evictions in flight and write the journal.
					TerminationGracePeriodSeconds: ptr(int64(120)),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "karpenter-migrate", Image: o.Image, Args: args, Env: env,
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "rollout", MountPath: JobMountDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "rollout", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items,
					}}}},
				},
			},
		},
	}
}

func (o JobOptions) validate() error {
	var errs []error
	if o.Environment == "" {
		errs = append(errs, errors.New("environment is required (it comes from the plan)"))
	}
	for _, v := range []struct{ what, name string }{{"namespace", o.Namespace}, {"job name", JobName(o.Environment, o.PlanHash)}, {"service account", JobServiceAccount(o.Environment)}} {
		if msgs := validation.IsDNS1123Label(v.name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s", v.what, v.name, strings.Join(msgs, "; ")))
		}
	}
	if o.Image == "" {
		errs = append(errs, errors.New("image is required (--image)"))
	}
	if len(o.Plan) == 0 || o.PlanHash == "" {
		errs = append(errs, errors.New("a reviewed plan is required (--plan)"))
	}
	if o.LeaseDuration <= 0 {
		errs = append(errs, fmt.Errorf("lease duration %s: want a positive duration", o.LeaseDuration))
	}
	if o.BackoffLimit < 0 {
		errs = append(errs, fmt.Errorf("backoff limit %d: want 0 or more", o.BackoffLimit))
	}
	return errors.Join(errs...)
}

type treeFile struct{ path, data string }

// packTree reads base/ and overlays/<env>/ of the tree, the files kustomize
// needs to build the environment's overlay.
func packTree(dir, env string) ([]treeFile, error) {
	var files []treeFile
	for _, sub := range []string{BaseDir, path.Join(OverlaysDir, env)} {
		root := filepath.Join(dir, filepath.FromSlash(sub))
		if _, err := os.Stat(filepath.Join(root, Kustomization)); err != nil {
			return nil, fmt.Errorf("tree %s: %s/%s: %w; run generate --envs %s first", dir, sub, Kustomization, err, env)
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, treeFile{path: filepath.ToSlash(rel), data: string(b)})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("pack tree %s: %w", dir, err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, nil
}

// dropEmpty removes the "creationTimestamp: null" and empty "status: {}"
// lines typed objects marshal to, which only add noise to a reviewed
// manifest.
func dropEmpty(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	out := lines[:0]
	for _, l := range lines {
		if bytes.Equal(bytes.TrimSpace(l), []byte("creationTimestamp: null")) || bytes.Equal(l, []byte("status: {}")) {
			continue
		}
		out = append(out, l)
	}
	return bytes.Join(out, []byte("\n"))
}
