// Package testenv runs a real Kubernetes control plane for tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok fake
// nodes, optionally with the real Karpenter (its kwok provider), from the
// binaries that scripts/controlplane/build.sh builds (`make controlplane`).
//
// Start gives one test its own control plane; Shared lets the tests of a
// package share one, started on first use and stopped after TestMain's
// m.Run. Set KM_SKIP_E2E=1 to skip every test that asks for a control plane.
package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// startTimeout bounds how long a control plane may take to become ready.
const startTimeout = 2 * time.Minute

// logTailLines is how many lines of each component's log a failed test prints.
const logTailLines = 40

// Options selects what runs besides the core control plane.
type Options struct {
	// CRDDirs are directories of CustomResourceDefinition YAML files that are
	// installed before Start returns, for example the result of CRDDir("v1").
	CRDDirs []string
	// Karpenter runs Karpenter core with its kwok cloud provider out of
	// cluster, after installing the v1 CRDs and the KWOKNodeClass CRD.
	Karpenter bool
	// InstanceTypesFile is passed to Karpenter as INSTANCE_TYPES_FILE_PATH;
	// empty means Karpenter's built-in synthetic catalogue.
	InstanceTypesFile string
	// ControllerManagerArgs, SchedulerArgs and KwokArgs are extra flags
	// appended to kube-controller-manager's, kube-scheduler's and kwok's
	// command lines, e.g. client rate limits and controller concurrency for
	// a load benchmark: "--kube-api-qps=200", "--concurrent-replicaset-syncs=20",
	// or "--config", a KwokConfiguration file.
	ControllerManagerArgs []string
	SchedulerArgs         []string
	KwokArgs              []string
	// KwokStages replaces scripts/controlplane/stages.yaml, the stages kwok
	// moves nodes and pods through.
	KwokStages string
}

// Env is a running control plane and clients for it.
type Env struct {
	// Config reaches the API server as a system:masters user.
	Config *rest.Config
	// Client is a typed clientset for Config.
	Client kubernetes.Interface
	// Dynamic is a dynamic client for Config.
	Dynamic dynamic.Interface
	// Kubeconfig is the path of a kubeconfig file equivalent to Config.
	Kubeconfig string
	// Dir is the run directory: pki/, logs/, etcd/ and the kubeconfig.
	Dir string

	mapper *restmapper.DeferredDiscoveryRESTMapper
	procs  []*process
	// startAPIServer starts kube-apiserver again with the same flags (same
	// etcd, port and certificates) and waits until it is ready.
	startAPIServer func(ctx context.Context) (*process, error)
}

// Start starts a control plane for one test and stops it in t.Cleanup,
// printing the tail of every component's log if the test failed.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	skipIfRequested(t)
	began := time.Now()
	env, err := start(t.Context(), t.TempDir(), opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Logf("control plane ready in %s (run dir %s)", time.Since(began).Round(time.Millisecond), env.Dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs (last %d lines each):\n%s", logTailLines, logTails(env.procs, logTailLines))
		}
		env.stop()
	})
	return env
}

// Shared is a control plane shared by the tests of one package. Declare it
// at package level and run the tests through it:
//
//	var cluster = testenv.NewShared(testenv.Options{})
//
//	func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }
//
//	func TestX(t *testing.T) {
//		env := cluster.Env(t)
//		ns := env.Namespace(t)
//		...
//	}
type Shared struct {
	opts Options

	once sync.Once
	dir  string
	env  *Env
	err  error
}

// NewShared returns a Shared that starts with opts on first use.
func NewShared(opts Options) *Shared {
	return &Shared{opts: opts}
}

// Env returns the shared control plane, starting it on the first call. It
// skips t when KM_SKIP_E2E=1 and fails t when the control plane cannot start.
func (s *Shared) Env(t testing.TB) *Env {
	t.Helper()
	skipIfRequested(t)
	s.once.Do(func() {
		began := time.Now()
		s.dir, s.err = os.MkdirTemp("", "km-testenv-")
		if s.err != nil {
			s.err = fmt.Errorf("create run dir: %w", s.err)
			return
		}
		s.env, s.err = start(context.Background(), s.dir, s.opts)
		if s.err == nil {
			t.Logf("shared control plane ready in %s (run dir %s)", time.Since(began).Round(time.Millisecond), s.dir)
		}
	})
	if s.err != nil {
		t.Fatalf("start shared control plane: %v", s.err)
	}
	return s.env
}

// Run runs the package's tests, then stops the shared control plane if one
// was started and removes its run directory. When a test failed it first
// prints the tail of every component's log to stderr. It returns m.Run's
// exit code.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	if s.env != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "shared control plane logs (last %d lines each):\n%s", logTailLines, logTails(s.env.procs, logTailLines))
		}
		s.env.stop()
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			fmt.Fprintf(os.Stderr, "remove control plane run dir: %v\n", err)
		}
	}
	return code
}

