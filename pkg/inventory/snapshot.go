package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
)

// SnapshotAPIVersion versions the snapshot format; loading another version fails.
const SnapshotAPIVersion = "karpenter-migrate.io/v1alpha1"

// SnapshotKind is the kind field of a snapshot document.
const SnapshotKind = "InventorySnapshot"

// Snapshot is an Inventory as written to disk by `discover --snapshot`.
type Snapshot struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// TakenAt records when discover ran; it is the only field that differs
	// between two snapshots of an unchanged cluster.
	TakenAt   time.Time `json:"takenAt"`
	Inventory Inventory `json:"inventory"`
}

// NewSnapshot wraps inv for writing.
func NewSnapshot(inv Inventory, takenAt time.Time) Snapshot {
	return Snapshot{APIVersion: SnapshotAPIVersion, Kind: SnapshotKind, TakenAt: takenAt.UTC(), Inventory: inv}
}

// Marshal renders the snapshot as indented JSON. Slices are written in the
// order discover sorted them, so equal inventories give equal bytes.
func (s Snapshot) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteFile writes the snapshot atomically.
func (s Snapshot) WriteFile(path string) error {
	b, err := s.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o600)
}

// ReadSnapshotFile loads and validates a snapshot; errors name the file and,
// for malformed JSON, the line and column.
func ReadSnapshotFile(path string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	s, err := ParseSnapshot(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return s, nil
}

// ParseSnapshot decodes and validates snapshot bytes.
func ParseSnapshot(b []byte) (*Snapshot, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("empty file; write one with `karpenter-migrate discover --snapshot FILE`")
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, jsonError(b, err)
	}
	if head.Kind != SnapshotKind {
		return nil, fmt.Errorf("kind %q is not %s; is this a file written by `karpenter-migrate discover --snapshot`?", head.Kind, SnapshotKind)
	}
	if head.APIVersion != SnapshotAPIVersion {
		return nil, fmt.Errorf("apiVersion %q is not supported (this build reads %s); re-run discover with this version of karpenter-migrate", head.APIVersion, SnapshotAPIVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Snapshot
	if err := dec.Decode(&s); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, jsonError(b, err)
		}
		where := locate(b, reflect.TypeFor[Snapshot]())
		if where == nil {
			return nil, jsonError(b, err)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			line, col := position(b, typ.Offset)
			return nil, fmt.Errorf("line %d, column %d: %w", line, col, where)
		}
		return nil, where
	}
	if err := s.Inventory.Validate(); err != nil {
		return nil, err
	}
	s.Inventory.ResolveVolumes()
	return &s, nil
}

// jsonError turns a decoding error into one that names the line and column.
func jsonError(b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, the offending one included.
		line, col := position(b, syn.Offset-1)
		return fmt.Errorf("line %d, column %d: %v: the file is corrupt or truncated; fix it there or write it again with `karpenter-migrate discover --snapshot FILE`", line, col, syn)
	case errors.As(err, &typ):
		line, col := position(b, typ.Offset)
		return fmt.Errorf("line %d, column %d: field %s: cannot use a JSON %s as %s", line, col, typ.Field, typ.Value, typ.Type)
	}
	return err
}

