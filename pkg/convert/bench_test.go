package convert

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// BenchmarkConvert measures read + convert + print of a realistic mixed file
// (Provisioners, AWSNodeTemplates, v1beta1 objects, a workload) to v1.
func BenchmarkConvert(b *testing.B) {
	var in bytes.Buffer
	for _, f := range []string{"provisioner-full.yaml", "awsnodetemplate-selectors.yaml", "v1beta1-nodepools.yaml", "v1beta1-nodeclasses.yaml", "workloads.yaml"} {
		data, err := os.ReadFile("testdata/cases/" + f)
		if err != nil {
			b.Fatal(err)
		}
		in.Write(data)
		in.WriteString("\n---\n")
	}
	data := in.Bytes()
	for _, tc := range []struct {
		name string
		to   string
	}{{"v1beta1", ToV1beta1}, {"v1", ToV1}} {
		b.Run(tc.name, func(b *testing.B) {
			ndocs := 0
			b.ReportAllocs()
			for b.Loop() {
				docs, err := Parse("bench.yaml", data)
				if err != nil {
					b.Fatal(err)
				}
				ndocs = len(docs)
				res, err := Convert(context.Background(), docs, Options{To: tc.to, Workloads: true})
				if err != nil || res.Err() != nil {
					b.Fatal(err, res.Err())
				}
				if _, err := Encode(res.Objects, "yaml"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(ndocs*b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
