package engine

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Requirement is Karpenter's set algebra on one label key: a set of allowed
// values (or its complement) with optional integer bounds from Gt/Lt/Gte/Lte.
//
//	In x       = {x}                 NotIn x        = complement of {x}
//	Exists     = complement of {}    DoesNotExist   = {} (the key must be absent)
type Requirement struct {
	Key        string
	complement bool
	values     []string // sorted, unique
	gt, lt     *int64   // exclusive bounds
	MinValues  int
}

// NewRequirement builds a requirement from a node selector operator.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (Requirement, error) {
	r := Requirement{Key: key}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement, r.values = true, sortedUnique(values)
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, "Gte", "Lte":
		if len(values) != 1 {
			return r, fmt.Errorf("requirement %s %s needs exactly one integer value, got %d", key, op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return r, fmt.Errorf("requirement %s %s %q: value must be an integer", key, op, values[0])
		}
		r.complement = true
		switch op {
		case corev1.NodeSelectorOpGt:
			r.gt = &n
		case corev1.NodeSelectorOpLt:
			r.lt = &n
		case "Gte":
			n--
			r.gt = &n
		case "Lte":
			n++
			r.lt = &n
		}
	default:
		return r, fmt.Errorf("requirement %s: operator %q is not In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte", key, op)
	}
	return r, nil
}

func mustIn(key string, values ...string) Requirement {
	return Requirement{Key: key, values: sortedUnique(values)}
}

// isIn reports whether r is exactly mustIn(r.Key, v).
func (r Requirement) isIn(v string) bool {
	return !r.complement && len(r.values) == 1 && r.values[0] == v && r.gt == nil && r.lt == nil && r.MinValues == 0
}

func sortedUnique(v []string) []string {
	out := slices.Clone(v)
	sort.Strings(out)
	return slices.Compact(out)
}

func (r Requirement) withinBounds(v string) bool {
	if r.gt == nil && r.lt == nil {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	return (r.gt == nil || n > *r.gt) && (r.lt == nil || n < *r.lt)
}

// Has reports whether the value is allowed.
func (r Requirement) Has(v string) bool {
	_, found := slices.BinarySearch(r.values, v)
	if r.complement {
		return !found && r.withinBounds(v)
	}
	return found && r.withinBounds(v)
}

// Len is the number of allowed values (MaxInt64 for an open complement).
func (r Requirement) Len() int64 {
	if !r.complement {
		return int64(len(r.values))
	}
	if r.gt != nil && r.lt != nil {
		n := *r.lt - *r.gt - 1
		for _, v := range r.values {
			if r.withinBounds(v) {
				n--
			}
		}
		return max(n, 0)
	}
	return math.MaxInt64 - int64(len(r.values))
}

// Operator is the operator this requirement reads as.
func (r Requirement) Operator() corev1.NodeSelectorOperator {
	switch {
	case r.complement && r.Len() == 0:
		return corev1.NodeSelectorOpDoesNotExist
	case r.complement && len(r.values) == 0 && r.gt == nil && r.lt == nil:
		return corev1.NodeSelectorOpExists
	case r.complement:
		return corev1.NodeSelectorOpNotIn
	case len(r.values) == 0:
		return corev1.NodeSelectorOpDoesNotExist
	default:
		return corev1.NodeSelectorOpIn
	}
}

// Values are the allowed values of an In requirement (sorted).
func (r Requirement) Values() []string {
	if r.complement {
		return nil
	}
	return r.values
}

// Intersect is the set of values both allow.
func (r Requirement) Intersect(o Requirement) Requirement {
	out := Requirement{Key: r.Key, MinValues: max(r.MinValues, o.MinValues)}
	out.gt, out.lt = r.gt, r.lt
	if o.gt != nil && (out.gt == nil || *o.gt > *out.gt) {
		out.gt = o.gt
	}
	if o.lt != nil && (out.lt == nil || *o.lt < *out.lt) {
		out.lt = o.lt
	}
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = sortedUnique(append(slices.Clone(r.values), o.values...))
	case r.complement:
		out.values = filter(o.values, func(v string) bool { return !contains(r.values, v) })
	case o.complement:
		out.values = filter(r.values, func(v string) bool { return !contains(o.values, v) })
	default:
		out.values = filter(r.values, func(v string) bool { return contains(o.values, v) })
	}
	if !out.complement && (out.gt != nil || out.lt != nil) {
		out.values = filter(out.values, out.withinBounds)
		out.gt, out.lt = nil, nil
	}
	if out.complement && out.gt != nil && out.lt != nil && *out.lt-*out.gt <= 1 {
		return Requirement{Key: r.Key, MinValues: out.MinValues} // empty range: DoesNotExist
	}
	return out
}

