package guard

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ReadOnlySQL is a conservative allowlist parser, not a grep: it tokenizes the query as
// every supported dialect would (DialectAny) and accepts only one statement that reads:
//
//   - exactly one statement; a single trailing ';' (then only whitespace and comments) is
//     allowed, anything after it is not;
//   - starting with SELECT, VALUES, TABLE name, a parenthesised query, or WITH
//     [RECURSIVE] whose every CTE body is itself such a query; EXPLAIN (with options,
//     without ANALYZE) of such a query;
//   - with none of the keywords that write, lock or have side effects anywhere outside
//     strings, quoted identifiers and comments (INSERT, UPDATE, DELETE, INTO, FOR
//     UPDATE/SHARE, SET, COPY, CALL, EXECUTE, ANALYZE, ... see bannedKeywords), and no
//     call of a well-known side-effect function (pg_sleep, nextval, dblink, lo_import,
//     sleep, benchmark, load_file, ... see bannedFunctions);
//   - and nothing it cannot tokenize with certainty: unterminated strings or comments,
//     MySQL executable comments (/*! */) and optimizer hints (/*+ */), a backslash
//     outside a string, control characters, invalid UTF-8, non-ASCII characters outside
//     strings, quoted identifiers and comments.
//
// It cannot know what a function does: a user-defined or extension function called from
// a SELECT may write. The database's own read-only role (or a read-only transaction) is
// the real defence; this check keeps the model from even asking for more.
func ReadOnlySQL(sql string) error { return ReadOnlySQLDialect(sql, DialectAny) }

// Dialect is the database a query is meant for. It decides how the query is tokenized:
// each dialect has one or more lexical readings (PostgreSQL with and without
// standard_conforming_strings, MySQL with its sql_mode variants), and a query must be
// read-only in all of them.
type Dialect string

// The dialects. DialectAny is every other one at once.
const (
	DialectAny       Dialect = ""
	DialectPostgres  Dialect = "postgres"
	DialectMySQL     Dialect = "mysql" // MariaDB too
	DialectSQLite    Dialect = "sqlite"
	DialectSQLServer Dialect = "sqlserver"
)

// ParseDialect checks a configured dialect name.
func ParseDialect(s string) (Dialect, error) {
	switch d := Dialect(strings.ToLower(s)); d {
	case DialectAny, DialectPostgres, DialectMySQL, DialectSQLite, DialectSQLServer:
		return d, nil
	case "postgresql":
		return DialectPostgres, nil
	case "mariadb":
		return DialectMySQL, nil
	}
	return "", fmt.Errorf("unknown SQL dialect %q (want postgres, mysql, sqlite or sqlserver)", s)
}

// dialectProfiles are the lexical readings of each dialect.
var dialectProfiles = map[Dialect][]*lexProfile{
	DialectPostgres:  {profPostgres, profPostgresLegacy},
	DialectMySQL:     {profMySQL, profMySQLANSI, profMySQLNoBS},
	DialectSQLite:    {profSQLite},
	DialectSQLServer: {profSQLServer},
	DialectAny:       {profPostgres, profPostgresLegacy, profMySQL, profMySQLANSI, profMySQLNoBS, profSQLite, profSQLServer},
}

// maxSQL is the longest query the guard reads.
const maxSQL = 256 << 10

// ReadOnlySQLDialect is ReadOnlySQL for one dialect.
func ReadOnlySQLDialect(sql string, d Dialect) error {
	profiles, ok := dialectProfiles[d]
	if !ok {
		return fmt.Errorf("unknown SQL dialect %q", string(d))
	}
	if err := sqlText(sql); err != nil {
		return err.format(sql, "")
	}
	for i, p := range profiles {
		toks, _, err := lexSQL(sql, p)
		if err == nil {
			err = checkStatement(toks, d)
		}
		if err != nil {
			reading := ""
			if i > 0 {
				// The dialect's first reading passed: say which one made the difference.
				reading = "read as " + p.name
			}
			return err.format(sql, reading)
		}
	}
	return nil
}