func position(b []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// Largest resources one EC2 instance has (u7in-32tb.224xlarge: 896 vCPUs,
// 32 TiB); pkg/catalog's tests keep them true of every type it knows. A
// request or capacity above them is not a real value: a typo (cpu: 4000
// for 4000m) or a corrupt snapshot.
var (
	MaxInstanceCPU    = resource.MustParse("896")
	MaxInstanceMemory = resource.MustParse("32Ti")
)

// maxQuantity bounds every other resource: beyond 2^53 the milli-unit
// and float arithmetic of scheduling no longer holds.
var maxQuantity = *resource.NewQuantity(1<<53, resource.DecimalSI)

// Validate checks the references inside an inventory (every node's group
// exists and every pod's node exists) and its values: no request,
// capacity or allocatable is negative or larger than an instance can be,
// and prices are positive. Errors name the object and the field.
func (inv *Inventory) Validate() error {
	if inv.Cluster.Name == "" {
		return errors.New("inventory.cluster.name is empty")
	}
	groups := make(map[string]bool, len(inv.NodeGroups))
	for i, g := range inv.NodeGroups {
		if g.Name == "" {
			return fmt.Errorf("inventory.nodeGroups[%d].name is empty", i)
		}
		if groups[g.Name] {
			return fmt.Errorf("inventory.nodeGroups[%d]: duplicate node group %q", i, g.Name)
		}
		groups[g.Name] = true
		if g.MinSize < 0 || g.DesiredSize < 0 || g.MaxSize < 0 {
			return fmt.Errorf("inventory.nodeGroups[%d] (%s): sizes min %d, desired %d, max %d: none may be negative", i, g.Name, g.MinSize, g.DesiredSize, g.MaxSize)
		}
	}
	nodes := make(map[string]bool, len(inv.Nodes))
	for i, n := range inv.Nodes {
		if n.Name == "" {
			return fmt.Errorf("inventory.nodes[%d].name is empty", i)
		}
		if n.NodeGroup != "" && !groups[n.NodeGroup] {
			return fmt.Errorf("inventory.nodes[%d] (%s): nodeGroup %q is not in inventory.nodeGroups", i, n.Name, n.NodeGroup)
		}
		nodes[n.Name] = true
		where := fmt.Sprintf("inventory.nodes[%d] (%s)", i, n.Name)
		if err := checkResources(where, "capacity", n.Capacity); err != nil {
			return err
		}
		if err := checkResources(where, "allocatable", n.Allocatable); err != nil {
			return err
		}
	}
	for i, p := range inv.Pods {
		where := fmt.Sprintf("inventory.pods[%d] (%s/%s)", i, p.Namespace, p.Name)
		if p.NodeName != "" && !nodes[p.NodeName] {
			return fmt.Errorf("%s: nodeName %q is not in inventory.nodes", where, p.NodeName)
		}
		if err := checkResources(where, "requests", p.Requests); err != nil {
			return err
		}
	}
	for i, d := range inv.DaemonSets {
		if err := checkResources(fmt.Sprintf("inventory.daemonSets[%d] (%s/%s)", i, d.Namespace, d.Name), "requests", d.Requests); err != nil {
			return err
		}
	}
	for i, sp := range inv.SpotPrices {
		if err := checkPrice(fmt.Sprintf("inventory.spotPrices[%d] (%s in %s)", i, sp.InstanceType, sp.Zone), "price", sp.Price); err != nil {
			return err
		}
	}
	if pr := inv.Prices; pr != nil {
		if pr.Source != PricesLive && pr.Source != PricesEmbedded {
			return fmt.Errorf("inventory.prices.source %q: want %s or %s", pr.Source, PricesLive, PricesEmbedded)
		}
		for _, it := range slices.Sorted(maps.Keys(pr.OnDemand)) {
			if err := checkPrice("inventory.prices", fmt.Sprintf("onDemand[%q]", it), pr.OnDemand[it]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkResources rejects negative quantities and ones no instance holds.
func checkResources(where, field string, rl corev1.ResourceList) error {
	names := make([]string, 0, len(rl))
	for name := range rl {
		names = append(names, string(name))
	}
	slices.Sort(names)
	for _, name := range names {
		q := rl[corev1.ResourceName(name)]
		limit, what := maxQuantity, "too large to be real"
		switch corev1.ResourceName(name) {
		case corev1.ResourceCPU:
			limit, what = MaxInstanceCPU, "more than any EC2 instance type has ("+MaxInstanceCPU.String()+" CPUs)"
		case corev1.ResourceMemory:
			limit, what = MaxInstanceMemory, "more than any EC2 instance type has ("+MaxInstanceMemory.String()+")"
		}
		switch {
		case q.Sign() < 0:
			return fmt.Errorf("%s: %s.%s %s is negative", where, field, name, q.String())
		case q.Cmp(limit) > 0:
			return fmt.Errorf("%s: %s.%s %s is %s; is a unit missing (4000m, 512Mi)?", where, field, name, q.String(), what)
		}
	}
	return nil
}

// checkPrice rejects prices that are not a positive number of USD per hour.
func checkPrice(where, field string, v float64) error {
	if !(v > 0) || math.IsInf(v, 0) || v > 1e6 {
		return fmt.Errorf("%s: %s %v is not a price in USD per hour", where, field, v)
	}
	return nil
}

// NodeGroup returns the group with the given name.
func (inv *Inventory) NodeGroup(name string) (*NodeGroup, bool) {
	for i := range inv.NodeGroups {
		if inv.NodeGroups[i].Name == name {
			return &inv.NodeGroups[i], true
		}
	}
	return nil, false
}

// NodesOf returns the nodes of a node group.
func (inv *Inventory) NodesOf(group string) []Node {
	var out []Node
	for _, n := range inv.Nodes {
		if n.NodeGroup == group {
			out = append(out, n)
		}
	}
	return out
}

// PodsOn returns the pods bound to the named nodes.
func (inv *Inventory) PodsOn(nodeNames ...string) []Pod {
	want := make(map[string]bool, len(nodeNames))
	for _, n := range nodeNames {
		want[n] = true
	}
	var out []Pod
	for _, p := range inv.Pods {
		if want[p.NodeName] {
			out = append(out, p)
		}
	}
	return out
}
