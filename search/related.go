package search

// The related-words table: a query word also looks for these words, at a lower weight
// (Params.Related). It is small and generic on purpose: the usual verbs of tool names
// (create, get, list, update, delete, search, run…) with the words people use for them,
// and common abbreviations of computing nouns. Two noun groups (property/field/attribute,
// price/cost) were added after reading development misses of the benchmark, and kept
// because they left its held-out half as it was (docs/search.md); a word that means
// several things (open, add) is left out rather than guessed.
//
// Each line is one group: every word of a group looks for every other. A member of
// several words ("pull request") is matched as its words. Verbs look for each other at
// Params.Related; the nouns, mostly a word and its abbreviations (the same word
// written shorter), at Params.Abbrev.
var relatedGroups = [][]string{
	// Verbs of tool names.
	{"create", "make", "new"},
	{"delete", "remove", "erase", "destroy", "rm"},
	{"get", "fetch", "retrieve", "read", "view", "display"},
	{"list", "enumerate", "ls"},
	{"update", "edit", "change", "modify", "alter"},
	{"search", "find", "lookup", "query"},
	{"run", "execute", "exec", "invoke"},
	{"write", "save", "store"},
	{"move", "rename", "mv"},
	{"copy", "duplicate", "cp"},
	{"send", "post"},
}

var abbrevGroups = [][]string{
	// Nouns and their abbreviations.
	{"directory", "folder", "dir"},
	{"repository", "repo"},
	{"pull request", "pr"},
	{"merge request", "mr"},
	{"database", "db"},
	{"kubernetes", "k8s"},
	{"image", "picture", "photo", "img", "pic"},
	{"message", "msg"},
	{"documentation", "docs"},
	{"document", "doc"},
	{"organization", "org"},
	{"environment", "env"},
	{"configuration", "config", "cfg"},
	{"javascript", "js"},
	{"typescript", "ts"},
	{"information", "info"},
	{"statistics", "stats"},
	{"application", "app"},
	{"issue", "bug", "ticket"},
	{"error", "exception", "crash"},
	{"email", "mail"},
	{"virtual machine", "vm"},
	{"identifier", "id"},
	{"property", "field", "attribute"},
	{"price", "cost"},
	{"url", "link"},
	{"website", "site"},
	{"password", "pwd"},
	{"command", "cmd"},
	{"postgresql", "postgres", "psql"},
}

// related maps a term to the terms it also looks for (analyzed as documents are):
// relatedVerbs at Params.Related, relatedNouns at Params.Abbrev.
var relatedVerbs, relatedNouns = groupTable(relatedGroups), groupTable(abbrevGroups)

func groupTable(groups [][]string) map[string][]string {
	related := map[string][]string{}
	for _, g := range groups {
		members := make([][]string, len(g))
		for i, m := range g {
			members[i] = Terms(m)
		}
		for i, m := range members {
			if len(m) != 1 {
				continue // a member of several words only gives (a query says "pr", not "pull request" for "pr")
			}
			for j, o := range members {
				if i == j {
					continue
				}
				for _, t := range o {
					if t != m[0] && !containsString(related[m[0]], t) {
						related[m[0]] = append(related[m[0]], t)
					}
				}
			}
		}
	}
	return related
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
