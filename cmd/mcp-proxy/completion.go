package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Shell completion: scripts for bash, zsh and fish that complete the commands, their
// flags and the flags' values, built from the command table (help.go) and from each
// command's own flag set, so that they cannot drift from what the commands accept.

// valueWords is what the value of a flag completes to, by flag name: files, a list of
// words, or (a flag not listed) nothing.
var valueWords = map[string]string{
	"config":     compFiles,
	"log-level":  "trace debug info warn error",
	"log-format": "json console",
	"o":          compFiles, // import -o
	"workspace":  compDirs,
}

// compFiles and compDirs stand for file and directory names among completion words.
const (
	compFiles = "files"
	compDirs  = "dirs"
)

// compFlag is one flag as completion sees it.
type compFlag struct {
	name   string
	desc   string
	value  bool   // takes a value
	values string // compFiles, compDirs, words, or ""
}

// compCommand is one command as completion sees it.
type compCommand struct {
	name, summary string
	flags         []compFlag
	args          string // compFiles, words, or ""
}

// completionModel is every command with its flags, in the order of the usage.
func completionModel(ctx context.Context) []compCommand {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	out := make([]compCommand, 0, len(commands)+1)
	for _, c := range commands {
		cc := compCommand{name: c.name, summary: c.uses[0].summary, args: c.args}
		for _, f := range flagsOf(ctx, c.name) {
			_, usage := flag.UnquoteUsage(f)
			cf := compFlag{name: f.Name, desc: usage, value: !isBoolFlag(f)}
			if cf.value {
				cf.values = valueWords[f.Name]
			}
			cc.flags = append(cc.flags, cf)
		}
		out = append(out, cc)
	}
	return append(out, compCommand{name: "help", summary: "print a command's help", args: strings.Join(names, " ")})
}

// flagsOf is the flags of command name. Every command parses its flags before it does
// anything else, and --help stops it right there with its flag set (helpError), so
// asking for its help is how the flags are learned: nothing is read or started.
func flagsOf(ctx context.Context, name string) []*flag.Flag {
	err := dispatch(ctx, []string{name, "--help"}, strings.NewReader(""), io.Discard, io.Discard)
	h, ok := isHelp(err)
	if !ok {
		return nil
	}
	var out []*flag.Flag
	h.fs.VisitAll(func(f *flag.Flag) { out = append(out, f) })
	return out
}

// cmdCompletion prints the completion script for a shell.
func cmdCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("completion", stderr, nil)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("completion", "takes one shell: bash, zsh or fish (got %q)", pos)
	}
	model := completionModel(ctx)
	switch pos[0] {
	case "bash":
		_, err = io.WriteString(stdout, bashCompletion(model))
	case "zsh":
		_, err = io.WriteString(stdout, zshCompletion(model))
	case "fish":
		_, err = io.WriteString(stdout, fishCompletion(model))
	default:
		return usageErrorf("completion", "unknown shell %q: bash, zsh or fish", pos[0])
	}
	return err
}

// bashCompletion is the bash script: a completion function for the words typed so far.
func bashCompletion(model []compCommand) string {
	var b strings.Builder
	b.WriteString(`# bash completion for mcp-proxy (mcp-proxy completion bash)
# Load it in ~/.bashrc with: source <(mcp-proxy completion bash)
_mcp_proxy() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i
    # After --, a command and its arguments (bridge --listen ADDR -- CMD ARGS...).
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == -- ]]; then
            if ((i == COMP_CWORD - 1)); then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                compopt -o filenames 2>/dev/null
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return
        fi
    done
    if ((COMP_CWORD == 1)); then
`)
	var names []string
	for _, c := range model {
		names = append(names, c.name)
	}
	fmt.Fprintf(&b, "        COMPREPLY=($(compgen -W %s -- \"$cur\"))\n", shQuote(strings.Join(names, " ")+" --help --version"))
	b.WriteString(`        return
    fi
    # --flag=VALUE: bash splits the word at the =.
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]]; then
        prev=${COMP_WORDS[COMP_CWORD-2]}
    fi
    case $prev in
`)
	// One case per way of completing a value, listing the flags that take it.
	var actions []string
	patterns := map[string][]string{}
	seen := map[string]bool{}
	for _, c := range model {
		for _, f := range c.flags {
			if !f.value || seen[f.name] {
				continue
			}
			seen[f.name] = true
			a := bashWords(f.values)
			if patterns[a] == nil {
				actions = append(actions, a)
			}
			patterns[a] = append(patterns[a], "--"+f.name, "-"+f.name) // the flag package takes either
		}
	}
	for _, a := range actions {
		fmt.Fprintf(&b, "    %s)\n        %s\n        return ;;\n", strings.Join(patterns[a], " | "), a)
	}
	b.WriteString("    esac\n    local flags words\n    case ${COMP_WORDS[1]} in\n")
	for _, c := range model {
		var flags []string
		for _, f := range c.flags {
			flags = append(flags, dashed(f.name))
		}
		if c.name != "help" {
			flags = append(flags, "--help")
		}
		fmt.Fprintf(&b, "    %s) flags=%s words=%s ;;\n", c.name, shQuote(strings.Join(flags, " ")), shQuote(c.args))
	}
	b.WriteString(`    *) return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ $words == ` + compFiles + ` ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
    elif [[ -n $words ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
}
complete -F _mcp_proxy mcp-proxy
`)
	return b.String()
}

