package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
)

// An on-call tool (PagerDuty, Opsgenie) is not a channel: a transition
// there is an incident that pages someone, and that stays open until it
// is closed. So an incident receiver takes only two kinds of transition.
// A warning (an add-on Failed, Blocked or Degraded; a repository that
// fails or skips files) opens the object's incident, or adds to the one
// open, as one incident per object: its key is the object's, so failures
// in a row page once. A settled state (an add-on Synced, being deleted or
// gone; a repository synced cleanly or gone) closes it. The phases on the
// way (Progressing, OutOfSync, Paused) change nothing: a fix that is
// still rolling out has not fixed anything yet. A close goes to every
// incident receiver that holds the object's incident, whether or not its
// selector still takes the object (Notifier.holdsIncident).
//
// A close is sent only for an object whose incident this controller
// opened, or that was in a warning before and has not settled since
// (Event.PreviousSeverity, Event.WarningSince: a controller that restarted
// forgot what it opened): an install of a thousand add-ons that all end
// Synced must not send a thousand closes into the tool's rate limit.

// PhaseDeleted is the phase of an IncidentOnly event of an object that
// is gone.
const PhaseDeleted = "Deleted"

// The actions of an incident receiver.
const (
	incidentOpen  = "trigger"
	incidentClose = "resolve"
)

// incidentAction is what an incident receiver does with e: incidentOpen,
// incidentClose, or "" for nothing.
func incidentAction(e Event) string {
	switch {
	case e.SameState:
		return ""
	case e.Severity == SeverityWarning:
		return incidentOpen
	case e.Phase == "Synced", e.Phase == PhaseDeleted, e.Phase == "Deleting" && e.Kind != "AddonRepository":
		return incidentClose
	}
	return ""
}

// incident reports whether r opens and closes incidents rather than
// posting each transition.
func (r Receiver) incident() bool {
	return r.Format == FormatPagerDuty || r.Format == FormatOpsgenie
}

// maxIncidentKey is PagerDuty's bound on a dedup_key; Opsgenie's alias
// takes 512.
const maxIncidentKey = 255

// incidentKey names e's object in the tool: the receiver's cluster, the
// kind, namespace and name, joined by colons (which neither a name nor an
// Opsgenie address path needs escaped); a hash of them when that is too
// long.
func incidentKey(r Receiver, e Event) string {
	parts := []string{"capstan"}
	if r.Cluster != "" {
		parts = append(parts, r.Cluster)
	}
	kind := e.Kind
	if kind == "" {
		kind = "Addon"
	}
	key := strings.Join(append(parts, kind, e.Namespace, e.Name), ":")
	if len(key) <= maxIncidentKey {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return strings.Join(append(parts, hex.EncodeToString(sum[:])), ":")
}

// incidentUrgent reports whether e is an error rather than a warning: an
// add-on that failed or whose software is unhealthy. One Blocked waits
// for a person's decision, and a repository that fails changes nothing in
// the cluster while it does.
func incidentUrgent(e Event) bool {
	return e.Kind != "AddonRepository" && (e.Phase == "Failed" || e.Phase == "Degraded")
}

// incidentDetails are e's fields for the incident's details, as strings.
func incidentDetails(e Event) map[string]string {
	d := map[string]string{"kind": e.Kind, "namespace": e.Namespace, "name": e.Name, "phase": e.Phase, "reason": e.Reason}
	if d["kind"] == "" {
		d["kind"] = "Addon"
	}
	for k, v := range map[string]string{"source": e.Source, "version": e.Version, "repository": e.Repository, "commit": e.Commit} {
		if v != "" {
			d[k] = v
		}
	}
	if e.Revision > 0 {
		d["revision"] = strconv.FormatInt(e.Revision, 10)
	}
	return d
}

// pagerDutyEvent is e as an event of PagerDuty's Events API v2: a trigger
// with the transition (after the cluster's name, e.Cluster, which Body
// sets) as its summary and the rest as custom details, or a resolve. The
// routing key (the receiver's token) goes in the body, as that API takes
// it, never in a header.
func pagerDutyEvent(r Receiver, e Event) map[string]any {
	key := incidentKey(r, e)
	if incidentAction(e) == incidentClose {
		return map[string]any{"routing_key": r.Token, "event_action": "resolve", "dedup_key": key}
	}
	summaryText, _ := summary(e)
	if m := strings.Join(strings.Fields(e.Message), " "); m != "" {
		summaryText += ": " + m
	}
	severity := "warning"
	if incidentUrgent(e) {
		severity = "error"
	}
	source := e.Cluster
	if source == "" {
		source = "capstan"
	}
	details := map[string]any{}
	for k, v := range incidentDetails(e) {
		details[k] = v
	}
	if e.Message != "" {
		details["message"] = e.Message
	}
	if len(e.Labels) > 0 {
		details["labels"] = e.Labels
	}
	payload := map[string]any{
		// NOTE: PagerDuty cuts a summary at 1,024 characters.
		"summary": truncate(summaryText, 1000), "source": source, "severity": severity,
		"component": e.Name, "group": e.Namespace, "class": e.Reason, "custom_details": details,
	}
	if !e.Time.IsZero() {
		payload["timestamp"] = e.Time.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return map[string]any{"routing_key": r.Token, "event_action": "trigger", "dedup_key": key, "client": "Capstan", "payload": payload}
}

// opsgenieAlert is e as Opsgenie's Alert API takes it: an alert to
// create, whose alias is the object's incident key (Opsgenie adds a
// repeat to the open alert of that alias), or a note to close the alert
// of that alias with.
func opsgenieAlert(r Receiver, e Event) map[string]any {
	headline, what := summary(e)
	if incidentAction(e) == incidentClose {
		return map[string]any{"source": "capstan", "note": headline}
	}
	description := e.Message
	if what != "" {
		description = what + "\n\n" + description
	}
	priority := "P3"
	if incidentUrgent(e) {
		priority = "P2"
	}
	details := incidentDetails(e)
	tags := []string{"capstan", details["kind"], e.Phase}
	if e.Cluster != "" {
		tags = append(tags, e.Cluster)
	}
	return map[string]any{
		// NOTE: Opsgenie refuses a message over 130 characters and a
		// description over 15,000.
		"message": truncate(headline, 126), "alias": incidentKey(r, e), "description": truncate(description, 14000),
		"source": "capstan", "entity": details["kind"] + " " + e.Namespace + "/" + e.Name,
		"priority": priority, "tags": tags, "details": details,
	}
}

// opsgenieTarget is where an Opsgenie receiver sends e: its alerts
// address to create one, or the close of the alert of e's alias.
func opsgenieTarget(r Receiver, e Event) string {
	if incidentAction(e) != incidentClose {
		return r.URL.String()
	}
	u := r.URL.JoinPath(incidentKey(r, e), "close")
	u.RawQuery = url.Values{"identifierType": {"alias"}}.Encode()
	return u.String()
}

// The addresses an incident receiver posts to when its Secret gives no
// url: the tools' own, in their US regions. Their EU regions are
// https://events.eu.pagerduty.com/v2/enqueue and
// https://api.eu.opsgenie.com/v2/alerts.
const (
	pagerDutyURL = "https://events.pagerduty.com/v2/enqueue"
	opsgenieURL  = "https://api.opsgenie.com/v2/alerts"
)
