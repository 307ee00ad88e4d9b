package kube

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// TestDrainTimeoutIsDeadlineExceeded: a drain bounded by Options.Timeout
// that a PDB blocks forever ends with context.DeadlineExceeded (the cause
// of its clock timeout), not context.Canceled, so the rollout can tell a
// gate timeout (paused) from an interrupted run.
func TestDrainTimeoutIsDeadlineExceeded(t *testing.T) {
	cs := fake.NewClientset(testPod("a", "n1"))
	var calls atomic.Int32
	evictionReactor(cs, func(string) bool { return true }, &calls)
	o := fastDrain()
	o.Timeout = 50 * time.Millisecond
	d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: o}
	_, err := d.Drain(context.Background(), "n1")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if calls.Load() < 2 {
		t.Errorf("eviction attempts = %d, want retries until the timeout", calls.Load())
	}
}

// TestDrainTimeoutInFlight: when the timeout ends the drain while an
// eviction request is on the wire, client-go returns context.Canceled; the
// drain still reports its cause, DeadlineExceeded.
func TestDrainTimeoutInFlight(t *testing.T) {
	const timeout = 50 * time.Millisecond
	cs := fake.NewClientset(testPod("a", "n1"))
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		time.Sleep(3 * timeout)
		return true, nil, &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/api/v1/namespaces/app/pods/a/eviction", Err: context.Canceled}
	})
	o := fastDrain()
	o.Timeout = timeout
	d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: o}
	_, err := d.Drain(context.Background(), "n1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

// TestDrainAsksAgainWhenUnanswered: an eviction the API server did not
// decide — a 500 from its eviction handler, which could not update the
// budget while kube-apiserver shut down ("Put .../poddisruptionbudgets/
// web/status: connect: connection refused", #19 rung 3), or a connection
// lost under the request — is sent again rather than failing the drain.
// (A pod replaced under its name meanwhile is left alone by the API
// server's UID precondition: internal/testenv's
// TestDrainLeavesAReplacementAlone.)
func TestDrainAsksAgainWhenUnanswered(t *testing.T) {
	restarting := apierrors.NewInternalError(errors.New(`Put "https://127.0.0.1:38027/apis/policy/v1/namespaces/app/poddisruptionbudgets/web/status": dial tcp 127.0.0.1:38027: connect: connection refused`))
	lostConn := &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/api/v1/namespaces/app/pods/a/eviction", Err: errors.New("http2: client connection lost")}
	tests := map[string]struct {
		first     error
		wantCalls int32
	}{
		"500 while the API server shuts down": {first: restarting, wantCalls: 2},
		"connection lost under the request":   {first: lostConn, wantCalls: 2},
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(testPod("a", "n1"))
			var calls atomic.Int32
			cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				if calls.Add(1) == 1 {
					return true, nil, tt.first
				}
				return true, nil, cs.Tracker().Delete(pods, "app", "a")
			})
			o := fastDrain()
			o.Timeout = 5 * time.Second
			d := &Drainer{Client: cs, Clock: clock.RealClock{}, Options: o}
			res, err := d.Drain(context.Background(), "n1")
			if err != nil {
				t.Fatalf("Drain: %v; want the eviction asked again", err)
			}
			if len(res.Evicted) != 1 || calls.Load() != tt.wantCalls {
				t.Errorf("evicted %v with %d eviction requests; want [app/a] with %d", res.Evicted, calls.Load(), tt.wantCalls)
			}
		})
	}
}
