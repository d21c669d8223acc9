package notify

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// discordMessage is e as a Discord webhook's message. Its text is
// Discord's markdown, so what the event quotes (a chart's message, a
// source's address) is escaped: it cannot dress up a link, and with no
// mention allowed it cannot ping anyone, even as @everyone. Links show no
// preview: a chart's message must not unfold a page in the channel.
func discordMessage(e Event) map[string]any {
	headline, what := summary(e)
	text := tone(e, "✅", "🔄", "⚠️") + " **" + discordText(headline) + "**"
	if what != "" {
		text += " · " + discordText(what)
	}
	if e.Message != "" {
		text += "\n" + discordText(truncate(e.Message, 1000))
	}
	return map[string]any{
		// NOTE: Discord refuses content over 2,000 characters; the escapes
		// can double what the event quotes.
		"content":          discordCut(text, 1900),
		"allowed_mentions": map[string][]string{"parse": {}},
		"flags":            discordSuppressEmbeds,
	}
}

// discordSuppressEmbeds is the message flag that shows links without
// their previews.
const discordSuppressEmbeds = 1 << 2

// discordURL finds the addresses Discord links by itself. Within one, its
// markdown reads nothing, and a backslash would break the link.
var discordURL = regexp.MustCompile(`https?://\S+`)

// discordText escapes s for Discord's markdown: every character of its
// markup outside addresses, and within them only what could end one and
// begin markup (brackets, angle brackets, @, backticks, bars).
func discordText(s string) string {
	var b strings.Builder
	at := 0
	for _, m := range discordURL.FindAllStringIndex(s, -1) {
		b.WriteString(discordEscape(s[at:m[0]]))
		b.WriteString(discordURLEscape(s[m[0]:m[1]]))
		at = m[1]
	}
	b.WriteString(discordEscape(s[at:]))
	return b.String()
}

// discordEscape puts a backslash before each character that Discord's
// markdown reads: emphasis, code, spoilers, quotes, headings, masked
// links and mentions.
var discordEscape = strings.NewReplacer(
	`\`, `\\`, `*`, `\*`, `_`, `\_`, `~`, `\~`, "`", "\\`", `|`, `\|`,
	`>`, `\>`, `<`, `\<`, `#`, `\#`, `[`, `\[`, `]`, `\]`, `@`, `\@`,
).Replace

var discordURLEscape = strings.NewReplacer(
	"`", "\\`", `|`, `\|`, `>`, `\>`, `<`, `\<`, `[`, `\[`, `]`, `\]`, `@`, `\@`,
).Replace

// discordCut shortens s to at most n bytes and a mark, between characters
// and never after the first half of an escape.
func discordCut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	cut := s[:n]
	if k := len(cut) - len(strings.TrimRight(cut, `\`)); k%2 == 1 {
		cut = cut[:len(cut)-1]
	}
	return cut + "..."
}

// teamsMessage is e as a Teams Workflows webhook takes it: a message
// with one Adaptive Card. What the event quotes goes in text runs, which
// Teams shows as written, never as markdown.
func teamsMessage(e Event) map[string]any {
	color := tone(e, "Good", "Accent", "Attention")
	headline, what := summary(e)
	run := func(text string, style map[string]any) map[string]any {
		r := map[string]any{"type": "TextRun", "text": text}
		for k, v := range style {
			r[k] = v
		}
		return map[string]any{"type": "RichTextBlock", "inlines": []any{r}}
	}
	body := []any{run(headline, map[string]any{"weight": "Bolder", "size": "Medium", "color": color})}
	if what != "" {
		body = append(body, run(what, map[string]any{"isSubtle": true}))
	}
	if e.Message != "" {
		body = append(body, run(truncate(e.Message, 1000), nil))
	}
	return map[string]any{
		"type": "message",
		"attachments": []any{map[string]any{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"content": map[string]any{
				"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
				"type":    "AdaptiveCard",
				"version": "1.4",
				"msteams": map[string]string{"width": "Full"},
				"body":    body,
			},
		}},
	}
}

// googleChatMessage is e as a Google Chat space's webhook takes it: a
// message of one card, whose paragraph reads a few HTML tags. What the
// event quotes is escaped there, so that it shows as written. A card is
// used, not a text message, because a text message reads <users/all> as
// a mention of everyone in the space and <https://...|text> as a link,
// and gives no way to escape either.
func googleChatMessage(e Event) map[string]any {
	headline, what := summary(e)
	color := tone(e, "#188038", "#1a73e8", "#d93025")
	text := `<font color="` + color + `"><b>` + googleChatEscape(headline) + `</b></font>`
	if what != "" {
		text += "<br>" + googleChatEscape(what)
	}
	if e.Message != "" {
		text += "<br>" + strings.ReplaceAll(googleChatEscape(truncate(e.Message, 1000)), "\n", "<br>")
	}
	return map[string]any{"cardsV2": []any{map[string]any{
		"cardId": "capstan",
		"card": map[string]any{"sections": []any{map[string]any{
			"widgets": []any{map[string]any{"textParagraph": map[string]any{"text": text}}},
		}}},
	}}}
}

var googleChatEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
