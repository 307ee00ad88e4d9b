package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestRequestsCountsWhatTheClientSends counts a clientset's requests at
// the wire, named as the API server names them: an eviction is a create
// of pods/eviction, not a create of pods.
func TestRequestsCountsWhatTheClientSends(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/namespaces/ns/pods" && r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`))
		case r.URL.Path == "/api/v1/namespaces/ns/pods/a/eviction":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
		default:
			_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns"}}`))
		}
	}))
	defer srv.Close()
	reqs := &Requests{}
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(reqs.Wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := reqs.Counts()
	for range 2 {
		if _, err := client.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("ns").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	got := reqs.Counts().Since(before)
	if want := "create pods/eviction 1; get pods 2; list pods 1"; got.String() != want {
		t.Errorf("counted %q, want %q", got, want)
	}
	if got.Verb("get") != 2 || got.Verb("evict") != 1 || got.Verb("create") != 0 || got.Total() != 4 {
		t.Errorf("by verb: get %d evict %d create %d total %d, want 2 1 0 4", got.Verb("get"), got.Verb("evict"), got.Verb("create"), got.Total())
	}
	per := got.PerPod(2)
	if per["req/pod"] != 2 || per["get-req/pod"] != 1 || per["evict-req/pod"] != 0.5 || per["list-req/pod"] != 0.5 || per["watch-req/pod"] != 0 {
		t.Errorf("per pod of 2: %v", per)
	}
}
