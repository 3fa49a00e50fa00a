package topology

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports for the tests' listeners. A port the kernel picks for ":0" comes from its
// ephemeral range (ip_local_port_range), the same range every other ":0" listener and
// every outgoing connection of the machine draws from; the kernel hands a port freed a
// moment ago out again soon. So a port FreeAddr found free by listening on ":0" and
// closing was at times taken by another test's ":0" listener (a replica of a cluster
// test running in parallel) before the process it was meant for bound it, and that
// test then talked to the other test's proxy. FreeAddr picks below the ephemeral range
// instead, where no ":0" listener and no outgoing connection lands, at random, never
// the same port twice in one process, and checks that it can bind it.

// portRange is where FreeAddr picks: [portLow, portHigh).
var portLow, portHigh = portRangeBelowEphemeral()

var (
	portsMu sync.Mutex
	handed  = map[int]bool{} // ports this process handed out
)

// portRangeBelowEphemeral returns [10000, the ephemeral range's first port), or an empty
// range when that leaves fewer than 2,000 ports (FreeAddr then asks the kernel).
func portRangeBelowEphemeral() (int, int) {
	low := 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	if low-10000 < 2000 {
		return 0, 0
	}
	return 10000, low
}

// FreeAddr returns a loopback host:port that was free a moment ago and that this
// process has not handed out before.
func FreeAddr() (string, error) {
	if portHigh > portLow {
		for range 200 {
			port := portLow + rand.IntN(portHigh-portLow)
			portsMu.Lock()
			taken := handed[port]
			handed[port] = true
			portsMu.Unlock()
			if taken {
				continue
			}
			addr := "127.0.0.1:" + strconv.Itoa(port)
			if l, err := net.Listen("tcp", addr); err == nil {
				l.Close()
				return addr, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("no free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
