package controller

import (
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// A chart may put a value that must never be shown (one that came from a
// Secret, a writeOnly or a generated value) into an object that is not a
// Secret: a ConfigMap's data, an argument, even a name. The plan hides a
// Secret's data by key, but the diffs of other kinds show what they hold,
// and the API server's messages quote what they were given. So whatever
// the controller says about an add-on (the status's messages, the plan's
// diffs, errors and notices, its events and the errors it logs) has each
// such value replaced by "(hidden)" before it leaves the reconcile.
//
// Values shorter than minMaskedLen, and true and false, are left as they
// are: hiding every "1" or "true" would garble every message while hiding
// nothing a reader could not guess.
//
// Names stay as they are in the inventory and in each planned object's
// reference: the controller finds objects by them, and the API server shows
// a name to anyone who may list its kind. A value that must stay secret has
// no place in a name.

// minMaskedLen is the shortest value the mask hides.
const minMaskedLen = 4

// hiddenValue replaces a secret value in what the controller says.
const hiddenValue = "(hidden)"

// masker hides a fixed set of values in text. A nil masker hides nothing.
type masker struct {
	r *strings.Replacer
}

// newMasker hides values, the longest first, so that a value that holds
// another is hidden whole. Each value is searched for as it is and in the
// forms a message quotes it in: Go's %q and JSON escape quotes,
// backslashes and control characters (the API server quotes an invalid
// value with %q), and each line of a value of several lines (a key in PEM)
// may show alone.
func newMasker(secrets []string) *masker {
	var keep []string
	add := func(v string) {
		if len(v) >= minMaskedLen && v != "true" && v != "false" {
			keep = append(keep, v)
		}
	}
	for _, v := range secrets {
		add(v)
		quoted := strconv.Quote(v)
		add(quoted[1 : len(quoted)-1])
		if j, err := json.Marshal(v); err == nil {
			add(string(j[1 : len(j)-1]))
		}
		if strings.Contains(v, "\n") {
			for line := range strings.SplitSeq(v, "\n") {
				add(strings.TrimSpace(line))
			}
		}
	}
	if len(keep) == 0 {
		return nil
	}
	slices.SortFunc(keep, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	keep = slices.Compact(keep)
	pairs := make([]string, 0, 2*len(keep))
	for _, v := range keep {
		pairs = append(pairs, v, hiddenValue)
	}
	return &masker{r: strings.NewReplacer(pairs...)}
}

// String returns text with every secret value hidden. A plan's hash
// (sha256: and 64 hex digits) is left whole, whatever digits a value
// shares with it: a person copies it to approve the plan.
func (m *masker) String(text string) string {
	if m == nil {
		return text
	}
	hashes := planHash.FindAllStringIndex(text, -1)
	if hashes == nil {
		return m.r.Replace(text)
	}
	var b strings.Builder
	last := 0
	for _, h := range hashes {
		b.WriteString(m.r.Replace(text[last:h[0]]))
		b.WriteString(text[h[0]:h[1]])
		last = h[1]
	}
	b.WriteString(m.r.Replace(text[last:]))
	return b.String()
}

// planHash is a plan's or a digest's hash in a message.
var planHash = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// Holds reports whether text holds a secret value.
func (m *masker) Holds(text string) bool {
	return m != nil && m.String(text) != text
}

// holder is Holds, or nil for a nil masker, so that a diff with nothing to
// hide is not copied to be searched.
func (m *masker) holder() func(string) bool {
	if m == nil {
		return nil
	}
	return m.Holds
}

// Error returns err with its message masked, still wrapping err for
// errors.Is and errors.As. It returns err itself when nothing was hidden.
func (m *masker) Error(err error) error {
	if m == nil || err == nil {
		return err
	}
	msg := m.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &maskedError{msg: msg, err: err}
}

// maskedError is an error whose message had secret values hidden.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// Plan hides secret values in the free text of p.
func (m *masker) Plan(p *capstanv1.Plan) {
	if m == nil || p == nil {
		return
	}
	for i := range p.Objects {
		p.Objects[i].Diff = m.String(p.Objects[i].Diff)
		p.Objects[i].Error = m.String(p.Objects[i].Error)
	}
	for i := range p.Violations {
		p.Violations[i].Message = m.String(p.Violations[i].Message)
	}
	for i := range p.ValuesErrors {
		p.ValuesErrors[i].Message = m.String(p.ValuesErrors[i].Message)
	}
	for i := range p.Notices {
		p.Notices[i].Message = m.String(p.Notices[i].Message)
	}
}

// mask is the masker of the values this reconcile composed; nil before the
// values step, when no value is known and none can be quoted.
func (s *scope) mask() *masker {
	if s.values == nil {
		return nil
	}
	if s.maskedValues != s.values {
		s.masker, s.maskedValues = newMasker(s.values.SecretValues()), s.values
	}
	return s.masker
}
