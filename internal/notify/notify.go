// Package notify sends an add-on's transitions to webhooks: each change of
// its phase or reason, once the status that says so is written, as a JSON
// document or a Slack-style message. Flux has its notification-controller
// and Argo CD its notifications for this; a cluster admin who watched
// Synced and Failed arrive in a channel there expects the same here.
//
// Delivery never holds a reconcile: events wait in a bounded queue and one
// worker posts them, each receiver in turn, through an egress guard of
// their own (a receiver on a loopback or metadata address, or on a private
// one with --fetch-deny-private, is refused unless --notify-allow opens it),
// never following a redirect. A receiver that fails is retried a few times
// with backoff (but not after a post it let time out), then the event is
// dropped and counted; one that keeps failing is paused, and after each
// pause it gets one post, whose failure pauses it again for twice as long,
// so that it cannot hold the others' events; so is one that asks for a
// longer wait (Retry-After) than a post may take. A
// receiver's URL, token and key live in a Secret, since a Slack webhook's
// URL is its password; none of them is ever logged.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http/httpguts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"capstan.dev/capstan/internal/netguard"
)

// Severity orders events: a receiver gets those at its severity or above.
type Severity string

// The severities: info for every transition, warning for one that needs a
// look (an add-on Failed, Blocked or Degraded; a repository that failed or
// skips invalid files).
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
)

func (s Severity) rank() int {
	if s == SeverityWarning {
		return 1
	}
	return 0
}

// Event is one transition of an add-on, or of a repository of add-on
// definitions.
type Event struct {
	Time time.Time `json:"time"`
	// Kind is Addon or AddonRepository.
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Phase     string   `json:"phase"`
	Reason    string   `json:"reason"`
	Message   string   `json:"message"`
	Severity  Severity `json:"severity"`
	// Source and Version say what the add-on runs: the chart and its
	// version, or the git folder and its commit.
	Source  string `json:"source,omitempty"`
	Version string `json:"version,omitempty"`
	// Revision is the newest entry of the add-on's history.
	Revision int64 `json:"revision,omitempty"`
	// Repository and Commit are the git repository and the whole commit
	// an add-on's folder was rendered from; empty for a chart.
	Repository string `json:"repository,omitempty"`
	Commit     string `json:"commit,omitempty"`
	// SameState marks a new commit of an add-on's folder whose phase and
	// reason did not change: no transition, so only a commit status
	// (FormatGitHub, FormatGitLab) takes it, to name the commit.
	SameState bool `json:"-"`
	// IncidentOnly marks what only an incident receiver takes, to close
	// an incident: an object Deleted, an add-on Synced again after a
	// fight over a field, which is no transition for a channel, or a
	// Synced add-on whose close a controller before this one may not
	// have delivered; or to open one again: an add-on found in a warning
	// by a controller that just started, whose trigger an earlier one
	// may not have delivered.
	IncidentOnly bool `json:"-"`
	// PreviousSeverity is the severity of the object's transition before
	// this one, when there was one: an incident receiver closes the
	// incident of an object that was in a warning and is settled now,
	// though the controller that opened it has restarted since.
	PreviousSeverity Severity `json:"previousSeverity,omitempty"`
	// WarningSince is when the object went into the warning it has not
	// settled from since, through the phases on the way: on an add-on's
	// Synced or Deleted, the incident a warning opened is closed though
	// the controller restarted while the fix rolled out.
	WarningSince time.Time `json:"warningSince,omitzero"`
	// Cluster is the name the receiver's Secret gives this cluster, if
	// any: several clusters that post to one channel, one on-call tool or
	// one repository's commits tell their add-ons apart by it.
	Cluster string `json:"cluster,omitempty"`
	// Labels are the object's, which a receiver's selector reads.
	Labels map[string]string `json:"labels,omitempty"`
}

// The formats a receiver takes.
const (
	// FormatJSON posts the Event as it is.
	FormatJSON = "json"
	// FormatSlack posts {"text": "..."}, which Slack's incoming webhooks
	// take, and Mattermost's and Rocket.Chat's.
	FormatSlack = "slack"
	// FormatDiscord posts a message to a Discord channel's webhook, with
	// Discord's markdown escaped and no mention allowed.
	FormatDiscord = "discord"
	// FormatTeams posts an Adaptive Card to a Microsoft Teams channel
	// through a Workflows (Power Automate) webhook, the successor of
	// Teams' retired incoming webhooks, as Flux's msteams provider does.
	FormatTeams = "msteams"
	// FormatGitHub sets a commit status on GitHub or GitHub Enterprise:
	// an add-on rendered from a commit of the receiver's repository shows
	// there as pending, success or failure, as Flux's github provider
	// shows a Kustomization's. The url is the repository's address.
	FormatGitHub = "github"
	// FormatGitLab sets a commit status (a pipeline's external job) on
	// GitLab, as Flux's gitlab provider does. The url is the project's
	// address, in its groups.
	FormatGitLab = "gitlab"
	// FormatGoogleChat posts a card to a Google Chat space's webhook,
	// whose text is escaped so that a chart's message cannot mention
	// anyone or dress up a link.
	FormatGoogleChat = "googlechat"
	// FormatPagerDuty opens a PagerDuty incident for an object's warning
	// and resolves it once the object is settled, through the Events API
	// v2, as Flux's pagerduty provider does; the token is the
	// integration's routing key.
	FormatPagerDuty = "pagerduty"
	// FormatOpsgenie opens and closes Opsgenie alerts the same way,
	// through its Alert API; the token is an API integration's key.
	FormatOpsgenie = "opsgenie"
)

// formats lists the formats for the errors that name them.
const formats = "json, slack, discord, msteams, googlechat, github, gitlab, pagerduty or opsgenie"

// Receiver is one webhook, as its Secret describes it.
type Receiver struct {
	// Name is the Secret's, for messages: never the URL.
	Name   string
	URL    *url.URL
	Format string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// HMACKey, when set, signs each post (Sign).
	HMACKey     []byte
	MinSeverity Severity
	// Namespaces, when set, are the only namespaces whose Addons' and
	// AddonRepositories' events the receiver gets, and Selector, when
	// set, selects them by their labels.
	Namespaces []string
	Selector   labels.Selector
	// Trusted are the namespaces of the cluster profile, the only ones
	// whose objects a Selector without Namespaces selects: anyone who may
	// create an Addon sets its labels, so a selector alone would let a
	// tenant choose where the controller posts. FromSecrets sets the
	// controller's namespace, and Notifier.TrustedNamespaces, when set,
	// replaces it.
	Trusted []string
	// Cluster names the cluster in what r is sent (Event.Cluster): in a
	// chat's headline, in an incident and its key, and in a commit
	// status's context, so that the same add-on in two clusters opens two
	// incidents and sets two statuses.
	Cluster string
	// statuses is, for a commit status (FormatGitHub, FormatGitLab), the
	// API address of the repository's commit statuses, and repository the
	// repository as repositoryKey gives it.
	statuses   *url.URL
	repository string
}

// Wants reports whether r takes e: its severity, namespace and labels
// (a selector alone, in the trusted namespaces only), and for a commit
// status, an add-on's state rendered from a commit of
// the receiver's repository.
func (r Receiver) Wants(e Event) bool {
	if r.statuses != nil && (e.Kind != "Addon" || !isCommit(e.Commit) || githubState(e.Phase) == "" ||
		repositoryKey(e.Repository) != r.repository) {
		return false
	}
	if e.SameState && r.statuses == nil || e.IncidentOnly && !r.incident() {
		return false
	}
	if r.incident() && incidentAction(e) == "" {
		return false
	}
	if !r.incident() && e.Severity.rank() < r.MinSeverity.rank() {
		return false
	}
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, e.Namespace) {
		return false
	}
	if r.Selector == nil {
		return true
	}
	if len(r.Namespaces) == 0 && !slices.Contains(r.Trusted, e.Namespace) {
		// NOTE: a tenant labels its own Addons: a selector reaches
		// tenants' only in the namespaces the receiver names.
		return false
	}
	return r.Selector.Matches(labels.Set(e.Labels))
}