// Launch starts a control plane in dir outside a test (the demo on real
// parts); Stop stops it. Start and Shared are the tests' entry points.
func Launch(ctx context.Context, dir string, opts Options) (*Env, error) {
	return start(ctx, dir, opts)
}

// Stop stops every component Launch started.
func (e *Env) Stop() { e.stop() }

// LogTails is the end (n lines) of every component's log, for a run that
// failed.
func (e *Env) LogTails(n int) string { return logTails(e.procs, n) }

// skipIfRequested skips t when the environment asks to skip control-plane
// tests. Nothing else skips them: missing binaries fail the test.
func skipIfRequested(t testing.TB) {
	t.Helper()
	if os.Getenv("KM_SKIP_E2E") == "1" {
		t.Skip("KM_SKIP_E2E=1: skipping a test that needs the control plane")
	}
}

// start runs the control plane in dir. On error it has already stopped every
// component it started, and the error carries the end of their logs.
func start(ctx context.Context, dir string, opts Options) (*Env, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	need := []string{binEtcd, binAPIServer, binControllerManager, binScheduler, binKwok}
	if opts.Karpenter {
		need = append(need, binKarpenter)
	}
	binDir, err := findBinaries(root, need...)
	if err != nil {
		return nil, err
	}
	crdDirs := slices.Clone(opts.CRDDirs)
	if opts.Karpenter {
		for _, name := range []string{"v1", "kwok"} {
			d, err := CRDDir(name)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(crdDirs, d) {
				crdDirs = append(crdDirs, d)
			}
		}
	}

	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	keys, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, metricsPort, healthPort := ports[0], ports[1], ports[2], ports[3], ports[4]

	env := &Env{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	fail := func(err error) (*Env, error) {
		if len(env.procs) > 0 {
			err = fmt.Errorf("%w\ncomponent logs (last %d lines each):\n%s", err, logTailLines, logTails(env.procs, logTailLines))
		}
		env.stop()
		return nil, err
	}
	run := func(name string, args []string, extraEnv ...string) (*process, error) {
		p, err := startProcess(name, filepath.Join(binDir, name), args, extraEnv, logDir)
		if err != nil {
			return nil, err
		}
		env.procs = append(env.procs, p)
		return p, nil
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcd, err := run(binEtcd, []string{
		"--data-dir", filepath.Join(dir, "etcd"),
		"--name", "default",
		"--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default=" + peerURL,
		"--unsafe-no-fsync",
	})
	if err != nil {
		return fail(err)
	}
	if err := waitHTTP(ctx, etcd, http.DefaultClient, etcdURL+"/health", `"health":"true"`); err != nil {
		return fail(err)
	}

	apiURL := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	apiArgs := []string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(apiPort),
		"--tls-cert-file", keys.servingCert,
		"--tls-private-key-file", keys.servingKey,
		"--token-auth-file", keys.tokens,
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", keys.saPub,
		"--service-account-signing-key-file", keys.saKey,
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--allow-privileged=true",
		"--profiling=false",
	}
	apiserver, err := run(binAPIServer, apiArgs)
	if err != nil {
		return fail(err)
	}
	if err := keys.writeKubeconfig(env.Kubeconfig, apiURL); err != nil {
		return fail(err)
	}
	env.Config = &rest.Config{
		Host:            apiURL,
		BearerToken:     keys.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: keys.caPEM},
		QPS:             200,
		Burst:           400,
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(keys.caPEM)
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := waitHTTP(ctx, apiserver, probe, apiURL+"/readyz", "ok"); err != nil {
		return fail(err)
	}
	restarts := 0
	env.startAPIServer = func(ctx context.Context) (*process, error) {
		restarts++
		p, err := startProcess(fmt.Sprintf("%s-%d", binAPIServer, restarts), filepath.Join(binDir, binAPIServer), apiArgs, nil, logDir)
		if err != nil {
			return nil, err
		}
		return p, waitHTTP(ctx, p, probe, apiURL+"/readyz", "ok")
	}

	componentArgs := []string{
		"--kubeconfig", env.Kubeconfig,
		"--authentication-kubeconfig", env.Kubeconfig,
		"--authorization-kubeconfig", env.Kubeconfig,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1",
		"--secure-port", "0",
	}
	kcmArgs := append(slices.Clone(componentArgs),
		"--service-account-private-key-file", keys.saKey,
		"--root-ca-file", keys.caCert,
		"--use-service-account-credentials=true",
		"--controllers", "*",
	)
	if _, err := run(binControllerManager, append(kcmArgs, opts.ControllerManagerArgs...)); err != nil {
		return fail(err)
	}
	if _, err := run(binScheduler, append(slices.Clone(componentArgs), opts.SchedulerArgs...)); err != nil {
		return fail(err)
	}
	stages := opts.KwokStages
	if stages == "" {
		stages = filepath.Join(root, controlPlaneDir, "stages.yaml")
	}
	if _, err := run(binKwok, append([]string{
		"--kubeconfig", env.Kubeconfig,
		"--config", stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", KwokAnnotation + "=fake",
		"--node-lease-duration-seconds", "40",
		"--cidr", "10.244.0.0/16",
		"--node-ip", "10.0.0.1",
	}, opts.KwokArgs...)); err != nil {
		return fail(err)
	}

	if env.Client, err = kubernetes.NewForConfig(env.Config); err != nil {
		return fail(fmt.Errorf("create clientset: %w", err))
	}
	if env.Dynamic, err = dynamic.NewForConfig(env.Config); err != nil {
		return fail(fmt.Errorf("create dynamic client: %w", err))
	}
	env.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Client.Discovery()))

	for _, d := range crdDirs {
		if err := env.ApplyCRDs(ctx, d); err != nil {
			return fail(err)
		}
	}

	if opts.Karpenter {
		karpenterEnv := []string{
			"KUBECONFIG=" + env.Kubeconfig,
			"DISABLE_LEADER_ELECTION=true",
			"METRICS_PORT=" + strconv.Itoa(metricsPort),
			"HEALTH_PROBE_PORT=" + strconv.Itoa(healthPort),
		}
		if opts.InstanceTypesFile != "" {
			path, err := filepath.Abs(opts.InstanceTypesFile)
			if err != nil {
				return fail(fmt.Errorf("instance types file: %w", err))
			}
			karpenterEnv = append(karpenterEnv, "INSTANCE_TYPES_FILE_PATH="+path)
		}
		karpenter, err := run(binKarpenter, nil, karpenterEnv...)
		if err != nil {
			return fail(err)
		}
		if err := waitHTTP(ctx, karpenter, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(healthPort)+"/readyz", ""); err != nil {
			return fail(err)
		}
	}

	// Pods can be created once the default ServiceAccount exists.
	if err := env.waitServiceAccount(ctx, metav1.NamespaceDefault); err != nil {
		return fail(err)
	}
	return env, nil
}

