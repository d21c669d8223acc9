package benchmark_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// The floor's two runs in one benchmark differ by up to a fifth in time
// and in the control plane's CPU, with the machine's speed steady. A write
// census per turn says whether they differ in work: every write the API
// server received in the turn's window, from every writer (the floor or
// Capstan, the controller manager's controllers, the scheduler, kwok), by
// writer, verb and resource, from the audit log.

// writeCensus is the writes of one window, by "writer: verb resource",
// and when in the window they came.
type writeCensus struct {
	counts map[string]int
	// applies and deployments are the times, from the window's start, of
	// the add-ons' applies (not dry runs) and of the controller manager's
	// writes of the Deployments' status: where a turn's time goes, at its
	// start, in its middle and at its end.
	applies, deployments []time.Duration
	// each holds, per add-on (by its target namespace, which is the
	// Addon's name), when its steps came.
	each map[string]*addonSteps
}

// addonSteps is when one add-on's steps came, from the audit log: the
// Addon's creation (none for the floor), its first and last apply, the last
// write of its Deployment's status, and the Addon's last status write (the
// one that says Ready).
type addonSteps struct {
	created, firstApply, lastApply, deployment, ready time.Time
}

// mustCensus counts the writes the API server received between from and
// to.
func mustCensus(b *testing.B, from, to time.Time) writeCensus {
	b.Helper()
	events, err := cluster.AuditEvents()
	if err != nil {
		b.Fatalf("reading the audit log: %v", err)
	}
	return censusOf(events, from, to)
}

func censusOf(events []auditv1.Event, from, to time.Time) writeCensus {
	out := writeCensus{counts: map[string]int{}, each: map[string]*addonSteps{}}
	steps := func(name string) *addonSteps {
		st := out.each[name]
		if st == nil {
			st = &addonSteps{}
			out.each[name] = st
		}
		return st
	}
	for _, e := range events {
		if e.Stage != auditv1.StageResponseComplete {
			continue
		}
		at := e.RequestReceivedTimestamp.Time
		if at.Before(from) || at.After(to) {
			continue
		}
		resource := resourceOf(e)
		verb := e.Verb
		if strings.Contains(e.RequestURI, "dryRun=") {
			verb += " (dry run)"
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 {
			verb += fmt.Sprintf(" → %d", e.ResponseStatus.Code)
		}
		writer := writerOf(e)
		out.counts[writer+": "+verb+" "+resource]++
		switch {
		case writer == addonsWriter && verb == "patch" && resource != "namespaces":
			out.applies = append(out.applies, at.Sub(from))
			st := steps(e.ObjectRef.Namespace)
			if st.firstApply.IsZero() {
				st.firstApply = at
			}
			st.lastApply = at
		case writer == "deployment-controller" && verb == "update" && resource == "deployments/status":
			out.deployments = append(out.deployments, at.Sub(from))
			steps(e.ObjectRef.Namespace).deployment = at
		case verb == "create" && resource == "addons":
			steps(e.ObjectRef.Name).created = at
		case strings.HasSuffix(writer, ":capstan-controller") && verb == "patch" && resource == "addons/status":
			steps(e.ObjectRef.Name).ready = at
		}
	}
	slices.Sort(out.applies)
	slices.Sort(out.deployments)
	return out
}

// lags are, over the add-ons, the quantiles of the time between two of
// their steps: "-" when the census has none.
func (c writeCensus) lags(from, to func(*addonSteps) time.Time) string {
	var ds []time.Duration
	for _, st := range c.each {
		if a, b := from(st), to(st); !a.IsZero() && !b.IsZero() {
			ds = append(ds, b.Sub(a))
		}
	}
	slices.Sort(ds)
	return quantiles(ds)
}

// addonsWriter is the account that applies the add-ons' objects, for
// Capstan and for the floor alike.
const addonsWriter = "capstan-system:capstan-addons"

// quantiles writes when the first, the tenth, half, nine tenths and the
// last of the sorted times came, in seconds.
func quantiles(ts []time.Duration) string {
	if len(ts) == 0 {
		return "-"
	}
	at := func(q float64) float64 { return ts[int(q*float64(len(ts)-1))].Seconds() }
	return fmt.Sprintf("%.2f %.2f %.2f %.2f %.2f", at(0), at(0.1), at(0.5), at(0.9), at(1))
}

// writerOf names who made a write, short: a controller manager's
// controller by its service account, the impersonated user when there is
// one.
func writerOf(e auditv1.Event) string {
	u := e.User.Username
	if e.ImpersonatedUser != nil {
		u = e.ImpersonatedUser.Username
	}
	u = strings.TrimPrefix(u, "system:serviceaccount:kube-system:")
	u = strings.TrimPrefix(u, "system:serviceaccount:")
	return strings.TrimPrefix(u, "system:")
}

// logCensus writes the turns' censuses side by side, per add-on, and marks
// the rows whose turns differ by more than a twentieth.
func logCensus(s *strings.Builder, n int, names []string, turns []writeCensus) {
	var rows []string
	for _, t := range turns {
		for k := range t.counts {
			rows = append(rows, k)
		}
	}
	sort.Strings(rows)
	rows = slices.Compact(rows)
	total := make([]int, len(turns))
	fmt.Fprintf(s, "  writes in each turn's window (audit log), per add-on:")
	for _, name := range names {
		fmt.Fprintf(s, " %s |", name)
	}
	fmt.Fprintf(s, "\n")
	for _, k := range rows {
		lo, hi := -1, 0
		for i, t := range turns {
			c := t.counts[k]
			total[i] += c
			if lo < 0 || c < lo {
				lo = c
			}
			hi = max(hi, c)
		}
		if hi < n/20 {
			continue // a handful, not per add-on
		}
		fmt.Fprintf(s, "    %-66s", truncate(k, 66))
		for _, t := range turns {
			fmt.Fprintf(s, " %7.2f", float64(t.counts[k])/float64(n))
		}
		if float64(hi-lo) > float64(hi)/20 {
			fmt.Fprintf(s, "   differs")
		}
		fmt.Fprintf(s, "\n")
	}
	fmt.Fprintf(s, "    %-66s", "all")
	for _, t := range total {
		fmt.Fprintf(s, " %7.2f", float64(t)/float64(n))
	}
	fmt.Fprintf(s, "\n")
	fmt.Fprintf(s, "  when, in s from each turn's start (first, 1/10, 1/2, 9/10, last):\n")
	for i, t := range turns {
		fmt.Fprintf(s, "    %-14s applies %-30s Deployments' status %s\n", names[i], quantiles(t.applies), quantiles(t.deployments))
	}
	fmt.Fprintf(s, "  each add-on's steps, s between them (first, 1/10, 1/2, 9/10, last):\n")
	created := func(st *addonSteps) time.Time { return st.created }
	first := func(st *addonSteps) time.Time { return st.firstApply }
	last := func(st *addonSteps) time.Time { return st.lastApply }
	deployment := func(st *addonSteps) time.Time { return st.deployment }
	ready := func(st *addonSteps) time.Time { return st.ready }
	for i, t := range turns {
		fmt.Fprintf(s, "    %-14s created → first apply %s; first → last apply %s; → Deployment's last status %s; → Ready %s\n",
			names[i], t.lags(created, first), t.lags(first, last), t.lags(last, deployment), t.lags(deployment, ready))
	}
}
