package generate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/overlays"
	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

// CapacityPolicy is how an environment profile changes the capacity types a
// NodePool may launch.
type CapacityPolicy string

// Capacity policies of a profile.
const (
	// CapacityKeep keeps each pool's capacity types as the node group had them.
	CapacityKeep CapacityPolicy = "keep"
	// CapacitySpotFirst lets every pool use spot and on-demand; Karpenter
	// launches spot when it is offered and on-demand otherwise.
	CapacitySpotFirst CapacityPolicy = "spot-first"
	// CapacityOnDemandFallback lets pools that use spot fall back to
	// on-demand; on-demand-only pools are unchanged.
	CapacityOnDemandFallback CapacityPolicy = "on-demand-fallback"
)

// ProfileFileName is the settings file of a profile directory.
const ProfileFileName = "profile.yaml"

// Profile is one environment's settings plus its patch templates.
type Profile struct {
	Name                   string
	Description            string
	Capacity               CapacityPolicy
	Disruption             karpv1.Disruption
	ExpireAfter            *karpv1.NillableDuration
	TerminationGracePeriod *metav1.Duration
	// Source is "embedded" or the directory the profile was read from.
	Source    string
	templates []patchTemplate
}

type patchTemplate struct {
	name   string // file name, e.g. nodepool.yaml.tmpl
	target string // the kind it is rendered for
	tmpl   *template.Template
}

// profileFile is profile.yaml as written; fields are strings so errors can
// name the field and the value.
type profileFile struct {
	Description string `json:"description"`
	Capacity    string `json:"capacity"`
	Disruption  struct {
		ConsolidationPolicy string          `json:"consolidationPolicy"`
		ConsolidateAfter    string          `json:"consolidateAfter"`
		Budgets             []karpv1.Budget `json:"budgets"`
	} `json:"disruption"`
	ExpireAfter            string `json:"expireAfter"`
	TerminationGracePeriod string `json:"terminationGracePeriod"`
}

// Profiles are the known environment profiles by name.
type Profiles map[string]*Profile

// LoadProfiles returns the profiles embedded from the repository's overlays/
// directory, added to or replaced by the profile directories under extraDir
// when it is not empty (one sub-directory per profile, named after it).
func LoadProfiles(extraDir string) (Profiles, error) {
	ps, err := readProfiles(overlays.FS, ".", "embedded")
	if err != nil {
		return nil, fmt.Errorf("embedded profiles: %w", err)
	}
	if extraDir == "" {
		return ps, nil
	}
	info, err := os.Stat(extraDir)
	if err != nil {
		return nil, fmt.Errorf("--profiles %s: %w", extraDir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("--profiles %s: not a directory; want one sub-directory per profile holding %s", extraDir, ProfileFileName)
	}
	extra, err := readProfiles(os.DirFS(extraDir), ".", extraDir)
	if err != nil {
		return nil, err
	}
	if len(extra) == 0 {
		return nil, fmt.Errorf("--profiles %s: no profile found; want sub-directories such as %s/qa/%s", extraDir, extraDir, ProfileFileName)
	}
	for name, p := range extra {
		ps[name] = p
	}
	return ps, nil
}

// Names returns the profile names, sorted.
func (ps Profiles) Names() []string {
	names := make([]string, 0, len(ps))
	for n := range ps {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Select returns the named profiles in the order given; an unknown name is
// an error that lists the known ones.
func (ps Profiles) Select(names []string) ([]*Profile, error) {
	if len(names) == 0 {
		return nil, errors.New("no environment given: want at least one of " + strings.Join(ps.Names(), ", "))
	}
	out := make([]*Profile, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		p, ok := ps[n]
		if !ok {
			return nil, fmt.Errorf("unknown environment profile %q: known profiles are %s (add your own with --profiles DIR)", n, strings.Join(ps.Names(), ", "))
		}
		if seen[n] {
			return nil, fmt.Errorf("environment %q given twice", n)
		}
		seen[n] = true
		out = append(out, p)
	}
	return out, nil
}

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func readProfiles(fsys fs.FS, root, source string) (Profiles, error) {
	entries, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", source, err)
	}
	ps := Profiles{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := path.Join(root, e.Name())
		if _, err := fs.Stat(fsys, path.Join(dir, ProfileFileName)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		display := source + "/" + e.Name()
		if source == "embedded" {
			display = "overlays/" + e.Name()
		}
		if !dns1123Label.MatchString(e.Name()) || len(e.Name()) > 63 {
			return nil, fmt.Errorf("profile directory %s: the name must be a DNS-1123 label (lower-case letters, digits, '-')", display)
		}
		p, err := readProfile(fsys, dir, e.Name(), display)
		if err != nil {
			return nil, err
		}
		if source == "embedded" {
			p.Source = "embedded"
		} else {
			p.Source = display
		}
		ps[e.Name()] = p
	}
	return ps, nil
}

func readProfile(fsys fs.FS, dir, name, display string) (*Profile, error) {
	file := display + "/" + ProfileFileName
	raw, err := fs.ReadFile(fsys, path.Join(dir, ProfileFileName))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	p, err := parseProfile(raw, name, file)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", display, err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml.tmpl") {
			continue
		}
		tfile := display + "/" + e.Name()
		var target string
		switch {
		case strings.HasPrefix(e.Name(), "nodepool"):
			target = karpv1.NodePoolKind
		case strings.HasPrefix(e.Name(), "ec2nodeclass"):
			target = karpv1.EC2NodeClassKind
		default:
			return nil, fmt.Errorf("%s: a patch template's name must start with \"nodepool\" (rendered per NodePool) or \"ec2nodeclass\" (per EC2NodeClass)", tfile)
		}
		src, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", tfile, err)
		}
		t, err := template.New(tfile).Option("missingkey=error").Funcs(templateFuncs).Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("parse template %w", err)
		}
		p.templates = append(p.templates, patchTemplate{name: e.Name(), target: target, tmpl: t})
	}
	return p, nil
}

