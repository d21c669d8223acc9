// Package mask hides known secret values in text that Capstan shows: a
// status message, a diff, an error, a chart's own message. It knows the
// values, not where they came from; the caller decides which values must
// not be shown.
//
// Values shorter than MinLen, and true and false, are left as they are:
// hiding every "1" or "true" would garble every message while hiding
// nothing a reader could not guess.
//
// A Mask hides a value and the forms a text carries it in (New), not what
// is derived from it: a part of a value, or its hash, shows, since a Mask
// cannot tell them from other text; and a value encoded in a way New does
// not list shows too.
package mask

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MinLen is the shortest value a Mask hides.
const MinLen = 4

// Worth reports whether a Mask hides v: whether it is MinLen bytes long or
// more, and neither true nor false.
func Worth(v string) bool { return len(v) >= MinLen && v != "true" && v != "false" }

// Hidden replaces a secret value in text.
const Hidden = "(hidden)"

// Mask hides a fixed set of values in text. A nil Mask hides nothing.
type Mask struct {
	// byPrefix lists the values by their first two bytes.
	byPrefix map[uint16][]value
	// prefixes has a bit set for the first two bytes of each value, so that
	// a search passes most of a text by a bit test.
	prefixes []uint64
}

// value is one string a Mask hides, with its borders: border[i] is the
// length of the longest proper prefix of s[:i+1] that is also its suffix,
// so that a search goes on after a match without going back in the text.
type value struct {
	s      string
	border []int32
}