// maxField bounds each value of a receiver's Secret.
const maxField = 4096

// receiverKeys are the keys ReceiverFromSecret reads; it refuses others.
var receiverKeys = []string{"url", "format", "severity", "token", "hmacKey", "namespaces", "selector", "cluster"}

// nearKey is the receiver key that k most likely misspells: the same but
// for case, '-', '_' and '.', a plural or singular, or at most two letters
// apart. It is empty when none is near.
func nearKey(k string) string {
	fold := func(s string) string {
		return strings.NewReplacer("-", "", "_", "", ".", "").Replace(strings.ToLower(s))
	}
	got := fold(k)
	for _, known := range receiverKeys {
		want := fold(known)
		if got == want || got+"s" == want || got == want+"s" || editDistance(got, want) <= 2 {
			return known
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// ReceiverFromSecret reads a receiver from a Secret's data: url (https, or
// http), and optionally format (json, slack, discord, msteams, googlechat,
// github, gitlab, pagerduty or opsgenie), token, hmacKey, severity (info
// or warning), namespaces (of the Addons, by commas), selector (a label
// selector of the Addons) and cluster (this cluster's name, in what is
// sent). An incident
// receiver (pagerduty, opsgenie) needs a token, and its url defaults to
// the tool's own. Any other key is refused. The errors name the key to fix
// and never quote a secret value.
func ReceiverFromSecret(name string, data map[string][]byte) (Receiver, error) {
	r := Receiver{Name: name, Format: FormatJSON, MinSeverity: SeverityInfo}
	// NOTE: a key Capstan does not read is refused, not skipped: a slip
	// such as namespace for namespaces, or hmac-key for hmacKey, would
	// otherwise widen the receiver to every add-on, or stop its signing,
	// without a word. Only the key's name is quoted, never a value.
	unknown := make([]string, 0, len(data))
	for k := range data {
		if !slices.Contains(receiverKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		k := unknown[0]
		hint := ""
		if near := nearKey(k); near != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", near)
		}
		return r, fmt.Errorf("the notification Secret %s has the key %q, which Capstan does not read%s; its keys are %s: rename or remove the key", name, truncate(k, 63), hint, strings.Join(receiverKeys, ", "))
	}
	for _, k := range receiverKeys {
		if v := data[k]; len(v) > maxField {
			return r, fmt.Errorf("the notification Secret %s: key %s is %d bytes; at most %d", name, k, len(v), maxField)
		}
	}
	format := strings.TrimSpace(string(data["format"]))
	raw := strings.TrimSpace(string(data["url"]))
	switch {
	case raw != "":
	case format == FormatPagerDuty:
		raw = pagerDutyURL
	case format == FormatOpsgenie:
		raw = opsgenieURL
	}
	if raw == "" {
		return r, fmt.Errorf("the notification Secret %s has no key url: set it to the webhook's address, such as https://hooks.slack.com/services/T000/B000/XXXX", name)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return r, fmt.Errorf("the notification Secret %s: key url is not an http or https address with a host", name)
	}
	if u.User != nil {
		return r, fmt.Errorf("the notification Secret %s: key url carries a user and password; put a token in the key token instead", name)
	}
	r.URL = u
	switch f := format; f {
	case "", FormatJSON:
	case FormatSlack, FormatDiscord, FormatTeams, FormatGoogleChat, FormatPagerDuty, FormatOpsgenie:
		r.Format = f
	case FormatGitHub:
		r.Format = FormatGitHub
		if r.statuses, r.repository = githubStatuses(u); r.statuses == nil {
			return r, fmt.Errorf("the notification Secret %s: with format github, key url is the repository's address, such as https://github.com/OWNER/REPO", name)
		}
	case FormatGitLab:
		r.Format = FormatGitLab
		if r.statuses, r.repository = gitlabStatuses(u); r.statuses == nil {
			return r, fmt.Errorf("the notification Secret %s: with format gitlab, key url is the project's address, such as https://gitlab.com/GROUP/PROJECT", name)
		}
	default:
		return r, fmt.Errorf("the notification Secret %s: key format is %q; use %s", name, truncate(f, 20), formats)
	}
	switch s := Severity(strings.TrimSpace(string(data["severity"]))); s {
	case "", SeverityInfo:
	case SeverityWarning:
		r.MinSeverity = SeverityWarning
	default:
		return r, fmt.Errorf("the notification Secret %s: key severity is %q; use info or warning", name, truncate(string(s), 20))
	}
	r.Token = strings.TrimSpace(string(data["token"]))
	if !httpguts.ValidHeaderFieldValue(r.Token) {
		return r, fmt.Errorf("the notification Secret %s: key token holds characters a header cannot carry (a line break, a control character)", name)
	}
	// NOTE: GitHub and GitLab refuse a status posted without a token; the
	// receiver would be paused after its first posts, long after the
	// Secret was read.
	if r.Token == "" && (r.Format == FormatGitHub || r.Format == FormatGitLab) {
		what := "a fine-grained token with the permission Commit statuses: write on the repository"
		if r.Format == FormatGitLab {
			what = "a project access token with the api scope"
		}
		return r, fmt.Errorf("the notification Secret %s: format %s needs the key token: set it to %s", name, r.Format, what)
	}
	if r.incident() {
		if r.Token == "" {
			what := "the routing key of the PagerDuty service's Events API v2 integration"
			if r.Format == FormatOpsgenie {
				what = "the key of an Opsgenie API integration"
			}
			return r, fmt.Errorf("the notification Secret %s: format %s needs the key token: set it to %s", name, r.Format, what)
		}
		if strings.TrimSpace(string(data["severity"])) == string(SeverityInfo) {
			return r, fmt.Errorf("the notification Secret %s: key severity is info, but format %s opens incidents for warnings only and closes them once the object is settled; leave the key severity out", name, r.Format)
		}
	}
	if c := strings.TrimSpace(string(data["cluster"])); c != "" {
		// NOTE: Opsgenie takes tags of at most 50 characters.
		if len(c) > 50 || strings.IndexFunc(c, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '.' || r == '_')
		}) >= 0 {
			return r, fmt.Errorf("the notification Secret %s: key cluster is %q; give at most 50 letters, digits, '-', '.' or '_', such as prod-eu", name, truncate(c, 50))
		}
		r.Cluster = c
	}
	// NOTE: the key is used byte for byte, not trimmed as the token is: a
	// receiver that checks signatures with the key as stored (a line break
	// and all) would refuse every post if Capstan signed with less, and a
	// random binary key may end in such a byte. A text key that ends
	// with a line break is refused instead, since it is most often a key
	// file's (`echo key > file`) that the receiver was given without it;
	// a binary key (not printable text) is taken as it is.
	if k := data["hmacKey"]; endsWithLineBreak(k) && isText(bytes.TrimRight(k, "\r\n")) {
		return r, fmt.Errorf("the notification Secret %s: key hmacKey ends with a line break; write the key without it (printf '%%s' KEY, or echo -n), and give the receiver the same key", name)
	}
	r.HMACKey = data["hmacKey"]
	nss := strings.TrimSpace(string(data["namespaces"]))
	for _, ns := range strings.FieldsFunc(nss, func(c rune) bool { return c == ',' || unicode.IsSpace(c) }) {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return r, fmt.Errorf("the notification Secret %s: key namespaces names %q, which is not a namespace: give namespaces separated by commas", name, truncate(ns, 63))
		}
		r.Namespaces = append(r.Namespaces, ns)
	}
	if nss != "" && len(r.Namespaces) == 0 {
		return r, fmt.Errorf("the notification Secret %s: key namespaces names no namespace; give some, separated by commas, or leave the key out for all", name)
	}
	if sel := strings.TrimSpace(string(data["selector"])); sel != "" {
		s, err := labels.Parse(sel)
		if err != nil {
			return r, fmt.Errorf("the notification Secret %s: key selector is not a label selector such as team=web or tier in (a,b): %w", name, err)
		}
		r.Selector = s
	}
	return r, nil
}

