// Package registration reads the manifest an add-on's primary serves: the
// console's address, the tiles the page shows and the setup steps left. It
// is apart from the controller so that this parser of outside input is
// tested, and fuzzed, with no control plane.
package registration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/conditions"
)

// An add-on written for Capstan marks itself in Chart.yaml
// (capstan.dev/addon: "true") and names its primary Service
// (capstan.dev/primary: NAME or NAME:PORT). Once the add-on is Ready, the
// controller reads the add-on's manifest from the primary, through the fetch
// guard, and records it in status.registration: the console's address, the
// tiles the page shows, and the setup steps left. See docs/registration.md.

// ManifestPath is where a primary serves the add-on's manifest.
const ManifestPath = "/.well-known/capstan/addon.json"

// Limits of a manifest: it is read into the Addon's status, and shown on
// the page. MaxManifestBytes bounds what is fetched.
const (
	MaxManifestBytes = 64 << 10
	maxTiles         = 24
	maxSetupSteps    = 24
	maxTitleRunes    = 80
	maxIconChars     = 4
	maxIconBytes     = 64
	maxStepRunes     = 500
	maxURLBytes      = 2048
	maxReasonBytes   = 100
)

// manifest is the document a primary serves.
type manifest struct {
	Name       string `json:"name"`
	ConsoleURL string `json:"consoleURL"`
	Tiles      []struct {
		Title string `json:"title"`
		Icon  string `json:"icon"`
		Link  string `json:"link"`
	} `json:"tiles"`
	Setup []string `json:"setup"`
}

// Parse reads a manifest for the add-on named name, or says what is
// wrong with it. Every link must be http or https, so that the page never
// carries a script: or data: link from an add-on.
func Parse(data []byte, name string) (*capstanv1.Registration, error) {
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("the manifest is not the JSON Capstan reads: %s", shortReason(err))
	}
	// NOTE: Decode stops after the first value; a manifest followed by
	// anything else is not the document the primary meant to serve.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("the manifest is not the JSON Capstan reads: it holds more than one JSON value")
	}
	if m.Name != name {
		return nil, fmt.Errorf("the manifest names the add-on %q, not %q; an add-on registers its own name only", quotable(m.Name, 63), name)
	}
	reg := &capstanv1.Registration{Name: m.Name}
	if m.ConsoleURL != "" {
		if err := webURL(m.ConsoleURL); err != nil {
			return nil, fmt.Errorf("consoleURL: %v", err)
		}
		reg.ConsoleURL = m.ConsoleURL
	}
	if len(m.Tiles) > maxTiles {
		return nil, fmt.Errorf("the manifest has %d tiles; at most %d are shown", len(m.Tiles), maxTiles)
	}
	for i, t := range m.Tiles {
		switch {
		case strings.TrimSpace(t.Title) == "" || utf8.RuneCountInString(t.Title) > maxTitleRunes:
			return nil, fmt.Errorf("tiles[%d].title must have 1 to %d characters", i, maxTitleRunes)
		case len(t.Icon) > maxIconBytes || shownChars(t.Icon) > maxIconChars:
			return nil, fmt.Errorf("tiles[%d].icon must be a short text, such as an emoji, of at most %d characters as shown and %d bytes", i, maxIconChars, maxIconBytes)
		}
		if err := visible(fmt.Sprintf("tiles[%d].title", i), t.Title, titleText); err != nil {
			return nil, err
		}
		if err := visible(fmt.Sprintf("tiles[%d].icon", i), t.Icon, iconText); err != nil {
			return nil, err
		}
		if err := webURL(t.Link); err != nil {
			return nil, fmt.Errorf("tiles[%d].link: %v", i, err)
		}
		reg.Tiles = append(reg.Tiles, capstanv1.Tile{Title: t.Title, Icon: t.Icon, Link: t.Link})
	}
	if len(m.Setup) > maxSetupSteps {
		return nil, fmt.Errorf("the manifest has %d setup steps; at most %d are shown", len(m.Setup), maxSetupSteps)
	}
	for i, step := range m.Setup {
		if strings.TrimSpace(step) == "" || utf8.RuneCountInString(step) > maxStepRunes {
			return nil, fmt.Errorf("setup[%d] must have 1 to %d characters", i, maxStepRunes)
		}
		if err := visible(fmt.Sprintf("setup[%d]", i), step, stepText); err != nil {
			return nil, err
		}
	}
	reg.Setup = m.Setup
	return reg, nil
}

// textKind is what a text of the manifest is, for visible.
type textKind int

const (
	titleText textKind = iota
	stepText
	iconText
)

