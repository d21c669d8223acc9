// Package mask hides known secret values in text that Capstan shows: a
// status message, a diff, an error, a chart's own message. It knows the
// values, not where they came from; the caller decides which values must
// not be shown.
//
// Values shorter than MinLen, and true and false, are left as they are:
// hiding every "1" or "true" would garble every message while hiding
// nothing a reader could not guess.
package mask

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MinLen is the shortest value a Mask hides.
const MinLen = 4

// Hidden replaces a secret value in text.
const Hidden = "(hidden)"

// Mask hides a fixed set of values in text. A nil Mask hides nothing.
type Mask struct {
	// byPrefix lists the values by their first two bytes, the longest first.
	byPrefix map[uint16][]string
	// prefixes has a bit set for the first two bytes of each value, so that
	// a search passes most of a text by a bit test.
	prefixes []uint64
}

// New hides values wherever they occur, each whole: where values overlap
// (the end of one is the start of another) or follow one another, the text
// they cover together is hidden at once, so no part of either shows. Each value is searched for as it is and in the forms a
// message quotes it in: Go's %q and JSON escape quotes, backslashes and
// control characters (the API server quotes an invalid value with %q),
// each line of a value of several lines (a key in PEM) may show alone,
// and the value alone in base64, standard and URL-safe, with padding and
// without: a chart encodes a password with b64enc for a field that wants
// base64, not only a Secret's data (a ConfigMap's binaryData, a custom
// resource's field), and anyone can decode it. New returns nil when no
// value is worth hiding.
func New(secrets []string) *Mask {
	var keep []string
	worth := func(v string) bool { return len(v) >= MinLen && v != "true" && v != "false" }
	add := func(v string) {
		if worth(v) {
			keep = append(keep, v)
		}
	}
	for _, v := range secrets {
		add(v)
		if worth(v) {
			// NOTE: only the value alone: within a longer text its base64
			// depends on what comes before it. A diff decodes what looks
			// like base64 instead (plan.HideValuesPair).
			for _, enc := range encodings {
				add(enc.EncodeToString([]byte(v)))
			}
		}
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
	m := &Mask{byPrefix: map[uint16][]string{}, prefixes: make([]uint64, 1<<16/64)}
	for _, v := range slices.Compact(keep) {
		p := prefix(v)
		m.byPrefix[p] = append(m.byPrefix[p], v)
		m.prefixes[p/64] |= 1 << (p % 64)
	}
	return m
}

// prefix is the first two bytes of s, which holds at least two.
func prefix(s string) uint16 {
	return uint16(s[0])<<8 | uint16(s[1])
}

// encodings are the base64 forms a value is hidden in.
var encodings = []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}

// String returns text with every value hidden. A plan's hash (sha256: and
// 64 hex digits) is left whole, whatever digits a value shares with it: a
// person copies it to approve the plan.
func (m *Mask) String(text string) string {
	if m == nil {
		return text
	}
	hashes := planHash.FindAllStringIndex(text, -1)
	if hashes == nil {
		return m.hide(text)
	}
	var b strings.Builder
	last := 0
	for _, h := range hashes {
		b.WriteString(m.hide(text[last:h[0]]))
		b.WriteString(text[h[0]:h[1]])
		last = h[1]
	}
	b.WriteString(m.hide(text[last:]))
	return b.String()
}

// hide replaces each stretch of text that values cover with Hidden. It looks
// for the longest value at every position, inside a value found before
// included, and hides the values that overlap or touch as one: a
// leftmost-first replacement would hide the first of two overlapping values
// and show the rest of the second.
func (m *Mask) hide(text string) string {
	var b strings.Builder
	last, start, end := 0, -1, -1
	for i := 0; i+1 < len(text); i++ {
		p := prefix(text[i:])
		if m.prefixes[p/64]&(1<<(p%64)) == 0 {
			continue
		}
		for _, v := range m.byPrefix[p] {
			if !strings.HasPrefix(text[i:], v) {
				continue
			}
			if i > end {
				if start >= 0 {
					b.WriteString(text[last:start])
					b.WriteString(Hidden)
					last = end
				} else {
					b.Grow(len(text))
				}
				start = i
			}
			end = max(end, i+len(v))
			break
		}
	}
	if start < 0 {
		return text
	}
	b.WriteString(text[last:start])
	b.WriteString(Hidden)
	b.WriteString(text[end:])
	return b.String()
}

// planHash is a plan's or a digest's hash in a message.
var planHash = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// Holds reports whether text holds a value.
func (m *Mask) Holds(text string) bool {
	return m != nil && m.String(text) != text
}

// Strings returns the strings of a values tree (maps and lists of YAML or
// JSON), each once: the values a person gave, for a mask over all of them.
func Strings(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	slices.Sort(out)
	return slices.Compact(out)
}
