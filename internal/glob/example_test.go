package glob_test

import (
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/internal/glob"
)

func ExampleCompile() {
	g, _ := glob.Compile("create_*")
	fmt.Println(g.Match("create_issue"), g.Match("get_issue"))
	q := glob.MustCompile(`a?c\*`)
	fmt.Println(q.Match("abc*"), q.Match("abcd"))
	_, err := glob.Compile(`trailing\`)
	fmt.Println(err)
	// Output:
	// true false
	// true false
	// pattern "trailing\\" ends with a lone backslash
}
