package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Snippet returns the JSON that replaces a client's whole server list by one entry,
// named name, that runs command with args (the proxy and its configuration), in the
// client's format: {"mcpServers": {...}}, or for VS Code {"servers": {...}} with
// "type": "stdio" and the "inputs" it uses.
//
// The client starts the proxy, so the proxy sees the client's environment: a variable
// that stands for a VS Code input is passed as ${input:ID}; one that stands for a secret
// the source file had in clear is, for VS Code, a new password input, and otherwise a
// placeholder saying which value to copy there from the old entries. Variables the
// source itself read from the environment need nothing: the proxy inherits them.
func Snippet(f Format, name, command string, args []string, vars []Var) ([]byte, error) {
	type server struct {
		Type    string            `json:"type,omitempty"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env,omitempty"`
	}
	type vsInput struct {
		Type        string  `json:"type"`
		ID          string  `json:"id"`
		Description string  `json:"description,omitempty"`
		Password    bool    `json:"password,omitempty"`
		Default     *string `json:"default,omitempty"`
	}
	s := server{Command: command, Args: args, Env: map[string]string{}}
	var inputs []vsInput
	for _, v := range vars {
		switch {
		case v.Input != nil && f == FormatVSCode:
			s.Env[v.Name] = "${input:" + v.Input.ID + "}"
			typ := v.Input.Type
			if typ == "" {
				typ = "promptString"
			}
			inputs = append(inputs, vsInput{Type: typ, ID: v.Input.ID, Description: v.Input.Description, Password: v.Input.Password, Default: v.Input.Default})
		case v.Secret && f == FormatVSCode:
			id := strings.ToLower(strings.ReplaceAll(v.Name, "_", "-"))
			s.Env[v.Name] = "${input:" + id + "}"
			inputs = append(inputs, vsInput{Type: "promptString", ID: id, Description: v.Name + " for mcp-proxy: " + strings.Join(v.Uses, ", "), Password: true})
		case v.Secret || (v.Input != nil && !v.Optional):
			s.Env[v.Name] = "<the value of " + v.Name + " from your old entries>"
		}
	}
	if len(s.Env) == 0 {
		s.Env = nil
	}
	var doc any
	if f == FormatVSCode {
		s.Type = "stdio"
		doc = struct {
			Servers map[string]server `json:"servers"`
			Inputs  []vsInput         `json:"inputs,omitempty"`
		}{map[string]server{name: s}, inputs}
	} else {
		doc = struct {
			MCPServers map[string]server `json:"mcpServers"`
		}{map[string]server{name: s}}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding the snippet: %w", err)
	}
	return b.Bytes(), nil
}
