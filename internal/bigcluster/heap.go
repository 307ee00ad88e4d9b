package bigcluster

import (
	"runtime/metrics"
	"time"
)

// SamplePeakHeap samples the heap's live objects every few milliseconds
// until the returned function is called, which returns the highest sample
// in bytes: a benchmark's peak memory.
func SamplePeakHeap() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		most := read()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				peak <- max(most, read())
				return
			case <-t.C:
				most = max(most, read())
			}
		}
	}()
	return func() uint64 { close(done); return <-peak }
}
