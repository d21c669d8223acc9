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
	"unsafe"
)

// MinLen is the shortest value a Mask hides.
const MinLen = 4

// Worth reports whether a Mask hides v: whether it is MinLen bytes long or
// more, and neither true nor false.
func Worth(v string) bool { return len(v) >= MinLen && v != "true" && v != "false" }

// Hidden replaces a secret value in text.
const Hidden = "(hidden)"

// Mask hides a fixed set of values in text. A nil Mask hides nothing.
//
// It is an Aho–Corasick automaton over the values (in every form New
// lists): a trie of them, its nodes numbered breadth first so that the
// children of each are one run of numbers, with a failure link from each
// node to the longest proper suffix of its text that is in the trie too.
// One pass over a text, a step per byte plus at most as many failure links
// as steps, finds every value that ends at each byte.
type Mask struct {
	// root is the root's child for each byte, or 0 (the root) for none.
	root [256]int32
	// first gives the children of a node: the nodes first[n] to
	// first[n+1]-1, in the order of their bytes, label. Its last is the
	// number of nodes.
	first []int32
	label []byte
	// fail is the failure link of a node.
	fail []int32
	// out is the length of the longest value that is a suffix of the
	// node's text, or 0.
	out []int32
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
	add := func(v string) {
		if Worth(v) {
			keep = append(keep, v)
		}
	}
	for _, v := range secrets {
		add(v)
		if Worth(v) {
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
	return build(slices.Compact(keep))
}

// build makes the automaton of values, sorted and each once.
//
// NOTE: it builds the nodes in their final order, a level of the trie at a
// time, with no trie first: in sorted order the values that share their
// first d bytes are one run, so the nodes of depth d+1 are the distinct
// (d+1)-byte starts of the values in order, and the children of each node
// come after those of the node before it, each one run. So build holds,
// besides the Mask, only a node and a length per value, and the Mask holds
// 13 bytes per node, sized by the nodes there are.
func build(values []string) *Mask {
	// The nodes: one per distinct start of a value, the root's included.
	size := 1
	for i, v := range values {
		common := 0
		if i > 0 {
			prev := values[i-1]
			for common < len(v) && common < len(prev) && v[common] == prev[common] {
				common++
			}
		}
		size += len(v) - common
	}
	m := &Mask{first: make([]int32, size+1), label: make([]byte, size), fail: make([]int32, size), out: make([]int32, size)}
	// at is the node of each value at the depth being built; live are the
	// values longer than that depth, in order.
	at := make([]int32, len(values))
	live := make([]int32, 0, len(values))
	for i := range values {
		live = append(live, int32(i))
	}
	next := int32(1)
	from, to := int32(0), int32(1) // the nodes of the depth before
	for d := 0; len(live) > 0; d++ {
		// The children of the nodes from..to-1, in order.
		parent, last := int32(-1), -1
		kept := live[:0]
		for _, i := range live {
			v, p := values[i], at[i]
			if p != parent || int(v[d]) != last {
				for q := max(parent+1, from); q <= p; q++ {
					m.first[q] = next
				}
				m.label[next] = v[d]
				next++
				parent, last = p, int(v[d])
			}
			at[i] = next - 1
			if len(v) == d+1 {
				m.out[next-1] = int32(d + 1)
			} else {
				kept = append(kept, i)
			}
		}
		for q := max(parent+1, from); q <= to; q++ {
			m.first[q] = next
		}
		live = kept
		// The failure links of the new nodes: each links to a shallower
		// node, whose children are all made.
		for p := from; p < to; p++ {
			for id := m.first[p]; id < m.first[p+1]; id++ {
				c := m.label[id]
				if p == 0 {
					m.root[c] = id
					m.fail[id] = 0
				} else {
					f := m.fail[p]
					for f != 0 && m.child(f, c) < 0 {
						f = m.fail[f]
					}
					if f == 0 {
						m.fail[id] = m.root[c]
					} else {
						m.fail[id] = m.child(f, c)
					}
				}
				if m.out[id] == 0 {
					m.out[id] = m.out[m.fail[id]]
				}
			}
		}
		from, to = to, next
	}
	// The leaves have no children.
	for q := from; q <= int32(size); q++ {
		m.first[q] = next
	}
	return m
}

// child returns the child of the node n with the byte c, or -1.
func (m *Mask) child(n int32, c byte) int32 {
	if n == 0 {
		if ch := m.root[c]; ch != 0 {
			return ch
		}
		return -1
	}
	lo, end := m.first[n], m.first[n+1]
	hi := end
	for lo < hi {
		mid := int32(uint32(lo+hi) >> 1)
		if m.label[mid] < c {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < end && m.label[lo] == c {
		return lo
	}
	return -1
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
	spans := m.cover(text, false)
	if spans == nil {
		return text
	}
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
// even where what it writes is the text again (a value "(hidden)"). It
// stops at the first value it finds.
func (m *Mask) Holds(text string) bool {
	if m == nil {
		return false
	}
	return m.cover(text, true) != nil
}

// cover returns the stretches of text that values cover, in order, each
// merged with those it overlaps or touches: every occurrence of every value
// counts, those inside or overlapping another included, so that values
// that overlap or touch are hidden as one (a leftmost-first replacement
// would hide the first of two overlapping values and show the rest of the
// second). It returns nil when text holds no value, and with first only
// the first stretch found.
//
// NOTE: a tenant may choose both the values and the text (a chart's
// message quotes what it is given), so the cost must not depend on how
// many values share a start or how values and text repeat themselves. The
// automaton finds, at each byte, the longest value that ends there (the
// shorter ones that end there lie within it) in one pass over the text:
// the cost is linear in the text, whatever the values, and building the
// Mask is linear in the values' length. Searching for each value in turn
// would cost the text's length times the number of values that share a
// start with it.
func (m *Mask) cover(text string, first bool) [][2]int {
	var spans [][2]int
	n := int32(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		for {
			if n == 0 {
				n = m.root[c]
				break
			}
			if ch := m.child(n, c); ch >= 0 {
				n = ch
				break
			}
			n = m.fail[n]
		}
		l := m.out[n]
		if l == 0 {
			continue
		}
		start, end := i+1-int(l), i+1
		if first {
			return [][2]int{{start, end}}
		}
		// Stretches end in order, and this one may reach back over
		// those before it.
		for k := len(spans); k > 0 && start <= spans[k-1][1]; k = len(spans) {
			start = min(start, spans[k-1][0])
			spans = spans[:k-1]
		}
		spans = append(spans, [2]int{start, end})
	}
	return spans
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

// Size is about how many bytes m holds, for a cache bounded in bytes.
func (m *Mask) Size() int {
	if m == nil {
		return 0
	}
	return int(unsafe.Sizeof(*m)) + 4*cap(m.first) + cap(m.label) + 4*cap(m.fail) + 4*cap(m.out)
}
