package search

import "strings"

// Changing and asking. A tool whose own name holds a verb that changes something
// (create, delete, update, send…) is a "changing" tool. A query that says no such verb
// and asks — a question ("which channels do we have", "how many documents are in
// users?") or a request to see or find ("show me the README", "list my pods") — wants
// to read: there, Params.Asking scales the changing tools' scores down, so that among
// tools matching the same nouns the one that reads comes first. Any other query is
// scored as it is: one that says a changing verb, and a request whose verb is neither
// ("file a bug", "open a PR", "fork the repo"), which may well change something.
var changingVerbs = map[string]struct{}{}

func init() {
	for _, w := range []string{
		"create", "delete", "remove", "update", "insert", "drop", "rename", "write", "edit",
		"post", "send", "add", "set", "patch", "move", "merge", "push", "upload", "fork",
		"install", "uninstall", "upgrade", "scale", "apply", "cleanup", "append", "toggle",
		"close", "stop", "disconnect", "reply", "submit", "cancel", "revoke", "assign",
		"make", "new", "erase", "destroy", "change", "modify", "alter", "save", "store",
		"put", "replace", "reset", "restart", "deploy", "kill", "clear", "purge",
	} {
		for _, t := range Terms(w) {
			changingVerbs[t] = struct{}{}
		}
	}
}

// readingRequests are the verbs of a request to see or find ("show me", "list", "look
// up", "tell me"): a query that says one, and no changing verb, asks.
var readingRequests = map[string]struct{}{}

// questionStarts begin a question.
var questionStarts = []string{"what", "what's", "whats", "which", "who", "who's", "whom", "whose", "where",
	"where's", "when", "why", "how", "is", "are", "was", "were", "do", "does", "did", "has", "have", "any"}

func init() {
	for _, w := range []string{
		"show", "list", "get", "find", "search", "look", "read", "fetch", "view", "display",
		"see", "check", "tell", "give", "count", "describe", "explain", "print", "dump", "lookup",
	} {
		for _, t := range Terms(w) {
			readingRequests[t] = struct{}{}
		}
	}
}

func isReadingRequest(term []byte) bool {
	_, ok := readingRequests[string(term)]
	return ok
}

// isQuestion says whether a query reads as a question: a question mark, or a first
// word that begins questions.
func isQuestion(query string) bool {
	if strings.IndexByte(query, '?') >= 0 {
		return true
	}
	tok, _, ok := nextToken(query)
	if !ok {
		return false
	}
	for _, q := range questionStarts {
		if strings.EqualFold(tok.bare, q) {
			return true
		}
	}
	return false
}

func isChanging(term []byte) bool {
	_, ok := changingVerbs[string(term)]
	return ok
}

// changingName says whether a tool's own name holds a changing verb.
func changingName(own string) bool {
	found := false
	words(own, make([]byte, 0, maxWordBytes), func(t []byte) bool {
		found = isChanging(t)
		return !found
	})
	return found
}
