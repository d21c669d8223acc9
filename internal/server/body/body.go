// Package body reads and checks the JSON bodies of the HTTP API's requests.
// It needs no client, so that this parser of outside input is tested, and
// fuzzed, with no control plane.
package body

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/strictjson"
	"capstan.dev/capstan/internal/values"
)

// Error is a body the API refuses as a bad request.
type Error struct {
	// Field names the request field at fault, when one is.
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func refuse(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Add is the body of an add.
type Add struct {
	Name string              `json:"name"`
	Spec capstanv1.AddonSpec `json:"spec"`
	// SecretInputs are the values of writeOnly inputs by targetPath. They go
	// into a new values Secret and are never shown back.
	SecretInputs map[string]string `json:"secretInputs,omitempty"`
}

// MaxName is the longest an Addon's name may be: Helm's limit for a
// release name, which the Addon's CRD holds to with a rule of its own.
const MaxName = 53

// NameProblems says why name cannot name an Addon, or nothing when it can:
// it is a DNS subdomain of at most MaxName characters. It is checked before
// anything is fetched or written, so that a long name is not first refused
// as a values Secret's label, after a chart download.
func NameProblems(name string) []string {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errs
	}
	if len(name) > MaxName {
		return []string{fmt.Sprintf("an Addon's name is at most %d characters, Helm's limit for a release name; this one is %d", MaxName, len(name))}
	}
	return nil
}

// Check refuses an add whose name cannot name an Addon, or whose secret
// inputs are not at targetPaths (secretInputPaths).
func (a *Add) Check() error {
	if a.Name == "" {
		return refuse("name", `the body names no add-on: send {"name": "...", "spec": {...}}, with the Addon's name and spec`)
	}
	if errs := NameProblems(a.Name); len(errs) > 0 {
		return refuse("name", "name %q: %s", a.Name, strings.Join(errs, "; "))
	}
	return secretInputPaths(a.SecretInputs)
}

// secretInputPaths refuses secret inputs whose key is not a targetPath
// (auth.password, users[0].password), naming the first such input in
// sorted order, so that one is refused before anything is fetched or
// written.
func secretInputPaths(inputs map[string]string) error {
	for _, p := range slices.Sorted(maps.Keys(inputs)) {
		if _, err := values.PathSegments(p); err != nil {
			return refuse(fmt.Sprintf("secretInputs[%q]", p), "secret input %q: %v: name the value as a targetPath, such as auth.password or users[0].password", p, err)
		}
	}
	return nil
}

// Change is the body of a plan of a proposed change and of an edit: a
// JSON merge patch of the spec, and secret inputs by targetPath.
type Change struct {
	Spec         json.RawMessage   `json:"spec,omitempty"`
	SecretInputs map[string]string `json:"secretInputs,omitempty"`
	// Definition is the whole new definition file of an Addon that git
	// manages (the format of addons/*.yaml); an edit of one is a commit.
	Definition string `json:"definition,omitempty"`
	// Base is, with a definition, the git blob hash of the file it was
	// made from (git rev-parse HEAD:addons/NAME.yaml): when git holds
	// another version by then, the edit is refused (409) and nothing is
	// committed, rather than undo a colleague's commit.
	Base string `json:"base,omitempty"`
}

// Check refuses a change whose secret inputs are not at targetPaths.
func (c *Change) Check() error {
	return secretInputPaths(c.SecretInputs)
}

// Edit is the body of an edit: a Change, and optionally the version of
// the Addon it was made from. With either set, an edit of an Addon that is
// not that version any more is refused (409) and nothing is written, so
// that two clients that read the same spec do not silently overwrite each
// other's change.
type Edit struct {
	Change
	// Generation is the Addon's metadata.generation the change was made
	// from: any spec change since, by anyone, moves it.
	Generation int64 `json:"generation,omitempty"`
	// UID is the Addon's metadata.uid: an Addon deleted and created again
	// under the same name has another.
	UID string `json:"uid,omitempty"`
}

// Check refuses an edit whose generation cannot be an Addon's, or whose
// change Change.Check refuses.
func (e *Edit) Check() error {
	if e.Generation < 0 {
		return refuse("generation", "generation %d is not an Addon's metadata.generation, which is 1 or more: send the one you read, or leave it out", e.Generation)
	}
	return e.Change.Check()
}

// Approval is the body of an approve or an install: the reviewed plan.
type Approval struct {
	Hash string `json:"hash"`
}

// Check refuses an approval that names no plan.
func (a *Approval) Check() error {
	if a.Hash == "" {
		return refuse("hash", "name the plan you reviewed: {\"hash\": \"sha256:...\"}")
	}
	return nil
}

// SignIn is the body of a sign-in: a Kubernetes token.
type SignIn struct {
	Token string `json:"token"`
}

// Check refuses a sign-in without a token.
func (s *SignIn) Check() error {
	if s.Token == "" {
		return refuse("token", "sign in with a Kubernetes token: {\"token\": \"...\"}")
	}
	return nil
}

// Decode reads a JSON body into v; an empty body leaves v as it is. A body
// over the server's limit is the reader's *http.MaxBytesError; any other
// problem is an *Error.
func Decode(r io.Reader, v any) error {
	// NOTE: the body is read whole first (the server bounds it) because
	// encoding/json replaces invalid UTF-8 in strings with U+FFFD rather
	// than refusing it: a Latin-1 password would be written to the values
	// Secret as other bytes than were sent, with no word of it.
	data, err := io.ReadAll(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return refuse("", "the request body could not be read: %v", err)
	}
	if at := invalidUTF8(data); at >= 0 {
		return refuse("", "the request body is not UTF-8 at byte %d: JSON must be sent as UTF-8", at)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return refuse("", "the request body is not the JSON this endpoint takes: %v", err)
	}
	// NOTE: encoding/json matches a key to a field in any letter case, so
	// {"name":"blog","Name":"other"} passed the check of keys given twice,
	// which compares them exactly, and named the Addon other; the API
	// server and kubectl match field names exactly.
	if err := strictjson.Unmarshal(first, v); err != nil {
		var unknown *strictjson.UnknownField
		if errors.As(err, &unknown) {
			return refuse(unknown.Path, "the request body is not the JSON this endpoint takes: %v", err)
		}
		return refuse("", "the request body is not the JSON this endpoint takes: %v", err)
	}
	// NOTE: Decode stops after the first value; without reading on to the
	// end, a body such as {"hash":"a"}{"hash":"b"} or {}0 was taken as its
	// first part.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return refuse("", "the request body holds more than one JSON value; send one JSON object")
	}
	// NOTE: encoding/json also replaces with U+FFFD, silently, a \uD800 to
	// \uDFFF escape that is not half of a pair. That is how text that was
	// not UTF-8 reaches a JSON body from Python (surrogateescape, as
	// sys.argv and os.environ decode it): a Latin-1 password would reach
	// its Secret as other bytes than were meant. The body is one JSON value
	// by now, so its strings are found exactly.
	if at, esc := loneSurrogate(data); at >= 0 {
		return refuse("", "a string escape of the request body is a lone UTF-16 surrogate (%s) at byte %d, which stands for no character; send the text as UTF-8", esc, at)
	}
	// NOTE: encoding/json keeps the last of a key given twice, silently: a
	// body that a script made by appending an override to a template, or
	// a client that merged two maps badly, would name another Addon, set
	// another deletionPolicy or write another password than the one it
	// checked. Capstan's definitions and render -f refuse a key given
	// twice, and so does kubectl's strict field validation.
	if err := duplicateKey(data); err != nil {
		return err
	}
	return nil
}