// truncate shortens s to at most n bytes and a mark, cutting between
// characters.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// Body is what r is sent for e.
func (r Receiver) Body(e Event) ([]byte, error) {
	e.Cluster = r.Cluster
	switch r.Format {
	case FormatSlack:
		return json.Marshal(map[string]string{"text": SlackText(e)})
	case FormatDiscord:
		return json.Marshal(discordMessage(e))
	case FormatTeams:
		return json.Marshal(teamsMessage(e))
	case FormatGoogleChat:
		return json.Marshal(googleChatMessage(e))
	case FormatPagerDuty:
		return json.Marshal(pagerDutyEvent(r, e))
	case FormatOpsgenie:
		return json.Marshal(opsgenieAlert(r, e))
	case FormatGitHub:
		return json.Marshal(map[string]string{"state": githubState(e.Phase), "context": statusContext(e),
			"description": githubDescription(e)})
	case FormatGitLab:
		return json.Marshal(map[string]string{"state": gitlabState(e.Phase), "name": statusContext(e),
			"description": githubDescription(e)})
	}
	return json.Marshal(e)
}

// target is where r is sent e: its url, or the commit's statuses.
func (r Receiver) target(e Event) string {
	if r.statuses != nil {
		return r.statuses.JoinPath(e.Commit).String()
	}
	if r.Format == FormatOpsgenie {
		return opsgenieTarget(r, e)
	}
	return r.URL.String()
}

// SlackText is one event as a line of chat.
func SlackText(e Event) string {
	headline, what := summary(e)
	text := tone(e, ":white_check_mark:", ":arrows_counterclockwise:", ":warning:") + " " + headline
	if what != "" {
		text += " · " + slackEscape(what)
	}
	if e.Message != "" {
		text += "\n" + slackEscape(truncate(e.Message, 1000))
	}
	return text
}

// tone picks what a chat shows for e: synced when it is Synced, moving
// while it is in another phase, and warning for a warning.
func tone[T any](e Event, synced, moving, warning T) T {
	switch {
	case e.Severity == SeverityWarning:
		return warning
	case e.Phase != "Synced":
		return moving
	}
	return synced
}

// statusContext names e's add-on among a commit's statuses: one per
// add-on, and per cluster when the receiver names it, so that two
// clusters that deploy one commit do not overwrite each other's status.
func statusContext(e Event) string {
	if e.Cluster != "" {
		return "capstan/" + e.Cluster + "/" + e.Namespace + "/" + e.Name
	}
	return "capstan/" + e.Namespace + "/" + e.Name
}

// summary is what every chat says of e: which object is in which phase
// and why, after the cluster's name when the receiver gives one, and what
// it runs (its source and version, or none).
func summary(e Event) (headline, what string) {
	what = e.Source
	if e.Version != "" {
		what += " " + e.Version
	}
	kind := e.Kind
	if kind == "" {
		kind = "Addon"
	}
	headline = fmt.Sprintf("%s %s/%s is %s (%s)", kind, e.Namespace, e.Name, e.Phase, e.Reason)
	if e.Cluster != "" {
		headline = e.Cluster + ": " + headline
	}
	return headline, what
}

// slackEscape keeps a chat from reading what the event quotes (a chart's
// message, a source's address) as markup. Slack's own would let it ping a
// whole channel (<!channel>) or dress a link up as something else
// (<https://...|Approve>): &, < and > are escaped. Mattermost and
// Rocket.Chat, which take the same text, read it as Markdown, and see no
// backslash escape when they look for mentions: a zero-width space after
// an @ where a mention can start keeps @channel, @all, @here or anyone's
// name from pinging, and one after a ] that a ( [ or : follows (and
// between ! and [) breaks every link and image, inline
// ([Approve](https://...), ![](https://...)) or by reference ([Approve][1],
// [1]: https://...), while the text still reads the same.
//
// NOTE: the zero-width space is copied with the text, so it goes only
// where markup could start: an @ inside a word (ssh://git@github.com,
// chart@sha256:...) is no mention in either chat, and a ] before anything
// else (containers[0].image) starts no link, and both stay as written. A
// bare address stays a link: it shows where it goes. Emphasis and
// headings change how a message looks, not where it leads.
func slackEscape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/16)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '&':
			b.WriteString("&amp;")
			continue
		case '<':
			b.WriteString("&lt;")
			continue
		case '>':
			b.WriteString("&gt;")
			continue
		}
		b.WriteByte(c)
		var next byte
		if i+1 < len(s) {
			next = s[i+1]
		}
		switch {
		case c == '@' && (i == 0 || !mentionWord(s[i-1])),
			c == ']' && (next == '(' || next == '[' || next == ':'),
			c == '!' && next == '[':
			b.WriteString("\u200b")
		}
	}
	return b.String()
}

// mentionWord reports whether an @ after c is inside a word, where no
// chat finds a mention: c is an ASCII letter or digit.
//
// NOTE: _ is not one: Mattermost trims it from the front of a word
// before it looks for a mention (_@channel pings), and any other byte,
// a letter outside ASCII among them, counts as a mark.
func mentionWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Notifier queues events and delivers them in the background.
type Notifier struct {
	// Client posts; it should be an egress guard's whose allow-list is
	// --notify-allow, which a refusal names. The Notifier follows no
	// redirect, whatever the client would.
	Client *http.Client
	// Receivers reads the receivers now: those it could read, and an
	// error that says which it could not. It is called when an event is
	// to be delivered and the last read is ReceiversTTL old.
	Receivers    func(ctx context.Context) ([]Receiver, error)
	ReceiversTTL time.Duration
	// TrustedNamespaces, when set, are the namespaces of the cluster
	// profile, whose objects a receiver's selector alone selects
	// (Receiver.Trusted).
	TrustedNamespaces []string
	Log               logr.Logger
	// Attempts bounds the posts of one event to one receiver, and Backoff
	// is the wait before the second, doubling after, each wait at most
	// maxWait. Timeout bounds one post: a receiver that hangs holds every
	// notification behind it.
	Attempts int
	Backoff  time.Duration
	Timeout  time.Duration

	once     sync.Once
	client   *http.Client
	queue    chan Event
	mu       sync.Mutex
	cached   []Receiver
	cachedAt time.Time
	// failing counts, per receiver, the events in a row it failed, paused
	// says until when it is skipped, and pauses counts the pauses it has
	// had since it last took an event (pauseFailing). Only the worker
	// uses them.
	failing map[string]int
	paused  map[string]time.Time
	pauses  map[string]int
	// pauseFor is the first pause of a receiver that keeps failing;
	// tests shorten it.
	pauseFor time.Duration
	// open holds, per incident receiver, the keys of the incidents this
	// process opened and has not closed, and pending the triggers and
	// closes that are to be sent again: they failed, or came while the
	// receiver was paused. Only the worker uses them.
	open    map[string]map[string]bool
	pending map[string]map[string]*pendingEvent
	// overflow holds the events that found the queue full and may close
	// an incident, and those that came after them (Notify); wake tells
	// the worker they wait.
	overflowMu sync.Mutex
	overflow   []Event
	wake       chan struct{}
	// CloseRetry is how often a trigger or a close that was not
	// delivered is tried again.
	CloseRetry time.Duration
	// Closed, when set, is called with the close of an object that was
	// in a warning (one that mayClose) once no incident receiver that
	// takes it owes it any more: each delivered it, refused it for good,
	// or gave it up (giveUp), or its Secret no longer names an incident
	// format. It is called once per close, from the worker, and must not
	// block; a close that no incident receiver takes is not reported. The
	// Addon reconciler sets it before Start, so that an add-on keeps
	// status.warningSince, the mark from which a controller that restarts
	// closes the incident again, until its close is delivered.
	Closed func(e Event)
}

