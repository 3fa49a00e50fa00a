package search

// Changing and asking. A tool whose own name holds a verb that changes something
// (create, delete, update, send…) is a "changing" tool. A query that holds no such verb,
// nor a related word of one, asks to see or find something ("which channels do we
// have", "how many documents are in users"): there, Params.Asking scales the changing
// tools' scores down, so that among tools matching the same nouns the one that reads
// comes first. A query that does say a changing verb is scored as it is.
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
