package generate

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxNameLen keeps names usable as label values (karpenter.sh/nodepool=<name>).
const maxNameLen = 63

// sanitizeName turns a node-group name into a DNS-1123 label: lower case,
// runs of other characters replaced by '-', trimmed, at most max characters
// (a long name keeps a short hash of the original so two long names that
// share a prefix stay distinct).
func sanitizeName(s string, max int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		out = "nodegroup-" + shortHash(s)
	}
	if len(out) > max {
		h := shortHash(s)
		out = strings.TrimRight(out[:max-len(h)-1], "-") + "-" + h
	}
	return out
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

// nameAllocator hands out unique names; a clash gets the hash of the
// original name appended, so the result does not depend on input order.
type nameAllocator struct{ used map[string]string }

func newNameAllocator() *nameAllocator { return &nameAllocator{used: map[string]string{}} }

// name returns a unique DNS-1123 name for original with suffix appended
// (suffix may be empty, e.g. "-spot").
func (a *nameAllocator) name(original, suffix string) string {
	n := sanitizeName(original, maxNameLen-len(suffix)) + suffix
	if prev, ok := a.used[n]; ok && prev != original+suffix {
		h := "-" + shortHash(original)
		n = sanitizeName(original, maxNameLen-len(suffix)-len(h)) + h + suffix
	}
	a.used[n] = original + suffix
	return n
}