// visible refuses text of the manifest that holds a character that can
// spoof or hide text: the page shows a title or a step next to the add-on
// it comes from, and a right-to-left override in it would turn that
// attribution around, or a zero-width space pass for a title. Refused are
// control characters (but a tab, line feed or carriage return in a setup
// step, which the page shows as a space), the bidi embeddings, overrides
// and isolates, invisible spaces and operators (hidden), the byte order
// mark, the deprecated format controls, the interlinear annotation marks,
// and tag characters. Kept are the characters that writing needs: the
// zero-width non-joiner and joiner between letters (Persian, Kurdish and
// Indic scripts) or, for the joiner, between emoji; the left-to-right,
// right-to-left and Arabic letter marks, which order only the text
// around them, within the <bdi> the page shows each text in; and the
// soft hyphen. An icon keeps only what an emoji sequence needs: a
// zero-width joiner between two emoji, and the tags of a subdivision flag
// after its black flag. A title or step must also show something.
func visible(field, s string, kind textKind) error {
	var prev rune
	shown := false
	rest := s
	for rest != "" {
		r, size := utf8.DecodeRuneInString(rest)
		rest = rest[size:]
		next, _ := utf8.DecodeRuneInString(rest)
		hidden := unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)
		emojiJoiner := r == 0x200D && (emoji(prev) || isVariation(prev) || isSkinTone(prev)) && emoji(next)
		switch {
		case !hidden:
			shown = shown || !unicode.IsSpace(r)
		case kind == iconText && emojiJoiner:
		case kind == iconText && isTag(r) && (prev == 0x1F3F4 || isTag(prev)):
		case kind == iconText:
			return fmt.Errorf("%s holds an invisible or direction-changing character (U+%04X); remove it", field, r)
		case kind == stepText && (r == '\t' || r == '\n' || r == '\r'):
		case (r == 0x200C || r == 0x200D) && (letter(prev) && letter(next) || emojiJoiner):
		case !spoofs(r):
		case r == 0x200C || r == 0x200D:
			return fmt.Errorf("%s holds a zero-width joiner or non-joiner (U+%04X) that joins no letters; remove it", field, r)
		default:
			return fmt.Errorf("%s holds an invisible or direction-changing character (U+%04X); remove it", field, r)
		}
		prev = r
	}
	if !shown && kind != iconText {
		return fmt.Errorf("%s shows nothing: it holds only spaces and invisible characters", field)
	}
	return nil
}

// letter says whether r is a letter or a mark, which a zero-width
// joiner or non-joiner may stand between (a virama before it is a mark).
func letter(r rune) bool { return unicode.IsLetter(r) || unicode.IsMark(r) }

// spoofs says whether a control or format character r can spoof or hide
// text: a control character, a bidi embedding, override or isolate, an
// invisible space, joiner or operator, the byte order mark, a deprecated
// format control, an interlinear annotation mark or a tag.
func spoofs(r rune) bool {
	switch {
	case unicode.Is(unicode.Cc, r):
		return true
	case 0x202A <= r && r <= 0x202E, 0x2066 <= r && r <= 0x2069:
		return true
	case r == 0x200B, r == 0x200C, r == 0x200D, 0x2060 <= r && r <= 0x2064, r == 0xFEFF:
		return true
	case 0x206A <= r && r <= 0x206F, 0xFFF9 <= r && r <= 0xFFFB:
		return true
	case r == 0xE0001, isTag(r):
		return true
	}
	return false
}

// webURL accepts an absolute http or https URL.
func webURL(s string) error {
	if len(s) > maxURLBytes {
		return fmt.Errorf("longer than %d bytes", maxURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL", quotable(s, 80))
	}
	return nil
}

// shortReason is err's message as a condition may quote it: the JSON
// decoder's errors quote the document (a field's name, a character).
func shortReason(err error) string {
	return quotable(err.Error(), maxReasonBytes)
}

// quotable is text of the document as a refusal may quote it: the document
// comes from whoever serves the primary, and must not be read back through
// the Addon's condition, so only printable ASCII is kept (any other
// character is a ?), and at most n bytes of it, n no more than
// maxReasonBytes. A refusal quotes one such text at most.
func quotable(s string, n int) string {
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
	return conditions.Truncate(clean, min(n, maxReasonBytes))
}

// shownChars counts the characters of an icon as a page shows them: an
// emoji sequence, such as a family joined by zero-width joiners, a skin
// tone, a flag of two regional indicators or a keycap, is one character,
// though it has several code points.
//
// NOTE: an approximation of Unicode's grapheme clusters for emoji, so that
// no dependency is added for it. A variation selector and a combining
// keycap add no character. The rest adds none only where a browser joins
// it to what comes before: a code point joined by a zero-width joiner, when
// it and the character before the joiner are both emoji; a skin tone right
// after an emoji; a tag after a black flag (the base of a subdivision
// flag); the second regional indicator of a flag. Anything else, a letter
// after a joiner included, is a character of its own, so joiners cannot
// hide text in an icon.
func shownChars(s string) int {
	n := 0
	var base, prev rune // the first code point of the current character, and the code point before r
	joined, flag := false, false
	for _, r := range s {
		if r == 0x200D { // zero-width joiner
			joined = emoji(base) && (emoji(prev) || isVariation(prev))
			prev = r
			flag = false
			continue
		}
		pair := flag && isRegional(r)
		switch {
		case joined && emoji(r):
			base = r
		case isVariation(r), r == 0x20E3: // combining keycap
		case isSkinTone(r) && emoji(prev) && !isSkinTone(prev):
		case isTag(r) && base == 0x1F3F4 && (prev == 0x1F3F4 || isTag(prev)):
		case pair:
		default:
			n++
			base = r
		}
		flag = isRegional(r) && !pair
		joined = false
		prev = r
	}
	return n
}

// emoji reports whether r is a pictographic emoji (roughly Unicode's
// Extended_Pictographic), skin tones and regional indicators included:
// the emoji planes, the symbols and dingbats, and the arrows, technical
// symbols, geometric shapes and the stars and squares of U+2B00–U+2BFF,
// which standard sequences join (⬛ in the black cat 🐈‍⬛).
func emoji(r rune) bool {
	return 0x1F000 <= r && r <= 0x1FAFF || 0x2600 <= r && r <= 0x27BF ||
		0x2190 <= r && r <= 0x23FF || 0x25A0 <= r && r <= 0x25FF || 0x2B00 <= r && r <= 0x2BFF
}

func isVariation(r rune) bool { return 0xFE00 <= r && r <= 0xFE0F }
func isSkinTone(r rune) bool  { return 0x1F3FB <= r && r <= 0x1F3FF }
func isTag(r rune) bool       { return 0xE0020 <= r && r <= 0xE007F }
func isRegional(r rune) bool  { return 0x1F1E6 <= r && r <= 0x1F1FF }