// pendingEvent is an incident's trigger or close not yet delivered, and
// how often it was tried. For a trigger, mayBeOpen says whether the
// incident may be open in the tool already: this process delivered a
// trigger of it, or posted this one and had no answer that says the tool
// did not take it (unsureError), or the object was in a warning before (a
// process before this one may have). A close that comes while a trigger
// is pending with mayBeOpen false closes an incident the tool never saw:
// neither is sent.
type pendingEvent struct {
	event     Event
	tries     int
	mayBeOpen bool
}

const (
	// QueueSize bounds the events that wait for delivery.
	QueueSize = 1024
	// maxWait bounds one wait between posts, whatever Retry-After asks.
	maxWait = time.Minute
	// pauseAfter failed events in a row pause a receiver for pauseFor:
	// with one worker, a receiver that hangs would otherwise cost every
	// event its timeouts and backoff, and the queue would fill and drop
	// the other receivers' events too. Each pause after is twice the one
	// before (pauseFailing).
	pauseAfter = 3
	pauseFor   = time.Minute
	// maxPause bounds the pause of a receiver that asks, with a
	// Retry-After longer than a post's Timeout, to be sent nothing for a
	// while: a receiver that asks for a day is tried again sooner. It
	// bounds the pause of one that keeps failing too, so that one back
	// from an outage hears again within it.
	maxPause = 10 * time.Minute
	// readTimeout bounds one read of the receivers' Secrets.
	readTimeout = 10 * time.Second
)

func (n *Notifier) init() {
	n.once.Do(func() {
		n.queue = make(chan Event, QueueSize)
		n.wake = make(chan struct{}, 1)
		if n.ReceiversTTL <= 0 {
			n.ReceiversTTL = 30 * time.Second
		}
		if n.Attempts <= 0 {
			n.Attempts = 4
		}
		if n.Backoff <= 0 {
			n.Backoff = time.Second
		}
		if n.Timeout <= 0 {
			n.Timeout = 10 * time.Second
		}
		c := http.Client{}
		if n.Client != nil {
			c = *n.Client
		}
		// NOTE: a 301 to 303 would turn the post into a GET without its
		// body, and a 307 would send the body and its signature to
		// another address: a webhook's address is its final one.
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		n.client = &c
		n.failing, n.paused, n.pauses = map[string]int{}, map[string]time.Time{}, map[string]int{}
		if n.pauseFor <= 0 {
			n.pauseFor = pauseFor
		}
		n.open, n.pending = map[string]map[string]bool{}, map[string]map[string]*pendingEvent{}
		if n.CloseRetry <= 0 {
			n.CloseRetry = time.Minute
		}
	})
}

// Notify queues e without waiting. When the queue is full, e is dropped
// and counted: a receiver that is down must not hold a reconcile. But an
// event that may close an incident waits in the overflow instead: the
// object is settled and says nothing more, so a lost close would leave
// the incident open for good.
func (n *Notifier) Notify(e Event) bool {
	if n == nil {
		return false
	}
	n.init()
	if (e.SameState || e.IncidentOnly && incidentAction(e) == incidentOpen) && len(n.queue) >= sameStateRoom {
		notifications.WithLabelValues("dropped").Inc()
		return false
	}
	n.overflowMu.Lock()
	defer n.overflowMu.Unlock()
	// NOTE: while the overflow holds events, every event joins it, so that
	// none overtakes an older one: a close must not come after the warning
	// that opened the incident again.
	if len(n.overflow) == 0 {
		select {
		case n.queue <- e:
			return true
		default:
		}
	}
	if len(n.overflow) < maxOverflow && (mayClose(e) || len(n.overflow) < overflowRoom) {
		n.overflow = append(n.overflow, e)
		select {
		case n.wake <- struct{}{}:
		default:
		}
		return true
	}
	notifications.WithLabelValues("dropped").Inc()
	return false
}

const (
	// maxOverflow bounds the events that wait past a full queue: closes,
	// and the events that came after the first of them.
	maxOverflow = 10000
	// overflowRoom is how many of them may be other events; past it, only
	// closes join.
	overflowRoom = QueueSize
)

// mayClose reports whether e may close an incident: an object settled,
// or gone, after a warning.
func mayClose(e Event) bool {
	return incidentAction(e) == incidentClose && (e.IncidentOnly || afterWarning(e))
}

// afterWarning reports whether e's object was in a warning just before e,
// or has been since it last settled: whichever process opened the
// incident, e closes it.
func afterWarning(e Event) bool {
	return e.PreviousSeverity == SeverityWarning || !e.WarningSince.IsZero()
}

// takeOverflow hands the worker the events that waited past the queue,
// once the queue is empty, oldest first.
func (n *Notifier) takeOverflow() []Event {
	n.overflowMu.Lock()
	defer n.overflowMu.Unlock()
	if len(n.queue) > 0 {
		return nil
	}
	out := n.overflow
	n.overflow = nil
	return out
}

// sameStateRoom is how full the queue may be for an event of a new commit
// in the same phase (Event.SameState), or for a warning's trigger sent
// again by a controller that restarted (Event.IncidentOnly), to join it:
// there is one per add-on of a repository per commit, or per failing
// add-on per start, and they must not crowd out transitions.
const sameStateRoom = QueueSize / 2

// Start delivers queued events until ctx ends. It is a manager Runnable,
// run by the leader only, as the reconciles that feed it are.
func (n *Notifier) Start(ctx context.Context) error {
	n.init()
	retry := time.NewTicker(n.CloseRetry)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-n.queue:
			n.deliverAll(ctx, e)
			if len(n.queue) == 0 {
				n.drainOverflow(ctx)
			}
		case <-n.wake:
			n.drainOverflow(ctx)
		case <-retry.C:
			n.retryPending(ctx)
		}
	}
}

// drainOverflow delivers the events that waited past the queue, once the
// queue ahead of them is empty.
func (n *Notifier) drainOverflow(ctx context.Context) {
	for _, e := range n.takeOverflow() {
		if ctx.Err() != nil {
			return
		}
		n.deliverAll(ctx, e)
	}
}