// maxShownKey is how much of a key a refusal quotes: a key may be as long
// as the body.
const maxShownKey = 64

// duplicateKey refuses a key given twice in one object of data, one JSON
// value, at any depth: the spec patch and spec.values are raw JSON to the
// decoder, and a merge patch keeps the last of two keys as well. Keys are
// compared as they decode ("a" and "\u0061" are one key). It reads data
// once and keeps each key once, so its time is linear in the body; the
// path to a key is only spelled out for the refusal.
func duplicateKey(data []byte) error {
	// frame is one open object or array: the keys an object has given, or
	// the next index of an array, and the segment that leads to it.
	type frame struct {
		keys    map[string]struct{}
		index   int
		segment string
		// key is an object's last key; wantKey says whether the next
		// token is a key (true) or that key's value.
		key     string
		wantKey bool
	}
	var stack []frame
	// value is called for each value: it returns the value's segment
	// within the container on top, and moves the container on.
	value := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := &stack[len(stack)-1]
		if top.keys != nil {
			top.wantKey = true
			return keySegment(top.key)
		}
		top.index++
		return "[" + strconv.Itoa(top.index-1) + "]"
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return refuse("", "the request body is not the JSON this endpoint takes: %v", err)
		}
		if key, ok := tok.(string); ok && len(stack) > 0 && stack[len(stack)-1].wantKey {
			top := &stack[len(stack)-1]
			if _, seen := top.keys[key]; seen {
				var at strings.Builder
				for _, f := range stack[1:] {
					at.WriteString(f.segment)
				}
				at.WriteString(keySegment(key))
				field := strings.TrimPrefix(at.String(), ".")
				return refuse(field, "%s is given twice in the request body: keep one", field)
			}
			top.keys[key] = struct{}{}
			top.key, top.wantKey = key, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]struct{}{}, segment: value(), wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{segment: value()})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			value()
		}
	}
}

// keySegment is key as a segment of a field's path: .name for a key that
// is a name, and ["a.b"] for any other, cut to maxShownKey characters.
func keySegment(key string) string {
	if isName(key) {
		return "." + key
	}
	if len(key) > maxShownKey {
		cut := maxShownKey
		for cut > 0 && !utf8.RuneStart(key[cut]) {
			cut--
		}
		return "[" + strconv.Quote(key[:cut]) + "…]"
	}
	return "[" + strconv.Quote(key) + "]"
}

// isName says whether key is a short name of letters, digits, - and _
// that starts with a letter, as the fields of a spec are.
func isName(key string) bool {
	if key == "" || len(key) > maxShownKey {
		return false
	}
	for i, c := range key {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '-')) {
			return false
		}
	}
	return true
}

// loneSurrogate is the offset of the first \u escape in the strings of
// data, one JSON value, that is a UTF-16 surrogate but not half of a pair
// (a high one, \uD800 to \uDBFF, followed at once by a low one, \uDC00
// to \uDFFF), and the escape; -1 when there is none.
func loneSurrogate(data []byte) (int, string) {
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c != '\\' || i+1 >= len(data):
		case data[i+1] != 'u':
			// NOTE: \\ among them: the u of \\u is a letter, not an escape.
			i++
		default:
			r, ok := escapedUnit(data, i)
			switch {
			case !ok || !utf16.IsSurrogate(r):
				i += 5
			case r < 0xDC00:
				if low, ok := escapedUnit(data, i+6); ok && low >= 0xDC00 && low <= 0xDFFF {
					i += 11
					continue
				}
				return i, string(data[i : i+6])
			default:
				return i, string(data[i : i+6])
			}
		}
	}
	return -1, ""
}

// escapedUnit reads the \uXXXX escape at data[i:], if there is one there.
func escapedUnit(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}

// invalidUTF8 is the offset of the first byte of data that is not UTF-8, or
// -1 when all of it is.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
