package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// tolerates reports whether the pod tolerates every NoSchedule/NoExecute
// taint (and PreferNoSchedule unless relaxed), returning the first one not.
func tolerates(tols []corev1.Toleration, taints []corev1.Taint, preferNoSchedule bool) (corev1.Taint, bool) {
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !preferNoSchedule {
			continue
		}
		ok := false
		for i := range tols {
			if toleratesTaint(tols[i], t) {
				ok = true
				break
			}
		}
		if !ok {
			return t, false
		}
	}
	return corev1.Taint{}, true
}

// toleratesTaint is the core toleration rule (Equal/Exists, empty key with
// Exists matches every key, empty effect matches every effect).
func toleratesTaint(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return tol.Key != "" && tol.Value == t.Value
	}
	return false
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}