// sqlText refuses what no reading may contain: too much, invalid UTF-8, NUL and other
// control characters than tab, newline and carriage return.
func sqlText(sql string) *sqlError {
	if len(sql) > maxSQL {
		return &sqlError{pos: -1, reason: fmt.Sprintf("query longer than %d bytes", maxSQL)}
	}
	if strings.TrimSpace(sql) == "" {
		return &sqlError{pos: -1, reason: "empty query"}
	}
	if !utf8.ValidString(sql) {
		return &sqlError{pos: -1, reason: "query is not valid UTF-8"}
	}
	for i := 0; i < len(sql); i++ {
		if c := sql[i]; (c < ' ' && c != '\t' && c != '\n' && c != '\r') || c == 0x7f {
			return errAt(i, "control character 0x%02x", c)
		}
	}
	return nil
}

// format renders a refusal for the caller: the reason, where, a short excerpt, and the
// reading that refused when it is not the dialect's first.
func (e *sqlError) format(sql, reading string) error {
	var b strings.Builder
	if reading != "" {
		b.WriteString(reading + ": ")
	}
	b.WriteString(e.reason)
	if e.pos >= 0 && e.pos < len(sql) {
		fmt.Fprintf(&b, " at byte %d near %s", e.pos, excerpt(sql[e.pos:]))
	}
	b.WriteString("; only a single read-only SELECT is allowed")
	return errors.New(b.String())
}

// bannedKeywords write, lock, change session state or run other code. They are refused
// anywhere as unquoted words, even where a database would take them for a column name.
// REPLACE and TRUNCATE are let through directly before '(': MySQL's string and number
// functions of those names only read.
var bannedKeywords = wordSet(`
	insert update delete merge upsert replace truncate
	drop create alter rename grant revoke deny
	copy call do exec execute into lock unlock set reset
	vacuum analyze analyse reindex cluster optimize repair checkpoint
	listen unlisten notify prepare deallocate load attach detach pragma handler
	flush purge install uninstall shutdown kill`)

// bannedSQLServer are SQL Server statements and locking table hints. SQL Server needs no
// ';' between statements (SELECT 1 WAITFOR DELAY '1:00' is two), so its statement
// keywords count anywhere.
var bannedSQLServer = wordSet(`
	waitfor dbcc backup restore reconfigure declare begin commit rollback bulk
	enable disable setuser revert
	updlock xlock tablock tablockx holdlock`)

// bannedFunctions have side effects, read server files or sleep: refused when called
// (the name, plain or quoted, schema-qualified or not, before '('). bannedFunctionPrefixes
// are families of them.
var bannedFunctions = wordSet(`
	pg_sleep pg_sleep_for pg_sleep_until pg_terminate_backend pg_cancel_backend
	pg_reload_conf pg_rotate_logfile pg_promote pg_notify pg_stat_file
	pg_start_backup pg_stop_backup pg_current_xact_id txid_current
	set_config nextval setval
	sleep benchmark load_file get_lock release_lock release_all_locks
	master_pos_wait source_pos_wait
	load_extension writefile readfile edit fts3_tokenizer
	openrowset opendatasource openquery`)