// New hides values wherever they occur, each whole: where values overlap
// (the end of one is the start of another) or follow one another, the text
// they cover together is hidden at once, so no part of either shows. Each value is searched for as it is and in the forms a
// message quotes it in: Go's %q and JSON escape quotes, backslashes and
// control characters (the API server quotes an invalid value with %q),
// each line of a value of several lines (a key in PEM) may show alone,
// and the value in base64, standard and URL-safe: a chart encodes a
// password with b64enc for a field that wants base64, not only a Secret's
// data (a ConfigMap's binaryData, a custom resource's field), often with
// text around it (user:password for basic auth, a registry's auth in a
// dockerconfigjson), and anyone can decode it. The value alone is hidden
// in its whole encoding, with padding and without; within a longer text,
// by the characters of its encoding that it alone decides (base64Cores).
// A value in a URL is hidden escaped as url.QueryEscape and url.PathEscape
// escape it (a password in postgres://user:p%40ss@db, or in a query):
// a chart builds a connection string with urlquery. New returns nil when
// no value is worth hiding.
func New(secrets []string) *Mask {
	var keep []string
	worth := Worth
	add := func(v string) {
		if worth(v) {
			keep = append(keep, v)
		}
	}
	for _, v := range secrets {
		add(v)
		if worth(v) {
			for _, enc := range encodings {
				add(enc.EncodeToString([]byte(v)))
			}
			for _, core := range base64Cores(v) {
				add(core)
			}
			// NOTE: only for a value worth hiding: escaping makes "ab!"
			// five bytes long, and its raw form is not hidden either.
			for _, esc := range []string{url.QueryEscape(v), url.PathEscape(v)} {
				if esc != v {
					add(esc)
				}
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
	slices.Sort(keep)
	m := &Mask{byPrefix: map[uint16][]value{}, prefixes: make([]uint64, 1<<16/64)}
	for _, v := range slices.Compact(keep) {
		p := prefix(v)
		m.byPrefix[p] = append(m.byPrefix[p], value{s: v, border: borders(v)})
		m.prefixes[p/64] |= 1 << (p % 64)
	}
	return m
}

// borders computes the borders of v (Knuth, Morris and Pratt's failure
// function).
func borders(v string) []int32 {
	border := make([]int32, len(v))
	k := int32(0)
	for i := 1; i < len(v); i++ {
		for k > 0 && v[i] != v[k] {
			k = border[k-1]
		}
		if v[i] == v[k] {
			k++
		}
		border[i] = k
	}
	return border
}

// prefix is the first two bytes of s, which holds at least two.
func prefix(s string) uint16 {
	return uint16(s[0])<<8 | uint16(s[1])
}

// encodings are the base64 forms a value alone is hidden in.
var encodings = []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}

// base64Cores returns what shows of v in base64 wherever it starts in the
// encoded text, in the standard and the URL-safe alphabet. base64 encodes
// three bytes as four characters, so a value that follows s bytes of a
// group (s is 0, 1 or 2) is encoded in one of three ways, and the
// characters at its ends mix its bits with its neighbours'. Each core is
// the encoding of s bytes and v with the characters that hold bits of those
// s bytes, or of the bytes that would follow v, cut off: those the value
// alone decides, the same whatever text is around it.
//
// NOTE: a core that holds fewer bits than a value of MinLen bytes is left
// out, as such a value is: a few base64 characters occur by chance in any
// long base64 (a certificate, an image), and hiding them would hide nothing
// a reader could not guess.
func base64Cores(v string) []string {
	var cores []string
	for s := range 3 {
		b := make([]byte, s+len(v))
		copy(b[s:], v)
		// Character i holds bits 6i to 6i+6 of b, and v is bits 8s to
		// 8len(b): its own characters are from ceil(8s/6) to 8len(b)/6.
		from, to := (4*s+2)/3, 4*len(b)/3
		if (to-from)*6 < MinLen*8 {
			continue
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			cores = append(cores, enc.EncodeToString(b)[from:to])
		}
	}
	return cores
}

// String returns text with every value hidden.
//
// NOTE: a hash (sha256: and 64 hex digits, a plan's or an image's digest)
// that a value occurs in is hidden whole, the value too. A person copies a
// plan's hash to approve the plan, but a value can be such a hash itself
// (a password's hash, a hex token), or run on past its digits, and nothing
// tells the two apart in a message; and a hash hidden only where a short
// value of hex digits occurs in it by chance would give that value away to
// anyone who reads the same hash whole elsewhere (the plan's status, the
// live object). Such a plan's hash is still whole in the plan's own status.
func (m *Mask) String(text string) string {
	if m == nil {
		return text
	}
	reach, from := m.cover(text)
	if reach == nil {
		return text
	}
	// Merge the stretches that overlap or touch.
	base := len(text) - len(reach)
	var spans [][2]int
	start, end := -1, 0
	for i := from; i < len(text); i++ {
		r := int(reach[i-base])
		if r == 0 {
			continue
		}
		if start >= 0 && i <= end {
			end = max(end, r)
			continue
		}
		if start >= 0 {
			spans = append(spans, [2]int{start, end})
		}
		start, end = i, r
	}
	spans = append(spans, [2]int{start, end})
	spans = widenToHashes(text, spans)
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, sp := range spans {
		b.WriteString(text[last:sp[0]])
		b.WriteString(Hidden)
		last = sp[1]
	}
	b.WriteString(text[last:])
	return b.String()
}

// hashRE is a hash as a plan's hash and an image's digest write it.
var hashRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// widenToHashes widens each of spans, sorted stretches of text that do not
// touch, to the whole of every hash it overlaps, and merges those that
// come to touch.
func widenToHashes(text string, spans [][2]int) [][2]int {
	if !strings.Contains(text, "sha256:") {
		return spans
	}
	hashes := hashRE.FindAllStringIndex(text, -1)
	if hashes == nil {
		return spans
	}
	out := spans[:0]
	h := 0
	for _, sp := range spans {
		for h < len(hashes) && hashes[h][1] <= sp[0] {
			h++
		}
		for k := h; k < len(hashes) && hashes[k][0] < sp[1]; k++ {
			sp[0], sp[1] = min(sp[0], hashes[k][0]), max(sp[1], hashes[k][1])
		}
		if n := len(out); n > 0 && sp[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], sp[1])
			continue
		}
		out = append(out, sp)
	}
	return out
}

