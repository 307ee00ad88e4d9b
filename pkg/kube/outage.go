package kube

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// RideOutOutages wraps an API server transport for a long run (apply,
// rollback): a request that failed before reaching the API server — the
// connection refused or reset while connecting, the TLS handshake timed
// out, as while it restarts or is unreachable — is sent again every
// second, for up to outage since the first failure; a read (GET) is also
// resent after a connection lost mid-request. The request's context still
// ends it (the run's Lease bounds every outage).
func RideOutOutages(rt http.RoundTripper, outage time.Duration) http.RoundTripper {
	return &outageTransport{rt: rt, outage: outage}
}

type outageTransport struct {
	rt     http.RoundTripper
	outage time.Duration
}

func (o *outageTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var first time.Time
	for {
		resp, err := o.rt.RoundTrip(req)
		if err == nil || !unsent(err) && !(req.Method == http.MethodGet && lost(err)) {
			return resp, err
		}
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) >= o.outage || req.Body != nil && req.GetBody == nil {
			return resp, err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, errors.Join(err, req.Context().Err())
		case <-t.C:
		}
		if req.GetBody != nil {
			body, berr := req.GetBody()
			if berr != nil {
				return nil, errors.Join(err, berr)
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// unsent reports a failure to connect: the request never reached the server.
func unsent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "TLS handshake timeout")
}

// lost reports a connection that broke under a request.
func lost(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection lost") || strings.Contains(err.Error(), "EOF")
}
