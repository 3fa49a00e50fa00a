package guard_test

import (
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/plugins/guard"
)

func Example() {
	g, err := guard.New(guard.Config{
		SQLArguments:     []string{"query"},
		SQLDialect:       "postgres",
		CommandArguments: []string{"command"},
		Commands:         []string{"ls", "git"},
		URLArguments:     []string{"url"},
		Hosts:            []string{"api.github.com", "*.example.com"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, args := range []string{
		`{"query": "SELECT name FROM users WHERE note = '; DROP TABLE users'"}`,
		`{"query": "SELECT 1; DROP TABLE users"}`,
		`{"command": "git log --oneline"}`,
		`{"command": "ls | sh"}`,
		`{"url": "https://API.GitHub.com./repos"}`,
		`{"url": "https://api.github.com@evil.com/"}`,
	} {
		fmt.Println(g.Check([]byte(args)))
	}
	// Output:
	// <nil>
	// guard: argument "query" refused: more than one statement at byte 8 near "; DROP TABLE users"; only a single read-only SELECT is allowed
	// <nil>
	// guard: argument "command" refused: '|' (pipe or ||) at byte 3 near "| sh"; send one simple command with literal, quoted arguments
	// <nil>
	// guard: argument "url" refused: URL "https://api.github.com@evil.com/" refused: user info (user@ or user:password@) is not allowed; send the URL without credentials
}

func ExampleReadOnlySQL() {
	fmt.Println(guard.ReadOnlySQL("WITH t AS (SELECT 1 AS x) SELECT x FROM t"))
	fmt.Println(guard.ReadOnlySQL("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d"))
	// Output:
	// <nil>
	// CTE "d" must be a SELECT or VALUES query, not DELETE at byte 11 near "DELETE FROM t RETURNING *) SELECT * FROM"...; only a single read-only SELECT is allowed
}
