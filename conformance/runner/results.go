package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// result is what one run produced.
type result struct {
	status    string // OK, FAIL, STALE, ERROR, SKIP, ABORT
	note      string
	exitCode  int
	suiteErr  error
	catalogue *catalogueResult // server mode
	elapsed   time.Duration

	scenarios       int // scored scenarios that ran
	passed          int // SUCCESS checks in scored scenarios
	failed          int // FAILURE checks in scored scenarios, not in the baseline
	warnings        int // WARNING checks in scored scenarios, not in the baseline
	expected        int // FAILURE or WARNING checks covered by the baseline
	notScoredFailed int // FAILURE checks in scenarios the revision does not score
	problems        []problem
	stale           []string // baseline entries that now pass
	unused          []string // baseline entries for scenarios that did not run
}

func (r *result) ok() bool { return r.status == "OK" || r.status == "SKIP" }

// problem is one FAILURE or WARNING check.
type problem struct {
	scenario, check, status, message string
	expected, scored, flaky          bool
}

// check is one entry of a checks.json file.
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

var timestampSuffix = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// readResults returns the checks of every scenario under dir. The suite writes
// <dir>/[server-]<scenario>-<timestamp>/checks.json; scenario names may contain '/'.
func readResults(dir, mode string) (map[string][]check, error) {
	out := map[string][]check{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(path))
		if err != nil {
			return err
		}
		name := timestampSuffix.ReplaceAllString(filepath.ToSlash(rel), "")
		if mode == modeServer {
			name = strings.TrimPrefix(name, "server-")
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var cs []check
		if err := json.Unmarshal(b, &cs); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		out[name] = append(out[name], cs...)
		return nil
	})
	return out, err
}

// evaluate counts the checks of a finished run against its baseline, the way the
// suite does: a scenario entry covers every failing check of that scenario, a
// "scenario:check" entry covers that check; WARNING counts as failing; a covered
// scenario or check that passes is stale.
func evaluate(res *result, dir, mode string, base *baseline, scored map[string]bool, oneScenario bool) {
	results, err := readResults(dir, mode)
	if err != nil {
		res.status, res.note = "ERROR", err.Error()
		return
	}
	entries := base.entries(mode)
	wholeScenario := map[string]bool{}
	perCheck := map[string]bool{}
	for _, en := range entries {
		if en.check == "" {
			wholeScenario[en.scenario] = true
		} else {
			perCheck[en.scenario+":"+en.check] = true
		}
	}
	flaky := map[string]bool{}
	for _, en := range base.entries("flaky") {
		flaky[en.String()] = true
	}
	flakyFailed := 0

	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		isScored := scored == nil || scored[name]
		if isScored {
			res.scenarios++
		}
		worst := map[string]string{} // check id -> worst status
		failing := false
		for _, c := range results[name] {
			switch c.Status {
			case "SUCCESS":
				if isScored {
					res.passed++
				}
			case "FAILURE", "WARNING":
				failing = true
				fl := flaky[name] || flaky[name+":"+c.ID]
				exp := wholeScenario[name] || perCheck[name+":"+c.ID] || fl
				if fl && isScored {
					flakyFailed++
				}
				msg := c.ErrorMessage
				if msg == "" {
					msg = c.Description
				}
				res.problems = append(res.problems, problem{scenario: name, check: c.ID, status: c.Status,
					message: msg, expected: exp, scored: isScored, flaky: fl})
				switch {
				case !isScored:
					if c.Status == "FAILURE" {
						res.notScoredFailed++
					}
				case exp:
					res.expected++
				case c.Status == "FAILURE":
					res.failed++
				default:
					res.warnings++
				}
			}
			if c.Status != "INFO" && rank(c.Status) >= rank(worst[c.ID]) {
				worst[c.ID] = c.Status
			}
		}
		if !isScored {
			continue
		}
		if wholeScenario[name] && !failing {
			res.stale = append(res.stale, name)
		}
		for _, en := range entries {
			if en.check != "" && en.scenario == name && worst[en.check] == "SUCCESS" {
				res.stale = append(res.stale, en.String())
			}
		}
	}
	for _, en := range entries {
		if _, ran := results[en.scenario]; !ran && !oneScenario {
			res.unused = append(res.unused, en.String())
		}
	}

	var notes []string
	switch {
	case res.suiteErr != nil:
		res.status = "ERROR"
		notes = append(notes, "suite: "+res.suiteErr.Error())
	case len(results) == 0:
		res.status = "ERROR"
		notes = append(notes, "no checks.json written (see suite.log)")
	case res.failed+res.warnings > 0:
		res.status = "FAIL"
	case len(res.stale) > 0:
		res.status = "STALE"
		notes = append(notes, "baseline entries now pass: remove them")
	case res.catalogue != nil && !res.catalogue.ok:
		res.status = "FAIL"
	case res.exitCode != 0 && flakyFailed == 0:
		res.status = "FAIL"
		notes = append(notes, fmt.Sprintf("the suite exited %d although every failure is in the baseline (see suite.log)", res.exitCode))
	default:
		res.status = "OK"
	}
	if flakyFailed > 0 {
		notes = append(notes, fmt.Sprintf("%d check(s) listed as flaky failed this time (the suite, not told about them, exited %d)", flakyFailed, res.exitCode))
	}
	if res.catalogue != nil && !res.catalogue.ok {
		notes = append(notes, "catalogue: "+res.catalogue.err)
	}
	if len(res.unused) > 0 {
		notes = append(notes, "baseline entries for scenarios that did not run: "+strings.Join(res.unused, ", "))
	}
	res.note = strings.Join(notes, "; ")
}

