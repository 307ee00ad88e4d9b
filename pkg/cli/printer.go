package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// printStructured writes v as JSON or YAML according to -o; it reports
// false for -o table so the caller renders its own table.
func printStructured(w io.Writer, output string, v any) (bool, error) {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, fmt.Errorf("render YAML: %w", err)
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}

// newTable returns a tab-aligned writer; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}