// apiServer is the running kube-apiserver process.
func (e *Env) apiServer() (*process, int) {
	for i, p := range e.procs {
		if strings.HasPrefix(p.name, binAPIServer) {
			return p, i
		}
	}
	return nil, -1
}

// RestartAPIServer stops kube-apiserver (SIGTERM, as a control-plane
// update rolls it) and starts it again on the same etcd, port and
// certificates; it returns once the new one is ready. Clients reconnect to
// the same URL. It is for one test's own control plane (Start), not a
// Shared one.
func (e *Env) RestartAPIServer(ctx context.Context) error {
	old, i := e.apiServer()
	if old == nil {
		return fmt.Errorf("no kube-apiserver running")
	}
	old.stop()
	p, err := e.startAPIServer(ctx)
	if p != nil {
		e.procs[i] = p
	}
	if err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}

// PauseAPIServer freezes kube-apiserver (SIGSTOP): connections are
// accepted by the kernel but never answered, as behind a network
// partition, until ResumeAPIServer.
func (e *Env) PauseAPIServer() error { return e.signalAPIServer(syscall.SIGSTOP) }

// ResumeAPIServer continues a paused kube-apiserver (SIGCONT).
func (e *Env) ResumeAPIServer() error { return e.signalAPIServer(syscall.SIGCONT) }

func (e *Env) signalAPIServer(sig syscall.Signal) error {
	p, _ := e.apiServer()
	if p == nil {
		return fmt.Errorf("no kube-apiserver running")
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal kube-apiserver %s: %w", sig, err)
	}
	return nil
}

// stop stops every component, the last started first.
func (e *Env) stop() {
	for _, p := range slices.Backward(e.procs) {
		p.stop()
	}
}

// waitHTTP polls url until it answers 200 with a body containing want, or p
// exits, or ctx ends.
func waitHTTP(ctx context.Context, p *process, client *http.Client, url, want string) error {
	var last string
	for {
		if exited, _ := p.exited(); exited {
			return p.exitError()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("probe %s: %w", p.name, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be ready at %s (last answer: %s): %w", p.name, url, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitServiceAccount waits for the controller-manager to create the default
// ServiceAccount of namespace, without which pods are rejected.
func (e *Env) waitServiceAccount(ctx context.Context, namespace string) error {
	return e.WaitFor(ctx, "ServiceAccount "+namespace+"/default", func(ctx context.Context) (bool, error) {
		for _, p := range e.procs {
			if exited, _ := p.exited(); exited {
				return false, p.exitError()
			}
		}
		_, err := e.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}
