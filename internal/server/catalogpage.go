package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/catalog"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/server/body"
)

// catalogView is the data of the catalog pages.
type catalogView struct {
	Entries         []catalog.Entry
	Problems        []catalog.Problem
	Entry           *catalog.Entry
	Fields          []formField
	Namespace, Name string
	YAML            string
	// Trusted are the namespaces whose add-ons use the cluster profile: an
	// Addon there sends its objects to the entry's namespace.
	Trusted []string
}

// catalogTTL is how long the catalog's entries, as read, serve the pages,
// and the least time from the start of one read to that of the next.
const catalogTTL = 10 * time.Second

// catalogFailureTTL is how long a failed read is answered from the cache
// after it failed, at the least.
const catalogFailureTTL = 3 * time.Second

// catalogCache keeps the catalog's entries of the last read for catalogTTL,
// and the error of a failed read for catalogFailureTTL after it failed, and
// in any case until catalogTTL after it began.
//
// NOTE: the catalog's ConfigMaps are listed as the controller, whose
// client has no rate limit, and any token the API server accepts signs
// in: a read per view would let a loop of views flood the API server as
// the controller, and slow its own reconciles. One read at a time, then
// one per catalogTTL, whatever the views. A failed read is kept too:
// else, while the API server fails or is slow, the time it can least
// afford them, each view would list again.
type catalogCache struct {
	flight   singleflight.Group
	mu       sync.Mutex
	read     time.Time
	list     []catalog.Entry
	problems []catalog.Problem
	// failed is the error of the last read when it failed, answered
	// until retry.
	failed error
	retry  time.Time
}

// entries are the catalog's entries and problems, from the last read when
// it is under catalogTTL old, or the error of the last read when it failed
// and may not be retried yet, else read again; now is the clock.
func (c *catalogCache) entries(ctx context.Context, r client.Reader, namespace string, now func() time.Time) ([]catalog.Entry, []catalog.Problem, error) {
	if list, problems, err, ok := c.cached(now()); ok {
		return list, problems, err
	}
	ch := c.flight.DoChan("", func() (any, error) {
		// NOTE: a view that waited for the read before this one, and
		// started this one as it ended, takes the answer that read left.
		if _, _, err, ok := c.cached(now()); ok {
			return nil, err
		}
		// NOTE: shared by every view that waits, so it does not end with
		// the first one's context.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogTTL)
		defer cancel()
		began := now()
		list, problems, err := catalog.Entries(ctx, r, namespace)
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.failed = fmt.Errorf("%w; the catalog is read again in a few seconds: reload the page then", err)
			c.retry = later(began.Add(catalogTTL), now().Add(catalogFailureTTL))
			return nil, c.failed
		}
		c.read, c.list, c.problems, c.failed = began, list, problems, nil
		return nil, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, nil, res.Err
		}
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list), slices.Clone(c.problems), nil
}

// cached is the answer of the last read at time now, and whether it still
// holds: its entries when it succeeded under catalogTTL ago, its error
// when it failed and may not be retried yet.
func (c *catalogCache) cached(now time.Time) ([]catalog.Entry, []catalog.Problem, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.failed != nil && now.Before(c.retry):
		return nil, nil, c.failed, true
	case c.failed == nil && !c.read.IsZero() && now.Sub(c.read) < catalogTTL:
		return slices.Clone(c.list), slices.Clone(c.problems), nil, true
	}
	return nil, nil, nil, false
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// catalogFields are an entry's typed fields as the form renders them.
func catalogFields(e catalog.Entry) []formField {
	out := make([]formField, 0, len(e.Fields))
	for _, f := range e.Fields {
		out = append(out, formField{Path: f.Path, Label: f.Label, Kind: f.Type, Default: f.Default, Description: f.Description})
	}
	return out
}

// catalogPage lists the entries, or shows and takes one entry's form. The
// form builds values from the typed fields and merges the YAML over them on
// the server, then creates the Addon suspended.
func (s *Server) catalogPage(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.pageSession(w, r)
	if !ok {
		return
	}
	v := &catalogView{}
	d := pageData{Title: "Add from the catalog", User: sess.user.Name, CSRF: sess.csrf, Catalog: v}
	entries, problems, err := s.catalog.entries(r.Context(), s.Controller, s.config().Namespace, s.now)
	if err != nil {
		d.Error = err.Error()
	}
	v.Entries, v.Problems, v.Trusted = entries, problems, s.trusted()
	id := r.PathValue("entry")
	if id == "" {
		s.render(w, "catalog", http.StatusOK, d)
		return
	}
	for i := range entries {
		if entries[i].ID == id {
			v.Entry = &entries[i]
		}
	}
	if v.Entry == nil || v.Entry.Kind == "any-chart" {
		http.Redirect(w, r, "/new", http.StatusSeeOther)
		return
	}
	v.Fields, v.Namespace, v.Name = catalogFields(*v.Entry), v.Entry.Namespace, v.Entry.ID
	if r.Method != http.MethodPost {
		s.render(w, "catalog", http.StatusOK, d)
		return
	}
	if code, msg := pageForm(w, r, sess, "created"); code != 0 {
		d.Error = msg
		s.render(w, "catalog", code, d)
		return
	}
	v.Namespace, v.Name, v.YAML = strings.TrimSpace(r.PostFormValue("namespace")), strings.TrimSpace(r.PostFormValue("name")), r.PostFormValue("yaml")
	a, msg := catalogAddon(r, v, slices.Contains(s.trusted(), v.Namespace))
	if msg != "" {
		d.Error = msg
		s.render(w, "catalog", http.StatusUnprocessableEntity, d)
		return
	}
	// NOTE: the form has no secret fields, and its YAML could put a
	// secret input into spec.values, read by anyone who may view the
	// Addon: the chart is fetched to check the values before the Addon is
	// added, as the API's add checks them.
	check := func(ctx context.Context) error {
		return s.checkSecretValues(ctx, s.chartCheck(sess.user, "create", client.ObjectKeyFromObject(a)), a.Spec, nil, catalogSecrets,
			func(msg string) {
				s.Log.Info("Values of a catalog add-on not checked", "user", sess.user.Name, "addon", a.Namespace+"/"+a.Name, "reason", msg)
			})
	}
	done, err := s.addOrCommit(r.Context(), sess.user, a, v.Entry.Namespace, nil, check)
	if err != nil {
		d.Error = errorFor(err).Message
		s.render(w, "catalog", errorFor(err).Code, d)
		return
	}
	s.Log.Info("Page write", "user", sess.user.Name, "verb", done, "addon", a.Namespace+"/"+a.Name, "catalog", v.Entry.ID)
	http.Redirect(w, r, "/addons/"+url.PathEscape(a.Namespace)+"/"+url.PathEscape(a.Name)+"?done="+done, http.StatusSeeOther)
}