// overlaps is r.Intersect(o).Len() > 0 without building the intersection
// when neither side has integer bounds (the scheduler's hot path).
func (r Requirement) overlaps(o Requirement) bool {
	if r.gt != nil || r.lt != nil || o.gt != nil || o.lt != nil {
		return r.Intersect(o).Len() > 0
	}
	switch {
	case r.complement && o.complement:
		return true // a complement of finitely many values is never empty
	case r.complement:
		return slices.ContainsFunc(o.values, func(v string) bool { return !contains(r.values, v) })
	case o.complement:
		return slices.ContainsFunc(r.values, func(v string) bool { return !contains(o.values, v) })
	}
	return slices.ContainsFunc(r.values, func(v string) bool { return contains(o.values, v) })
}

func contains(s []string, v string) bool { _, ok := slices.BinarySearch(s, v); return ok }

func filter(s []string, keep func(string) bool) []string {
	var out []string
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

func (r Requirement) String() string {
	switch op := r.Operator(); op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		s := fmt.Sprintf("%s %s [%s]", r.Key, op, strings.Join(r.values, ","))
		if r.gt != nil {
			s += fmt.Sprintf(" >%d", *r.gt)
		}
		if r.lt != nil {
			s += fmt.Sprintf(" <%d", *r.lt)
		}
		return s
	case corev1.NodeSelectorOpExists:
		return r.Key + " Exists"
	default:
		if r.complement && (r.gt != nil || r.lt != nil) {
			return fmt.Sprintf("%s in an empty range", r.Key)
		}
		return r.Key + " DoesNotExist"
	}
}

// nodeSelector renders the requirement for a NodeClaim spec.
func (r Requirement) nodeSelector() corev1.NodeSelectorRequirement {
	op := r.Operator()
	out := corev1.NodeSelectorRequirement{Key: r.Key, Operator: op}
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		out.Values = slices.Clone(r.values)
		if r.gt != nil || r.lt != nil { // bounds with exclusions: keep the bound, the scheduler re-checks
			if r.gt != nil {
				out = corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(*r.gt, 10)}}
			} else {
				out = corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(*r.lt, 10)}}
			}
		}
	case corev1.NodeSelectorOpExists:
	}
	return out
}

// Requirements are requirements by key.
type Requirements map[string]Requirement

// Add intersects r into the set.
func (rs Requirements) Add(r Requirement) {
	if cur, ok := rs[r.Key]; ok {
		rs[r.Key] = cur.Intersect(r)
		return
	}
	rs[r.Key] = r
}

// Clone copies the set (requirements themselves are immutable).
func (rs Requirements) Clone() Requirements {
	out := make(Requirements, len(rs))
	for k, v := range rs {
		out[k] = v
	}
	return out
}

// Intersects is Karpenter's check that every shared key has a common value,
// where NotIn/DoesNotExist on both sides count as compatible.
func (rs Requirements) Intersects(o Requirements) error {
	if existing, incoming, ok := rs.conflict(o); ok {
		return fmt.Errorf("%s, but the node allows %s", incoming, existing)
	}
	return nil
}

// intersect is Intersects == nil without building the error: hot paths
// (every pool × type, every claim) only need yes or no.
func (rs Requirements) intersect(o Requirements) bool {
	_, _, ok := rs.conflict(o)
	return !ok
}

