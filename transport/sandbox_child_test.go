package transport

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// sandboxedChild is the child of the sandbox tests: it tries each operation of
// SANDBOX_OPS (";"-separated: "read:PATH", "write:PATH", "connect:HOST:PORT", "selfloop"
// (listen on 127.0.0.1 and connect to itself), "signal:PID" (signal 0 to each thread of
// process PID: ok when one takes it), "ids:UID:GID" (its own uid and gid are those)) and
// prints one line per operation,
// "who op result", result being "ok" or the error. The child then starts a grandchild
// (the same binary) that does the same under the inherited sandbox and relays its lines.
func sandboxedChild() {
	who := "child"
	if os.Getenv("TRANSPORT_TEST_CHILD") == "sandboxed-grandchild" {
		who = "grandchild"
	}
	for _, op := range strings.Split(os.Getenv("SANDBOX_OPS"), ";") {
		fmt.Printf("%s %s %s\n", who, op, outcome(tryOp(op)))
	}
	if who == "grandchild" {
		return
	}
	gc := exec.Command(os.Args[0])
	gc.Env = append(os.Environ(), "TRANSPORT_TEST_CHILD=sandboxed-grandchild")
	out, err := gc.Output()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		fmt.Println(sc.Text())
	}
	fmt.Printf("child spawn %s\n", outcome(err))
	fmt.Println("done")
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

func tryOp(op string) error {
	kind, arg, _ := strings.Cut(op, ":")
	switch kind {
	case "read":
		_, err := os.ReadFile(arg)
		return err
	case "write":
		f, err := os.OpenFile(arg, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case "tmp":
		f, err := os.CreateTemp("", "sandboxed-")
		if err != nil {
			return err
		}
		f.Close()
		return os.Remove(f.Name())
	case "connect":
		c, err := net.DialTimeout("tcp", arg, 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	case "signal":
		return signalThreads(arg)
	case "ids":
		if want := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()); want != arg {
			return fmt.Errorf("uid:gid %s", want)
		}
		return nil
	case "selfloop":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
	return fmt.Errorf("unknown operation %q", op)
}
