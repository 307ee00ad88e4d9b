// Package config reads the per-environment migration config file
// (migrations/<env>.yaml in the user's repository) that makes CI runs
// reproducible and reviewable. Unknown keys and bad values are errors that
// name the file and line.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
)

// APIVersion and Kind identify a migration config document.
const (
	APIVersion = "karpenter-migrate.io/v1alpha1"
	Kind       = "MigrationConfig"
)

// Config is one environment's migration settings.
type Config struct {
	APIVersion  string `yaml:"apiVersion" json:"apiVersion"`
	Kind        string `yaml:"kind" json:"kind"`
	Environment string `yaml:"environment" json:"environment"`
	Cluster     string `yaml:"cluster" json:"cluster"`
	Region      string `yaml:"region" json:"region"`
	Profile     string `yaml:"profile" json:"profile"`

	NodeGroups        NodeGroups        `yaml:"nodeGroups" json:"nodeGroups"`
	Controller        Controller        `yaml:"controller" json:"controller"`
	Generate          Generate          `yaml:"generate" json:"generate"`
	Rollout           Rollout           `yaml:"rollout" json:"rollout"`
	Gates             Gates             `yaml:"gates" json:"gates"`
	MaintenanceWindow MaintenanceWindow `yaml:"maintenanceWindow" json:"maintenanceWindow"`
	Readiness         Readiness         `yaml:"readiness" json:"readiness"`
}

// NodeGroups selects the legacy groups in scope; empty Include means all.
type NodeGroups struct {
	Include []string `yaml:"include" json:"include"`
	Exclude []string `yaml:"exclude" json:"exclude"`
}

// Controller says where the Karpenter controller lives once the legacy
// groups are gone: the node group kept for it (empty: decided by plan from
// the live Deployment, the generated Helm values or a Fargate profile) and
// that group's final size.
type Controller struct {
	NodeGroup string `yaml:"nodeGroup" json:"nodeGroup"`
	// Size is the kept group's final fixed size (never below the
	// controller's replicas).
	Size int32 `yaml:"size" json:"size"`
	// Namespace is where the controller runs (or will be installed).
	Namespace string `yaml:"namespace" json:"namespace"`
}

// Generate holds the generate command's choices.
type Generate struct {
	Strategy           string `yaml:"strategy" json:"strategy"`
	Flexibility        string `yaml:"flexibility" json:"flexibility"`
	KeepNodegroupLabel bool   `yaml:"keepNodegroupLabel" json:"keepNodegroupLabel"`
	Out                string `yaml:"out" json:"out"`
}

// Rollout holds the wave settings.
type Rollout struct {
	// WaveSize is a node count ("5") or a percentage of legacy nodes ("20%").
	WaveSize      string `yaml:"waveSize" json:"waveSize"`
	Concurrency   int    `yaml:"concurrency" json:"concurrency"`
	PreProvision  bool   `yaml:"preProvision" json:"preProvision"`
	AllowEmptyDir bool   `yaml:"allowEmptyDir" json:"allowEmptyDir"`
	ForceEvict    bool   `yaml:"forceEvict" json:"forceEvict"`
	// PrepareAhead is how many waves beyond the one running have their
	// placeholders created ahead (with preProvision), once its own
	// capacity is Ready, so that their nodes launch while it drains: more
	// transient capacity for a shorter migration. 0 (the default): each
	// wave launches its own as it starts (docs/ARCHITECTURE.md says why).
	PrepareAhead int `yaml:"prepareAhead" json:"prepareAhead"`
	// DrainTogether drains consecutive waves whose PodDisruptionBudgets do
	// not overlap together: each pre-provisioned and cordoned, their nodes
	// in one drain (concurrency at a time), behind one gate. A NodePool
	// takes one wave's pods before a gate has passed on it (the first wave
	// drains alone). On by default (docs/ARCHITECTURE.md says why).
	DrainTogether bool `yaml:"drainTogether" json:"drainTogether"`
	// NodeLaunchTime is how long Karpenter takes from launching a node to
	// its being Ready, and PodReadyTime how long an evicted pod's
	// replacement takes to become Ready: the plan's duration model reads
	// them (plan.Timing), nothing waits on them.
	NodeLaunchTime Duration `yaml:"nodeLaunchTime" json:"nodeLaunchTime"`
	PodReadyTime   Duration `yaml:"podReadyTime" json:"podReadyTime"`
}

