package mask

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestHidesLongValuesWhole(t *testing.T) {
	m := New([]string{"hunter2-long", "hunter2", "1", "true", "abc", "hunter2"})
	if got, want := m.String("a=hunter2-long b=hunter2 c=1 d=true e=abc"), "a=(hidden) b=(hidden) c=1 d=true e=abc"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if New([]string{"1", "true", "no"}) != nil {
		t.Error("a Mask of only short values and booleans should be nil, hiding nothing")
	}
	var none *Mask
	if none.String("hunter2") != "hunter2" || none.Holds("hunter2") {
		t.Error("a nil Mask should hide nothing")
	}
}

// TestHidesQuotedFormsAndKeepsHashes hides a value with a quote and
// a line break as a message quotes it, each line of a PEM-like value, and
// leaves a plan's hash that holds no value whole.
func TestHidesQuotedFormsAndKeepsHashes(t *testing.T) {
	secret := "pa\"ss\nw0rd-line-two"
	hash := "sha256:" + strings.Repeat("6789", 16)
	m := New([]string{secret, "5432"})
	for _, text := range []string{
		fmt.Sprintf("Invalid value: %q: a label must", secret),
		"in JSON: " + mustJSON(t, secret),
		"the second line alone: w0rd-line-two",
	} {
		if got := m.String(text); strings.Contains(got, "w0rd") || strings.Contains(got, "ss\\n") {
			t.Errorf("String(%q) = %q; the value shows", text, got)
		}
	}
	msg := "set spec.approvedPlan to " + hash + " on port 5432"
	if got, want := m.String(msg), "set spec.approvedPlan to "+hash+" on port (hidden)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// TestHidesAValueInAPlansHash: a value that is a hash like a plan's, holds
// one, or runs on past one is hidden like any other, and Holds says so.
func TestHidesAValueInAPlansHash(t *testing.T) {
	hex := "3f9a1c07e2b84d65a0c9f1e37b2d8456c1e0a9f47b3d2e618c5a0f9e4d7b2a13"
	for _, tc := range []struct {
		name, secret, text, want string
	}{
		{"the hash's digits", hex, "password_hash = sha256:" + hex, "password_hash = (hidden)"},
		{"the whole hash", "sha256:" + hex, "password_hash = sha256:" + hex + ".", "password_hash = (hidden)."},
		{"past the digits", hex + "0a1b2c", "token sha256:" + hex + "0a1b2c", "token (hidden)"},
		// NOTE: hidden in part, the hash would give the value away to
		// whoever reads it whole elsewhere.
		{"in part", hex[40:], "plan sha256:" + hex, "plan (hidden)"},
		{"a short value of hex digits in a digest", "5432", "image@sha256:" + hex[:20] + "5432" + hex[24:] + " on port 5432", "image@(hidden) on port (hidden)"},
		{"two hashes, one holding the value", "5432", "sha256:" + hex + " sha256:" + hex[:20] + "5432" + hex[24:], "sha256:" + hex + " (hidden)"},
		{"a value that reads (hidden)", Hidden, "set to " + Hidden, "set to " + Hidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New([]string{tc.secret})
			if got := m.String(tc.text); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.text, got, tc.want)
			}
			if !m.Holds(tc.text) {
				t.Errorf("Holds(%q) = false", tc.text)
			}
		})
	}
}

func TestStringsOfAValuesTree(t *testing.T) {
	tree := map[string]any{"a": "x1", "b": []any{"y2", map[string]any{"c": "x1", "d": 3, "e": true}}}
	if got, want := Strings(tree), []string{"x1", "y2"}; !slices.Equal(got, want) {
		t.Errorf("Strings = %q, want %q", got, want)
	}
}