// Holds reports whether text holds a value: whether String hides anything,
// even where what it writes is the text again (a value "(hidden)").
func (m *Mask) Holds(text string) bool {
	if m == nil {
		return false
	}
	reach, _ := m.cover(text)
	return reach != nil
}

// cover finds the stretches of text that values cover. Every occurrence of
// every value counts, those inside or overlapping another included, so that
// the values that overlap or touch are hidden as one: a leftmost-first
// replacement would hide the first of two overlapping values and show the
// rest of the second. reach[i-base], where base is len(text)-len(reach), is
// one past the end of the longest value found at the byte i, or 0; from is
// where the first starts. reach is nil when text holds no value.
//
// NOTE: a tenant may choose both the values and the text (a chart's message
// quotes what it is given), so the cost must not depend on how values
// repeat themselves. Each value is searched for once over the text, in time
// linear in the text and the value, and the stretches are merged in one
// pass: comparing every value at every position would cost the text's
// length times the values' total length (seconds for 128 KiB of one byte
// against values that start with thousands of it).
func (m *Mask) cover(text string) (reach []int32, from int) {
	// Find the values whose first two bytes occur in the text, and where
	// they first occur; most texts hold none, and most of the rest a few.
	var c candidates
	for i := 0; i+1 < len(text); i++ {
		if p := prefix(text[i:]); m.prefixes[p/64]&(1<<(p%64)) != 0 {
			c.meet(m, p, i)
		}
	}
	if c.starts == nil {
		return nil, 0
	}
	base := c.starts[0].at
	from = len(text)
	for _, st := range c.starts {
		for _, v := range m.byPrefix[st.p] {
			from = min(from, find(text, base, st.at, v, &reach))
		}
	}
	return reach, from
}

// candidates are the two-byte prefixes of values that a text holds, each
// with where it first occurs, in the order they occur.
type candidates struct {
	starts []candidate
	// pending has a bit set for each prefix not met yet, once many are met.
	pending []uint64
}

type candidate struct {
	p  uint16
	at int
}

// meet notes the prefix p of some value at the byte at of the text.
func (c *candidates) meet(m *Mask, p uint16, at int) {
	if c.pending != nil {
		if c.pending[p/64]&(1<<(p%64)) == 0 {
			return
		}
		c.pending[p/64] &^= 1 << (p % 64)
	} else {
		for _, s := range c.starts {
			if s.p == p {
				return
			}
		}
	}
	c.starts = append(c.starts, candidate{p, at})
	if len(c.starts) == 16 && c.pending == nil {
		c.pending = slices.Clone(m.prefixes)
		for _, s := range c.starts {
			c.pending[s.p/64] &^= 1 << (s.p % 64)
		}
	}
}

// find records in reach every occurrence of v in text from the byte at
// from on, overlapping ones included, and returns where the first starts
// (len(text) for none). reach starts at the byte at base of the text; find
// makes it at the first occurrence. strings.Index passes the text up to an occurrence;
// from there the borders of v carry the search on byte by byte while part
// of v may still match, so no byte of the text is compared twice against
// the same part of v.
func find(text string, base, from int, v value, rp *[]int32) int {
	n, first := len(v.s), len(text)
	for i := from; i < len(text); {
		j := strings.Index(text[i:], v.s)
		if j < 0 {
			break
		}
		if *rp == nil {
			*rp = make([]int32, len(text)-base)
		}
		reach := *rp
		i += j + n
		first = min(first, i-n)
		reach[i-n-base] = max(reach[i-n-base], int32(i))
		for k := v.border[n-1]; k > 0 && i < len(text); i++ {
			c := text[i]
			for k > 0 && c != v.s[k] {
				k = v.border[k-1]
			}
			if c == v.s[k] {
				k++
			}
			if int(k) == n {
				reach[i+1-n-base] = max(reach[i+1-n-base], int32(i+1))
				k = v.border[n-1]
			}
		}
	}
	return first
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