// Gates bound how long a wave may wait before the rollout pauses.
type Gates struct {
	NodeReadyTimeout  Duration `yaml:"nodeReadyTimeout" json:"nodeReadyTimeout"`
	PodPendingTimeout Duration `yaml:"podPendingTimeout" json:"podPendingTimeout"`
	PDBWaitTimeout    Duration `yaml:"pdbWaitTimeout" json:"pdbWaitTimeout"`
}

// MaintenanceWindow limits destructive steps to a cron window; an empty
// Schedule means any time.
type MaintenanceWindow struct {
	Schedule string   `yaml:"schedule" json:"schedule"`
	Duration Duration `yaml:"duration" json:"duration"`
	TimeZone string   `yaml:"timeZone" json:"timeZone"`
}

// Readiness sets which findings stop the run and which are acknowledged.
type Readiness struct {
	FailOn      string   `yaml:"failOn" json:"failOn"`
	Acknowledge []string `yaml:"acknowledge" json:"acknowledge"`
}

// Duration is a time.Duration written as a Go duration string ("10m").
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 90s, 10m or 1h30m", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a string, as in the file.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(d.String())), nil }

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Default returns the settings used for every key the file leaves out.
func Default(env string) Config {
	return Config{
		APIVersion:  APIVersion,
		Kind:        Kind,
		Environment: env,
		Controller:  Controller{Size: 2, Namespace: "kube-system"},
		Generate:    Generate{Strategy: "multiple", Flexibility: "exact", KeepNodegroupLabel: true, Out: "karpenter"},
		Rollout: Rollout{WaveSize: "20%", Concurrency: 2, PreProvision: true, DrainTogether: true,
			NodeLaunchTime: Duration{60 * time.Second}, PodReadyTime: Duration{5 * time.Second}},
		Gates: Gates{
			NodeReadyTimeout:  Duration{10 * time.Minute},
			PodPendingTimeout: Duration{5 * time.Minute},
			PDBWaitTimeout:    Duration{15 * time.Minute},
		},
		MaintenanceWindow: MaintenanceWindow{TimeZone: "UTC"},
		Readiness:         Readiness{FailOn: "blocker"},
	}
}

// Load reads and validates a config file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read migration config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes config bytes over the defaults; unknown keys are errors.
func Parse(b []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, syntaxError(b, err)
	}
	if len(root.Content) == 0 {
		return nil, errors.New("empty file; write one with `karpenter-migrate config init ENV`")
	}
	c := Default("")
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, decodeError(root.Content[0], err)
	}
	if err := c.validate(root.Content[0]); err != nil {
		return nil, err
	}
	return &c, nil
}

// WaveNodes returns the wave size for a rollout of total legacy nodes
// (at least one).
func (r Rollout) WaveNodes(total int) int {
	n, pct := parseWaveSize(r.WaveSize)
	if pct {
		n = (total*n + 99) / 100
	}
	return max(1, min(n, max(total, 1)))
}

func parseWaveSize(s string) (n int, percent bool) {
	if v, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return -1, true
		}
		return n, true
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1, false
	}
	return n, false
}

// InWindow reports whether t falls inside the maintenance window.
func (w MaintenanceWindow) InWindow(t time.Time) (bool, error) {
	if w.Schedule == "" {
		return true, nil
	}
	loc, err := time.LoadLocation(w.TimeZone)
	if err != nil {
		return false, fmt.Errorf("maintenanceWindow.timeZone %q: %w", w.TimeZone, err)
	}
	sched, err := cron.ParseStandard(w.Schedule)
	if err != nil {
		return false, fmt.Errorf("maintenanceWindow.schedule %q: %w", w.Schedule, err)
	}
	t = t.In(loc)
	// The window is open when the last activation is at most Duration ago:
	// the first activation after (t - Duration) must not be later than t.
	next := sched.Next(t.Add(-w.Duration.Duration - time.Second))
	return !next.After(t), nil
}