// deliverAll sends e to every receiver that takes it (Wants), and a close
// to every incident receiver that holds the incident it closes
// (holdsIncident), but to none that is paused. An incident receiver's
// trigger or close that is not delivered stays pending (incidentStep),
// and is sent again (retryPending). A close that every incident receiver
// taking it delivered (or had nothing to close for) is reported to
// Closed.
func (n *Notifier) deliverAll(ctx context.Context, e Event) {
	// incident says whether an incident receiver takes e, and owed
	// whether one still owes it.
	incident, owed := false, false
	for _, r := range n.receivers(ctx) {
		if ctx.Err() != nil {
			return
		}
		if !r.Wants(e) && !n.holdsIncident(r, e) {
			continue
		}
		incident = incident || r.incident()
		if !n.incidentStep(r, e) {
			continue
		}
		if until := n.paused[r.Name]; time.Now().Before(until) {
			notifications.WithLabelValues("skipped").Inc()
			owed = owed || r.incident()
			continue
		}
		attempts := n.Attempts
		if n.pauses[r.Name] > 0 {
			// NOTE: the receiver failed every event until it was
			// paused, and has taken none since: one post tells whether
			// it is back, without the retries that a receiver that
			// hangs would make cost the others Attempts timeouts.
			attempts = 1
		}
		err := n.deliver(ctx, r, e, attempts)
		var perm *permanentError
		if err == nil || errors.As(err, &perm) {
			// NOTE: a trigger or close refused for good is not tried
			// again.
			n.delivered(r, e, err == nil)
		} else {
			owed = owed || r.incident()
			n.mayHaveOpened(r, e, err)
		}
		switch {
		case err == nil:
			n.failing[r.Name] = 0
			delete(n.pauses, r.Name)
			notifications.WithLabelValues("sent").Inc()
		case ctx.Err() != nil:
			return // shutting down: not the receiver's failure
		default:
			notifications.WithLabelValues("failed").Inc()
			if d, ok := n.pauseBusy(r, err); ok {
				n.Log.Error(err, "A notification was not delivered; the receiver asked for a wait, and is skipped until then",
					"receiver", r.Name, "object", e.Kind+" "+e.Namespace+"/"+e.Name, "phase", e.Phase, "skippedFor", d.String())
				continue
			}
			n.failing[r.Name]++
			if n.failing[r.Name] >= pauseAfter || n.pauses[r.Name] > 0 {
				d := n.pauseFailing(r)
				n.Log.Error(err, "A notification was not delivered; the receiver failed for several in a row, and is skipped for a while",
					"receiver", r.Name, "object", e.Kind+" "+e.Namespace+"/"+e.Name, "phase", e.Phase, "skippedFor", d.String())
				continue
			}
			n.Log.Error(err, "A notification was not delivered", "receiver", r.Name, "object", e.Kind+" "+e.Namespace+"/"+e.Name, "phase", e.Phase)
		}
	}
	if incident && !owed && n.Closed != nil && mayClose(e) {
		n.Closed(e)
	}
}

const (
	// maxOpen bounds the incidents remembered per receiver, and the
	// triggers and closes waiting to be sent again; past it, a close is
	// sent only after a warning, and a trigger or close that fails is not
	// tried again.
	maxOpen = 10000
	// maxCloseTries bounds the tries of one pending trigger or close: an
	// hour of a receiver that fails, at the default CloseRetry.
	maxCloseTries = 60
)

// incidentStep reports whether an incident receiver r is to be sent e,
// and remembers what e does to the object's incident: a close is sent
// only for an incident this process opened, or after a warning, just
// before or since the object last settled (see incidentAction).
// A trigger or a close is pending until it is delivered (delivered), so
// that one that fails, or comes while the receiver is paused, is sent
// again (retryPending): a warning that no one was paged for, or a settled
// object whose incident stays open, would otherwise say nothing more.
// A pending event of the object gives way to the newer one: a trigger
// to its close, a close to the warning that opens the incident anew.
// Any other receiver is sent e.
func (n *Notifier) incidentStep(r Receiver, e Event) bool {
	if !r.incident() {
		return true
	}
	key := incidentKey(r, e)
	open, pending := n.open[r.Name], n.pending[r.Name]
	if open == nil {
		open, pending = map[string]bool{}, map[string]*pendingEvent{}
		n.open[r.Name], n.pending[r.Name] = open, pending
	}
	p := pending[key]
	if incidentAction(e) == incidentOpen {
		mayBeOpen := open[key] || afterWarning(e) || p != nil && (p.mayBeOpen || incidentAction(p.event) == incidentClose)
		if p != nil || len(pending) < maxOpen {
			pending[key] = &pendingEvent{event: e, mayBeOpen: mayBeOpen}
		}
		return true
	}
	if p != nil && incidentAction(p.event) == incidentOpen && !p.mayBeOpen {
		// NOTE: the trigger never reached the tool (it was never posted,
		// or every post of it was turned away unread), which holds no
		// incident of the object: a page for what is settled now, or a
		// close of nothing, would only confuse the on-call.
		delete(pending, key)
		return false
	}
	if !open[key] && p == nil && !afterWarning(e) {
		return false
	}
	if p != nil || len(pending) < maxOpen {
		pending[key] = &pendingEvent{event: e}
	}
	return true
}

// holdsIncident reports whether e closes an incident that the incident
// receiver r holds, open or pending, in this process. The close is owed
// to r though r no longer takes e: the object's labels, or r's selector,
// changed after the trigger, and no other close of that incident would
// ever come, so it would stay open for good.
func (n *Notifier) holdsIncident(r Receiver, e Event) bool {
	if !r.incident() || incidentAction(e) != incidentClose {
		return false
	}
	key := incidentKey(r, e)
	return n.open[r.Name][key] || n.pending[r.Name][key] != nil
}

// delivered records that an incident receiver r took e (ok), or refused
// it for good: it is no longer pending; a trigger taken opened the
// object's incident, and a close closed it.
func (n *Notifier) delivered(r Receiver, e Event, ok bool) {
	if !r.incident() {
		return
	}
	key := incidentKey(r, e)
	switch incidentAction(e) {
	case incidentClose:
		n.forget(r.Name, key)
	case incidentOpen:
		delete(n.pending[r.Name], key)
		if open := n.open[r.Name]; ok && open != nil && len(open) < maxOpen {
			open[key] = true
		}
	}
}

// mayHaveOpened marks the pending trigger e to the incident receiver r
// as one that may have opened the incident, when err, the failure of its
// delivery, says the tool may have taken it all the same (unsureError):
// a post answered after Timeout, or whose connection was lost after the
// request was written, or a proxy's 502. Once the object settles, its
// close is then sent, since the tool may hold an open incident that
// nothing else would ever close; a close of an incident the tool does not
// hold changes nothing there.
func (n *Notifier) mayHaveOpened(r Receiver, e Event, err error) {
	var unsure *unsureError
	if !r.incident() || incidentAction(e) != incidentOpen || !errors.As(err, &unsure) {
		return
	}
	if p := n.pending[r.Name][incidentKey(r, e)]; p != nil && incidentAction(p.event) == incidentOpen {
		p.mayBeOpen = true
	}
}

// forget drops the incident of key from what receiver remembers: open,
// and pending.
func (n *Notifier) forget(receiver, key string) {
	delete(n.open[receiver], key)
	delete(n.pending[receiver], key)
}

