package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/mcp-proxy/mcp-proxy/auth"
)

// cmdHashKey reads an API key on stdin and prints the sha256 that auth's api_key
// blocks take, so that the configuration never holds the key itself.
func cmdHashKey(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	pos, err := parseFlags(newFlagSet("hash-key", stderr, nil), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("hash-key", "reads the key on stdin and takes no arguments (got %q)", pos)
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && err != io.EOF {
		return err
	}
	key := strings.TrimRight(line, "\r\n")
	if len(key) < 16 {
		return exitError{code: 2, msg: "hash-key: give the key (at least 16 characters) on stdin, e.g. `openssl rand -hex 32 | tee key | mcp-proxy hash-key`"}
	}
	fmt.Fprintln(stdout, auth.HashToken(key))
	return nil
}