// catalogSecrets is how the catalog's form, which has no secret fields,
// takes secret inputs: by another form, or a Secret named later.
var catalogSecrets = secretWay{outcome: "nothing was created", scalar: func([]string) string {
	return "take it out of the YAML, and add the chart from \"Add from a chart link\", whose secret field keeps it in a Secret, " +
		"or put it in a Secret and name that Secret in the Addon's valuesFrom once it is added"
}}

// definitionOf is the gitops definition of a catalog form's Addon, whose
// objects go to the entry's namespace, created when missing. The chart
// keeps all of the entry's chart: its credentials, and its signature
// check, which the committed add-on must not install without.
func definitionOf(a *capstanv1.Addon, target string) *gitops.Definition {
	def := &gitops.Definition{Name: a.Name, ManualSync: a.Spec.ManualSync}
	if target != "" {
		def.Namespace, def.CreateNamespace = target, true
	}
	if c := a.Spec.Chart; c != nil {
		def.Helm = &gitops.HelmSource{Repo: c.Repo, Chart: c.Name, OCI: c.OCI, URL: c.URL, Version: c.Version, Digest: c.Digest,
			Verify: verificationOf(c.Verify)}
		if c.SecretRef != nil {
			def.Helm.SecretRef = &gitops.SecretRef{Name: c.SecretRef.Name}
		}
	}
	if g := a.Spec.Git; g != nil {
		def.Git = &gitops.GitSource{URL: g.URL, Revision: g.Revision, Path: g.Path}
	}
	if a.Spec.Values != nil {
		_ = json.Unmarshal(a.Spec.Values.Raw, &def.Values)
	}
	return def
}

// verificationOf is a chart's signature check as a definition writes it.
func verificationOf(v *capstanv1.ChartVerification) *gitops.ChartVerification {
	if v == nil {
		return nil
	}
	out := &gitops.ChartVerification{}
	if p := v.Provenance; p != nil {
		out.Provenance = &gitops.SignatureKeys{SecretRef: gitops.SecretRef{Name: p.SecretRef.Name}, Key: p.Key}
	}
	if c := v.Cosign; c != nil {
		out.Cosign = &gitops.SignatureKeys{SecretRef: gitops.SecretRef{Name: c.SecretRef.Name}, Key: c.Key}
	}
	return out
}

// catalogAddon builds the Addon of a posted entry form, or says what to fix.
// In a trusted namespace, whose add-ons use the cluster profile, the
// objects go to the entry's namespace, created when missing, as a committed
// definition's do (definitionOf): the Addon's own namespace, such as the
// controller's, is only where it is kept. Elsewhere the restricted profile
// keeps the objects in the Addon's namespace.
func catalogAddon(r *http.Request, v *catalogView, trusted bool) (*capstanv1.Addon, string) {
	if errs := validation.IsDNS1123Label(v.Namespace); len(errs) > 0 {
		return nil, "Namespace: " + strings.Join(errs, "; ")
	}
	if errs := body.NameProblems(v.Name); len(errs) > 0 {
		return nil, "Name: " + strings.Join(errs, "; ")
	}
	a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name}}
	a.Spec.ManualSync = r.PostFormValue("manualSync") == "true"
	if trusted && v.Entry.Namespace != "" {
		a.Spec.TargetNamespace, a.Spec.CreateNamespace = v.Entry.Namespace, true
	}
	if v.Entry.Kind == "git-folder" {
		a.Spec.Git = &capstanv1.GitSource{URL: strings.TrimSpace(r.PostFormValue("git")), Path: strings.TrimSpace(r.PostFormValue("path")),
			Revision: strings.TrimSpace(r.PostFormValue("revision"))}
		if a.Spec.Git.URL == "" {
			return nil, "Give the git repository."
		}
		return a, ""
	}
	chart := *v.Entry.Chart
	// NOTE: an https archive is its own version, and the Addon's schema
	// refuses a chart.url with a chart.version: the form asks for none,
	// and one posted all the same is not taken.
	if version := strings.TrimSpace(r.PostFormValue("version")); version != "" && chart.URL == "" {
		chart.Version = version
	}
	a.Spec.Chart = &chart
	vals := map[string]any{}
	if !formValues(v.Fields, r, vals, map[string]string{}, nil) {
		return nil, "Some values are not of their field's type."
	}
	vals, err := mergeYAML(vals, v.YAML)
	if err != nil {
		return nil, "More values: " + err.Error()
	}
	if len(vals) > 0 {
		raw, _ := json.Marshal(vals)
		a.Spec.Values = &apiextensionsv1.JSON{Raw: raw}
	}
	return a, ""
}
