package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

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
		return nil, jsonError(b, err)
	}
	if err := s.Inventory.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// jsonError turns a decoding error into one that names the line and column.
func jsonError(b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(b, syn.Offset)
		return fmt.Errorf("line %d, column %d: %v (the file is corrupt or truncated)", line, col, syn)
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

// Validate checks the references inside an inventory: every node's group
// exists and every pod's node exists.
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
	}
	for i, p := range inv.Pods {
		if p.NodeName != "" && !nodes[p.NodeName] {
			return fmt.Errorf("inventory.pods[%d] (%s/%s): nodeName %q is not in inventory.nodes", i, p.Namespace, p.Name, p.NodeName)
		}
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
