package registration

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := `{"name":"wiki","consoleURL":"https://wiki.example/admin","tiles":[{"title":"Wiki","icon":"📚","link":"https://wiki.example/"}],"setup":["Create the first page."]}`
	reg, err := Parse([]byte(good), "wiki")
	if err != nil {
		t.Fatal(err)
	}
	if reg.Name != "wiki" || reg.ConsoleURL != "https://wiki.example/admin" || len(reg.Tiles) != 1 || reg.Tiles[0].Icon != "📚" || len(reg.Setup) != 1 {
		t.Errorf("parsed %+v", reg)
	}
	// An emoji of several code points is one character on the page.
	for _, icon := range []string{"👨‍👩‍👧", "🧑‍🤝‍🧑", "👩‍❤️‍👨", "👨‍👩‍👧‍👦", "🧑🏽‍🤝‍🧑🏻", "🇪🇺🇯🇵", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "ab", "🏳️‍🌈👍🏽❤️", "🐈‍⬛🐦‍⬛🐈‍⬛🐦‍⬛", "🐻‍❄️"} {
		doc := `{"name":"wiki","tiles":[{"title":"x","icon":"` + icon + `","link":"https://a.example/"}]}`
		if _, err := Parse([]byte(doc), "wiki"); err != nil {
			t.Errorf("icon %q: %v", icon, err)
		}
	}
	// Text that writing needs: joiners and non-joiners between letters
	// (Persian, Hindi), an emoji sequence in a title, direction marks and a
	// soft hyphen, and line breaks and tabs in a step.
	for _, doc := range []string{
		`{"name":"wiki","tiles":[{"title":"می\u200cخواهم","link":"https://a.example/"}]}`,
		`{"name":"wiki","tiles":[{"title":"क्\u200dष","link":"https://a.example/"}]}`,
		`{"name":"wiki","tiles":[{"title":"👩\u200d💻 Code","link":"https://a.example/"}]}`,
		`{"name":"wiki","tiles":[{"title":"ויקי \u200e(beta)\u200f","link":"https://a.example/"}]}`,
		`{"name":"wiki","tiles":[{"title":"Wiki\u00adpedia \u061c","link":"https://a.example/"}]}`,
		`{"name":"wiki","setup":["Open the page,\nthen:\r\n\tsave it."]}`,
	} {
		if _, err := Parse([]byte(doc), "wiki"); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"name":"blog"}`, `names the add-on "blog", not "wiki"`},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"🇪🇺🇯🇵🇫🇷🇩🇪🇮🇹","link":"https://a.example/"}]}`, "tiles[0].icon"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"👍` + strings.Repeat("️", 30) + `","link":"https://a.example/"}]}`, "tiles[0].icon"},
		// A joiner joins emoji only: letters joined by it are shown one by
		// one, as are skin tones and tags that follow no emoji.
		{`{"name":"wiki","tiles":[{"title":"x","icon":"S\u200di\u200dg\u200dn\u200d \u200di\u200dn","link":"https://a.example/"}]}`, "tiles[0].icon"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"👍\u200da\u200db\u200dc\u200dd","link":"https://a.example/"}]}`, "tiles[0].icon"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"a🏻b🏻c","link":"https://a.example/"}]}`, "tiles[0].icon"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"🏻🏻🏻🏻🏻","link":"https://a.example/"}]}`, "tiles[0].icon"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"ab\udb40\udc67\udb40\udc62cd","link":"https://a.example/"}]}`, "tiles[0].icon"},
		{`{"name":"wiki","consoleURL":"javascript:alert(1)"}`, "consoleURL"},
		{`{"name":"wiki","tiles":[{"title":"x","link":"data:text/html,hi"}]}`, "tiles[0].link"},
		{`{"name":"wiki","tiles":[{"title":"","link":"https://a.example/"}]}`, "tiles[0].title"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"<script>","link":"https://a.example/"}]}`, "tiles[0].icon"},
		{`{"name":"wiki","setup":[""]}`, "setup[0]"},
		{`{"name":"wiki","extra":1}`, "not the JSON Capstan reads"},
		// Invisible and direction-changing characters, named by field
		// and code point.
		{`{"name":"wiki","tiles":[{"title":"Wiki\u202e","link":"https://a.example/"}]}`, "tiles[0].title holds an invisible or direction-changing character (U+202E)"},
		{`{"name":"wiki","tiles":[{"title":"\u200b","link":"https://a.example/"}]}`, "tiles[0].title holds an invisible or direction-changing character (U+200B)"},
		{`{"name":"wiki","tiles":[{"title":"a\u2066b","link":"https://a.example/"}]}`, "tiles[0].title holds an invisible or direction-changing character (U+2066)"},
		{`{"name":"wiki","tiles":[{"title":"\ufeffWiki","link":"https://a.example/"}]}`, "(U+FEFF)"},
		{`{"name":"wiki","tiles":[{"title":"a\u0007b","link":"https://a.example/"}]}`, "(U+0007)"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"\u202e","link":"https://a.example/"}]}`, "tiles[0].icon holds an invisible or direction-changing character (U+202E)"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"👍\u200da","link":"https://a.example/"}]}`, "(U+200D)"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"👍\u200d","link":"https://a.example/"}]}`, "tiles[0].icon holds an invisible or direction-changing character (U+200D)"},
		{`{"name":"wiki","tiles":[{"title":"x","icon":"\u200e👍","link":"https://a.example/"}]}`, "(U+200E)"},
		{`{"name":"wiki","setup":["Open \u202ethe page"]}`, "setup[0] holds an invisible or direction-changing character (U+202E)"},
		{`{"name":"wiki","setup":["a\u0007b"]}`, "setup[0] holds an invisible or direction-changing character (U+0007)"},
		{`{"name":"wiki","setup":["a\u0085b"]}`, "(U+0085)"},
		{`{"name":"wiki","tiles":[{"title":"a\tb","link":"https://a.example/"}]}`, "tiles[0].title holds an invisible or direction-changing character (U+0009)"},
		{`{"name":"wiki","tiles":[{"title":"a\u2062b","link":"https://a.example/"}]}`, "(U+2062)"},
		{`{"name":"wiki","tiles":[{"title":"Wiki\udb40\udc41","link":"https://a.example/"}]}`, "(U+E0041)"},
		{`{"name":"wiki","tiles":[{"title":"a\ufffab","link":"https://a.example/"}]}`, "(U+FFFA)"},
		// A joiner or non-joiner stands between letters (or, a joiner,
		// between emoji); one that joins nothing hides in the text.
		{`{"name":"wiki","tiles":[{"title":"Wiki\u200c","link":"https://a.example/"}]}`, "tiles[0].title holds a zero-width joiner or non-joiner (U+200C) that joins no letters"},
		{`{"name":"wiki","tiles":[{"title":"a \u200db","link":"https://a.example/"}]}`, "(U+200D) that joins no letters"},
		{`{"name":"wiki","tiles":[{"title":"\u200e\u00ad","link":"https://a.example/"}]}`, "tiles[0].title shows nothing"},
		{`{"name":"wiki","setup":["\u200f\n"]}`, "setup[0] shows nothing"},
		{`not json`, "not the JSON Capstan reads"},
	} {
		if _, err := Parse([]byte(tc.doc), "wiki"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one that says %q", tc.doc, err, tc.want)
		}
	}
}

// TestParseQuotesLittleOfTheDocument checks that a refusal quotes no more of
// the document than a short, printable reason: whoever serves the primary
// must not read its content back through the Addon's condition. That holds
// for the decoder's reasons and for the values a refusal names: a name that
// is not the add-on's, a link that is no web URL.
func TestParseQuotesLittleOfTheDocument(t *testing.T) {
	secret := strings.Repeat("s3cr3t-", 200)
	for _, doc := range []string{
		`{"name":"wiki","` + secret + `":1}`,
		`{"name":"wiki","\u202e` + secret + `\u0007":1}`,
		"\x00\x1b[31m" + secret,
		`{"name":"Пароль-` + secret + `-Пароль"}`,
		`{"name":"\u001b[31m` + secret + `"}`,
		`{"name":"wiki","consoleURL":"token=Пароль-` + secret + `"}`,
		`{"name":"wiki","consoleURL":"\u001b]8;;` + secret + `"}`,
		`{"name":"wiki","tiles":[{"title":"Wiki","link":"Пароль ` + secret + `"}]}`,
	} {
		_, err := Parse([]byte(doc), "wiki")
		if err == nil {
			t.Fatalf("%.40s...: parsed", doc)
		}
		msg := err.Error()
		if len(msg) > 200 || strings.Count(msg, "s3cr3t") > 14 {
			t.Errorf("the refusal quotes %d bytes of the document: %.300s", len(msg), msg)
		}
		for _, r := range msg {
			if r < 0x20 || r > 0x7e {
				t.Errorf("the refusal carries %U: %q", r, msg)
				break
			}
		}
	}
}