// retryPending sends again the triggers and closes that were not
// delivered, to the receivers not paused, at most pendingPerRetry of each
// at a time, so that a receiver back after an outage cannot hold the
// worker, and the queue behind it, for long. A receiver that fails one is
// left until the next retry, and each of its pending events counts the
// try: one is given up after maxCloseTries, when the tool refuses it for
// good, or when its receiver no longer opens incidents or is gone
// (abandon); a newer event of its object replaces it (incidentStep). A
// close no incident receiver owes any more is reported to Closed.
func (n *Notifier) retryPending(ctx context.Context) {
	if !n.anyPending() {
		return
	}
	rs := n.receivers(ctx)
	n.abandon(rs)
	for _, r := range rs {
		pending := n.pending[r.Name]
		if len(pending) == 0 || time.Now().Before(n.paused[r.Name]) {
			continue
		}
		sent := 0
		for key, p := range pending {
			if ctx.Err() != nil {
				return
			}
			if sent >= pendingPerRetry {
				break
			}
			err := n.deliver(ctx, r, p.event, 1)
			var perm *permanentError
			switch {
			case err == nil:
				sent++
				n.failing[r.Name] = 0
				delete(n.pauses, r.Name)
				n.delivered(r, p.event, true)
				notifications.WithLabelValues("sent").Inc()
				n.settled(rs, p.event)
				continue
			case errors.As(err, &perm):
				n.giveUp(r, key, err, "refused, and is not sent again")
				n.settled(rs, p.event)
				continue
			}
			n.mayHaveOpened(r, p.event, err)
			if _, busy := n.pauseBusy(r, err); !busy && n.pauses[r.Name] > 0 {
				// NOTE: this post was the first after the receiver's
				// pause, as an event's would be (deliverAll).
				n.pauseFailing(r)
			}
			for k, q := range pending {
				if q.tries++; q.tries >= maxCloseTries {
					n.giveUp(r, k, err, "not delivered after an hour of tries, and is given up")
					n.settled(rs, q.event)
				}
			}
			break
		}
	}
}

// abandon drops the triggers and closes pending for receivers that no
// longer open incidents: those whose Secret now names another format,
// and those rs no longer holds (the Secret is gone, or wrong). Nothing
// is left to send them to, as after a restart; the closes among them are
// settled (settled) once, per object.
func (n *Notifier) abandon(rs []Receiver) {
	current := make(map[string]bool, len(rs))
	for _, r := range rs {
		current[r.Name] = r.incident()
	}
	var closes []Event
	for name, pending := range n.pending {
		if current[name] || len(pending) == 0 {
			continue
		}
		for _, p := range pending {
			if incidentAction(p.event) == incidentClose {
				closes = append(closes, p.event)
			}
		}
		delete(n.pending, name)
		delete(n.open, name)
	}
	seen := map[string]bool{}
	for _, e := range closes {
		if k := e.Kind + "/" + e.Namespace + "/" + e.Name; !seen[k] {
			seen[k] = true
			n.settled(rs, e)
		}
	}
}

// settled reports e, a close that an incident receiver no longer owes, to
// Closed, unless another incident receiver of rs still holds a close of
// its object pending.
func (n *Notifier) settled(rs []Receiver, e Event) {
	if n.Closed == nil || !mayClose(e) {
		return
	}
	for _, r := range rs {
		if !r.incident() {
			continue
		}
		if p := n.pending[r.Name][incidentKey(r, e)]; p != nil && incidentAction(p.event) == incidentClose {
			return
		}
	}
	n.Closed(e)
}

// giveUp forgets the pending trigger or close of key to r, and says why
// and what a person is to do.
func (n *Notifier) giveUp(r Receiver, key string, err error, why string) {
	e := n.pending[r.Name][key].event
	msg := "An incident's close was " + why + "; close the incident by hand"
	if incidentAction(e) == incidentOpen {
		msg = "An incident's trigger was " + why + "; the object still needs a look"
		delete(n.pending[r.Name], key)
	} else {
		n.forget(r.Name, key)
	}
	notifications.WithLabelValues("failed").Inc()
	n.Log.Error(err, msg, "receiver", r.Name, "object", e.Kind+" "+e.Namespace+"/"+e.Name)
}

// pendingPerRetry bounds the triggers and closes one retry sends to one
// receiver.
const pendingPerRetry = 20

// anyPending reports whether a trigger or a close waits to be sent again.
func (n *Notifier) anyPending() bool {
	for _, pending := range n.pending {
		if len(pending) > 0 {
			return true
		}
	}
	return false
}

// TakesIncidents reports whether an incident receiver takes e, by the
// receivers as last read (read again once they are ReceiversTTL old, as
// for a delivery): the Addon reconciler asks it of a Synced add-on that
// carries status.warningSince, which it keeps until Closed reports the
// close delivered only when some receiver is to be sent that close.
func (n *Notifier) TakesIncidents(ctx context.Context, e Event) bool {
	if n == nil || n.Receivers == nil {
		return false
	}
	n.init()
	for _, r := range n.receivers(ctx) {
		if r.incident() && r.Wants(e) {
			return true
		}
	}
	return false
}

// receivers are the receivers, read again once they are ReceiversTTL old.
// Those that could not be read are left out, and said so once per read.
func (n *Notifier) receivers(ctx context.Context) []Receiver {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cachedAt.IsZero() || time.Since(n.cachedAt) >= n.ReceiversTTL {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		rs, err := n.Receivers(rctx)
		cancel()
		if len(n.TrustedNamespaces) > 0 {
			for i := range rs {
				rs[i].Trusted = n.TrustedNamespaces
			}
		}
		if err != nil && ctx.Err() == nil {
			n.Log.Error(err, "Some notification receivers could not be read; until they can, notifications go to the others only")
		}
		n.cached, n.cachedAt = rs, time.Now()
	}
	return n.cached
}

// Deliver posts e to r, and again after a failure that may pass (a
// connection error, 408, 429 and 5xx) up to Attempts times, waiting as
// wait says; a post that had no answer within Timeout is not repeated
// (hungError); a Retry-After longer than Timeout is not waited for, and the
// error says how long the receiver asked for (busyError). Every post of
// one delivery carries the same
// X-Capstan-Delivery, so that a receiver can tell a retry from a new event.
// An error after a post that may have reached the receiver all the same
// is an unsureError.
func (n *Notifier) Deliver(ctx context.Context, r Receiver, e Event) error {
	n.init()
	return n.deliver(ctx, r, e, n.Attempts)
}

// deliver posts e to r, at most attempts times.
func (n *Notifier) deliver(ctx context.Context, r Receiver, e Event, attempts int) error {
	body, err := r.Body(e)
	if err != nil {
		return err
	}
	target := r.target(e)
	var id [12]byte
	_, _ = rand.Read(id[:])
	delivery := hex.EncodeToString(id[:])
	// unsure says whether a post so far may have reached r (unsureError),
	// which the error that ends the delivery must still say, though its
	// own post was turned away unread.
	unsure := false
	fail := func(err error) error {
		var u *unsureError
		if unsure && !errors.As(err, &u) {
			return &unsureError{err}
		}
		return err
	}
	for attempt := 1; ; attempt++ {
		after, err := n.post(ctx, r, target, body, delivery)
		if err == nil {
			return nil
		}
		var u *unsureError
		unsure = unsure || errors.As(err, &u)
		if after > n.Timeout {
			// NOTE: the one worker would sleep the whole wait, holding
			// every other receiver's events behind it; the receiver is
			// paused for it instead (deliverAll).
			return fail(&busyError{err, after})
		}
		var perm *permanentError
		var hung *hungError
		if errors.As(err, &perm) || errors.As(err, &hung) || attempt >= attempts {
			return fail(err)
		}
		select {
		case <-ctx.Done():
			return fail(errors.Join(err, ctx.Err()))
		case <-time.After(wait(n.Backoff, attempt, after)):
		}
	}
}

// wait is how long to wait after the attempt-th post failed: what the
// receiver asked for (Retry-After), or base doubled for each post before;
// at most maxWait either way.
func wait(base time.Duration, attempt int, asked time.Duration) time.Duration {
	if asked > 0 {
		return min(asked, maxWait)
	}
	return doubled(base, attempt-1, maxWait)
}

