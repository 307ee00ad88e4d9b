// Package motoenv runs moto_server — moto 5.2.1, an AWS emulator nobody
// here wrote, installed on every machine of this project — for tests: on a
// free loopback port, with AWS managed policies loaded, reset between
// tests, seeded only through the real SDK (Seed), and killed by process
// group. It is the outside reference beside pkg/aws/awsfake, our own.
//
// A missing moto_server fails the test: it is part of the machine image,
// not an optional extra.
package motoenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	kmaws "github.com/karpenter-migrate/karpenter-migrate/pkg/aws"
)

// Binary is the emulator's command.
const Binary = "moto_server"

// AccountID is the account moto answers for.
const AccountID = "123456789012"

const (
	startTimeout = 30 * time.Second
	stopGrace    = 5 * time.Second
)

// Server is a running moto_server.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:<port>.
	URL string

	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

// Start runs moto_server on a free loopback port and waits until it
// answers. logDir receives its log.
func Start(ctx context.Context, logDir string) (*Server, error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("%s not found on PATH: it is part of this project's machine image (moto 5.2.1 with boto3); the AWS tests run against it and cannot skip it: %w", Binary, err)
	}
	var lastErr error
	for range 3 { // a port taken between probe and bind: try another
		s, err := start(ctx, bin, logDir)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(ctx context.Context, bin, logDir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, "moto_server-"+strconv.Itoa(port)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", Binary, err)
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	// Without the managed policies, attaching AmazonEKSWorkerNodePolicy & co fails with NoSuchEntity.
	cmd.Env = append(os.Environ(), "MOTO_IAM_LOAD_MANAGED_POLICIES=true")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so Close reaches whatever it forks; SIGKILL
	// if the test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", Binary, err)
	}
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// waitReady polls moto's own API until it answers.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before it was ready (%v):\n%s", Binary, s.waitErr, s.LogTail(20))
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/moto-api/data.json", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s at %s not ready after %s (last: %v):\n%s", Binary, s.URL, startTimeout, last, s.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Reset empties every service (moto's POST /moto-api/reset).
func (s *Server) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset %s: %w", Binary, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("reset %s: HTTP %d: %s", Binary, resp.StatusCode, body)
	}
	return nil
}

// PID is the process id of moto_server (its process group's too).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Close sends SIGTERM to moto_server's process group, then SIGKILL after a
// grace period, and returns once it has been reaped.
func (s *Server) Close() {
	pgid := s.cmd.Process.Pid
	select {
	case <-s.done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // a child may still hold the group
		return
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// LogTail returns the last n lines of moto_server's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", s.logPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Config is the SDK configuration for region, pointed at moto with static
// credentials, built by pkg/aws as the tool builds it (adaptive retryer,
// the denial and non-AWS-answer middlewares).
func (s *Server) Config(ctx context.Context, region string) (awssdk.Config, error) {
	return ConfigAt(ctx, s.URL, region)
}

// ConfigAt is Config for another endpoint (awsfake, in a differential
// test): the same credentials and client options. A copy of a Config with
// another BaseEndpoint is not enough: the SDK resolves the endpoint given
// to LoadConfig from the config sources again.
func ConfigAt(ctx context.Context, endpoint, region string) (awssdk.Config, error) {
	return kmaws.LoadConfig(ctx, kmaws.Options{
		Region: region, EndpointURL: endpoint, MaxBackoff: 10 * time.Millisecond,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDMOTO", "moto", ""),
	})
}

// Env sets the environment the CLI reads credentials from to moto's test
// credentials and no shared config, for the duration of t.
func Env(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDMOTO")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "moto")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Shared is one moto_server for the tests of a package, started on first
// use and reset before every test that asks for it:
//
//	var moto = motoenv.NewShared()
//
//	func TestMain(m *testing.M) { os.Exit(moto.Run(m)) }
//
//	func TestMotoX(t *testing.T) {
//		srv := moto.Server(t) // empty
//		...
//	}
type Shared struct {
	once sync.Once
	dir  string
	srv  *Server
	err  error
}

// NewShared returns a Shared that starts moto_server on first use.
func NewShared() *Shared { return &Shared{} }

// Server returns the shared moto_server, started on the first call and
// reset on every call. It fails t if moto_server is missing or broken.
// Tests that share it must not run in parallel.
func (s *Shared) Server(t testing.TB) *Server {
	t.Helper()
	s.once.Do(func() {
		began := time.Now()
		if s.dir, s.err = os.MkdirTemp("", "km-motoenv-"); s.err != nil {
			return
		}
		s.srv, s.err = Start(context.Background(), s.dir)
		if s.err == nil {
			t.Logf("%s ready at %s in %s", Binary, s.srv.URL, time.Since(began).Round(time.Millisecond))
		}
	})
	if s.err != nil {
		t.Fatalf("start %s: %v", Binary, s.err)
	}
	if err := s.srv.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (last 30 lines):\n%s", Binary, s.srv.LogTail(30))
		}
	})
	return s.srv
}

// Run runs the package's tests, then stops moto_server; it returns m.Run's
// exit code.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	s.Stop()
	return code
}

// Stop stops moto_server if it was started and removes its log directory;
// for a TestMain that also runs other shared fixtures.
func (s *Shared) Stop() {
	if s.srv != nil {
		s.srv.Close()
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "remove %s run dir: %v\n", Binary, err)
		}
	}
}

// Gap is a known difference between awsfake and moto that is moto's: the
// keys it covers and why moto differs there.
type Gap struct {
	Key    *regexp.Regexp
	Reason string
}

// KnownGap is a Gap for the keys matching pattern.
func KnownGap(pattern, reason string) Gap {
	return Gap{Key: regexp.MustCompile(pattern), Reason: reason}
}

// Differential compares what awsfake and moto answered, key by key (a
// path in a document, a step of a script). Every differing key must be
// covered by a gap, and every gap must cover a difference, so that the
// list stays true as moto or awsfake change.
func Differential(t testing.TB, what string, fake, moto map[string]string, gaps []Gap) {
	t.Helper()
	keys := map[string]bool{}
	for k := range fake {
		keys[k] = true
	}
	for k := range moto {
		keys[k] = true
	}
	used := make([]bool, len(gaps))
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		f, fok := fake[k]
		m, mok := moto[k]
		if fok == mok && f == m {
			continue
		}
		if i := slices.IndexFunc(gaps, func(g Gap) bool { return g.Key.MatchString(k) }); i >= 0 {
			used[i] = true
			continue
		}
		if !fok {
			f = "(absent)"
		}
		if !mok {
			m = "(absent)"
		}
		t.Errorf("%s differs at %s:\n  awsfake: %s\n  moto:    %s", what, k, f, m)
	}
	for i, g := range gaps {
		if !used[i] {
			t.Errorf("%s: known moto gap %q (%s) no longer differs: drop it from the list", what, g.Key, g.Reason)
		} else {
			t.Logf("%s: known moto gap %s: %s", what, g.Key, g.Reason)
		}
	}
}