var templateFuncs = template.FuncMap{
	"toJSON": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

var budgetNodes = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)

// budgetSchedule is the CRD's pattern for a budget's cron schedule.
var budgetSchedule = regexp.MustCompile(`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`)

func parseProfile(raw []byte, name, file string) (*Profile, error) {
	var f profileFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	p := &Profile{Name: name, Description: f.Description}
	switch c := CapacityPolicy(f.Capacity); c {
	case CapacityKeep, CapacitySpotFirst, CapacityOnDemandFallback:
		p.Capacity = c
	case "":
		p.Capacity = CapacityKeep
	default:
		return nil, fmt.Errorf("%s: capacity %q: want keep, spot-first or on-demand-fallback", file, f.Capacity)
	}
	switch cp := karpv1.ConsolidationPolicy(f.Disruption.ConsolidationPolicy); cp {
	case karpv1.ConsolidationPolicyWhenEmpty, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, karpv1.ConsolidationPolicyBalanced:
		p.Disruption.ConsolidationPolicy = cp
	default:
		return nil, fmt.Errorf("%s: disruption.consolidationPolicy %q: want WhenEmpty, WhenEmptyOrUnderutilized or Balanced", file, f.Disruption.ConsolidationPolicy)
	}
	if f.Disruption.ConsolidateAfter == "" {
		return nil, fmt.Errorf("%s: disruption.consolidateAfter is required (Karpenter v1 needs it): give a duration such as 30s, or Never", file)
	}
	ca, err := karpv1.ParseNillableDuration(f.Disruption.ConsolidateAfter)
	if err != nil {
		return nil, fmt.Errorf("%s: disruption.consolidateAfter %q: %w", file, f.Disruption.ConsolidateAfter, err)
	}
	p.Disruption.ConsolidateAfter = ca
	for i, b := range f.Disruption.Budgets {
		field := fmt.Sprintf("%s: disruption.budgets[%d]", file, i)
		if !budgetNodes.MatchString(b.Nodes) {
			return nil, fmt.Errorf("%s.nodes %q: want a count such as \"3\" or a percentage such as \"10%%\"", field, b.Nodes)
		}
		if (b.Schedule == nil) != (b.Duration == nil) {
			return nil, fmt.Errorf("%s: schedule and duration must be set together", field)
		}
		if b.Schedule != nil && !budgetSchedule.MatchString(*b.Schedule) {
			return nil, fmt.Errorf("%s.schedule %q: want a cron schedule such as \"0 9 * * 1-5\" or @daily", field, *b.Schedule)
		}
		for _, r := range b.Reasons {
			if !slices.Contains([]karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted}, r) {
				return nil, fmt.Errorf("%s.reasons: %q: want Underutilized, Empty or Drifted", field, r)
			}
		}
	}
	p.Disruption.Budgets = f.Disruption.Budgets
	if f.ExpireAfter != "" {
		d, err := karpv1.ParseNillableDuration(f.ExpireAfter)
		if err != nil {
			return nil, fmt.Errorf("%s: expireAfter %q: %w", file, f.ExpireAfter, err)
		}
		p.ExpireAfter = &d
	}
	if f.TerminationGracePeriod != "" {
		d, err := time.ParseDuration(f.TerminationGracePeriod)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%s: terminationGracePeriod %q: want a duration such as 48h", file, f.TerminationGracePeriod)
		}
		p.TerminationGracePeriod = &metav1.Duration{Duration: d}
	}
	return p, nil
}

// patchData is what a patch template sees.
type patchData struct {
	Env          string
	Profile      *Profile
	NodePool     *karpv1.NodePool
	NodeClass    *karpv1.EC2NodeClass
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
}

// renderPatch executes a template and checks that the result patches the
// object it was rendered for; it returns nil for an empty rendering.
func renderPatch(t patchTemplate, data *patchData, wantKind, wantName string) ([]byte, error) {
	var buf bytes.Buffer
	if err := t.tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render %w", err)
	}
	if strings.TrimSpace(buf.String()) == "" {
		return nil, nil
	}
	var obj map[string]any
	if err := yaml.Unmarshal(buf.Bytes(), &obj); err != nil {
		return nil, fmt.Errorf("template %s rendered for %s %s is not valid YAML: %w", t.tmpl.Name(), wantKind, wantName, err)
	}
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if kind != wantKind || name != wantName {
		return nil, fmt.Errorf("template %s rendered for %s %s patches %s %q instead: keep kind and metadata.name of the object it is rendered for", t.tmpl.Name(), wantKind, wantName, kind, name)
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", t.tmpl.Name(), err)
	}
	return out, nil
}
