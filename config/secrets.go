package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// secret("NAME") names one of the calling principal's secrets, in the env or headers of
// an upstream in credentials mode "secret". The file cannot know its value: it is looked
// up per principal when that principal's upstream session starts. What the file holds
// is a reference the proxy replaces then: NUL, "secret:", the name, NUL. A NUL byte can
// be neither in an environment variable nor in a header, so a reference can never be
// taken for a value, nor a value for a reference; and env() returns values, never
// references, so the two cannot be confused.
//
// The value is marked (cty marks), so that a reference written anywhere else (a url, a
// command, an argument of another block) is reported where it is written.

// secretMark marks a value that holds secret() references.
type secretMark struct{}

const (
	secretOpen  = "\x00secret:"
	secretClose = "\x00"
)

// secretFunc implements secret("NAME").
func secretFunc() function.Function {
	return function.New(&function.Spec{
		Description: "Names a secret of the calling principal, filled in when that principal's upstream session starts (credentials mode \"secret\").",
		Params: []function.Parameter{{
			Name:        "name",
			Description: "The secret's name: letters, digits, '_', '.' and '-'.",
			Type:        cty.String,
		}},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: func(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			name := args[0].AsString()
			if !ValidSecretName(name) {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(0,
					"a secret's name is letters, digits, '_', '.' and '-' (1 to 128 of them), got %q", name)
			}
			return cty.StringVal(secretOpen + name + secretClose).Mark(secretMark{}), nil
		},
	})
}

// ValidSecretName reports whether name can name a secret.
func ValidSecretName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, r := range name {
		if !isNameChar(r) && r != '.' {
			return false
		}
	}
	return true
}

// unmark removes v's marks; a secret() reference where none may be is reported at attr.
func (e *evaluator) unmark(attr *hcl.Attribute, v cty.Value) (cty.Value, bool) {
	v, marks := v.UnmarkDeep()
	if _, ok := marks[secretMark{}]; ok && !e.secrets {
		e.errorf(attr, "Secret not allowed here",
			"secret() names a principal's secret, which only an upstream's \"env\" and \"headers\" can take (with credentials mode %q); %q cannot.",
			CredentialsSecret, attr.Name)
		return cty.NilVal, false
	}
	return v, true
}

// secretMap is stringMap for an upstream's env or headers, which may hold secret()
// references: each value is checked to hold them whole (a function such as upper()
// applied to one would change it).
func (e *evaluator) secretMap(attr *hcl.Attribute) (map[string]string, bool) {
	e.secrets = true
	m, ok := e.stringMap(attr)
	e.secrets = false
	if !ok {
		return nil, false
	}
	for _, k := range sortedKeys(m) {
		if _, err := SecretRefs(m[k]); err != nil {
			e.errorf(attr, "Invalid secret reference", "The value of %q in %q: %v.", k, attr.Name, err)
			ok = false
		}
	}
	return m, ok
}

// SecretRefs returns the names of the secrets s refers to, in order of appearance and
// without repeats; an error when s holds a NUL byte that is not part of a whole
// reference.
func SecretRefs(s string) ([]string, error) {
	var names []string
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return names, nil
		}
		rest := s[i:]
		if !strings.HasPrefix(rest, secretOpen) {
			return nil, fmt.Errorf("a secret() reference was changed by a function (use it as it is, in a template or format())")
		}
		rest = rest[len(secretOpen):]
		j := strings.IndexByte(rest, 0)
		if j < 0 || !ValidSecretName(rest[:j]) {
			return nil, fmt.Errorf("a secret() reference was changed by a function (use it as it is, in a template or format())")
		}
		if name := rest[:j]; !slices.Contains(names, name) {
			names = append(names, name)
		}
		s = rest[j+len(secretClose):]
	}
}

// HasSecretRefs reports whether s refers to a secret.
func HasSecretRefs(s string) bool { return strings.Contains(s, secretOpen) }

// ExpandSecrets returns s with each secret() reference replaced by its value from
// lookup; an error naming the first secret lookup does not have (never its value).
func ExpandSecrets(s string, lookup func(name string) (string, bool)) (string, error) {
	if !HasSecretRefs(s) {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, secretOpen)
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+len(secretOpen):]
		j := strings.IndexByte(rest, 0)
		if j < 0 {
			return "", fmt.Errorf("malformed secret reference")
		}
		v, ok := lookup(rest[:j])
		if !ok {
			return "", fmt.Errorf("no secret %q", rest[:j])
		}
		b.WriteString(v)
		s = rest[j+len(secretClose):]
	}
}

// ShowSecretRefs is s with each secret() reference written as it was in the file, for
// what shows a configured value (a diagnostic, a dry run).
func ShowSecretRefs(s string) string {
	out, _ := ExpandSecrets(s, func(name string) (string, bool) { return `${secret("` + name + `")}`, true })
	return out
}

// WithoutSecrets is m without the entries that refer to a secret (nil for nil): what
// the upstream's own session, which acts as no principal, is started with.
func WithoutSecrets(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !HasSecretRefs(v) {
			out[k] = v
		}
	}
	return out
}

// checkSecretRefs reports secret() references in an upstream whose credentials mode is
// not "secret", and warns of mode "secret" without any; it fills u.Secrets.
func checkSecretRefs(e *evaluator, raw *rawUpstream, u *Upstream) {
	var names []string
	for _, m := range []map[string]string{u.Env, u.Headers} {
		for _, k := range sortedKeys(m) {
			refs, _ := SecretRefs(m[k])
			for _, n := range refs {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	slices.Sort(names)
	isSecret := u.Credentials != nil && u.Credentials.Mode == CredentialsSecret
	if len(names) > 0 && !isSecret {
		for _, a := range []*hcl.Attribute{raw.Env, raw.Headers} {
			if a == nil {
				continue
			}
			m := u.Env
			if a == raw.Headers {
				m = u.Headers
			}
			for _, v := range m {
				if HasSecretRefs(v) {
					e.errorf(a, "Secret without credentials mode \"secret\"",
						"%q refers to a principal's secret with secret(), which needs credentials { mode = %q } in upstream %q "+
							"(each principal then gets a session of its own).", a.Name, CredentialsSecret, u.Name)
					break
				}
			}
		}
		return
	}
	if isSecret && len(names) == 0 {
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "No secret referenced",
			Detail: fmt.Sprintf("Upstream %q is in credentials mode %q but its env and headers name no secret(): "+
				"each principal gets a session of its own, with nothing of its own in it.", u.Name, CredentialsSecret),
			Subject: u.Credentials.ModeRange.Ptr(),
		})
	}
	u.Secrets = names
}
