package convert

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/cases")

// caseOptions reads `# flags: ...` from the first line of a case.
func caseOptions(t *testing.T, data []byte) Options {
	t.Helper()
	var o Options
	first, _, _ := bytes.Cut(data, []byte("\n"))
	rest, ok := strings.CutPrefix(string(first), "# flags:")
	if !ok {
		return o
	}
	for _, f := range strings.Fields(rest) {
		switch f {
		case "--ignore-defaults":
			o.IgnoreDefaults = true
		case "--workloads":
			o.Workloads = true
		case "--strict":
			o.Strict = true
		default:
			t.Fatalf("unknown flag %q in case header", f)
		}
	}
	return o
}

// run converts like the command does without --continue-on-error: on any
// failure stdout stays empty and stderr names every failure.
func run(t *testing.T, name string, data []byte, opts Options) (stdout, stderr []byte) {
	t.Helper()
	var errOut bytes.Buffer
	docs, readErr := Parse(name, data)
	res, err := Convert(context.Background(), docs, opts)
	if err != nil {
		errOut.WriteString("error: " + err.Error() + "\n")
		return nil, errOut.Bytes()
	}
	for _, m := range res.Messages() {
		errOut.WriteString(m + "\n")
	}
	failed := readErr != nil || len(res.Errors) > 0
	if readErr != nil {
		errOut.WriteString("error: " + readErr.Error() + "\n")
	}
	for _, e := range res.Errors {
		errOut.WriteString("error: " + e.Error() + "\n")
	}
	if failed {
		return nil, errOut.Bytes()
	}
	out, err := Encode(res.Objects, "yaml")
	if err != nil {
		t.Fatal(err)
	}
	return out, errOut.Bytes()
}

func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/cases/*.*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.Contains(in, ".golden") || strings.HasSuffix(in, ".md") {
			continue
		}
		n++
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		opts := caseOptions(t, data)
		base := strings.TrimSuffix(in, filepath.Ext(in))
		for _, to := range []string{ToV1beta1, ToV1} {
			t.Run(filepath.Base(base)+"/"+to, func(t *testing.T) {
				o := opts
				o.To = to
				stdout, stderr := run(t, filepath.ToSlash(in), data, o)
				golden(t, base+"."+to+".golden.yaml", stdout)
				golden(t, base+"."+to+".stderr.golden", stderr)
			})
		}
	}
	if n < 10 {
		t.Fatalf("found %d cases, want the full set under testdata/cases", n)
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/convert -run TestGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (rerun with -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
