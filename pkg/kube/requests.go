package kube

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Requests counts the API requests a client sends, by verb and resource
// as the API server names them (its RequestInfo): "get pods", "list
// pods", "watch poddisruptionbudgets", "create pods/eviction". It is safe
// for concurrent use; the zero value is ready.
type Requests struct {
	mu sync.Mutex
	n  RequestCounts
}

// Add counts one request.
func (r *Requests) Add(verb, resource, subresource string) {
	key := verb + " " + resource
	if subresource != "" {
		key += "/" + subresource
	}
	r.mu.Lock()
	if r.n == nil {
		r.n = RequestCounts{}
	}
	r.n[key]++
	r.mu.Unlock()
}

// Counts is a copy of the counts so far.
func (r *Requests) Counts() RequestCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

// Wrap counts the resource requests sent through rt (for rest.Config.Wrap).
func (r *Requests) Wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{r: r, next: rt}
}

// requestInfo reads a request as the API server does.
var requestInfo = apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

type countingTransport struct {
	r    *Requests
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if ri, err := requestInfo.NewRequestInfo(req); err == nil && ri.IsResourceRequest {
		t.r.Add(ri.Verb, ri.Resource, ri.Subresource)
	}
	return t.next.RoundTrip(req)
}

// RequestCounts are API requests by "verb resource[/subresource]".
type RequestCounts map[string]int

// Verb sums the requests of one verb ("get", "list", "watch", "patch";
// "evict" for pods/eviction, which the API server names a create).
func (c RequestCounts) Verb(v string) int {
	n := 0
	for k, m := range c {
		verb, res, _ := strings.Cut(k, " ")
		if v == "evict" && res == "pods/eviction" || v == verb && res != "pods/eviction" {
			n += m
		}
	}
	return n
}

// Total is every request counted.
func (c RequestCounts) Total() int {
	n := 0
	for _, m := range c {
		n += m
	}
	return n
}

// Since is what was counted after before (a copy of the same counter).
func (c RequestCounts) Since(before RequestCounts) RequestCounts {
	out := RequestCounts{}
	for k, m := range c {
		if d := m - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// PerPod is the requests per pod moved, in all and by verb, under the
// names benchmarks report them with: req/pod, then evict-req/pod (eviction
// requests, those refused included), get-req/pod, list-req/pod,
// watch-req/pod and patch-req/pod.
func (c RequestCounts) PerPod(pods int) map[string]float64 {
	n := float64(max(pods, 1))
	out := map[string]float64{"req/pod": float64(c.Total()) / n}
	for _, verb := range []string{"evict", "get", "list", "watch", "patch"} {
		out[verb+"-req/pod"] = float64(c.Verb(verb)) / n
	}
	return out
}

// String lists the counts by verb and resource.
func (c RequestCounts) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, "%s %d; ", k, c[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}
