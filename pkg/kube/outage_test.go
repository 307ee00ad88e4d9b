package kube

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRideOutOutages: a request to an API server that is down (connection
// refused) is sent again, body and all, once it listens again within the
// outage allowed; past it, the connection error is returned.
func TestRideOutOutages(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // down: connections are refused
	serve := func() {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(append([]byte("got "), b...))
		})}
		t.Cleanup(func() { srv.Close() })
		go func() { _ = srv.Serve(l) }()
	}
	post := func(rt http.RoundTripper) (string, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/namespaces/x/pods/y/eviction", strings.NewReader("eviction"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	base := &http.Transport{}
	if _, err := post(RideOutOutages(base, 1500*time.Millisecond)); err == nil || !unsent(err) {
		t.Fatalf("server down for longer than the outage allowed: %v, want the connection error", err)
	}
	time.AfterFunc(1500*time.Millisecond, serve)
	got, err := post(RideOutOutages(base, 10*time.Second))
	if err != nil || got != "got eviction" {
		t.Fatalf("server back after 1.5s: %q, %v; want the request sent again with its body", got, err)
	}
}