// doubled is d doubled times times, at most limit: the waits between
// posts and the pauses of a failing receiver both grow so. It stops at
// limit, so that the large count a long outage makes costs only the
// doublings up to limit and never overflows; a d that is not positive
// stays as it is.
func doubled(d time.Duration, times int, limit time.Duration) time.Duration {
	for i := 0; i < times && d > 0 && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// pauseFailing pauses r, which failed pauseAfter events in a row, or the
// one post after its last pause (deliverAll), and returns for how long:
// pauseFor the first time, then twice as long as the pause before, at
// most maxPause, until r takes an event. A receiver that hangs costs the
// worker one Timeout per pause, and the others' events wait that long.
func (n *Notifier) pauseFailing(r Receiver) time.Duration {
	d := doubled(n.pauseFor, n.pauses[r.Name], maxPause)
	n.failing[r.Name] = 0
	n.pauses[r.Name]++
	n.paused[r.Name] = time.Now().Add(d)
	return d
}

// busyError is a receiver's answer that asks for a wait (Retry-After)
// longer than a post may take: not waited for, but a pause of the
// receiver (pauseBusy).
type busyError struct {
	error
	after time.Duration
}

func (b *busyError) Unwrap() error { return b.error }

// pauseBusy pauses r for as long as it asked, at most maxPause, when err
// is its busyError, and reports whether it was.
func (n *Notifier) pauseBusy(r Receiver, err error) (time.Duration, bool) {
	var busy *busyError
	if !errors.As(err, &busy) {
		return 0, false
	}
	d := min(busy.after, maxPause)
	n.failing[r.Name] = 0
	n.paused[r.Name] = time.Now().Add(d)
	return d, true
}

// hungError is a post that had no answer within Timeout. It is not
// posted again for the same event: a receiver that hangs would most
// likely hang as long again, and the one worker would hold every other
// receiver's events behind Attempts timeouts.
type hungError struct{ error }

func (h *hungError) Unwrap() error { return h.error }

// unsureError is a failed post that may have reached the receiver all the
// same: the request was written whole, and no answer said it was turned
// away unread (a 408, a 429, a rate limit's 403). One answered after
// Timeout, one whose connection was lost before the answer, and a 5xx (a
// proxy's 502 or 504 after the tool took it, the tool's own 500) may each
// hide a trigger the tool took, and an incident it opened
// (mayHaveOpened). A post never written (nothing listens, the guard
// refused the address) reached no one.
type unsureError struct{ error }

func (u *unsureError) Unwrap() error { return u.error }

// permanentError is a refusal that a retry would not change.
type permanentError struct{ error }

func (p *permanentError) Unwrap() error { return p.error }

// post sends one request to target, r's address. It returns the
// Retry-After the receiver asked for, if any.
func (n *Notifier) post(ctx context.Context, r Receiver, target string, body []byte, delivery string) (time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, &permanentError{fmt.Errorf("receiver %s: %w", r.Name, scrub(err, r))}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "capstan-notify")
	req.Header.Set("X-Capstan-Delivery", delivery)
	if r.Format == FormatGitHub {
		req.Header.Set("Accept", "application/vnd.github+json")
	}
	switch {
	case r.Token == "", r.Format == FormatPagerDuty:
		// NOTE: PagerDuty's routing key is in the body.
	case r.Format == FormatOpsgenie:
		req.Header.Set("Authorization", "GenieKey "+r.Token)
	default:
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	if len(r.HMACKey) > 0 {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("X-Capstan-Timestamp", ts)
		req.Header.Set("X-Capstan-Signature", Sign(r.HMACKey, ts, body))
	}
	// NOTE: the transport reports the request written from its own
	// goroutine, which may outlive Do.
	var written atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(pctx, &httptrace.ClientTrace{
		WroteRequest: func(w httptrace.WroteRequestInfo) { written.Store(w.Err == nil) },
	}))
	resp, err := n.client.Do(req)
	if err != nil {
		err = fmt.Errorf("receiver %s: %w", r.Name, scrub(err, r))
		if netguard.IsRefused(err) {
			// NOTE: the guard's hint names the fetch guard's flag; a
			// receiver is opened with the notifier's own.
			msg := strings.ReplaceAll(err.Error(), "if it is a trusted mirror, allow it with --fetch-allow",
				"if it is a trusted receiver, allow it with --notify-allow")
			return 0, &permanentError{netguard.Retext(err, msg)}
		}
		if pctx.Err() != nil && ctx.Err() == nil {
			err = &hungError{err}
		}
		if written.Load() {
			err = &unsureError{err}
		}
		return 0, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, nil
	case r.Format == FormatGitLab && resp.StatusCode == http.StatusBadRequest && bytes.Contains(answer, []byte("Cannot transition status")):
		// NOTE: GitLab refuses a state the commit's status has already
		// (running after running): the status says it.
		return 0, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return 0, &permanentError{fmt.Errorf("receiver %s answered %s: a webhook is posted to its address and not followed elsewhere; give its final address in the key url", r.Name, resp.Status)}
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusServiceUnavailable,
		resp.StatusCode == http.StatusForbidden && (resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0"):
		// NOTE: GitHub answers a rate limit with 403 and these headers;
		// any other 403 is a token that may not post.
		err := fmt.Errorf("receiver %s answered %s", r.Name, resp.Status)
		if resp.StatusCode == http.StatusServiceUnavailable {
			err = &unsureError{err}
		}
		return rateLimitWait(resp.StatusCode, resp.Header, time.Now()), err
	case resp.StatusCode == http.StatusRequestTimeout:
		return 0, fmt.Errorf("receiver %s answered %s", r.Name, resp.Status)
	case resp.StatusCode >= 500:
		return 0, &unsureError{fmt.Errorf("receiver %s answered %s", r.Name, resp.Status)}
	}
	return 0, &permanentError{fmt.Errorf("receiver %s answered %s; check its url and token", r.Name, resp.Status)}
}

// rateLimitWait is how long a receiver that answered status with header h
// at now asked to be sent nothing: its Retry-After, or else the time left
// until its rate limit resets, at least a second: GitHub's
// X-RateLimit-Reset once X-RateLimit-Remaining is 0, GitLab's
// RateLimit-Reset on a 429. Posts before the reset would only be refused
// again, and each counts against the limit. 0 when it says neither.
func rateLimitWait(status int, h http.Header, now time.Time) time.Duration {
	if d := retryAfter(h.Get("Retry-After")); d > 0 {
		return d
	}
	var reset string
	switch {
	case h.Get("X-RateLimit-Remaining") == "0":
		reset = h.Get("X-RateLimit-Reset")
	case status == http.StatusTooManyRequests || h.Get("RateLimit-Remaining") == "0":
		reset = h.Get("RateLimit-Reset")
	}
	v, err := strconv.ParseInt(strings.TrimSpace(reset), 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	// NOTE: GitHub and GitLab give the reset as Unix seconds; the IETF
	// draft's RateLimit-Reset is the seconds left, which no epoch since
	// 2001 is as small as.
	if v < 1e9 {
		return time.Duration(min(v, int64(maxPause/time.Second))) * time.Second
	}
	return max(time.Unix(v, 0).Sub(now), time.Second)
}

// retryAfter reads a Retry-After of seconds; an HTTP date, or nothing,
// gives 0.
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// scrub takes the receiver's URL and token out of an error: Go's HTTP
// client quotes the URL, and a webhook's URL is its password. The URL of a
// *url.Error is replaced whole, however it would be quoted; the strings
// after are a second net.
func scrub(err error, r Receiver) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = "<" + r.Name + " url>"
	}
	msg := err.Error()
	secrets := []string{r.URL.String(), r.URL.Redacted(), r.URL.RawQuery}
	if r.statuses != nil {
		secrets = append(secrets, r.statuses.String())
	}
	if p := r.URL.EscapedPath(); len(p) > 1 {
		secrets = append(secrets, p, r.URL.Path)
	}
	if len(r.Token) >= 4 {
		secrets = append(secrets, r.Token)
	}
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "<"+r.Name+" url>")
		}
	}
	return netguard.Retext(err, msg)
}

