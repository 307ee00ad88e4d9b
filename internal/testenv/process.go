package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before its
// process group is killed.
const stopGrace = 10 * time.Second

// process is one running component. Its stdout and stderr go to a log file in
// the run directory.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	err     error         // exit status, valid after done is closed
}

// startProcess starts bin with args and extra environment in its own process
// group, so that stop reaches any child it forks. The child gets SIGKILL if
// the test binary dies first (for example on a go test timeout).
func startProcess(name, bin string, args, env []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, waits up to stopGrace, then sends
// SIGKILL. It returns once the process has been reaped.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	if exited, _ := p.exited(); exited {
		// The leader is gone, but a child it forked may still hold the group.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// exitError describes a component that ended before the control plane was
// ready, with the end of its log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited early (%v); last lines of %s:\n%s", p.name, p.err, p.logPath, p.tail(20))
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago: it listens on port 0 n times, then closes all listeners.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTails renders the end of every component's log, for a failed test.
func logTails(procs []*process, n int) string {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "==== %s (%s) ====\n%s\n", p.name, p.logPath, p.tail(n))
	}
	return b.String()
}
