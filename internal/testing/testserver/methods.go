package main

import (
	"encoding/json"
	"slices"
	"strings"
)

// Protocol versions this server accepts from a client.
var supportedVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

const latestVersion = "2025-11-25"

const capabilitiesJSON = `{"tools":{"listChanged":true},"prompts":{},"resources":{"subscribe":false},"logging":{}}`

type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type initializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      implementation  `json:"serverInfo"`
	Instructions    string          `json:"instructions,omitempty"`
}

// negotiateVersion returns the version to answer: the forced one if set,
// else the requested one if supported, else the latest.
func negotiateVersion(forced, requested string) string {
	switch {
	case forced != "":
		return forced
	case slices.Contains(supportedVersions, requested):
		return requested
	default:
		return latestVersion
	}
}

func (s *server) initialize(params json.RawMessage) (json.RawMessage, *rpcError) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if e := decodeParams(params, &p); e != nil {
		return nil, e
	}
	return encodeResult(initializeResult{
		ProtocolVersion: negotiateVersion(s.cfg.version, p.ProtocolVersion),
		Capabilities:    json.RawMessage(capabilitiesJSON),
		ServerInfo:      implementation{Name: s.cfg.name, Version: "1.0.0"},
		Instructions:    s.cfg.instructions,
	})
}

func (s *server) listTools(params json.RawMessage) (json.RawMessage, *rpcError) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if e := decodeParams(params, &p); e != nil {
		return nil, e
	}
	return s.tools.page(p.Cursor)
}

// The prompt.

const greetPrompt = "greet"

func (s *server) listPrompts() (json.RawMessage, *rpcError) {
	return json.RawMessage(`{"prompts":[{"name":"greet","description":"Greets someone by name.",` +
		`"arguments":[{"name":"who","description":"Whom to greet.","required":true}]}]}`), nil
}

func (s *server) getPrompt(params json.RawMessage) (json.RawMessage, *rpcError) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if e := decodeParams(params, &p); e != nil {
		return nil, e
	}
	if p.Name != greetPrompt {
		return nil, &rpcError{Code: codeInvalidParams, Message: "Unknown prompt: " + p.Name}
	}
	who, ok := p.Arguments["who"]
	if !ok {
		return nil, &rpcError{Code: codeInvalidParams, Message: "Missing required argument: who"}
	}
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type message struct {
		Role    string  `json:"role"`
		Content content `json:"content"`
	}
	return encodeResult(struct {
		Description string    `json:"description"`
		Messages    []message `json:"messages"`
	}{
		Description: "A greeting",
		Messages:    []message{{Role: "user", Content: content{Type: "text", Text: "Hello, " + who}}},
	})
}

// The resources.

const (
	staticURIPrefix = "mis://static/"
	itemURIPrefix   = "mis://item/"
)

func (s *server) staticURI() string {
	return staticURIPrefix + s.cfg.name
}

type resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType"`
}

func (s *server) listResources() (json.RawMessage, *rpcError) {
	return encodeResult(struct {
		Resources []resource `json:"resources"`
	}{Resources: append([]resource{{
		URI:         s.staticURI(),
		Name:        "static",
		Description: "A fixed text resource.",
		MimeType:    "text/plain",
	}}, s.fileResources()...)})
}

func (s *server) listResourceTemplates() (json.RawMessage, *rpcError) {
	return json.RawMessage(`{"resourceTemplates":[{"uriTemplate":"mis://item/{id}","name":"item",` +
		`"description":"Any item by id.","mimeType":"text/plain"}]}`), nil
}

func (s *server) readResource(params json.RawMessage) (json.RawMessage, *rpcError) {
	var p struct {
		URI string `json:"uri"`
	}
	if e := decodeParams(params, &p); e != nil {
		return nil, e
	}
	if s.cfg.files != "" {
		if res, e, ok := readFileURI(p.URI); ok {
			return res, e
		}
	}
	var text string
	switch id, isItem := strings.CutPrefix(p.URI, itemURIPrefix); {
	case p.URI == s.staticURI():
		text = "static resource of " + s.cfg.name
	case isItem && id != "":
		text = "item " + id
	default:
		return nil, &rpcError{Code: codeResourceNotFound, Message: "Resource not found", Data: map[string]string{"uri": p.URI}}
	}
	type contents struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType"`
		Text     string `json:"text"`
	}
	return encodeResult(struct {
		Contents []contents `json:"contents"`
	}{Contents: []contents{{URI: p.URI, MimeType: "text/plain", Text: text}}})
}