func rank(status string) int {
	switch status {
	case "FAILURE":
		return 3
	case "WARNING":
		return 2
	case "SUCCESS":
		return 1
	}
	return 0
}

// renderReport is the summary table, then every failing check.
func renderReport(runs []*run, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n== conformance summary (%s)\n\n", elapsed.Round(time.Second))
	fmt.Fprintf(&b, "%-34s %-9s %9s %6s %6s %8s %8s %9s  %-6s %6s\n",
		"run", "catalogue", "scenarios", "passed", "failed", "warnings", "expected", "unscored", "status", "time")
	fmt.Fprintf(&b, "%s\n", strings.Repeat("-", 113))
	var tot result
	for _, r := range runs {
		res := r.res
		if res == nil {
			res = &result{status: "ABORT"}
		}
		cat := "-"
		if res.catalogue != nil {
			cat = "ok"
			if !res.catalogue.ok {
				cat = "FAIL"
			}
		}
		fmt.Fprintf(&b, "%-34s %-9s %9d %6d %6d %8d %8d %9d  %-6s %5.0fs\n", r.id, cat, res.scenarios, res.passed,
			res.failed, res.warnings, res.expected, res.notScoredFailed, res.status, res.elapsed.Seconds())
		tot.scenarios += res.scenarios
		tot.passed += res.passed
		tot.failed += res.failed
		tot.warnings += res.warnings
		tot.expected += res.expected
		tot.notScoredFailed += res.notScoredFailed
	}
	fmt.Fprintf(&b, "%s\n", strings.Repeat("-", 113))
	fmt.Fprintf(&b, "%-34s %-9s %9d %6d %6d %8d %8d %9d\n\n", "total", "", tot.scenarios, tot.passed, tot.failed,
		tot.warnings, tot.expected, tot.notScoredFailed)
	b.WriteString("passed/failed/warnings count checks of scored scenarios; failed and warnings exclude the baseline\n" +
		"(conformance/baseline/<run>.yml), which 'expected' counts; 'unscored' counts FAILURE checks of scenarios\n" +
		"the --requirements revision runs but does not score (tasks extension, pending).\n")

	section := func(title string, keep func(problem) bool) {
		var lines []string
		for _, r := range runs {
			if r.res == nil {
				continue
			}
			for _, p := range r.res.problems {
				if keep(p) {
					st := p.status
					if p.flaky {
						st += " (flaky)"
					}
					lines = append(lines, fmt.Sprintf("  %-32s %-40s %-7s %s", r.id, p.scenario+":"+p.check,
						st, oneLine(p.message, 240)))
				}
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "\n%s:\n%s\n", title, strings.Join(lines, "\n"))
		}
	}
	section("Unexpected failures (not in the baseline)", func(p problem) bool { return p.scored && !p.expected })
	section("Expected failures (in the baseline)", func(p problem) bool { return p.scored && p.expected })

	var notes []string
	for _, r := range runs {
		if r.res == nil {
			continue
		}
		for _, s := range r.res.stale {
			notes = append(notes, fmt.Sprintf("  %-32s stale baseline entry (now passes): %s", r.id, s))
		}
		if r.res.note != "" {
			notes = append(notes, fmt.Sprintf("  %-32s %s", r.id, r.res.note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\nNotes:\n%s\n", strings.Join(notes, "\n"))
	}
	bad := 0
	for _, r := range runs {
		if r.res == nil || !r.res.ok() {
			bad++
		}
	}
	if bad == 0 {
		b.WriteString("\nconformance: PASS (every failure is in the baseline)\n")
	} else {
		fmt.Fprintf(&b, "\nconformance: FAIL (%d of %d runs)\n", bad, len(runs))
	}
	return b.String()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
