package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile is a message a chart could make: a ping of everyone, a link
// dressed up as a button, and markdown.
var hostile = Event{Namespace: "apps", Name: "web", Phase: "Failed", Reason: "RenderFailed", Severity: SeverityWarning,
	Source: "https://charts.example/web_app#a~b", Version: "1.0.0",
	Message: "@everyone see [Approve](https://evil.example) <@123> **now** # heading https://x.example/a[b]<c>"}

func TestDiscordMessage(t *testing.T) {
	rcv := newReceiver(t)
	r := rcv.receiver(t, "/api/webhooks/1/secret")
	r.Format, r.Token, r.HMACKey = FormatDiscord, "", nil
	if err := (&Notifier{Client: http.DefaultClient}).Deliver(context.Background(), r, hostile); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Content         string              `json:"content"`
		AllowedMentions map[string][]string `json:"allowed_mentions"`
		Flags           int                 `json:"flags"`
	}
	if err := json.Unmarshal(rcv.bodies[0], &got); err != nil {
		t.Fatalf("%s: %v", rcv.bodies[0], err)
	}
	want := "⚠️ **Addon apps/web is Failed (RenderFailed)** · https://charts.example/web_app#a~b 1.0.0\n" +
		`\@everyone see \[Approve\](https://evil.example) \<\@123\> \*\*now\*\* \# heading https://x.example/a\[b\]\<c\>`
	if got.Content != want {
		t.Fatalf("content:\n%s\nwant:\n%s", got.Content, want)
	}
	// Even unescaped, nobody would be pinged: no mention is allowed; and
	// no link unfolds a preview.
	if parse, ok := got.AllowedMentions["parse"]; !ok || len(parse) != 0 || got.Flags != 4 {
		t.Fatalf("allowed_mentions %v, flags %d", got.AllowedMentions, got.Flags)
	}
	synced := discordMessage(Event{Namespace: "a", Name: "b", Phase: "Synced", Reason: "Synced", Severity: SeverityInfo})
	if synced["content"] != "✅ **Addon a/b is Synced (Synced)**" {
		t.Fatalf("synced: %q", synced["content"])
	}
	// Escapes double a message of markup; Discord takes 2,000 characters.
	long := discordMessage(Event{Message: strings.Repeat("*", 1000) + strings.Repeat("é", 600)})["content"].(string)
	if utf8.RuneCountInString(long) > 2000 || !utf8.ValidString(long) {
		t.Fatalf("a long message: %d characters", utf8.RuneCountInString(long))
	}
	// A cut never leaves the first half of an escape, which would eat the
	// mark.
	if got := discordCut(`ab\*\*`, 3); got != "ab..." {
		t.Fatalf("a cut inside an escape: %q", got)
	}
	if got := discordCut(`ab\\cd`, 4); got != `ab\\...` {
		t.Fatalf("a cut after an escaped backslash: %q", got)
	}
}

func TestTeamsMessage(t *testing.T) {
	// A Workflows webhook answers 202 Accepted.
	rcv := newReceiver(t, http.StatusAccepted)
	r := rcv.receiver(t, "/workflows/abc/triggers/manual/paths/invoke")
	r.Format, r.Token, r.HMACKey = FormatTeams, "", nil
	if err := (&Notifier{Client: http.DefaultClient}).Deliver(context.Background(), r, hostile); err != nil || rcv.calls() != 1 {
		t.Fatalf("%v, %d calls", err, rcv.calls())
	}
	var got struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string `json:"contentType"`
			Content     struct {
				Type    string `json:"type"`
				Version string `json:"version"`
				Body    []struct {
					Type    string `json:"type"`
					Inlines []struct {
						Type, Text, Color string
					} `json:"inlines"`
				} `json:"body"`
			} `json:"content"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(rcv.bodies[0], &got); err != nil {
		t.Fatalf("%s: %v", rcv.bodies[0], err)
	}
	if got.Type != "message" || len(got.Attachments) != 1 || got.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" {
		t.Fatalf("not a Workflows message of one card: %s", rcv.bodies[0])
	}
	card := got.Attachments[0].Content
	if card.Type != "AdaptiveCard" || card.Version != "1.4" || len(card.Body) != 3 {
		t.Fatalf("card: %s", rcv.bodies[0])
	}
	var texts []string
	for _, b := range card.Body {
		// Text runs are not markdown: the message is shown as written.
		if b.Type != "RichTextBlock" || len(b.Inlines) != 1 || b.Inlines[0].Type != "TextRun" {
			t.Fatalf("a block that Teams would read as markdown: %s", rcv.bodies[0])
		}
		texts = append(texts, b.Inlines[0].Text)
	}
	want := []string{"Addon apps/web is Failed (RenderFailed)", "https://charts.example/web_app#a~b 1.0.0", hostile.Message}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") || card.Body[0].Inlines[0].Color != "Attention" {
		t.Fatalf("texts %q, color %q", texts, card.Body[0].Inlines[0].Color)
	}
}

// TestGoogleChatMessage: a card whose text is escaped: Google Chat's
// mention of everyone and its links show as written.
func TestGoogleChatMessage(t *testing.T) {
	rcv := newReceiver(t)
	r := rcv.receiver(t, "/v1/spaces/AAA/messages?key=k&token=t")
	r.Format, r.Token, r.HMACKey = FormatGoogleChat, "", nil
	e := hostile
	e.Message = "<users/all> see <https://evil.example|Approve> & <b>bold</b>\nline two"
	if err := (&Notifier{Client: http.DefaultClient}).Deliver(context.Background(), r, e); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Text    string `json:"text"`
		CardsV2 []struct {
			CardID string `json:"cardId"`
			Card   struct {
				Sections []struct {
					Widgets []struct {
						TextParagraph struct {
							Text string `json:"text"`
						} `json:"textParagraph"`
					} `json:"widgets"`
				} `json:"sections"`
			} `json:"card"`
		} `json:"cardsV2"`
	}
	if err := json.Unmarshal(rcv.bodies[0], &got); err != nil || len(got.CardsV2) != 1 || got.CardsV2[0].CardID == "" || got.Text != "" {
		t.Fatalf("%s: %v", rcv.bodies[0], err)
	}
	text := got.CardsV2[0].Card.Sections[0].Widgets[0].TextParagraph.Text
	want := `<font color="#d93025"><b>Addon apps/web is Failed (RenderFailed)</b></font><br>https://charts.example/web_app#a~b 1.0.0<br>` +
		`&lt;users/all&gt; see &lt;https://evil.example|Approve&gt; &amp; &lt;b&gt;bold&lt;/b&gt;<br>line two`
	if text != want {
		t.Fatalf("text:\n%s\nwant:\n%s", text, want)
	}
	synced := googleChatMessage(Event{Namespace: "a", Name: "b", Phase: "Synced", Reason: "Synced", Severity: SeverityInfo})
	if b, _ := json.Marshal(synced); !strings.Contains(string(b), `#188038`) {
		t.Fatalf("synced: %s", b)
	}
}
