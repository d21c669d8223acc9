package registration

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hiddenRune is a control or invisible formatting character.
func hiddenRune(r rune) bool { return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) }

// spoofing finds in a title or step (step says which) a character that
// can spoof or hide text: a control character (but a tab or line break in
// a step), a bidi embedding, override or isolate, an invisible space or
// operator, the byte order mark, a tag, or a joiner or non-joiner beside a
// space or at an end. It returns -1 if there is none.
func spoofing(s string, step bool) int {
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			if !step {
				return i
			}
		case unicode.Is(unicode.Cc, r), 0x202A <= r && r <= 0x202E, 0x2066 <= r && r <= 0x2069,
			r == 0x200B, 0x2060 <= r && r <= 0x2064, r == 0xFEFF, 0xE0000 <= r && r <= 0xE007F:
			return i
		case r == 0x200C || r == 0x200D:
			if i == 0 || i == len(rs)-1 || unicode.IsSpace(rs[i-1]) || unicode.IsSpace(rs[i+1]) || hiddenRune(rs[i-1]) || hiddenRune(rs[i+1]) {
				return i
			}
		}
	}
	return -1
}

// FuzzParse feeds any document to the manifest parser. An accepted manifest
// is one JSON value, registers the add-on's own name, holds only http and
// https links and stays within the limits, and no text that can spoof or
// hide text; serialised again, it parses to the same registration.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"name":"wiki","consoleURL":"https://wiki.example/admin","tiles":[{"title":"Wiki","icon":"📚","link":"https://wiki.example/"}],"setup":["Create the first page."]}`,
		`{"name":"wiki","tiles":[{"title":"x","link":"data:text/html,hi"}]}`,
		`{"name":"wiki","consoleURL":"javascript:alert(1)"}`,
		`{"name":"wiki","setup":[""]}`,
		`{"name":"wiki"} {"name":"blog"}`,
		`{"name":"wiki","tiles":null,"setup":null}`,
		`not json`,
		`{"name":"wiki","tiles":[{"title":"می\u200cخواهم \u200e","link":"https://a.example/"}],"setup":["a\nb\tc"]}`,
		`{"name":"wiki","tiles":[{"title":"a\u202eb","link":"https://a.example/"}],"setup":["\u200c"]}`,
	} {
		f.Add([]byte(s), "wiki")
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		reg, err := Parse(data, name)
		if err != nil {
			if reg != nil {
				t.Fatalf("an error with a registration: %v", err)
			}
			return
		}
		if !json.Valid(bytes.TrimSpace(data)) {
			t.Fatalf("accepted a manifest that is not one JSON value: %q", data)
		}
		if reg.Name != name {
			t.Fatalf("registered %q for the add-on %q", reg.Name, name)
		}
		links := []string{}
		if reg.ConsoleURL != "" {
			links = append(links, reg.ConsoleURL)
		}
		for _, tile := range reg.Tiles {
			links = append(links, tile.Link)
			if utf8.RuneCountInString(tile.Title) > maxTitleRunes || len(tile.Icon) > maxIconBytes || shownChars(tile.Icon) > maxIconChars {
				t.Fatalf("a tile over the limits: %+v", tile)
			}
			if spoofing(tile.Title, false) >= 0 || strings.IndexFunc(strings.NewReplacer("\u200d", "").Replace(tile.Icon), func(r rune) bool {
				return hiddenRune(r) && !isTag(r)
			}) >= 0 {
				t.Fatalf("a tile with a character that can spoof or hide text: %+q", tile)
			}
		}
		for _, step := range reg.Setup {
			if spoofing(step, true) >= 0 {
				t.Fatalf("a setup step with a character that can spoof or hide text: %+q", step)
			}
		}
		for _, l := range links {
			u, err := url.Parse(l)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || len(l) > maxURLBytes {
				t.Fatalf("accepted the link %q", l)
			}
		}
		if len(reg.Tiles) > maxTiles || len(reg.Setup) > maxSetupSteps {
			t.Fatalf("%d tiles and %d setup steps are over the limits", len(reg.Tiles), len(reg.Setup))
		}
		m := manifest{Name: reg.Name, ConsoleURL: reg.ConsoleURL, Setup: reg.Setup}
		for _, tile := range reg.Tiles {
			m.Tiles = append(m.Tiles, struct {
				Title string `json:"title"`
				Icon  string `json:"icon"`
				Link  string `json:"link"`
			}{tile.Title, tile.Icon, tile.Link})
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out, name)
		if err != nil {
			t.Fatalf("the serialised manifest %s is refused: %v", out, err)
		}
		if !reflect.DeepEqual(reg, again) {
			t.Fatalf("serialise and parse changed the registration:\n%+v\n%+v", reg, again)
		}
	})
}
