package awsfake

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Server is an AWS endpoint on 127.0.0.1 backed by one in-memory Account.
// Point real SDK clients at URL() with BaseEndpoint and any static
// credentials; the service is read from the SigV4 credential scope.
type Server struct {
	srv *httptest.Server

	// mu guards acct, faults, calls and reqID. Handlers run with it held, so
	// a handler sees and mutates the account atomically.
	mu     sync.Mutex
	acct   *Account
	faults map[string]Fault
	calls  map[string]int
	reqID  uint64

	actions map[string]map[string]handler // service -> action -> handler (query and JSON-RPC protocols)
	rest    map[string]*restRoutes        // service -> routes (restJson1)
	sleep   func(time.Duration)
}

// handler serves one operation. It runs with the account locked and returns
// either an output value (an SDK output struct, encoded by the service's
// protocol) or an error (an *Error, or any other error as InternalFailure).
type handler func(c *call) (any, error)

// serviceRegistrations lists every per-service file's registration function.
// To add a service: write <service>.go with a registerX(s *Server) that calls
// s.register (query / JSON-RPC protocols) or s.registerREST (restJson1) for
// each operation, add its state struct to Account, and append registerX here.
// The protocol facts for iam, sqs and events are already in the services table.
var serviceRegistrations = []func(*Server){
	registerEC2,
	registerAutoScaling,
	registerEKS,
	registerSTS,
	registerSSM,
	registerIAM,
	registerSQS,
	registerEventBridge,
	registerEKSAccess,
	registerPricing,
}

// Option configures a Server.
type Option func(*Server)

// WithFault installs a fault at start; see Server.SetFault.
func WithFault(service, action string, f Fault) Option {
	return func(s *Server) { s.faults[faultKey(service, action)] = f }
}

// New starts a server for account (an empty account in us-east-1 when nil).
// Close it when done.
func New(account *Account, opts ...Option) *Server {
	if account == nil {
		account = &Account{}
	}
	account.defaults()
	s := &Server{
		acct:    account,
		faults:  map[string]Fault{},
		calls:   map[string]int{},
		actions: map[string]map[string]handler{},
		rest:    map[string]*restRoutes{},
		sleep:   time.Sleep,
	}
	for _, reg := range serviceRegistrations {
		reg(s)
	}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the endpoint to give SDK clients as BaseEndpoint.
func (s *Server) URL() string { return s.srv.URL }

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Account runs f with the account locked, to inspect or change state
// between calls.
func (s *Server) Account(f func(*Account)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.acct)
}

// register adds an operation of a query or JSON-RPC service.
func (s *Server) register(service, action string, h handler) {
	if s.actions[service] == nil {
		s.actions[service] = map[string]handler{}
	}
	s.actions[service][action] = h
}

// restRoutes maps restJson1 requests to operations with Go's pattern mux.
type restRoutes struct {
	mux     *http.ServeMux
	actions map[string]string // mux pattern -> action
	h       map[string]handler
}

// registerREST adds a restJson1 operation; pattern is an http.ServeMux
// pattern such as "GET /clusters/{name}", and handlers read path values with
// c.path("name").
func (s *Server) registerREST(service, action, pattern string, h handler) {
	r := s.rest[service]
	if r == nil {
		r = &restRoutes{mux: http.NewServeMux(), actions: map[string]string{}, h: map[string]handler{}}
		s.rest[service] = r
	}
	r.mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	r.actions[pattern] = action
	r.h[action] = h
}

// Fault is injected behaviour for one operation (or every operation of a
// service with action "*").
type Fault struct {
	// Throttle fails the next Throttle calls with the service's throttling
	// error (RequestLimitExceeded, Throttling or ThrottlingException).
	Throttle int
	// ThrottleRatio fails that fraction of calls (0 to 1) with the
	// throttling error, spread evenly and deterministically: 0.5 fails
	// every other call, 1 every call (a throttling storm).
	ThrottleRatio float64
	throttleSeen  int
	// Deny fails every call with the service's access-denied error
	// (UnauthorizedOperation, AccessDenied or AccessDeniedException).
	Deny bool
	// Latency delays every call before it is served.
	Latency time.Duration
	// Err, when set, fails the next ErrCount calls (every call when
	// ErrCount is 0) with this error.
	Err      *Error
	ErrCount int
}

// SetFault installs f for service/action, replacing any previous fault.
// Service is the signing name (ec2, autoscaling, eks, sts, ssm, iam, sqs, events).
func (s *Server) SetFault(service, action string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[faultKey(service, action)] = f
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string]Fault{}
}

// Calls returns how many requests reached service:action, faulted ones included.
func (s *Server) Calls(service, action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[faultKey(service, action)]
}

// CallCounts returns a copy of every "service:Action" request count.
func (s *Server) CallCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// TotalCalls is the number of requests served since start or ResetCalls.
func (s *Server) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.calls {
		n += v
	}
	return n
}

// ResetCalls zeroes the call counters.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = map[string]int{}
}

// CallSummary renders the counters one "service:Action n" per line, sorted.
func (s *Server) CallSummary() string {
	counts := s.CallCounts()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d\n", k, counts[k])
	}
	return b.String()
}

