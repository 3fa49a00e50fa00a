package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/mcp-proxy/mcp-proxy/internal/importer"
)

// cmdImport converts client configuration files into an HCL configuration.
func cmdImport(args []string, stdout, stderr io.Writer) error {
	fset := newFlagSet("import", stderr, nil)
	out := fset.String("o", "", "write the configuration to `FILE` instead of stdout")
	force := fset.Bool("force", false, "with -o: replace FILE if it exists")
	workspace := fset.String("workspace", "", "the folder `DIR` that ${workspaceFolder} stands for (default: the folder holding\n"+
		"the file's .vscode or .cursor folder, else the file's own folder)")
	files, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usageErrorf("import", "needs at least one FILE")
	}
	srcs := make([]importer.Source, 0, len(files))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			return exitError{code: 1, msg: fmt.Sprintf("reading %s: %v", p, err)}
		}
		srcs = append(srcs, importer.Source{Path: p, Data: data})
	}
	res, err := importer.Convert(srcs, importer.Options{Workspace: *workspace})
	if err != nil {
		var ie *importer.Error
		if errors.As(err, &ie) {
			printProblems(stderr, ie.Problems)
			return exitError{code: 1, msg: "nothing imported"}
		}
		return fmt.Errorf("importing: %w", err)
	}
	printProblems(stderr, res.Warnings)

	configPath := "/absolute/path/to/proxy.hcl"
	if *out == "" {
		if _, err := stdout.Write(res.HCL); err != nil {
			return fmt.Errorf("writing the configuration: %w", err)
		}
	} else {
		if err := writeNew(*out, res.HCL, *force); err != nil {
			return exitError{code: 1, msg: err.Error()}
		}
		if abs, err := filepath.Abs(*out); err == nil {
			configPath = abs
		}
		fmt.Fprintf(stderr, "Wrote %s: %d upstreams (%s).\n", *out, len(res.Upstreams), strings.Join(res.Upstreams, ", "))
	}
	return printNextSteps(stderr, res, configPath, *out == "")
}

// printProblems prints one problem a line.
func printProblems(w io.Writer, ps []importer.Problem) {
	for _, p := range ps {
		fmt.Fprintln(w, p)
	}
}

// writeNew writes a generated configuration to path, refusing to replace an existing
// file unless force is set. The file is private to its owner: it holds no secrets the
// importer recognized, but it may hold one it did not.
func writeNew(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; choose another -o FILE, or add --force to replace it", path)
	}
	if err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// printNextSteps tells, on stderr, which variables to set and what to put in the
// client's configuration instead of its server list.
func printNextSteps(w io.Writer, res *importer.Result, configPath string, toStdout bool) error {
	var needed []importer.Var
	for _, v := range res.Vars {
		if v.Secret || (v.Input != nil && !v.Optional) {
			needed = append(needed, v)
		}
	}
	if len(needed) > 0 {
		fmt.Fprintln(w, "\nSet these environment variables where mcp-proxy runs (the snippet below passes them):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, v := range needed {
			fmt.Fprintf(tw, "  %s\t%s\n", v.Name, strings.Join(v.Uses, ", "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "mcp-proxy"
	}
	for _, f := range res.Formats {
		snippet, err := importer.Snippet(f, "mcp-proxy", exe, []string{"run", "--config", configPath}, res.Vars)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nReplace the servers in your %s configuration with this one entry", f.Clients())
		if toStdout {
			fmt.Fprint(w, " (with the path where you save the configuration)")
		}
		fmt.Fprintf(w, ":\n%s", snippet)
	}
	return nil
}
