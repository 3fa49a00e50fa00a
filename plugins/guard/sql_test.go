package guard

import (
	"strings"
	"testing"
)

func TestReadOnlySQL(t *testing.T) {
	const any, pg, my, lite, mssql = DialectAny, DialectPostgres, DialectMySQL, DialectSQLite, DialectSQLServer
	tests := []struct {
		name    string
		sql     string
		dialect Dialect
		want    string // "" accepted; else a substring of the refusal
	}{
		// Accepted.
		{"plain select", "SELECT 1", any, ""},
		{"lower case", "select id, name from users where id = 42", any, ""},
		{"trailing semicolon", "SELECT 1;", any, ""},
		{"semicolon then comments", "SELECT 1; -- done\n/* really */  ", any, ""},
		{"join", "SELECT u.id, o.total FROM users u JOIN orders o ON o.user_id = u.id WHERE o.total > 10.5", any, ""},
		{"left join group order limit", "SELECT a, count(*) FROM t LEFT JOIN s USING (id) GROUP BY a HAVING count(*) > 1 ORDER BY 2 DESC LIMIT 10 OFFSET 5", any, ""},
		{"subquery", "SELECT * FROM (SELECT id FROM t WHERE x IN (SELECT y FROM s)) AS q", any, ""},
		{"exists", "SELECT 1 WHERE EXISTS (SELECT 1 FROM t)", any, ""},
		{"union", "SELECT 1 UNION ALL SELECT 2 EXCEPT SELECT 3", any, ""},
		{"cte", "WITH x AS (SELECT 1 AS a), y (b) AS (SELECT a FROM x) SELECT * FROM y", any, ""},
		{"recursive cte", "WITH RECURSIVE r(n) AS (VALUES (1) UNION ALL SELECT n+1 FROM r WHERE n < 5) SELECT n FROM r", any, ""},
		{"cte materialized", "WITH x AS NOT MATERIALIZED (SELECT 1) SELECT * FROM x", pg, ""},
		{"nested with in cte", "WITH x AS (WITH y AS (SELECT 1) SELECT * FROM y) SELECT * FROM x", any, ""},
		{"values", "VALUES (1, 'a'), (2, 'b')", any, ""},
		{"parenthesised", "(SELECT 1) UNION (SELECT 2)", any, ""},
		{"table", "TABLE users", pg, ""},
		{"explain", "EXPLAIN SELECT * FROM t", any, ""},
		{"explain options", "EXPLAIN (FORMAT JSON, COSTS false) SELECT * FROM t", pg, ""},
		{"explain format mysql", "EXPLAIN FORMAT=JSON SELECT * FROM t", my, ""},
		{"explain query plan", "EXPLAIN QUERY PLAN SELECT * FROM t", lite, ""},
		{"string with stacked statement", "SELECT '; DROP TABLE t; --' AS s", any, ""},
		{"string with doubled quote", "SELECT 'it''s; DELETE FROM t'", any, ""},
		{"comment with drop", "SELECT 1 -- DROP TABLE t\n", any, ""},
		{"block comment with delete", "SELECT /* DELETE FROM t; */ 1", any, ""},
		{"nested comment", "SELECT /* a /* b */ c */ 1", pg, ""},
		{"trailing line comment", "SELECT 1 -- the answer", any, ""},
		{"dollar-quoted body with delete", "SELECT $body$ DELETE FROM t; $body$", pg, ""},
		{"empty dollar tag", "SELECT $$; UPDATE t SET x = 1$$", pg, ""},
		{"e-string with escaped quote", `SELECT E'a\'; DROP TABLE t; --'`, pg, ""},
		{"quoted identifier delete", `SELECT "delete", "into" FROM "update"`, any, ""},
		{"backtick identifier", "SELECT `delete` FROM `insert`", my, ""},
		{"bracket identifier", "SELECT [delete] FROM [order details]", mssql, ""},
		{"mysql hash comment", "SELECT 1 # INSERT\n", my, ""},
		{"replace function", "SELECT replace(name, 'a', 'b') FROM t", any, ""},
		{"truncate function", "SELECT TRUNCATE(1.234, 1)", my, ""},
		{"casts and operators", "SELECT a::text, b->>'k', c || 'x', d <> 1, e >= 2 FROM t", pg, ""},
		{"parameters", "SELECT * FROM t WHERE a = $1 AND b = $2", pg, ""},
		{"question parameters", "SELECT * FROM t WHERE a = ? AND b = ?", any, ""},
		{"window", "SELECT rank() OVER (PARTITION BY a ORDER BY b) FROM t", any, ""},
		{"for xml is not a lock", "SELECT a FROM t FOR XML PATH", mssql, ""},
		{"fetch first", "SELECT a FROM t ORDER BY a OFFSET 10 ROWS FETCH NEXT 5 ROWS ONLY", any, ""},
		{"unicode in string", "SELECT 'héllo → 世界'", any, ""},
		{"crlf line comment", "SELECT 1 -- x\r\n", any, ""},
		{"numbers", "SELECT 1.5e10, .5, 0x1F, 1_000", pg, ""},

		// Refused: statements.
		{"empty", "", any, "empty query"},
		{"blank", " \n\t", any, "empty query"},
		{"only a comment", "-- nothing\n", any, "no statement"},
		{"only a block comment", "/* nothing */", any, "no statement"},
		{"only a semicolon", ";", any, "no statement"},
		{"stacked", "SELECT 1; DROP TABLE x", any, "more than one statement"},
		{"double semicolon", "SELECT 1;;", any, "more than one statement"},
		{"comment then stacked", "SELECT 1 /* */; DROP TABLE t", any, "more than one statement"},
		{"line comment then stacked", "SELECT 1 -- \n; DROP TABLE t", any, "more than one statement"},
		{"delete", "DELETE FROM t", any, "must start with SELECT"},
		{"insert", "INSERT INTO t VALUES (1)", any, "must start with SELECT"},
		{"update", "update t set x = 1", any, "must start with SELECT"},
		{"drop", "DROP TABLE t", any, "must start with SELECT"},
		{"show", "SHOW TABLES", any, "must start with SELECT"},
		{"table without name", "TABLE (1)", pg, "TABLE must be followed"},

		// Refused: hidden statements and ambiguity.
		{"unterminated string", "SELECT 'abc", any, "unterminated string"},
		{"unterminated quoted identifier", `SELECT "abc`, pg, "unterminated quoted identifier"},
		{"unterminated comment", "SELECT 1 /* DROP TABLE t", any, "unterminated /* comment"},
		{"unterminated nested comment", "SELECT 1 /* /* */ ; DROP TABLE t", pg, "unterminated /* comment"},
		{"non-nesting reading of nested comment", "SELECT 1 /* /* */ ; DROP TABLE t; /* */ */", any, "more than one statement"},
		{"unterminated dollar quote", "SELECT $x$ abc", pg, "unterminated dollar-quoted"},
		{"mysql executable comment", "SELECT 1 /*! ; DROP TABLE t */", any, "executable comment"},
		{"mariadb executable comment", "SELECT 1 /*M!100000 , sleep(5) */", any, "executable comment"},
		{"optimizer hint", "SELECT /*+ SET_VAR(x=1) */ 1", any, "optimizer hint"},
		{"backslash quote ambiguity", `SELECT 'a\'; DROP TABLE t; -- '`, any, "more than one statement"},
		{"backslash quote postgres legacy", `SELECT 'a\', ' ; DROP TABLE t; --'`, pg, "standard_conforming_strings off"},
		{"double quote as mysql string", `SELECT "a\"; DROP TABLE t; -- "`, my, "ANSI_QUOTES"},
		{"dollar body under mysql", "SELECT 1 AS $$; DROP TABLE t; $$", my, "more than one statement"},
		{"dollar body under any dialect", "SELECT $body$ DELETE FROM t $body$", any, "read as MySQL"},
		{"hash comment under postgres reading", "SELECT 1 # 1; DROP TABLE t", any, "more than one statement"},
		{"dash dash without space under mysql", "SELECT 1--1; DROP TABLE t", any, "read as MySQL"},
		{"sqlite tcl variable", "SELECT $a('), 1; DROP TABLE t; --')", lite, "more than one statement"},
		{"sql server bracket", "SELECT [a'], 1; DROP TABLE t --']", mssql, "more than one statement"},
		{"lone carriage return in comment", "SELECT 1 -- x\r; DROP TABLE t", any, "carriage return"},
		{"backslash outside string", `SELECT 1 \! rm -rf /`, any, "backslash outside a string"},
		{"nul", "SELECT 1\x00; DROP TABLE t", any, "control character"},
		{"invalid utf-8", "SELECT '\xff'", any, "UTF-8"},
		{"non-ascii outside quotes", "SELECT café FROM t", any, "non-ASCII"},
		{"unbalanced", "SELECT (1", any, "unbalanced"},

		// Refused: writes, locks and side effects inside a SELECT.
		{"data-modifying cte", "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", any, `CTE "d" must be a SELECT`},
		{"insert in cte", "WITH d AS (INSERT INTO t VALUES (1) RETURNING id) SELECT 1", pg, "must be a SELECT"},
		{"cte then delete", "WITH x AS (SELECT 1) DELETE FROM t", any, "expected the query after the WITH"},
		{"delete in subquery", "SELECT * FROM (DELETE FROM t RETURNING *) x", pg, "DELETE is not allowed"},
		{"select into", "SELECT * INTO newtable FROM t", any, "INTO writes"},
		{"select into outfile", "SELECT * FROM t INTO OUTFILE '/tmp/x'", my, "INTO writes"},
		{"for update", "SELECT * FROM t FOR UPDATE", any, "locks rows"},
		{"for share", "SELECT * FROM t FOR SHARE", any, "locks rows"},
		{"for no key update", "SELECT * FROM t FOR NO KEY UPDATE", pg, "locks rows"},
		{"for key share", "SELECT * FROM t FOR KEY SHARE", pg, "locks rows"},
		{"lock in share mode", "SELECT * FROM t LOCK IN SHARE MODE", my, "LOCK is not allowed"},
		{"pg_sleep", "SELECT pg_sleep(10)", any, "pg_sleep() is not allowed"},
		{"qualified pg_sleep", "SELECT pg_catalog.pg_sleep (10)", pg, "pg_sleep() is not allowed"},
		{"quoted pg_sleep", `SELECT "pg_sleep"(10)`, pg, "pg_sleep() is not allowed"},
		{"pg_sleep after comment", "SELECT pg_sleep/**/(10)", pg, "pg_sleep() is not allowed"},
		{"pg_read_file", "SELECT pg_read_file('/etc/passwd')", any, "pg_read_file() is not allowed"},
		{"nextval", "SELECT nextval('s')", any, "nextval() is not allowed"},
		{"set_config", "SELECT set_config('role', 'admin', false)", any, "set_config() is not allowed"},
		{"dblink", "SELECT * FROM dblink_exec('host=x', 'DROP TABLE t')", pg, "dblink_exec() is not allowed"},
		{"lo_import", "SELECT lo_import('/etc/passwd')", pg, "lo_import() is not allowed"},
		{"mysql sleep", "SELECT SLEEP(5)", my, "sleep() is not allowed"},
		{"benchmark", "SELECT BENCHMARK(1000000, MD5('a'))", my, "benchmark() is not allowed"},
		{"load_file", "SELECT LOAD_FILE('/etc/passwd')", my, "load_file() is not allowed"},
		{"explain analyze", "EXPLAIN ANALYZE SELECT * FROM t", any, "EXPLAIN ANALYZE runs the query"},
		{"explain analyze option", "EXPLAIN (ANALYZE true) SELECT * FROM t", pg, "EXPLAIN ANALYZE runs the query"},
		{"explain delete", "EXPLAIN DELETE FROM t", any, "must start with SELECT"},
		{"explain plan for", "EXPLAIN PLAN FOR SELECT 1", any, "must start with SELECT"},
		{"set in select", "SELECT 1 FROM t WHERE a = (SELECT 1) SET x = 1", any, "SET is not allowed"},
		{"mysql variable assignment", "SELECT @a := 1", my, "assignment"},
		{"sql server waitfor without semicolon", "SELECT 1 WAITFOR DELAY '00:01'", mssql, "WAITFOR is not allowed"},
		{"sql server drop without semicolon", "SELECT 1 DROP TABLE t", mssql, "DROP is not allowed"},
		{"keyword glued to number", "SELECT 1delete", any, "DELETE is not allowed"},
		{"replace statement", "SELECT 1 FROM t UNION REPLACE INTO t VALUES (1)", any, "REPLACE is not allowed"},
		{"copy", "SELECT 1 FROM t UNION COPY t TO '/tmp/x'", any, "COPY is not allowed"},
		{"unicode-escaped identifier", `SELECT U&"pg\005fsleep"(10)`, pg, "Unicode escapes"},
		{"unicode-escaped string is data", `SELECT U&'d\0061t\+000061'`, pg, ""},
		{"lock hint", "SELECT * FROM t WITH (UPDLOCK, HOLDLOCK)", mssql, "UPDLOCK is not allowed"},
		{"fts3_tokenizer", "SELECT fts3_tokenizer('x', X'00')", lite, "fts3_tokenizer() is not allowed"},
		{"xp_cmdshell", "SELECT xp_cmdshell('dir')", mssql, "xp_cmdshell() is not allowed"},
		{"long query", "SELECT " + strings.Repeat("1,", maxSQL/2) + "1", any, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ReadOnlySQLDialect(tt.sql, tt.dialect)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused, want accepted: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted, want refusal containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("refusal %q does not contain %q", err, tt.want)
			}
			if err != nil && len(err.Error()) > 300 {
				t.Errorf("refusal is %d bytes long: %v", len(err.Error()), err)
			}
			if tt.dialect == DialectAny {
				if err2 := ReadOnlySQL(tt.sql); (err2 == nil) != (err == nil) {
					t.Errorf("ReadOnlySQL disagrees with DialectAny: %v vs %v", err2, err)
				}
			}
		})
	}
}

