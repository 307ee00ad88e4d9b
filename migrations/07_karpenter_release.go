package migrations

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/generate"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/kube"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/rollout"
)

// KarpenterRecord is what the step records in the journal before it
// installs: the release it created (Down removes only that).
type KarpenterRecord struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Created is true when the release did not exist before the rollout.
	Created bool `json:"created"`
}

const karpenterRecordKey = "karpenter"

func (s run) karpenterRecord() (*KarpenterRecord, error) {
	if s.Journal == nil {
		return nil, nil
	}
	raw, ok := s.Journal.Recorded.Extra[karpenterRecordKey]
	if !ok {
		return nil, nil
	}
	var r KarpenterRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("journal: recorded %s: %w", karpenterRecordKey, err)
	}
	return &r, nil
}

// InstallsKarpenter reports whether the run installs Karpenter itself
// (then preflight does not ask for its CRDs).
func (s run) InstallsKarpenter() bool { return s.Plan.Karpenter != nil && s.Karpenter != nil }

// KarpenterInstalled is the Karpenter step's Check. Done when the release
// this tool installed is deployed at the plan's version and values, or
// when someone else installed Karpenter (a release we did not create, or
// plain manifests) with settings that agree with the plan: that one is
// left alone. A setting that contradicts the plan is an error naming it.
func (s run) KarpenterInstalled(ctx context.Context) (bool, string, error) {
	k := s.Plan.Karpenter
	if k == nil {
		return true, "not run: the plan has no Karpenter release (planned before the step existed); install Karpenter yourself", nil
	}
	if s.Karpenter == nil {
		return true, "not run: no Helm client for this cluster", nil
	}
	st, err := s.KarpenterState(ctx)
	if err != nil {
		return false, "", err
	}
	switch {
	case len(st.Mismatches) > 0:
		return false, "", fmt.Errorf("the installed Karpenter (%s) contradicts the plan:\n  %s\nfix the installation or the plan (generate's %s), then run apply again; karpenter-migrate leaves an installation it did not make alone",
			st.Source, strings.Join(st.Mismatches, "\n  "), cmp.Or(k.ValuesFrom, "Helm values"))
	case st.Problem != "":
		return false, "", fmt.Errorf("%s", st.Problem)
	case st.Foreign:
		return true, fmt.Sprintf("Karpenter already installed by someone else (%s) and agrees with the plan: left alone", st.Source), nil
	case st.Release == nil:
		return false, "", nil
	case st.UpToDate:
		return true, fmt.Sprintf("release %s/%s (chart %s %s, revision %d) installed by this tool, as planned", st.Release.Namespace, st.Release.Name, st.Release.Chart, st.Release.Version, st.Release.Revision), nil
	}
	return false, "", nil
}

// KarpenterState is what the Karpenter step finds in the cluster.
type KarpenterState struct {
	// Release is the plan's release, if installed.
	Release *rollout.Release
	// Foreign is true when Karpenter was installed by someone else (a
	// release this tool did not create, or plain manifests); Source says which.
	Foreign bool
	Source  string
	// UpToDate is true when this tool's release has the plan's version and values.
	UpToDate bool
	// Mismatches are a foreign installation's settings that contradict
	// the plan, each naming the field.
	Mismatches []string
	// Problem is a release Helm cannot upgrade (failed or pending), with
	// what to do.
	Problem string
}

// Verdict says in a word what the Karpenter step will do: install,
// upgrade, nothing (installed as planned, or left alone), or refuse.
func (st *KarpenterState) Verdict() string {
	switch {
	case len(st.Mismatches) > 0:
		return "mismatch"
	case st.Problem != "":
		return "blocked"
	case st.Foreign:
		return "left alone"
	case st.Release == nil:
		return "install"
	case st.UpToDate:
		return "installed"
	}
	return "upgrade"
}

// KarpenterState reads the release and the running controller
// (action.KarpenterStatus shows it; the step's Check decides on it).
func (s run) KarpenterState(ctx context.Context) (*KarpenterState, error) {
	k := s.Plan.Karpenter
	st := &KarpenterState{}
	rel, err := s.Karpenter.Release(ctx, k.Namespace, k.Release)
	if err != nil {
		return nil, err
	}
	st.Release = rel
	rec, err := s.karpenterRecord()
	if err != nil {
		return nil, err
	}
	ours := rec != nil && rec.Created && rec.Namespace == k.Namespace && rec.Release == k.Release
	if rel != nil {
		st.Source = fmt.Sprintf("Helm release %s/%s, chart %s %s, revision %d, %s", rel.Namespace, rel.Name, rel.Chart, rel.Version, rel.Revision, rel.Status)
		if rel.Status != rollout.ReleaseDeployed {
			st.Problem = fmt.Sprintf("Helm release %s/%s is %s (revision %d): an earlier install or upgrade did not finish; see `helm history %s -n %s`, then `helm rollback %s -n %s` to the last deployed revision (or `helm uninstall` it if none was), and run apply again",
				rel.Namespace, rel.Name, rel.Status, rel.Revision, rel.Name, rel.Namespace, rel.Name, rel.Namespace)
			return st, nil
		}
	}
	switch {
	case rel != nil && ours:
		st.UpToDate = rel.Version == k.Version && valuesEqual(rel.Values, k.Values)
		return st, nil
	case rel == nil:
		d, err := s.installedController(ctx)
		if err != nil || d == nil {
			return st, err
		}
		st.Source = fmt.Sprintf("Deployment %s/%s, not a Helm release named %s in %s", d.Namespace, d.Name, k.Release, k.Namespace)
	}
	st.Foreign = true
	d, err := s.installedController(ctx)
	if err != nil {
		return nil, err
	}
	if d == nil {
		st.Mismatches = append(st.Mismatches, fmt.Sprintf("no controller Deployment found for %s", st.Source))
		return st, nil
	}
	st.Mismatches, err = s.controllerMismatches(ctx, d)
	return st, err
}

