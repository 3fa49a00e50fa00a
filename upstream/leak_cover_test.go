package upstream

import (
	"testing"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
)

// noLeaks fails the test when it leaves goroutines behind (see leaktest.Check).
func noLeaks(t *testing.T) { leaktest.Check(t, waitFor) }
