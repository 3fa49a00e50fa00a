package redact_test

import (
	"fmt"

	"github.com/mcp-proxy/mcp-proxy/plugins/redact"
)

func ExampleRedactor_JSON() {
	r, err := redact.New(redact.Config{Patterns: []string{"email", "aws_access_key"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	result := []byte(`{"content":[{"type":"text","text":"owner: jane@example.com\nkey: AKIAIOSFODNN7EXAMPLE"}],"isError":false}`)
	out, counts, err := r.JSON(result)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	fmt.Println(counts["email"], counts["aws_access_key"])
	// Output:
	// {"content":[{"type":"text","text":"owner: [REDACTED:email]\nkey: [REDACTED:aws_access_key]"}],"isError":false}
	// 1 1
}

func ExampleRedactor_String() {
	r, err := redact.New(redact.Config{
		Patterns:    []string{"credit_card"},
		Custom:      map[string]string{"ticket": `TICKET-[0-9]+`},
		Replacement: "<{name}>",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, counts := r.String("TICKET-4711: refund 4111 1111 1111 1111, not 4111 1111 1111 1112")
	fmt.Println(out)
	fmt.Println(counts)
	// Output:
	// <ticket>: refund <credit_card>, not 4111 1111 1111 1112
	// map[credit_card:1 ticket:1]
}

func ExampleNew_unknownDetector() {
	_, err := redact.New(redact.Config{Patterns: []string{"emial"}})
	fmt.Println(err)
	// Output:
	// configuring redact: patterns: unknown detector "emial"; did you mean "email"? (known: anthropic_key, aws_access_key, aws_secret_key, bearer_token, credit_card, email, github_token, gitlab_token, google_api_key, jwt, npm_token, openai_key, private_key, slack_token, stripe_key)
}