// installedController is the running Karpenter Deployment: the plan's
// namespace first, then the other usual one.
func (s run) installedController(ctx context.Context) (*appsv1.Deployment, error) {
	k := s.Plan.Karpenter
	for _, ns := range slices.Compact([]string{k.Namespace, "kube-system", "karpenter"}) {
		d, err := s.Kube.AppsV1().Deployments(ns).Get(ctx, k.Release, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the Karpenter Deployment %s/%s: %w", ns, k.Release, err)
		}
		return d, nil
	}
	return nil, nil
}

// controllerMismatches compares a controller installed by someone else
// with the plan: the settings the chart passes as environment variables,
// the service account's IRSA role (when it has one: without, it may use a
// pod identity association, which is AWS's to tell), and whether it may
// run on Karpenter's own nodes.
func (s run) controllerMismatches(ctx context.Context, d *appsv1.Deployment) ([]string, error) {
	k := s.Plan.Karpenter
	var want struct {
		Settings struct {
			ClusterName       string `json:"clusterName"`
			InterruptionQueue string `json:"interruptionQueue"`
		} `json:"settings"`
		ServiceAccount struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"serviceAccount"`
	}
	if b, err := json.Marshal(k.Values); err == nil {
		_ = json.Unmarshal(b, &want) // values of another shape compare as unset
	}
	env := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	where := "Deployment " + d.Namespace + "/" + d.Name
	var out []string
	if got, w := env[generate.ControllerEnv["clusterName"]], want.Settings.ClusterName; w != "" && got != w {
		out = append(out, fmt.Sprintf("settings.clusterName: %s runs for cluster %q, the plan is for %q", where, got, w))
	}
	if got, w := env[generate.ControllerEnv["interruptionQueue"]], want.Settings.InterruptionQueue; w != "" && got != w {
		if got == "" {
			out = append(out, fmt.Sprintf("settings.interruptionQueue: %s has no interruption queue, the plan creates %q (spot interruptions and rebalances would go unhandled)", where, w))
		} else {
			out = append(out, fmt.Sprintf("settings.interruptionQueue: %s reads queue %q, the plan creates %q", where, got, w))
		}
	}
	if !avoidsKarpenterNodes(d.Spec.Template.Spec.Affinity) {
		out = append(out, fmt.Sprintf("affinity: %s may run on nodes it manages: add required node affinity karpenter.sh/nodepool DoesNotExist", where))
	}
	const irsa = "eks.amazonaws.com/role-arn"
	if w := want.ServiceAccount.Annotations[irsa]; w != "" {
		sa, err := s.Kube.CoreV1().ServiceAccounts(d.Namespace).Get(ctx, cmp.Or(d.Spec.Template.Spec.ServiceAccountName, "default"), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, fmt.Sprintf("serviceAccount: %s's service account %q does not exist", where, d.Spec.Template.Spec.ServiceAccountName))
		case err != nil:
			return nil, fmt.Errorf("read the Karpenter service account: %w", err)
		case sa.Annotations[irsa] != "" && sa.Annotations[irsa] != w: // none: Pod Identity, perhaps
			out = append(out, fmt.Sprintf("serviceAccount.annotations[%s]: service account %s/%s has %q, the plan's controller role is %q", irsa, sa.Namespace, sa.Name, sa.Annotations[irsa], w))
		}
	}
	return out, nil
}

// InstallKarpenter is the Karpenter step's Up: it records that this tool
// creates the release (when none exists), then installs or upgrades it
// and waits for the controller. In a dry run it reports the release and
// the values it would change, and renders the chart.
func (s run) InstallKarpenter(ctx context.Context) error {
	k := s.Plan.Karpenter
	if s.Options.DryRun {
		return s.dryRunKarpenter(ctx)
	}
	rel, err := s.Karpenter.Release(ctx, k.Namespace, k.Release)
	if err != nil {
		return err
	}
	if rel == nil {
		raw, _ := json.Marshal(KarpenterRecord{Release: k.Release, Namespace: k.Namespace, Created: true})
		if _, err := s.Record(ctx, karpenterRecordKey, raw); err != nil {
			return err
		}
		s.Change("install %s", k)
	} else {
		s.Change("upgrade %s (installed: chart %s %s, revision %d)", k, rel.Chart, rel.Version, rel.Revision)
	}
	if err := s.roomForController(ctx); err != nil {
		return err
	}
	s.Waiting(ctx, "the Karpenter controller to be Ready", 0, 1)
	got, err := s.Karpenter.Install(ctx, *k)
	if err != nil {
		return err
	}
	s.Change("release %s/%s revision %d %s: chart %s %s", got.Namespace, got.Name, got.Revision, got.Status, got.Chart, got.Version)
	return nil
}

func (s run) dryRunKarpenter(ctx context.Context) error {
	k := s.Plan.Karpenter
	rel, err := s.Karpenter.Release(ctx, k.Namespace, k.Release)
	if err != nil {
		return err
	}
	var old map[string]any
	if rel == nil {
		s.Change("would install %s", k)
	} else {
		old = rel.Values
		s.Change("would upgrade %s (installed: chart %s %s, revision %d)", k, rel.Chart, rel.Version, rel.Revision)
	}
	if d := ValuesDiff(old, k.Values); d != "" {
		s.Change("values (- installed, + planned):\n%s", d)
	}
	manifest, err := s.Karpenter.Render(ctx, *k)
	if err != nil {
		return err
	}
	s.Change("renders %s", strings.Join(ManifestNames(manifest), ", "))
	return s.roomForController(ctx)
}

// UninstallKarpenter is the Karpenter step's Down: it uninstalls the
// release only if this tool created it (the journal says so), and only
// once every NodeClaim is gone, so no node is left without its controller.
func (s run) UninstallKarpenter(ctx context.Context) error {
	rec, err := s.karpenterRecord()
	if err != nil {
		return err
	}
	if rec == nil || !rec.Created || s.Karpenter == nil {
		s.Change("Karpenter left installed: this tool did not install it")
		return nil
	}
	if s.Options.DryRun {
		s.Change("would uninstall Helm release %s/%s once every NodeClaim is gone", rec.Namespace, rec.Release)
		return nil
	}
	var left []string
	total := 0 // the NodeClaims there when the wait started
	err = s.Poll(ctx, s.Plan.Budget.Gates.NodeReadyTimeout.Duration, func() (bool, error) {
		if s.Dynamic == nil {
			return true, nil
		}
		l, err := s.Dynamic.Resource(kube.NodeClaimGVK.GroupVersion().WithResource("nodeclaims")).List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) { // the CRD is gone: so are the NodeClaims
				return true, nil
			}
			return false, fmt.Errorf("list NodeClaims: %w", err)
		}
		left = left[:0]
		for _, n := range l.Items {
			left = append(left, n.GetName())
		}
		if total == 0 && len(left) > 0 {
			total = len(left)
		}
		if total > 0 {
			// Counted against the claims there at the start, to the last
			// one removed.
			s.Waiting(ctx, fmt.Sprintf("%d NodeClaims to be removed before Karpenter is uninstalled", total), total-min(len(left), total), total)
		}
		return len(left) == 0, nil
	})
	if err == rollout.ErrTimeout {
		return fmt.Errorf("%d NodeClaims remain (%s) after %s: Karpenter must remove its nodes before it is uninstalled; delete the NodePools (the NodePools step's Down) or the NodeClaims, then run rollback again",
			len(left), strings.Join(left, ", "), s.Plan.Budget.Gates.NodeReadyTimeout.Duration)
	}
	if err != nil {
		return err
	}
	s.Change("uninstall Helm release %s/%s", rec.Namespace, rec.Release)
	return s.Karpenter.Uninstall(ctx, rec.Namespace, rec.Release)
}

// valuesEqual compares values as JSON documents (numbers from YAML and
// from Helm's storage decode differently).
func valuesEqual(a, b map[string]any) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

func normalize(v map[string]any) any {
	if len(v) == 0 {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// ValuesDiff is a unified diff of two sets of values as YAML ("" when equal).
func ValuesDiff(old, planned map[string]any) string {
	if valuesEqual(old, planned) {
		return ""
	}
	y := func(v map[string]any) string {
		if len(v) == 0 {
			return ""
		}
		b, _ := yaml.Marshal(v)
		return string(b)
	}
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(y(old)), B: difflib.SplitLines(y(planned)), FromFile: "installed", ToFile: "planned", Context: 2})
	return d
}

// ManifestNames names the objects of a rendered manifest (Kind namespace/name).
func ManifestNames(manifest string) []string {
	var out []string
	for _, m := range generate.ManifestObjects(manifest) {
		name := m.Name
		if m.Namespace != "" {
			name = m.Namespace + "/" + name
		}
		out = append(out, m.Kind+" "+name)
	}
	return out
}

// ReadKarpenter is what the Karpenter step's Check finds for the session's
// plan (action.KarpenterStatus): it changes nothing.
func ReadKarpenter(ctx context.Context, s *rollout.Session) (*KarpenterState, error) {
	return run{s}.KarpenterState(ctx)
}