// TestReadOnlySQLDialects: what one dialect accepts, DialectAny accepts only if every
// dialect does.
func TestReadOnlySQLDialects(t *testing.T) {
	queries := []string{
		"SELECT 1",
		"SELECT $$x$$",
		"SELECT `a` FROM t",
		"SELECT [a] FROM t",
		`SELECT "a\"" FROM t`,
		`SELECT 'a\\'`,
		"SELECT 1 # c\n",
		"SELECT 1 --c\n",
		"SELECT /* /* */ 1",
		"SELECT E'\\''",
		"SELECT 1 WAITFOR DELAY '1'",
	}
	for _, q := range queries {
		all := true
		for _, d := range []Dialect{DialectPostgres, DialectMySQL, DialectSQLite, DialectSQLServer} {
			all = all && ReadOnlySQLDialect(q, d) == nil
		}
		if any := ReadOnlySQL(q) == nil; any != all {
			t.Errorf("%q: any dialect %v, every dialect %v", q, any, all)
		}
	}
}

func TestParseDialect(t *testing.T) {
	for in, want := range map[string]Dialect{"": DialectAny, "postgres": DialectPostgres, "PostgreSQL": DialectPostgres, "mysql": DialectMySQL, "mariadb": DialectMySQL, "sqlite": DialectSQLite, "sqlserver": DialectSQLServer} {
		if got, err := ParseDialect(in); err != nil || got != want {
			t.Errorf("ParseDialect(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseDialect("oracle"); err == nil {
		t.Error("ParseDialect(oracle): no error")
	}
	if err := ReadOnlySQLDialect("SELECT 1", "oracle"); err == nil {
		t.Error("ReadOnlySQLDialect with an unknown dialect accepted")
	}
}

// TestSQLExcerptBounded: a refusal quotes only a little of the query.
func TestSQLExcerptBounded(t *testing.T) {
	secret := strings.Repeat("s", 200)
	err := ReadOnlySQL("SELECT 1; DROP TABLE " + secret)
	if err == nil || strings.Count(err.Error(), "s") > 80 {
		t.Fatalf("refusal quotes too much: %v", err)
	}
}