var bannedFunctionPrefixes = []string{
	"pg_read_", "pg_ls_", "pg_file_", "pg_advisory_", "pg_try_advisory_", "pg_stat_reset",
	"pg_create_", "pg_drop_", "pg_replication_", "pg_logical_", "pg_backup_",
	"pg_switch_", "pg_wal_replay_", "pg_import_", "pg_copy_",
	"lo_", "dblink", "query_to_xml", "cursor_to_xml", "sys_", "xp_", "sp_", "utl_", "dbms_",
}

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// bannedFunction reports whether name (lower-case) is a side-effect function.
func bannedFunction(name string) bool {
	if bannedFunctions[name] {
		return true
	}
	for _, p := range bannedFunctionPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// sqlChecker checks one reading's tokens.
type sqlChecker struct {
	toks []token
}

func (c *sqlChecker) word(i int, w string) bool {
	return i < len(c.toks) && c.toks[i].kind == tkWord && c.toks[i].text == w
}

func (c *sqlChecker) punct(i int, p string) bool {
	return i < len(c.toks) && c.toks[i].kind == tkPunct && c.toks[i].text == p
}

// describe names token i for a message.
func (c *sqlChecker) describe(i int) string {
	if i >= len(c.toks) {
		return "the end of the query"
	}
	switch t := c.toks[i]; t.kind {
	case tkWord:
		return strings.ToUpper(t.text)
	case tkPunct:
		return fmt.Sprintf("%q", t.text)
	case tkString:
		return "a string"
	case tkQuoted:
		return "a quoted identifier"
	case tkNumber:
		return "a number"
	}
	return "a parameter"
}

// checkStatement applies the statement rules to one reading's tokens.
func checkStatement(toks []token, d Dialect) *sqlError {
	if len(toks) == 0 {
		return &sqlError{pos: -1, reason: "no statement (only comments)"}
	}
	for i, t := range toks {
		if t.kind == tkPunct && t.text == ";" {
			if i != len(toks)-1 {
				return errAt(t.pos, "more than one statement")
			}
			toks = toks[:i]
		}
	}
	if len(toks) == 0 {
		return errAt(0, "no statement before ';'")
	}
	c := &sqlChecker{toks: toks}
	if err := c.parens(); err != nil {
		return err
	}
	if err := c.statement(); err != nil {
		return err
	}
	return c.banned(d)
}

// parens checks that parentheses balance.
func (c *sqlChecker) parens() *sqlError {
	var open []int
	for i, t := range c.toks {
		switch {
		case c.punct(i, "("):
			open = append(open, t.pos)
		case c.punct(i, ")"):
			if len(open) == 0 {
				return errAt(t.pos, "unbalanced ')'")
			}
			open = open[:len(open)-1]
		}
	}
	if len(open) > 0 {
		return errAt(open[len(open)-1], "unbalanced '('")
	}
	return nil
}

// closing returns the index of the ')' matching the '(' at i (parens are balanced).
func (c *sqlChecker) closing(i int) int {
	depth := 0
	for j := i; j < len(c.toks); j++ {
		switch {
		case c.punct(j, "("):
			depth++
		case c.punct(j, ")"):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(c.toks)
}

// explainWords may stand between EXPLAIN and the query: PostgreSQL's VERBOSE, MySQL's
// EXTENDED / PARTITIONS / FORMAT=..., SQLite's QUERY PLAN.
var explainWords = wordSet(`verbose extended partitions format json tree traditional text xml yaml query plan`)

// statement checks the head of the statement: an optional EXPLAIN, then a query.
func (c *sqlChecker) statement() *sqlError {
	i := 0
	if c.word(0, "explain") {
		i = 1
		if c.punct(i, "(") && !c.queryStart(i+1) {
			end := c.closing(i)
			for j := i + 1; j < end; j++ {
				t := c.toks[j]
				if t.kind != tkWord && t.kind != tkNumber && t.kind != tkString && !c.punct(j, ",") && !c.punct(j, "=") {
					return errAt(t.pos, "unexpected %s in EXPLAIN options", c.describe(j))
				}
				if t.kind == tkWord && (t.text == "analyze" || t.text == "analyse") {
					return errAt(t.pos, "EXPLAIN ANALYZE runs the query (use plain EXPLAIN)")
				}
			}
			i = end + 1
		}
		for ; i < len(c.toks); i++ {
			t := c.toks[i]
			if t.kind == tkWord && (t.text == "analyze" || t.text == "analyse") {
				return errAt(t.pos, "EXPLAIN ANALYZE runs the query (use plain EXPLAIN)")
			}
			if !(t.kind == tkWord && explainWords[t.text]) && !c.punct(i, "=") {
				break
			}
		}
	}
	return c.query(i, 0)
}

// queryStart reports whether a query can start at i.
func (c *sqlChecker) queryStart(i int) bool {
	return c.word(i, "select") || c.word(i, "values") || c.word(i, "table") || c.word(i, "with") || c.punct(i, "(")
}

// maxQueryDepth bounds the nesting of WITH and parentheses that query follows.
const maxQueryDepth = 64

// query checks that a query starts at i: WITH [RECURSIVE] cte AS (query) [, ...] then a
// query body; SELECT; VALUES; TABLE name; or '(' query ')'.
func (c *sqlChecker) query(i, depth int) *sqlError {
	if depth > maxQueryDepth {
		return errAt(c.toks[min(i, len(c.toks)-1)].pos, "query nested too deeply")
	}
	pos := func(i int) int {
		if i < len(c.toks) {
			return c.toks[i].pos
		}
		return -1
	}
	if c.word(i, "with") {
		i++
		if c.word(i, "recursive") {
			i++
		}
		for {
			if i >= len(c.toks) || (c.toks[i].kind != tkWord && c.toks[i].kind != tkQuoted) {
				return errAt(pos(i), "expected a CTE name after WITH, found %s", c.describe(i))
			}
			name := c.toks[i].text
			i++
			if c.punct(i, "(") {
				i = c.closing(i) + 1
			}
			if !c.word(i, "as") {
				return errAt(pos(i), "expected AS in CTE %q, found %s", name, c.describe(i))
			}
			i++
			if c.word(i, "not") {
				i++
			}
			if c.word(i, "materialized") {
				i++
			}
			if !c.punct(i, "(") {
				return errAt(pos(i), "expected ( after AS in CTE %q, found %s", name, c.describe(i))
			}
			end := c.closing(i)
			if !c.queryStart(i + 1) {
				return errAt(pos(i+1), "CTE %q must be a SELECT or VALUES query, not %s", name, c.describe(i+1))
			}
			if err := c.query(i+1, depth+1); err != nil {
				return err
			}
			i = end + 1
			if c.punct(i, ",") {
				i++
				continue
			}
			break
		}
		if !c.queryStart(i) || c.word(i, "with") {
			return errAt(pos(i), "expected the query after the WITH clauses, found %s", c.describe(i))
		}
	}
	switch {
	case c.word(i, "select"), c.word(i, "values"):
		return nil
	case c.word(i, "table"):
		if i+1 >= len(c.toks) || (c.toks[i+1].kind != tkWord && c.toks[i+1].kind != tkQuoted) {
			return errAt(pos(i), "TABLE must be followed by a table name")
		}
		return nil
	case c.punct(i, "("):
		if !c.queryStart(i + 1) {
			return errAt(pos(i+1), "a parenthesised statement must be a SELECT, not %s", c.describe(i+1))
		}
		return c.query(i+1, depth+1)
	}
	return errAt(pos(i), "query must start with SELECT, WITH, VALUES, TABLE or EXPLAIN, not %s", c.describe(i))
}

// banned refuses the words and calls that write, lock or have side effects.
func (c *sqlChecker) banned(d Dialect) *sqlError {
	for i, t := range c.toks {
		switch t.kind {
		case tkWord:
			w := t.text
			switch {
			case (w == "replace" || w == "truncate") && c.punct(i+1, "("):
				continue
			case w == "into":
				return errAt(t.pos, "SELECT ... INTO writes (a table, file or variable)")
			case w == "analyze" || w == "analyse":
				return errAt(t.pos, "ANALYZE is not allowed (EXPLAIN ANALYZE runs the query)")
			case w == "for" && (c.word(i+1, "update") || c.word(i+1, "share") || c.word(i+1, "key") || c.word(i+1, "no")):
				return errAt(t.pos, "FOR UPDATE/SHARE locks rows")
			case bannedKeywords[w], (d == DialectAny || d == DialectSQLServer) && bannedSQLServer[w]:
				return errAt(t.pos, "%s is not allowed: it writes, locks or has side effects", strings.ToUpper(w))
			}
			if c.punct(i+1, "(") && bannedFunction(w) {
				return errAt(t.pos, "%s() is not allowed: it has side effects or reads server files", w)
			}
		case tkQuoted:
			if c.punct(i+1, "(") && bannedFunction(t.text) {
				return errAt(t.pos, "%s() is not allowed: it has side effects or reads server files", t.text)
			}
		case tkPunct:
			if t.text == ":" && c.punct(i+1, "=") && c.toks[i+1].pos == t.pos+1 {
				return errAt(t.pos, "assignment := is not allowed")
			}
		}
	}
	return nil
}