type fieldError struct {
	path, msg string
}

func (c *Config) validate(root *yaml.Node) error {
	var errs []fieldError
	bad := func(path, format string, args ...any) {
		errs = append(errs, fieldError{path, fmt.Sprintf(format, args...)})
	}
	if c.APIVersion != APIVersion {
		bad("apiVersion", "%q is not supported; want %s", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		bad("kind", "%q: want %s", c.Kind, Kind)
	}
	if c.Environment == "" {
		bad("environment", "is required (dev, staging, prod, ...)")
	}
	if !oneOf(c.Generate.Strategy, "single", "multiple", "weighted") {
		bad("generate.strategy", "%q: want single, multiple or weighted", c.Generate.Strategy)
	}
	if !oneOf(c.Generate.Flexibility, "exact", "family", "similar") {
		bad("generate.flexibility", "%q: want exact, family or similar", c.Generate.Flexibility)
	}
	if n, pct := parseWaveSize(c.Rollout.WaveSize); n < 1 || (pct && n > 100) {
		bad("rollout.waveSize", "%q: want a node count like 5 or a percentage like 20%%", c.Rollout.WaveSize)
	}
	if c.Controller.Size < 1 {
		bad("controller.size", "%d: want at least 1 (the Karpenter controller needs a node)", c.Controller.Size)
	}
	if c.Controller.Namespace == "" {
		bad("controller.namespace", "is required (kube-system, karpenter, ...)")
	}
	if c.Rollout.Concurrency < 1 {
		bad("rollout.concurrency", "%d: want at least 1", c.Rollout.Concurrency)
	}
	if c.Rollout.PrepareAhead < 0 {
		bad("rollout.prepareAhead", "%d: want 0 (each wave launches its capacity as it starts) or the number of later waves whose placeholders are created ahead (1, 2, ...)", c.Rollout.PrepareAhead)
	}
	for _, g := range []struct {
		path string
		d    Duration
	}{{"gates.nodeReadyTimeout", c.Gates.NodeReadyTimeout}, {"gates.podPendingTimeout", c.Gates.PodPendingTimeout}, {"gates.pdbWaitTimeout", c.Gates.PDBWaitTimeout},
		{"rollout.nodeLaunchTime", c.Rollout.NodeLaunchTime}, {"rollout.podReadyTime", c.Rollout.PodReadyTime}} {
		if g.d.Duration <= 0 {
			bad(g.path, "%s: want a positive duration", g.d)
		}
	}
	if c.MaintenanceWindow.Schedule != "" {
		if _, err := c.MaintenanceWindow.InWindow(time.Time{}); err != nil {
			bad("maintenanceWindow", "%v", err)
		}
		if c.MaintenanceWindow.Duration.Duration <= 0 {
			bad("maintenanceWindow.duration", "is required with a schedule")
		}
	}
	if !oneOf(c.Readiness.FailOn, "blocker", "warning", "never") {
		bad("readiness.failOn", "%q: want blocker, warning or never", c.Readiness.FailOn)
	}
	for _, g := range c.NodeGroups.Include {
		for _, x := range c.NodeGroups.Exclude {
			if g == x {
				bad("nodeGroups", "%q is both included and excluded", g)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = fmt.Sprintf("line %d: %s %s", lineOf(root, e.path), e.path, e.msg)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// lineOf finds the line of a dotted key path, or of its nearest present
// parent, so an error points where the user should look.
func lineOf(n *yaml.Node, path string) int {
	line := n.Line
	for _, key := range strings.Split(path, ".") {
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line, n, found = n.Content[i].Line, n.Content[i+1], true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// yaml.v3's decoding errors: "line N: MSG", several after "unmarshal errors:".
var (
	lineError    = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	wrongType    = regexp.MustCompile("^cannot unmarshal !!\\w+ (?:`(.*)` )?into (\\S+)$")
)

// syntaxError says which line a tab indents when yaml.v3 reports the
// character it cannot start a token with (YAML indents with spaces only).
func syntaxError(b []byte, err error) error {
	m := lineError.FindStringSubmatch(strings.TrimPrefix(err.Error(), "yaml: "))
	if m == nil {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	if tab := TabIndent(b, n); tab > 0 {
		return fmt.Errorf("line %d: %s", tab, TabIndentAdvice)
	}
	return fmt.Errorf("line %d: %s", n, m[2])
}

// TabIndentAdvice is what to do about a tab that indents a YAML line.
const TabIndentAdvice = "a tab indents this line; YAML indents with spaces only: replace the tab with spaces"

// TabIndent is the line (1-based) a tab indents, at or just after line,
// where a YAML parser reported a syntax error; 0 if no tab does. Parsers
// name the character, not the tab ("found character that cannot start
// any token"), and report the line before the tab's when it follows a key.
func TabIndent(b []byte, line int) int {
	for i, l := range strings.Split(string(b), "\n") {
		if i+1 < line {
			continue
		}
		if indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]; strings.Contains(indent, "\t") {
			return i + 1
		}
		if i+1 > line {
			break
		}
	}
	return 0
}

// decodeError rewrites yaml.v3's errors for a value of the wrong type or an
// unknown key in the file's words: the key's path instead of a Go type, and
// what the value should look like.
func decodeError(root *yaml.Node, err error) error {
	msgs := strings.Split(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n"), "\n")
	for i, msg := range msgs {
		m := lineError.FindStringSubmatch(strings.TrimSpace(msg))
		if m == nil {
			continue
		}
		line, _ := strconv.Atoi(m[1])
		path, msg := pathAt(root, line, ""), m[2]
		switch {
		case path == "":
			msgs[i] = fmt.Sprintf("line %d: %s", line, msg)
		case unknownField.MatchString(msg):
			hint := "is it misspelt?"
			if k := Nearest(path[strings.LastIndex(path, ".")+1:], keysAt(reflect.TypeOf(Config{}), path)); k != "" {
				hint = fmt.Sprintf("did you mean %s?", k)
			}
			msgs[i] = fmt.Sprintf("line %d: %s: unknown key; %s (`karpenter-migrate config init ENV` writes every key with what it does)", line, path, hint)
		case wrongType.MatchString(msg):
			w := wrongType.FindStringSubmatch(msg)
			if w[1] != "" { // a scalar; yaml.v3 does not show lists and maps
				path += " " + strconv.Quote(w[1])
			}
			msgs[i] = fmt.Sprintf("line %d: %s: want %s", line, path, goTypeWords(w[2]))
		default:
			msgs[i] = fmt.Sprintf("line %d: %s %s", line, path, msg)
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// pathAt is the dotted path of the key on a line ("rollout.concurrency"),
// or "" when no key is there.
func pathAt(n *yaml.Node, line int, prefix string) string {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := prefix + n.Content[i].Value
			if n.Content[i].Line == line {
				return key
			}
			if p := pathAt(n.Content[i+1], line, key+"."); p != "" {
				return p
			}
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			elem := fmt.Sprintf("%s[%d]", strings.TrimSuffix(prefix, "."), i)
			// A block mapping's first key shares its line: name the key.
			if item.Line == line && (item.Kind != yaml.MappingNode || item.Style&yaml.FlowStyle != 0) {
				return elem
			}
			if p := pathAt(item, line, elem+"."); p != "" {
				return p
			}
		}
	}
	return ""
}

// keysAt lists the keys the mapping holding the dotted path's last key
// accepts ("rollout.wavesize": the keys of rollout).
func keysAt(t reflect.Type, path string) []string {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		p, _, _ := strings.Cut(p, "[") // nodeGroups.include[1]
		f, ok := fieldByKey(t, p)
		if !ok {
			return nil
		}
		if t = f.Type; t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	var keys []string
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// fieldByKey is t's field whose YAML key is key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// Nearest is the known name a misspelt one most likely meant: the one
// equal but for case, else the closest within two edits (case ignored),
// else "". The CLI suggests flags with it too.
func Nearest(typed string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if strings.EqualFold(k, typed) {
			return k
		}
		if d := levenshtein.ComputeDistance(strings.ToLower(typed), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// goTypeWords says what YAML a config field's Go type decodes from.
func goTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list like [a, b]"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	}
	return "a " + t
}

func oneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
