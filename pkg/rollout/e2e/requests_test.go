package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// requestCounter counts the API requests a client sends, by verb and
// resource as the API server names them (its RequestInfo): "get pods",
// "list pods", "watch poddisruptionbudgets", "create pods/eviction".
type requestCounter struct {
	info apirequest.RequestInfoFactory
	mu   sync.Mutex
	n    map[string]int
}

func newRequestCounter() *requestCounter {
	return &requestCounter{info: apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}, n: map[string]int{}}
}

// client is a clientset for cfg whose requests c counts.
func (c *requestCounter) client(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{c: c, next: rt} })
	return kubernetes.NewForConfig(cfg)
}

type countingTransport struct {
	c    *requestCounter
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if ri, err := t.c.info.NewRequestInfo(r); err == nil && ri.IsResourceRequest {
		key := ri.Verb + " " + ri.Resource
		if ri.Subresource != "" {
			key += "/" + ri.Subresource
		}
		t.c.mu.Lock()
		t.c.n[key]++
		t.c.mu.Unlock()
	}
	return t.next.RoundTrip(r)
}

// verb sums the requests of one verb ("get", "list", "watch"; "evict"
// for pods/eviction, which the API server names a create).
func (c *requestCounter) verb(v string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, m := range c.n {
		verb, res, _ := strings.Cut(k, " ")
		switch {
		case v == "evict" && res == "pods/eviction", v == verb && res != "pods/eviction":
			n += m
		}
	}
	return n
}

func (c *requestCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.n {
		n += m
	}
	return n
}

// String lists the counts by verb and resource.
func (c *requestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.n)) {
		fmt.Fprintf(&b, "%s %d; ", k, c.n[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}
