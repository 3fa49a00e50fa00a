// Package search ranks a catalogue's tools against a query written the way a person
// asks a model for something. An endpoint in search mode (and a tools/list with a
// query) answers from an Index built when the merged catalogue changes, never per
// request: a query touches no upstream and a call pays nothing.
//
// The package knows tools as documents only: it must not know routers, upstreams,
// sessions or transports. What a principal may see is the caller's to say (Search's
// visible function); a hidden document is never returned, counted or hinted at.
//
// BM25F is the default ranker: lexical, deterministic, standard library only
// (docs/search.md says how it ranks and how well). Another ranker implements Ranker and
// Index with the same visibility contract.
package search

import "encoding/json"

// Doc is one tool as the index reads it.
type Doc struct {
	Name string // the exposed name: the key a hit returns
	// Namespace is the part of Name that names the upstream (Name without the tool's
	// own name and the separator), empty for an unprefixed name. Its words count for
	// less than the tool's own name. When empty and Name holds "__", the part before
	// the first "__" is taken as the namespace.
	Namespace   string
	Title       string          // the tool's title (or annotations.title), may be empty
	Description string          // may be empty
	InputSchema json.RawMessage // the tool's inputSchema as listed; parameter names and descriptions are read from it
	// Raw is the tool's definition as listed, handed back with a hit so that the caller
	// can show the full definition without a second lookup. The index does not read it.
	Raw json.RawMessage
}

// Hit is one match, best first in a result.
type Hit struct {
	Doc   *Doc
	Score float64 // comparable within one result only
}

// Index answers queries over one set of documents. It is immutable once built and safe
// for concurrent use.
type Index interface {
	// Search returns at most limit hits for query, best first, ties broken by name so
	// that a result is deterministic. visible, when not nil, is asked about each
	// candidate; a document it refuses is skipped as if it were not in the index. A
	// query with no word any visible document holds (an empty one, too) and a limit of
	// 0 or less find nothing.
	Search(query string, limit int, visible func(name string) bool) []Hit
	// Len is the number of documents indexed.
	Len() int
}

// Ranker builds indexes. prev, when not nil, is an index this ranker built before (for
// the previous catalogue): what it learned of documents that did not change may be
// reused, so that a catalogue change costs in proportion to what changed.
type Ranker interface {
	Build(docs []Doc, prev Index) Index
}