// Sign is the X-Capstan-Signature of body sent at timestamp (the
// X-Capstan-Timestamp header, Unix seconds) with key: "sha256=" and the hex
// HMAC-SHA256 of timestamp, ".", and body. A receiver checks it, and that
// the timestamp is recent, so that a post seen once cannot be sent again
// later as Capstan's.
func Sign(key []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

var notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "capstan_notifications_total",
	Help: "Notifications of Addon and AddonRepository transitions, by result: sent (one per receiver), failed (after the retries), skipped (the receiver was paused after failing several in a row), dropped (the queue was full).",
}, []string{"result"})

func init() {
	metrics.Registry.MustRegister(notifications)
}

// FromSecrets reads the receivers from the Secrets names in namespace, for
// Notifier.Receivers; namespace, the controller's, is the one trusted
// namespace they know (Receiver.Trusted). A Secret that is missing or wrong is left out, and
// the error names it and says what to fix; one that could not be read for
// a moment (the API server) stays as it was last read.
func FromSecrets(reader client.Reader, namespace string, names []string) func(ctx context.Context) ([]Receiver, error) {
	last := map[string]Receiver{}
	return func(ctx context.Context) ([]Receiver, error) {
		var out []Receiver
		var errs []error
		for _, name := range names {
			sec := &corev1.Secret{}
			err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sec)
			switch {
			case apierrors.IsNotFound(err):
				delete(last, name)
				errs = append(errs, fmt.Errorf("the notification Secret %s/%s does not exist: create it with the key url (see docs/notifications.md), or leave it out of --notify-secret", namespace, name))
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("reading the notification Secret %s/%s: %w", namespace, name, err))
				if r, ok := last[name]; ok {
					out = append(out, r)
				}
				continue
			}
			r, err := ReceiverFromSecret(namespace+"/"+name, sec.Data)
			r.Trusted = []string{namespace}
			if err != nil {
				delete(last, name)
				errs = append(errs, err)
				continue
			}
			last[name] = r
			out = append(out, r)
		}
		return out, errors.Join(errs...)
	}
}

// githubStatuses gives, for a repository's address on GitHub or GitHub
// Enterprise (https://HOST/OWNER/REPO, .git or not), the API address of
// its commit statuses, and the repository as repositoryKey gives it; nil
// for an address that names no repository. GitHub's API is at
// api.github.com, an Enterprise server's under /api/v3 on its own host.
func githubStatuses(u *url.URL) (*url.URL, string) {
	key := repositoryKey(u.String())
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if key == "" || len(parts) != 2 || u.RawQuery != "" || u.Fragment != "" {
		return nil, ""
	}
	path := "/repos/" + parts[0] + "/" + strings.TrimSuffix(parts[1], ".git") + "/statuses/"
	switch host := strings.ToLower(u.Hostname()); {
	case host == "github.com":
		return &url.URL{Scheme: "https", Host: "api.github.com", Path: path}, key
	case strings.HasSuffix(host, ".ghe.com"):
		// GitHub Enterprise Cloud with data residency serves its API
		// on its own api. host.
		return &url.URL{Scheme: "https", Host: "api." + host, Path: path}, key
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/api/v3" + path}, key
}

// repositoryKey is a git repository's address as host/owner/repo, in
// lower case, whether given as https or ssh (with or without .git, a user,
// a port or a trailing slash) or as scp-like ssh (git@HOST:OWNER/REPO.git);
// "" when it names no owner and repository. A receiver's repository and an
// add-on's are the same when their keys are. The port is left out: one
// host has one set of owners and repositories, whether cloned over ssh on
// port 22 or https on another.
func repositoryKey(raw string) string {
	raw = strings.TrimSpace(raw)
	host, path := "", ""
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		host, path = u.Hostname(), u.Path
	} else if colon := strings.Index(raw, ":"); !strings.Contains(raw, "://") && colon > 0 && !strings.Contains(raw[:colon], "/") {
		host, path = raw[strings.Index(raw[:colon], "@")+1:colon], raw[colon+1:]
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	last := len(parts) - 1
	parts[last] = strings.TrimSuffix(parts[last], ".git")
	if host == "" || len(parts) < 2 || slices.Contains(parts, "") {
		return ""
	}
	return strings.ToLower(host + "/" + strings.Join(parts, "/"))
}

// gitlabStatuses gives, for a project's address on GitLab
// (https://HOST/GROUP/.../PROJECT, .git or not), the API address of its
// commit statuses, with the project's path as one escaped segment, and
// the project as repositoryKey gives it; nil for an address that names no
// group and project.
func gitlabStatuses(u *url.URL) (*url.URL, string) {
	key := repositoryKey(u.String())
	if key == "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Path, "/-/") {
		return nil, ""
	}
	project := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	api := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/api/v4/projects/" + project + "/statuses/",
		RawPath: "/api/v4/projects/" + url.PathEscape(project) + "/statuses/"}
	return api, key
}

// gitlabState maps an add-on's phase to GitLab's states, as githubState
// does: running while it is on its way, pending while it waits for an
// approval.
func gitlabState(phase string) string {
	switch githubState(phase) {
	case "success":
		return "success"
	case "failure":
		return "failed"
	case "pending":
		if phase == "Progressing" {
			return "running"
		}
		return "pending"
	}
	return ""
}

// isCommit reports whether s is a whole git commit id: 40 hex digits, or
// 64 for a SHA-256 repository.
func isCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// githubState maps an add-on's phase to a commit status: success once it
// is Synced, failure when it failed, is blocked or degraded, pending while
// it is on its way or waits for an approval; "" for a phase that says
// nothing of the commit (paused, suspended, being deleted), which sets no
// status.
func githubState(phase string) string {
	switch phase {
	case "Synced":
		return "success"
	case "Failed", "Blocked", "Degraded":
		return "failure"
	case "Progressing", "OutOfSync":
		return "pending"
	}
	return ""
}

// githubDescription is the status's text: the phase, the reason and the
// message's start, within GitHub's 140 characters.
func githubDescription(e Event) string {
	d := e.Phase
	if e.Reason != "" && e.Reason != e.Phase {
		d += " (" + e.Reason + ")"
	}
	if m := strings.Join(strings.Fields(e.Message), " "); m != "" {
		d += ": " + m
	}
	if utf8.RuneCountInString(d) > 140 {
		r := []rune(d)
		d = string(r[:137]) + "..."
	}
	return d
}

// endsWithLineBreak reports whether k ends with a line break.
func endsWithLineBreak(k []byte) bool {
	return bytes.HasSuffix(k, []byte("\n")) || bytes.HasSuffix(k, []byte("\r"))
}

// isText reports whether k is printable UTF-8 text with no control
// characters (an empty key is text too): a key typed or generated as
// text, not random bytes.
func isText(k []byte) bool {
	if !utf8.Valid(k) {
		return false
	}
	for _, r := range string(k) {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
