package notify

import "strings"

// discordMessage is e as a Discord webhook's message. Its text is
// Discord's markdown, so what the event quotes (a chart's message, a
// source's address) is escaped: it cannot dress up a link, and with no
// mention allowed it cannot ping anyone, even as @everyone.
func discordMessage(e Event) map[string]any {
	mark := "✅"
	switch {
	case e.Severity == SeverityWarning:
		mark = "⚠️"
	case e.Phase != "Synced":
		mark = "🔄"
	}
	headline, what := summary(e)
	text := mark + " **" + discordEscape(headline) + "**"
	if what != "" {
		text += " · " + discordEscape(what)
	}
	if e.Message != "" {
		text += "\n" + discordEscape(truncate(e.Message, 1000))
	}
	// NOTE: Discord refuses content over 2,000 characters; the escapes can
	// double what the event quotes.
	return map[string]any{
		"content":          truncate(text, 1900),
		"allowed_mentions": map[string][]string{"parse": {}},
	}
}

// discordEscape puts a backslash before each character that Discord's
// markdown reads: emphasis, code, spoilers, quotes, headings, masked
// links and mentions.
var discordEscape = strings.NewReplacer(
	`\`, `\\`, `*`, `\*`, `_`, `\_`, `~`, `\~`, "`", "\\`", `|`, `\|`,
	`>`, `\>`, `<`, `\<`, `#`, `\#`, `[`, `\[`, `]`, `\]`, `@`, `\@`,
).Replace

// teamsMessage is e as a Teams Workflows webhook takes it: a message
// with one Adaptive Card. What the event quotes goes in text runs, which
// Teams shows as written, never as markdown.
func teamsMessage(e Event) map[string]any {
	color := "Good"
	switch {
	case e.Severity == SeverityWarning:
		color = "Attention"
	case e.Phase != "Synced":
		color = "Accent"
	}
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