// conflict is the first shared key (rs's side, o's side) without a common value.
func (rs Requirements) conflict(o Requirements) (existing, incoming Requirement, found bool) {
	small, big := rs, o
	swapped := false
	if len(o) < len(rs) {
		small, big, swapped = o, rs, true
	}
	for key, a := range small {
		b, ok := big[key]
		if !ok {
			continue
		}
		existing, incoming = a, b
		if swapped {
			existing, incoming = b, a
		}
		if !intersectOne(existing, incoming) {
			return existing, incoming, true
		}
	}
	return Requirement{}, Requirement{}, false
}

// intersectOne: the two have a common value, or both are NotIn/DoesNotExist.
func intersectOne(existing, incoming Requirement) bool {
	if existing.overlaps(incoming) {
		return true
	}
	neg := func(op corev1.NodeSelectorOperator) bool {
		return op == corev1.NodeSelectorOpNotIn || op == corev1.NodeSelectorOpDoesNotExist
	}
	return neg(incoming.Operator()) && neg(existing.Operator())
}

// Compatible is Intersects plus Karpenter's rule that a custom label the
// pod requires must be defined by the node side, unless the pod's operator
// is NotIn or DoesNotExist; well-known labels may be undefined (the instance
// types decide).
func (rs Requirements) Compatible(pod Requirements, wellKnown map[string]bool) error {
	if r, ok := rs.undefinedLabel(pod, wellKnown); ok {
		return fmt.Errorf("label %s is required (%s) but the NodePool does not set it", r.Key, r)
	}
	return rs.Intersects(pod)
}

// compatible is Compatible == nil without building the error.
func (rs Requirements) compatible(pod Requirements, wellKnown map[string]bool) bool {
	_, ok := rs.undefinedLabel(pod, wellKnown)
	return !ok && rs.intersect(pod)
}

// undefinedLabel is a custom label the pod requires that rs does not define.
func (rs Requirements) undefinedLabel(pod Requirements, wellKnown map[string]bool) (Requirement, bool) {
	for key, r := range pod {
		if _, ok := rs[key]; ok || wellKnown[key] {
			continue
		}
		if op := r.Operator(); op != corev1.NodeSelectorOpNotIn && op != corev1.NodeSelectorOpDoesNotExist {
			return r, true
		}
	}
	return Requirement{}, false
}

// sortedKeys returns the keys in order, for deterministic output.
func (rs Requirements) sortedKeys() []string {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FromNodeSelectorTerm builds requirements from one term's match expressions
// (matchFields is not supported by Karpenter and is ignored).
func FromNodeSelectorTerm(exprs []corev1.NodeSelectorRequirement) (Requirements, error) {
	rs := Requirements{}
	for _, e := range exprs {
		r, err := NewRequirement(e.Key, e.Operator, e.Values...)
		if err != nil {
			return nil, err
		}
		rs.Add(r)
	}
	return rs, nil
}

// diffKeys lists the keys whose requirement differs between two sets.
func diffKeys(old, cur Requirements) []string {
	var keys []string
	for k, r := range cur {
		if o, ok := old[k]; !ok || !reqEqual(o, r) {
			keys = append(keys, k)
		}
	}
	return keys
}

func reqEqual(a, b Requirement) bool {
	if a.complement != b.complement || len(a.values) != len(b.values) || (a.gt == nil) != (b.gt == nil) || (a.lt == nil) != (b.lt == nil) {
		return false
	}
	if (a.gt != nil && *a.gt != *b.gt) || (a.lt != nil && *a.lt != *b.lt) {
		return false
	}
	for i := range a.values {
		if a.values[i] != b.values[i] {
			return false
		}
	}
	return true
}

func describeReqs(rs Requirements) string {
	if len(rs) == 0 {
		return "the NodePool's requirements"
	}
	var parts []string
	for _, k := range rs.sortedKeys() {
		parts = append(parts, rs[k].String())
	}
	return strings.Join(parts, ", ")
}

func sameMap(a, b Requirements) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
