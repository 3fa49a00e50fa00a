package guard

import (
	"slices"
	"strings"
	"testing"
)

func commandGuard(t testing.TB, commands ...string) *Guard {
	t.Helper()
	g, err := New(Config{CommandArguments: []string{"cmd"}, Commands: commands})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCheckCommand(t *testing.T) {
	g := commandGuard(t, "ls", "git", "echo", "grep", "cat")
	tests := []struct {
		name string
		cmd  string
		want string // "" accepted; else a substring of the refusal
	}{
		// Accepted.
		{"bare", "ls", ""},
		{"arguments", "ls -la /tmp", ""},
		{"tabs and spaces", "ls\t -l  \t/tmp ", ""},
		{"single-quoted metacharacters", "echo 'a;b' 'c|d' '$(rm)' '`x`' '*' '>'", ""},
		{"double-quoted metacharacters", `echo "a;b" "c&d" "x > y" "{a,b}" "[*?]" "#"`, ""},
		{"escaped metacharacters", `echo a\;b \$HOME \* \| \(x\)`, ""},
		{"escaped dollar in double quotes", `echo "cost: \$5"`, ""},
		{"empty argument", "echo '' \"\"", ""},
		{"hash inside a word", "echo a#b", ""},
		{"tilde inside a word", "git log HEAD~1", ""},
		{"equals in an argument", "git -c core.pager=sh log", ""},
		{"absolute program path", "/usr/bin/ls -l", ""},
		{"quoted program", "'ls' -l", ""},
		{"unicode argument", "grep 'héllo' 世界.txt", ""},

		// Refused: more than one command.
		{"semicolon", "ls; rm -rf /", "';' separates commands"},
		{"and", "ls && x", "'&'"},
		{"background", "ls & rm -rf /", "'&'"},
		{"pipe", "ls | sh", "'|'"},
		{"or", "ls || sh", "'|'"},
		{"command substitution", "$(rm)", "'$'"},
		{"command substitution in argument", "echo $(rm -rf /)", "'$'"},
		{"backticks", "`rm`", "'`'"},
		{"backticks in argument", "echo `rm -rf /`", "'`'"},
		{"substitution in double quotes", `echo "$(rm)"`, "'$' inside double quotes"},
		{"backticks in double quotes", "echo \"`rm`\"", "'`' inside double quotes"},
		{"variable", "echo $HOME", "'$'"},
		{"braced variable", "echo ${HOME}", "'$'"},
		{"ansi-c quoting", `echo $'\x3b'`, "'$'"},
		{"redirect out", "ls > /etc/passwd", "redirection"},
		{"redirect in", "cat < /etc/shadow", "redirection"},
		{"append", "echo x >> ~/.bashrc", "redirection"},
		{"subshell", "(ls)", "subshell"},
		{"brace group", "{ ls; }", "brace"},
		{"brace expansion", "echo a{b,c}", "brace"},
		{"newline", "ls\nrm -rf /", "line break"},
		{"carriage return", "ls\rrm", "line break"},
		{"newline in quotes", "echo 'a\nb'", "line break"},
		{"nul", "ls\x00rm", "NUL"},
		{"other control", "ls \x1b[2J", "control character"},
		{"unicode space", "ls\u00a0-l", "space character"},
		{"bidi override", "echo \u202eabc", "invisible"},
		{"invalid utf-8", "ls \xff", "UTF-8"},

		// Refused: expansions and syntax.
		{"glob star", "ls *", "pathname expansion"},
		{"glob question", "ls ?", "pathname expansion"},
		{"glob bracket", "ls [ab]", "pathname expansion"},
		{"comment", "ls # rm", "comment"},
		{"tilde", "cat ~/.ssh/id_rsa", "tilde"},
		{"tilde after equals", "git --git-dir=~root log", "tilde"},
		{"assignment", "PATH=/tmp ls", "NAME=value"},
		{"assignment with underscore", "_X1=1 ls", "NAME=value"},
		{"unterminated single", "echo 'abc", "unterminated single quote"},
		{"unterminated double", `echo "abc`, "unterminated double quote"},
		{"trailing backslash", `ls \`, "trailing backslash"},
		{"empty", "", "empty command"},
		{"blank", "   ", "empty command"},

		// Refused: programs.
		{"not allowed", "rm -rf /", `program "rm" is not allowed (allowed: cat, echo, git, grep, ls)`},
		{"sh not special but not allowed", "sh -c ls", `program "sh" is not allowed`},
		{"env", "env ls", `program "env" is not allowed`},
		{"sudo", "sudo ls", `program "sudo" is not allowed`},
		{"relative path", "./ls", "relative path"},
		{"relative dir path", "bin/ls", "relative path"},
		{"dot-dot path", "/usr/bin/../../tmp/ls", "not clean"},
		{"double slash", "//usr/bin/ls", "not clean"},
		{"trailing slash", "/usr/bin/ls/", "not clean"},
		{"path to other program", "/bin/rm", `program "rm" is not allowed`},
		{"case differs", "LS", `program "LS" is not allowed`},
		{"quoted assignment is a program name", "'A=b' ls", `program "A=b" is not allowed`},
		{"empty program", "'' ls", `program "" is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.CheckCommand(tt.cmd)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused, want accepted: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted, want refusal containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("refusal %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestSplitCommand: the words are what a POSIX shell would pass.
func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"ls", []string{"ls"}},
		{"  ls   -l\t/x  ", []string{"ls", "-l", "/x"}},
		{`echo 'a b' "c d" e\ f`, []string{"echo", "a b", "c d", "e f"}},
		{`echo 'it'\''s'`, []string{"echo", "it's"}},
		{`echo "a\"b" "a\\b" "a\b" "a\$b"`, []string{"echo", `a"b`, `a\b`, `a\b`, "a$b"}},
		{`echo '' "" x''y`, []string{"echo", "", "", "xy"}},
		{`echo \é`, []string{"echo", "é"}},
		{"git -c core.pager=sh log", []string{"git", "-c", "core.pager=sh", "log"}},
	}
	for _, tt := range tests {
		got, err := splitCommand(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestWrappersWhenAllowed: a wrapper is an ordinary program; allowed, it passes with
// whatever it will run.
func TestWrappersWhenAllowed(t *testing.T) {
	g := commandGuard(t, "env", "xargs")
	for _, cmd := range []string{"env ls", "xargs rm", "/usr/bin/env -i sh"} {
		if err := g.CheckCommand(cmd); err != nil {
			t.Errorf("%q: %v", cmd, err)
		}
	}
}

func TestValidCommandName(t *testing.T) {
	for _, n := range []string{"ls", "git", "python3.12", "g++", "7z", "clang-format"} {
		if err := validCommandName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range []string{"", ".", "..", "/bin/ls", "bin/ls", "my tool", "a\tb", "ls;", "$x", "a*", "if", "time", "!", "{", "-x", "a=b", "\u00a0", "x\u200b", "\xff"} {
		if err := validCommandName(n); err == nil {
			t.Errorf("%q: accepted", n)
		}
	}
}
