// Command mcp-proxy-sandbox is the launcher of mcp-proxy's sandboxed upstreams: installed
// next to mcp-proxy, it is what the proxy starts for a child with a sandbox block when it
// cannot start it from a restricted thread of its own (a kernel or policy that refuses
// ptrace; network "loopback" where the proxy cannot bring up the child's lo from that
// thread, as off x86-64: the launcher brings it up from inside), and it
// restricts itself (package sandbox's init) and executes the server. It exists because it
// starts in a fraction of the time the proxy's own binary takes to initialize its
// packages; without it the proxy re-executes itself instead, with the same result. It is
// not run by hand.
package main

import (
	"fmt"
	"os"

	_ "github.com/mcp-proxy/mcp-proxy/sandbox" // the launcher: takes over in init when started as one
)

func main() {
	fmt.Fprintln(os.Stderr, "mcp-proxy-sandbox is the launcher of mcp-proxy's sandboxed upstreams; mcp-proxy starts it, it is not run by hand")
	os.Exit(2)
}
