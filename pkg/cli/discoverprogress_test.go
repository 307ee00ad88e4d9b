package cli

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestDiscoverProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		tty  bool
		err  error
		want []string // in order
		not  []string
	}{
		{"plain lines", false, nil, []string{"reading EKS\n", "reading pods\n", "discovery took "}, []string{"✓", "\x1b["}},
		{"spinner, success", true, nil, []string{"✓ read EKS", "✓ read pods", "discovery took "}, []string{"failed"}},
		{"spinner, failure", true, errors.New("denied"), []string{"✓ read EKS", "✗ reading pods failed", "discovery took "}, []string{"✓ read pods"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			pr := newProgress(&out, tc.tty)
			pr.cancelOnInterrupt(func() { t.Error("interrupted") })
			pr.step("EKS")
			pr.step("pods")
			pr.finish(tc.err)
			got := regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`).ReplaceAllString(out.String(), "")
			if tc.tty && !strings.Contains(out.String(), "\x1b[") {
				t.Errorf("no terminal control sequences on a TTY: %q", out.String())
			}
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output %q lacks %q (in order)", got, w)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tc.not {
				if strings.Contains(out.String(), n) || strings.Contains(got, n) {
					t.Errorf("output %q has %q", got, n)
				}
			}
		})
	}
}

func TestStepsModelView(t *testing.T) {
	m := newStepsModel()
	m.Update(stepMsg("EKS"))
	m.Update(stepMsg("pods"))
	v := m.View()
	if !strings.Contains(v, "✓ read EKS") || !strings.Contains(v, "reading pods…") || strings.Contains(v, "✓ read pods") {
		t.Errorf("view while reading pods:\n%s", v)
	}
}