func faultKey(service, action string) string { return service + ":" + action }

// call is one request being served.
type call struct {
	s       *Server
	acct    *Account
	service string
	action  string
	proto   protocol
	req     *http.Request
	form    url.Values
	body    []byte
}

var scopeRe = regexp.MustCompile(`Credential=[^/,\s]+/\d{8}/([^/,\s]+)/([^/,\s]+)/aws4_request`)

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	service := serviceOf(r)
	info, ok := services[service]
	if !ok {
		writeBareError(w, http.StatusBadRequest, "UnrecognizedClientException",
			fmt.Sprintf("awsfake: cannot tell the service of %s %s (signing scope service %q); sign requests with SigV4", r.Method, r.URL.Path, service))
		return
	}
	c := &call{s: s, service: service, proto: info.protocol, req: r, body: body}
	var h handler
	switch info.protocol {
	case ec2Query, awsQuery:
		form, err := url.ParseQuery(string(body))
		if err != nil {
			s.writeError(w, c, errorf(http.StatusBadRequest, "MalformedQueryString", "form body: %v", err))
			return
		}
		for k, v := range r.URL.Query() {
			form[k] = append(form[k], v...)
		}
		c.form = form
		c.action = form.Get("Action")
		h = s.actions[service][c.action]
	case awsJSON10, awsJSON11:
		target := r.Header.Get("X-Amz-Target")
		_, c.action, _ = strings.Cut(target, ".")
		h = s.actions[service][c.action]
	case restJSON1:
		if routes := s.rest[service]; routes != nil {
			if _, pattern := routes.mux.Handler(r); pattern != "" {
				c.action = routes.actions[pattern]
				h = routes.h[c.action]
				// Populate r.PathValue by serving through the mux.
				routes.mux.ServeHTTP(discard{}, r)
			}
		}
	}
	if h == nil {
		s.writeError(w, c, errorf(http.StatusBadRequest, invalidActionCode(info.protocol),
			"awsfake does not implement %s %s (%s %s); add it in pkg/aws/awsfake/%s.go", service, c.action, r.Method, r.URL.Path, service))
		return
	}

	s.mu.Lock()
	s.calls[faultKey(service, c.action)]++
	f, fk := s.faultFor(service, c.action)
	s.mu.Unlock()
	if f.Latency > 0 {
		s.sleep(f.Latency)
	}

	s.mu.Lock()
	if ferr := s.applyFault(fk, info.protocol, service, c.action); ferr != nil {
		s.mu.Unlock()
		s.writeError(w, c, ferr)
		return
	}
	c.acct = s.acct
	out, herr := safeCall(h, c)
	s.mu.Unlock()
	if herr != nil {
		s.writeError(w, c, herr)
		return
	}
	s.writeOutput(w, c, out)
}

// safeCall turns a handler panic into an InternalFailure so one bad request
// never takes the server (or the test binary) down.
func safeCall(h handler, c *call) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errorf(http.StatusInternalServerError, "InternalFailure", "awsfake %s:%s panicked: %v", c.service, c.action, r)
		}
	}()
	return h(c)
}

func (s *Server) faultFor(service, action string) (Fault, string) {
	if f, ok := s.faults[faultKey(service, action)]; ok {
		return f, faultKey(service, action)
	}
	if f, ok := s.faults[faultKey(service, "*")]; ok {
		return f, faultKey(service, "*")
	}
	return Fault{}, ""
}

// applyFault consumes one unit of the fault at key and returns the error to
// answer with, if any. s.mu must be held.
func (s *Server) applyFault(key string, p protocol, service, action string) *Error {
	if key == "" {
		return nil
	}
	f := s.faults[key]
	switch {
	case f.Deny:
		return accessDenied(p, s.acct.CallerARN, service, action)
	case f.Throttle > 0:
		f.Throttle--
		s.faults[key] = f
		return throttled(p)
	case f.ThrottleRatio > 0:
		// Call n is throttled when the count of throttled calls due
		// by n (ceil(n*ratio)) grows with it: the first call is.
		f.throttleSeen++
		s.faults[key] = f
		n := float64(f.throttleSeen)
		if math.Ceil(n*f.ThrottleRatio) > math.Ceil((n-1)*f.ThrottleRatio) {
			return throttled(p)
		}
	case f.Err != nil:
		e := f.Err
		if f.ErrCount > 0 {
			f.ErrCount--
			if f.ErrCount == 0 {
				f.Err = nil
			}
			s.faults[key] = f
		}
		return e
	}
	return nil
}

func (s *Server) nextRequestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqID++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", s.reqID)
}

// serviceOf reads the service from the SigV4 credential scope, falling back
// to the X-Amz-Target prefix for unsigned JSON requests.
func serviceOf(r *http.Request) string {
	if m := scopeRe.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[2]
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		prefix, _, _ := strings.Cut(target, ".")
		for name, info := range services {
			if info.targetPrefix == prefix {
				return name
			}
		}
	}
	return ""
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

func writeBareError(w http.ResponseWriter, status int, code, msg string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"__type":%q,"message":%q}`, code, msg)
	w.Header().Set("X-Amzn-ErrorType", code)
	send(w, status, "application/json", b.String())
}