func mustJSON(t *testing.T, v string) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHidesBase64OfAValueAlone: a value is hidden in base64 too, standard
// and URL-safe, padded or not, when it was encoded alone; a value too short
// to hide is not hidden in base64 either.
func TestHidesBase64OfAValueAlone(t *testing.T) {
	m := New([]string{"?>?~~pass>?", "abc", "true"})
	for _, tc := range []struct{ text, want string }{
		{"data: Pz4/fn5wYXNzPj8=", "data: (hidden)"},
		{"data: Pz4/fn5wYXNzPj8", "data: (hidden)"},
		{"data: Pz4_fn5wYXNzPj8=", "data: (hidden)"},
		{`"Pz4_fn5wYXNzPj8"`, `"(hidden)"`},
		{"too short: YWJj, a boolean: dHJ1ZQ==", "too short: YWJj, a boolean: dHJ1ZQ=="},
	} {
		if got := m.String(tc.text); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestHidesURLEscapedValues: a value in a URL is hidden as it is escaped
// in a path or user info and in a query; a value too short to hide is not
// hidden escaped either, though escaping makes it longer.
func TestHidesURLEscapedValues(t *testing.T) {
	m := New([]string{"s3cretPassw0rd!", "p@ss w/rd", "ab!"})
	for _, tc := range []struct{ text, want string }{
		{"postgres://u:s3cretPassw0rd%21@db:5432/app", "postgres://u:(hidden)@db:5432/app"},
		{"https://db/?user=u&password=p%40ss+w%2Frd", "https://db/?user=u&password=(hidden)"},
		{"https://db/p@ss%20w%2Frd/x", "https://db/(hidden)/x"},
		{"https://db/?q=ab%21", "https://db/?q=ab%21"},
	} {
		if got := m.String(tc.text); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestHidesOverlappingValuesWhole: where two values overlap in a text, or
// one follows the other, neither shows in part.
func TestHidesOverlappingValuesWhole(t *testing.T) {
	m := New([]string{"1234wxyz", "wxyz-s3cret-long", "abab"})
	for _, tc := range []struct{ text, want string }{
		{"token=1234wxyz-s3cret-long.", "token=(hidden)."},
		{"token=wxyz-s3cret-long1234wxyz", "token=(hidden)"},
		{"a 1234wxyz and a wxyz-s3cret-long", "a (hidden) and a (hidden)"},
		{"ababab", "(hidden)"},
	} {
		got := m.String(tc.text)
		if got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("String(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestHidesWhatEveryOccurrenceCovers compares the mask with the plainest
// search there is, every value at every position, on texts and values of
// two letters, which overlap and repeat themselves in every way.
func TestHidesWhatEveryOccurrenceCovers(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab"[rnd.IntN(2)]
		}
		return string(b)
	}
	for range 2000 {
		var secrets []string
		for range 1 + rnd.IntN(4) {
			secrets = append(secrets, word(MinLen+rnd.IntN(5)))
		}
		m := New(secrets)
		text := word(rnd.IntN(40))
		want := plainHide(secrets, text)
		if got := m.String(text); got != want {
			t.Fatalf("New(%q).String(%q) = %q, want %q", secrets, text, got, want)
		}
		if got := m.Holds(text); got != (want != text) {
			t.Fatalf("New(%q).Holds(%q) = %v, want %v", secrets, text, got, want != text)
		}
	}
}

// plainHide hides what a Mask of secrets does in a text of the secrets'
// letters, comparing every value at every position. (The other forms a
// Mask looks for, such as base64, hold other letters.)
func plainHide(secrets []string, text string) string {
	covered := make([]bool, len(text))
	for _, v := range secrets {
		for i := range text {
			if strings.HasPrefix(text[i:], v) {
				for j := i; j < i+len(v); j++ {
					covered[j] = true
				}
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if !covered[i] {
			b.WriteByte(text[i])
			continue
		}
		b.WriteString(Hidden)
		for i+1 < len(text) && covered[i+1] {
			i++
		}
	}
	return b.String()
}

// TestHideTakesTimeLinearInTheText: a tenant chooses both the values and
// the text, and no choice of them may tie up the controller.
func TestHideTakesTimeLinearInTheText(t *testing.T) {
	text := strings.Repeat("a", 128<<10)
	var near []string
	for n := range 200 {
		near = append(near, strings.Repeat("a", 4000)+strconv.Itoa(n))
	}
	m := New(near)
	start := time.Now()
	if got := m.String(text); got != text {
		t.Errorf("String hid %d bytes that hold no value", len(text)-len(got))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("String took %v on 128 KiB against 200 values that almost occur everywhere", d)
	}
}

// TestHidesBase64OfAValueWithinText: a value encoded with text around it
// (user:password for basic auth, a registry's auth) is hidden whatever
// the text before it, in both alphabets.
func TestHidesBase64OfAValueWithinText(t *testing.T) {
	pw := "s3cretPassw0rd!"
	m := New([]string{pw, "?>?~~pass>?"})
	enc := base64.StdEncoding.EncodeToString
	for _, text := range []string{
		"k: 'Authorization: Basic dXNlcjpzM2NyZXRQYXNzdzByZCE='",                      // user:s3cretPassw0rd!
		`{"auths":{"r.io":{"auth":"Ym9iOnMzY3JldFBhc3N3MHJkIQ=="}}}`,                  // bob:s3cretPassw0rd!
		"auth: " + enc([]byte("u:"+pw+"@db")),                                         // the value 2 bytes into a group
		"auth: " + enc([]byte("ab:"+pw+"@db")),                                        // 0 bytes into a group
		"url-safe: " + base64.RawURLEncoding.EncodeToString([]byte("x:?>?~~pass>?;")), // - and _
		"standard: " + enc([]byte("xy:?>?~~pass>?;")),                                 // + and /
	} {
		got := m.String(text)
		if !m.Holds(text) || !strings.Contains(got, Hidden) {
			t.Errorf("String(%q) = %q; the value's base64 shows", text, got)
		}
	}
	// A value of MinLen bytes gives too few characters that are its alone:
	// any long base64 would hold them by chance.
	short := New([]string{"abcd"})
	if text := enc([]byte("x:abcd;")); short.String(text) != text {
		t.Errorf("String(%q) = %q; a core of a value of MinLen bytes was hidden", text, short.String(text))
	}
}

// TestHidesBase64OfAValueWithAnyNeighbours encodes random values between
// random bytes, at every offset from a group of three bytes, in every
// alphabet, padded or not, and checks that the mask holds each.
func TestHidesBase64OfAValueWithAnyNeighbours(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	bytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.IntN(256))
		}
		return b
	}
	encs := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
	for range 3000 {
		v := string(bytes(MinLen + 1 + rnd.IntN(12)))
		m := New([]string{v})
		plain := append(append(bytes(rnd.IntN(7)), v...), bytes(rnd.IntN(7))...)
		text := "data: " + encs[rnd.IntN(len(encs))].EncodeToString(plain)
		if !m.Holds(text) {
			t.Fatalf("New(%q).Holds(%q) = false; the text encodes %q", v, text, plain)
		}
	}
}

// TestHideTakesTimeLinearInTheValues: the values may be many and share
// their start (a writeOnly list of a chart's defaults), and the text may
// hold that start everywhere; still the text is read once, not once per
// value.
func TestHideTakesTimeLinearInTheValues(t *testing.T) {
	var values []string
	for i := range 100_000 {
		values = append(values, fmt.Sprintf("aaaa%06d", i))
	}
	start := time.Now()
	m := New(values)
	built := time.Since(start)
	text := strings.Repeat("a", 256<<10)
	start = time.Now()
	if got := m.String(text); got != text {
		t.Errorf("String hid %d bytes that hold no value", len(text)-len(got))
	}
	if m.Holds(text) {
		t.Error("Holds found a value in a text that holds none")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("String and Holds took %v on 256 KiB against 100,000 values that share its start", d)
	}
	every := strings.Join(values[:20_000], "")
	start = time.Now()
	if got := m.String(every); got != Hidden {
		t.Errorf("String of 20,000 values that follow one another = %.40q…, want one %s", got, Hidden)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("String took %v on 20,000 values that follow one another", d)
	}
	t.Logf("New of 100,000 values took %v", built)
}

// TestHidesWhatEveryOccurrenceOfManyValuesCovers is
// TestHidesWhatEveryOccurrenceCovers with many values, whose failure links
// cross from one value to another in every way.
func TestHidesWhatEveryOccurrenceOfManyValuesCovers(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rnd.IntN(3)]
		}
		return string(b)
	}
	for range 500 {
		var secrets []string
		for range 1 + rnd.IntN(60) {
			secrets = append(secrets, word(MinLen+rnd.IntN(8)))
		}
		m := New(secrets)
		text := word(rnd.IntN(200))
		want := plainHide(secrets, text)
		if got := m.String(text); got != want {
			t.Fatalf("New(%q).String(%q) = %q, want %q", secrets, text, got, want)
		}
		if got := m.Holds(text); got != (want != text) {
			t.Fatalf("New(%q).Holds(%q) = %v, want %v", secrets, text, got, want != text)
		}
	}
}

// TestBuildAllocatesLittleMoreThanTheMask: building the mask of a CA
// bundle of 207 KiB (a values Secret's, within values.Compose's bound)
// allocates little beyond the mask itself (some 13 bytes a node) and the
// values' forms: no trie of the values first, nor arrays sized by their
// length together. The whole build allocates less than 48 MiB.
func TestBuildAllocatesLittleMoreThanTheMask(t *testing.T) {
	values := []string{caBundle(), "hunter2-correct-horse", "battery-staple-42"}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := New(values)
	runtime.ReadMemStats(&after)
	nodes := len(m.label)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 48<<20 {
		t.Errorf("building the mask of %d nodes allocated %.1f MiB", nodes, float64(alloc)/(1<<20))
	}
	if !m.Holds("x"+strings.Split(values[0], "\n")[1]+"y") || !m.Holds(values[0]) {
		t.Error("the mask should hide the bundle and each of its lines")
	}
}
