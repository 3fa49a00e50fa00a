package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/mcp-proxy/mcp-proxy/sandbox"
)

// ProcessSpec describes a child process speaking newline-delimited JSON-RPC on stdio.
type ProcessSpec struct {
	Command    []string          // program and arguments; Command[0] is looked up in PATH
	Env        map[string]string // added to (and overriding) the proxy's own environment
	Dir        string            // working directory; "" means the proxy's
	MaxMessage int               // largest message read from the child, in bytes
	// Stderr receives each line the child writes to stderr (without the newline). It is
	// called from one goroutine owned by the Process. Nil discards stderr.
	Stderr func(line string)
	// Sandbox, when set, confines the child (and whatever it starts) with Landlock,
	// no_new_privs and, where asked for, network namespaces of its own; a policy this
	// machine cannot enforce makes StartProcess fail. Package sandbox starts the child
	// (from a restricted thread, or through its launcher). Nil runs the child unconfined.
	Sandbox *sandbox.Policy
	// Name names the sandbox's private temporary directory (the upstream's label).
	Name string
}

// Process is a running child. Its stdout/stdin are the Stream; Done is closed when the
// child has exited and its stderr has been drained.
type Process struct {
	*Stream
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *os.File // the child's stdout, read through Stream
	// interruptible: out takes read deadlines (the runtime polls it), so InterruptRead works
	interruptible bool
	done          chan struct{}
	err           error // exit status; written before done is closed

	stopOnce sync.Once
	stopErr  error
}

// StartProcess starts the child in its own process group, so that stopping it also stops
// anything it started (npx, go run, shell wrappers).
func StartProcess(spec ProcessSpec) (*Process, error) {
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return nil, errors.New("empty command")
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = mergeEnv(os.Environ(), spec.Env)
	ownProcessGroup(cmd)
	var launch *sandbox.Launch
	if spec.Sandbox != nil {
		l, err := sandbox.Prepare(spec.Sandbox, cmd, spec.Name)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", spec.Command[0], err)
		}
		launch = l
	}

	// Our own pipes rather than cmd.StdoutPipe: Wait may then be called while reads are
	// still in progress, and exec starts no copying goroutines.
	inR, inW, err := os.Pipe()
	if err != nil {
		launch.Cleanup()
		return nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		launch.Cleanup()
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		launch.Cleanup()
		return nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	exited := watchExit(cmd)
	if launch != nil {
		err = launch.Start(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		if cmd.Process != nil {
			// The sandbox refused after its child was made, before anything of the
			// command ran: the child is dead or dying; reap it.
			_ = killGroup(cmd.Process)
			exited.wait()
			_ = cmd.Wait()
		}
		closeAll(inR, inW, outR, outW, errR, errW)
		launch.Cleanup()
		return nil, fmt.Errorf("starting %s: %w", spec.Command[0], err)
	}
	closeAll(inR, outW, errW) // the child holds its own copies

	p := &Process{
		Stream: NewStream(outR, inW, spec.MaxMessage),
		cmd:    cmd,
		stdin:  inW,
		out:    outR,
		done:   make(chan struct{}),
	}
	p.interruptible = outR.SetReadDeadline(time.Time{}) == nil
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		defer errR.Close()
		readStderr(errR, spec.Stderr)
	}()
	go func() {
		exited.wait()
		err := cmd.Wait()
		// Take down whatever the child left behind in its group (a wrapper's children).
		_ = killGroup(cmd.Process)
		// Give stderr a moment to drain the child's last words; a grandchild that
		// escaped the group could hold it open forever.
		select {
		case <-stderrDone:
		case <-time.After(2 * time.Second):
			errR.Close()
		}
		// The reader normally sees EOF now that the group is gone; a descendant that left
		// the group could keep stdout open, so close it for good after a grace period.
		time.AfterFunc(2*time.Second, func() { outR.Close() })
		launch.Cleanup()
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// Pid returns the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// ReadInterruptible implements ReadInterrupter.
func (p *Process) ReadInterruptible() bool { return p.interruptible }

// InterruptRead implements ReadInterrupter with a read deadline in the past on the
// child's stdout.
func (p *Process) InterruptRead() { _ = p.out.SetReadDeadline(time.Unix(1, 0)) }

// ResumeRead implements ReadInterrupter.
func (p *Process) ResumeRead() { _ = p.out.SetReadDeadline(time.Time{}) }

// Done is closed when the child has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr returns the child's exit status once Done is closed (nil for status 0).
func (p *Process) ExitErr() error {
	<-p.done
	return p.err
}

// Stop ends the child gracefully: close its stdin and wait up to grace; then SIGTERM to its
// process group and wait up to grace again; then SIGKILL. It returns once the child has
// exited and is safe to call more than once and concurrently. Call it also for a child
// that exited on its own: it closes the proxy's end of the child's stdin, which nothing
// else closes (but the garbage collector's finalizer, some time later).
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
		_ = terminateGroup(p.cmd.Process)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
		_ = killGroup(p.cmd.Process)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.stopErr = fmt.Errorf("process %d did not exit after SIGKILL", p.cmd.Process.Pid)
		}
	})
	return p.stopErr
}

func readStderr(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, 16<<10)
	skipping := false // the rest of a line over the buffer's size, whose start was logged
	for {
		// A line longer than the buffer comes in pieces: its start is logged (truncated),
		// the rest dropped as it comes, so that a child writing without newlines costs no
		// more memory.
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && !skipping && fn != nil {
			line := bytes.TrimSuffix(bytes.TrimSuffix(chunk, []byte("\n")), []byte("\r"))
			if len(line) > maxStderrLine {
				fn(string(line[:maxStderrLine]) + "…(truncated)")
			} else if len(line) > 0 || err == nil {
				fn(string(line))
			}
		}
		skipping = errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !skipping {
			return
		}
	}
}

// maxStderrLine is the most of one stderr line that is logged.
const maxStderrLine = 8 << 10

func mergeEnv(base []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				k = kv[:i]
				break
			}
		}
		if _, ok := extra[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out
}

func closeAll(cs ...io.Closer) {
	for _, c := range cs {
		c.Close()
	}
}
