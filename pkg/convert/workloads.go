package convert

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

// workloadTemplates maps workload kinds to the path of their pod template
// (nil for a Pod, whose spec is at the top).
var workloadTemplates = map[string][]string{
	"Pod":         nil,
	"Deployment":  {"spec", "template"},
	"StatefulSet": {"spec", "template"},
	"DaemonSet":   {"spec", "template"},
	"ReplicaSet":  {"spec", "template"},
	"Job":         {"spec", "template"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template"},
}

func isWorkload(d *Document) bool {
	_, ok := workloadTemplates[d.Kind]
	if !ok {
		return false
	}
	group, _, found := strings.Cut(d.APIVersion, "/")
	if !found {
		return d.APIVersion == "v1" && d.Kind == "Pod"
	}
	return group == "apps" || group == "batch"
}

// rewriteWorkload replaces karpenter.sh/provisioner-name with
// karpenter.sh/nodepool in the pod's nodeSelector, node affinity and
// topology keys, and the do-not-evict / do-not-consolidate annotations with
// do-not-disrupt. Every other field is kept as it was. It returns the object
// and one line per change.
func rewriteWorkload(d *Document) (map[string]any, []string, error) {
	var obj map[string]any
	if err := json.Unmarshal(d.JSON, &obj); err != nil {
		return nil, nil, &Error{Doc: d, Err: err}
	}
	path := workloadTemplates[d.Kind]
	tmpl := obj
	for i, k := range path {
		next, ok := tmpl[k].(map[string]any)
		if !ok {
			return nil, nil, &Error{Doc: d, Field: strings.Join(path[:i+1], "."), Err: fmt.Errorf("want an object (the pod template)")}
		}
		tmpl = next
	}
	prefix := strings.Join(path, ".")
	if prefix != "" {
		prefix += "."
	}
	var changes []string
	change := func(field, what string) { changes = append(changes, fmt.Sprintf("%s%s: %s", prefix, field, what)) }

	if md, ok := tmpl["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			for _, old := range []string{v1.LegacyDoNotEvictAnnotationKey, v1.LegacyDoNotConsolidateAnnotationKey} {
				val, ok := ann[old]
				if !ok {
					continue
				}
				delete(ann, old)
				if _, exists := ann[v1.DoNotDisruptAnnotationKey]; !exists {
					ann[v1.DoNotDisruptAnnotationKey] = val
				}
				change("metadata.annotations", fmt.Sprintf("%s → %s", old, v1.DoNotDisruptAnnotationKey))
			}
		}
	}
	spec, _ := tmpl["spec"].(map[string]any)
	if spec == nil {
		return obj, changes, nil
	}
	if ns, ok := spec["nodeSelector"].(map[string]any); ok {
		if val, ok := ns[v1.LegacyProvisionerNameLabelKey]; ok {
			delete(ns, v1.LegacyProvisionerNameLabelKey)
			ns[v1.NodePoolLabelKey] = val
			change("spec.nodeSelector", fmt.Sprintf("%s → %s", v1.LegacyProvisionerNameLabelKey, v1.NodePoolLabelKey))
		}
	}
	renameKeys := func(field string, exprs any) {
		list, _ := exprs.([]any)
		for i, e := range list {
			m, _ := e.(map[string]any)
			if m != nil && m["key"] == v1.LegacyProvisionerNameLabelKey {
				m["key"] = v1.NodePoolLabelKey
				change(fmt.Sprintf("%s[%d].key", field, i), fmt.Sprintf("%s → %s", v1.LegacyProvisionerNameLabelKey, v1.NodePoolLabelKey))
			}
		}
	}
	if aff, ok := spec["affinity"].(map[string]any); ok {
		if na, ok := aff["nodeAffinity"].(map[string]any); ok {
			if req, ok := na["requiredDuringSchedulingIgnoredDuringExecution"].(map[string]any); ok {
				terms, _ := req["nodeSelectorTerms"].([]any)
				for i, t := range terms {
					if m, ok := t.(map[string]any); ok {
						renameKeys(fmt.Sprintf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchExpressions", i), m["matchExpressions"])
					}
				}
			}
			prefs, _ := na["preferredDuringSchedulingIgnoredDuringExecution"].([]any)
			for i, p := range prefs {
				if m, ok := p.(map[string]any); ok {
					if pref, ok := m["preference"].(map[string]any); ok {
						renameKeys(fmt.Sprintf("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d].preference.matchExpressions", i), pref["matchExpressions"])
					}
				}
			}
		}
		for _, kind := range []string{"podAffinity", "podAntiAffinity"} {
			pa, _ := aff[kind].(map[string]any)
			req, _ := pa["requiredDuringSchedulingIgnoredDuringExecution"].([]any)
			for i, t := range req {
				if m, ok := t.(map[string]any); ok && m["topologyKey"] == v1.LegacyProvisionerNameLabelKey {
					m["topologyKey"] = v1.NodePoolLabelKey
					change(fmt.Sprintf("spec.affinity.%s.requiredDuringSchedulingIgnoredDuringExecution[%d].topologyKey", kind, i), fmt.Sprintf("%s → %s", v1.LegacyProvisionerNameLabelKey, v1.NodePoolLabelKey))
				}
			}
			pref, _ := pa["preferredDuringSchedulingIgnoredDuringExecution"].([]any)
			for i, t := range pref {
				m, _ := t.(map[string]any)
				term, _ := m["podAffinityTerm"].(map[string]any)
				if term != nil && term["topologyKey"] == v1.LegacyProvisionerNameLabelKey {
					term["topologyKey"] = v1.NodePoolLabelKey
					change(fmt.Sprintf("spec.affinity.%s.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm.topologyKey", kind, i), fmt.Sprintf("%s → %s", v1.LegacyProvisionerNameLabelKey, v1.NodePoolLabelKey))
				}
			}
		}
	}
	tsc, _ := spec["topologySpreadConstraints"].([]any)
	for i, t := range tsc {
		if m, ok := t.(map[string]any); ok && m["topologyKey"] == v1.LegacyProvisionerNameLabelKey {
			m["topologyKey"] = v1.NodePoolLabelKey
			change(fmt.Sprintf("spec.topologySpreadConstraints[%d].topologyKey", i), fmt.Sprintf("%s → %s", v1.LegacyProvisionerNameLabelKey, v1.NodePoolLabelKey))
		}
	}
	return obj, changes, nil
}
