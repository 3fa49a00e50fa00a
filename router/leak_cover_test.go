package router

import (
	"testing"
	"time"

	"github.com/mcp-proxy/mcp-proxy/internal/testing/leaktest"
)

// noLeaks fails the test when it leaves goroutines behind (see leaktest.Check).
func noLeaks(t *testing.T) { leaktest.Check(t, 10*time.Second) }
