// Package redact finds secrets and personal data in text and in JSON documents and
// replaces them with a mask such as "[REDACTED:email]". It is the detection and masking
// logic of the proxy's shipped "redact" plugin, which runs it over tool results (and,
// if configured, tool arguments) before they reach the client and so the model.
//
// A Redactor is built once from a Config by New and is then read-only: it is safe for
// concurrent use. Built-in detectors are hand-written scanners (a literal anchor or a
// cheap byte test first, the precise check only where that says "maybe"); custom
// detectors are Go (RE2) regular expressions. When matches overlap, the overlapping
// matches are masked as one span, named for the longest of them (the earliest, then
// the first in priority order, on a tie), and counted once.
//
// Masking is idempotent: a mask of this Redactor's template already in the text is never
// masked again (a match inside it or across its edge is dropped; only a match that
// wholly contains it, such as a private key block, is masked, whole), and the Redactor
// repeats its search on its own output until nothing more is found, so String(String(s))
// and JSON(JSON(doc)) change nothing.
//
// What it must not do: change anything but the string values it masks. JSON member
// names, numbers' spelling, whitespace, member order and the escapes of unchanged strings
// are kept byte for byte. It must not import other packages of the project, log, or keep
// any state between calls; it does not know about MCP, JSON-RPC or plugins (the caller
// chooses which documents to give it). Detection is best effort: it reduces what leaks,
// it is no guarantee that nothing does.
package redact
