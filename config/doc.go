// Package config reads the mcp-proxy HCL configuration file.
//
// Loading happens in stages: the file is parsed with hclparse, decoded against
// strict schemas with gohcl (so unknown arguments and blocks are errors, with
// "Did you mean" suggestions), defaults are applied, and every value is
// validated. All problems found are returned together as hcl.Diagnostics, each
// located at the offending attribute or block label, so a user can fix a file
// in one pass; Options.Check adds the checks of other packages (the policy's) to
// that pass. FormatDiagnostics renders them as "file:line:col: ..." lines.
//
// Expressions may call a small set of functions: env("NAME") and
// env("NAME", "default") read the environment, and upper, lower, trimspace,
// join and format come from the cty standard library. No variables exist.
//
// This package only describes what should run. It must not start processes,
// open network connections, write to stdout or keep package-level mutable
// state; the only side effects are reading the configuration file in Load and
// reading environment variables (through an injectable lookup) for env().
package config
