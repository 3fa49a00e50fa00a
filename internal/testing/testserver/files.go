package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// With -files DIR the server is also a naive file server, as many real ones are: it
// lists a file:// resource for every regular file directly in DIR, reads any file: URI
// by percent-decoding its path (so %2F is a separator to it), and has a read_file tool
// whose path argument it decodes with encoding/json (the last of two members wins, and
// names match without case). It checks nothing itself: what the proxy lets through, it
// reads. Tests use it to prove that the proxy's policy is the only thing in the way.

const (
	toolReadFile   = "read_file"
	schemaReadFile = `{"type":"object","properties":{"path":{"type":"string","description":"Absolute path of the file to read."}},"required":["path"]}`
)

// fileResources lists DIR's regular files as file:// resources.
func (s *server) fileResources() []resource {
	entries, err := os.ReadDir(s.cfg.files)
	if err != nil {
		return nil
	}
	var out []resource
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(s.cfg.files, e.Name())
		out = append(out, resource{URI: (&url.URL{Scheme: "file", Path: p}).String(), Name: e.Name(), MimeType: "text/plain"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URI < out[j].URI })
	return out
}

// readFileURI reads a file: URI the way a naive server does.
func readFileURI(uri string) (json.RawMessage, *rpcError, bool) {
	if !strings.HasPrefix(strings.ToLower(uri), "file:") {
		return nil, nil, false
	}
	notFound := &rpcError{Code: codeResourceNotFound, Message: "Resource not found", Data: map[string]string{"uri": uri}}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, notFound, true
	}
	b, err := os.ReadFile(u.Path)
	if err != nil {
		return nil, notFound, true
	}
	type contents struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType"`
		Text     string `json:"text"`
	}
	res, rerr := encodeResult(struct {
		Contents []contents `json:"contents"`
	}{Contents: []contents{{URI: uri, MimeType: "text/plain", Text: string(b)}}})
	return res, rerr, true
}

// readFile is the read_file tool: a path or a file: URL.
func readFile(_ context.Context, _ *server, call *toolCall) (json.RawMessage, *rpcError) {
	var args struct {
		Path string `json:"path"`
	}
	if len(call.arguments) > 0 {
		if err := json.Unmarshal(call.arguments, &args); err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: " + err.Error()}
		}
	}
	p := args.Path
	if u, err := url.Parse(p); err == nil && strings.EqualFold(u.Scheme, "file") {
		p = u.Path // a file: URL, percent-decoded
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return textResult("error: " + err.Error())
	}
	return textResult(string(b))
}
