package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/notify"
)

// TestNotifyAllowOpensReceiversOnly: --notify-allow lets a post to a
// webhook through the notifier's guard while the fetch guard, from the
// same flags, still refuses that address; --fetch-allow does not open a
// receiver, and the notifier's refusal names --notify-allow. The webhook
// is on loopback, which both guards refuse unless allowed.
func TestNotifyAllowOpensReceiversOnly(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	u, err := url.Parse(hook.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	loopback := netip.MustParseAddr("127.0.0.1")
	r, err := notify.ReceiverFromSecret("capstan-system/hook", map[string][]byte{"url": []byte(hook.URL + "/hook")})
	if err != nil {
		t.Fatal(err)
	}
	e := notify.Event{Kind: "Addon", Namespace: "team", Name: "web", Phase: "Synced", Reason: "Synced", Severity: notify.SeverityInfo}
	guards := func(args ...string) (fetch, notifier *netguard.Guard) {
		t.Helper()
		o := parseControllerFlags(t, args...)
		fetch, err := netguard.New(o.guard)
		if err != nil {
			t.Fatal(err)
		}
		notifier, err = newNotifyGuard(fetch.Config(), o.notifyAllow)
		if err != nil {
			t.Fatal(err)
		}
		return fetch, notifier
	}

	fetch, notifier := guards("--notify-allow=127.0.0.1")
	if err := fetch.Allowed(loopback, port); !netguard.IsRefused(err) {
		t.Errorf("--notify-allow=127.0.0.1 opened the fetch guard to %s:%d: %v", loopback, port, err)
	}
	if err := notifier.Allowed(loopback, port); err != nil {
		t.Errorf("--notify-allow=127.0.0.1: the notifier's guard refuses it: %v", err)
	}
	n := &notify.Notifier{Client: notifier.Client(), Attempts: 1}
	if err := n.Deliver(context.Background(), r, e); err != nil {
		t.Errorf("a post with --notify-allow=127.0.0.1: %v", err)
	}

	fetch, notifier = guards("--fetch-allow=127.0.0.1")
	if err := fetch.Allowed(loopback, port); err != nil {
		t.Errorf("--fetch-allow=127.0.0.1: the fetch guard refuses it: %v", err)
	}
	n = &notify.Notifier{Client: notifier.Client(), Attempts: 1}
	err = n.Deliver(context.Background(), r, e)
	if !netguard.IsRefused(err) || !strings.Contains(err.Error(), "allow it with --notify-allow=127.0.0.1/32") || strings.Contains(err.Error(), "--fetch-allow") {
		t.Errorf("a post with --fetch-allow=127.0.0.1 alone: %v; want the guard's refusal, naming --notify-allow", err)
	}
	if _, err := newNotifyGuard(fetch.Config(), []string{"not an address!"}); err == nil {
		t.Error("--notify-allow took an entry that is no address")
	}
}