// bashWords is the bash statement that completes a flag's value to values.
func bashWords(values string) string {
	switch values {
	case compFiles:
		return `compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))`
	case compDirs:
		return `compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))`
	case "":
		return `COMPREPLY=()`
	}
	return fmt.Sprintf(`COMPREPLY=($(compgen -W %s -- "$cur"))`, shQuote(values))
}

// zshCompletion is the zsh script, for $fpath (autoloaded as _mcp-proxy) or for sourcing
// after compinit.
func zshCompletion(model []compCommand) string {
	var b strings.Builder
	b.WriteString(`#compdef mcp-proxy
# zsh completion for mcp-proxy (mcp-proxy completion zsh)
# Install it with: mcp-proxy completion zsh > "${fpath[1]}/_mcp-proxy"
# or, after compinit in ~/.zshrc: source <(mcp-proxy completion zsh)

_mcp-proxy() {
    local -a commands
    commands=(
`)
	for _, c := range model {
		fmt.Fprintf(&b, "        %s\n", shQuote(c.name+":"+c.summary))
	}
	b.WriteString(`    )
    if (( CURRENT == 2 )); then
        if [[ $PREFIX == -* ]]; then
            compadd -- --help --version
        else
            _describe -t commands 'mcp-proxy command' commands
        fi
        return
    fi
    local cmd=${words[2]}
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, c := range model {
		specs := []string{"_arguments -S"}
		for _, f := range c.flags {
			spec := dashed(f.name)
			if f.value {
				spec += "=[" + zshEscape(f.desc) + "]:" + f.name + ":" + zshAction(f.values)
			} else {
				spec += "[" + zshEscape(f.desc) + "]"
			}
			specs = append(specs, shQuote(spec))
		}
		if c.name != "help" {
			specs = append(specs, shQuote("--help[print this command's help]"))
		}
		switch {
		case c.name == "bridge": // the command after --
			specs = append(specs, shQuote("*:: :_normal"))
		case c.args != "":
			specs = append(specs, shQuote("*:argument:"+zshAction(c.args)))
		}
		fmt.Fprintf(&b, "    (%s)\n        %s\n        ;;\n", c.name, strings.Join(specs, " \\\n            "))
	}
	b.WriteString(`    esac
}

# Autoloaded from $fpath, this file is the body of _mcp-proxy: complete now. Sourced,
# register the function.
if [[ ${funcstack[1]} == _mcp-proxy ]]; then
    _mcp-proxy "$@"
else
    compdef _mcp-proxy mcp-proxy
fi
`)
	return b.String()
}

// zshAction is the _arguments action that completes to values.
func zshAction(values string) string {
	switch values {
	case compFiles:
		return "_files"
	case compDirs:
		return "_files -/"
	case "":
		return " "
	}
	return "(" + values + ")"
}

// zshEscape escapes what _arguments reads specially inside a description.
func zshEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`).Replace(s)
}

// fishCompletion is the fish script: one complete command per completion.
func fishCompletion(model []compCommand) string {
	var b strings.Builder
	b.WriteString(`# fish completion for mcp-proxy (mcp-proxy completion fish)
# Install it with: mcp-proxy completion fish > ~/.config/fish/completions/mcp-proxy.fish
complete -c mcp-proxy -f
complete -c mcp-proxy -n __fish_use_subcommand -l help -s h -d 'print the usage'
complete -c mcp-proxy -n __fish_use_subcommand -l version -s v -d 'print the version'
`)
	for _, c := range model {
		fmt.Fprintf(&b, "complete -c mcp-proxy -n __fish_use_subcommand -a %s -d %s\n", fishQuote(c.name), fishQuote(c.summary))
	}
	for _, c := range model {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			opt := "-l"
			if len(f.name) == 1 {
				opt = "-s"
			}
			fmt.Fprintf(&b, "complete -c mcp-proxy -n %s %s %s", cond, opt, f.name)
			switch {
			case !f.value:
			case f.values == compFiles:
				b.WriteString(" -r -F")
			case f.values == compDirs:
				b.WriteString(" -x -a '(__fish_complete_directories)'")
			case f.values == "":
				b.WriteString(" -x")
			default:
				fmt.Fprintf(&b, " -x -a %s", fishQuote(f.values))
			}
			fmt.Fprintf(&b, " -d %s\n", fishQuote(f.desc))
		}
		if c.name != "help" {
			fmt.Fprintf(&b, "complete -c mcp-proxy -n %s -l help -d %s\n", cond, fishQuote("print this command's help"))
		}
		switch c.args {
		case "":
		case compFiles:
			fmt.Fprintf(&b, "complete -c mcp-proxy -n %s -F\n", cond)
		default:
			fmt.Fprintf(&b, "complete -c mcp-proxy -n %s -x -a %s\n", cond, fishQuote(c.args))
		}
	}
	return b.String()
}

// shQuote quotes s for bash and zsh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishQuote quotes s for fish, where \ and ' are escaped inside single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
