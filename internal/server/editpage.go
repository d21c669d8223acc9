package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/values"
)

// The edit page changes an add-on's values through the form of its
// chart's values.schema.json, filled with the values it has now, and a YAML
// editor for the rest: the same form, and the same server-side check, as
// adding it. What the form sends replaces the values. An add-on that git
// manages is changed by a commit of its definition.

// editForm is the data of the edit page.
type editForm struct {
	YAML        string
	Fields      []formField
	HasSchema   bool
	NoValues    bool   // a git folder, which takes no values
	FetchError  string // why the chart's form is not shown
	Problems    []capstanv1.ValuesError
	GitManaged  string
	SecretPaths []string // writeOnly fields that have a value now
	// WholeFrom names the whole-document entries of valuesFrom (Kind/name),
	// which the page does not read: the controller's plan judges them.
	WholeFrom []string
	// Unread says which ConfigMaps of valuesFrom could not be read for the
	// form and its check, which went on without them.
	Unread []string
	// fromPaths are the targetPaths of the entries of valuesFrom whose
	// values the page does not know: the Secrets', and the ConfigMaps' it
	// could not read.
	fromPaths []string
	// from are the ConfigMaps of valuesFrom the page read, as layers.
	from []values.Layer
}

// editPage shows the edit form (GET) and takes it (POST).
func (s *Server) editPage(w http.ResponseWriter, r *http.Request, sess session) {
	d := pageData{User: sess.user.Name, CSRF: sess.csrf}
	key, err := target(r)
	var c client.Client
	if err == nil {
		c, _, err = s.userClient(sess.user)
	}
	if err == nil {
		d.Addon, err = addons.Get(r.Context(), c, key)
	}
	if err == nil && r.Method == http.MethodPost {
		// NOTE: before the chart is fetched, and before the repository is
		// read as the controller, so that a form sent from another site,
		// or without its token, makes the server fetch and read nothing.
		if code, msg := pageForm(w, r, sess, "changed"); code != 0 {
			d.Title, d.Error = "Edit "+key.Name, msg
			s.render(w, "list", code, d)
			return
		}
	}
	var repo *capstanv1.AddonRepository
	switch {
	case err != nil:
	case r.Method == http.MethodPost:
		// NOTE: a save commits to the repository: it is read afresh.
		repo, err = s.managedBy(r.Context(), d.Addon)
	default:
		repo, err = s.managedByView(r.Context(), d.Addon)
	}
	if err != nil {
		e := errorFor(err)
		d.Title, d.Error = key.Name, e.Message
		s.render(w, "list", e.Code, d)
		return
	}
	d.Title = "Edit " + key.Name
	form := &editForm{}
	if repo != nil {
		form.GitManaged = repo.Name
	}
	d.Edit = form
	current, err := specValues(d.Addon)
	if err != nil {
		d.Error = err.Error()
		s.render(w, "edit", http.StatusUnprocessableEntity, d)
		return
	}
	// NOTE: as for the chart form (newAddonPage), a GET or a HEAD sent
	// from another site, a sibling subdomain too, fetches nothing.
	if r.Method != http.MethodPost && crossSite(r) {
		d.Edit, d.Error = nil, "Edit values was opened from a link on another site, so the chart was not fetched. Open it from the add-on's page."
		s.render(w, "list", http.StatusForbidden, d)
		return
	}
	saving := r.Method == http.MethodPost
	yamlOnly := saving && r.PostFormValue("mode") == formModeYAML
	art, err := s.editArtifact(r.Context(), w, sess.user, c, d.Addon, current, form, saving, yamlOnly)
	if err != nil {
		e := errorFor(err)
		d.Edit, d.Error = nil, e.Message
		s.render(w, "list", e.Code, d)
		return
	}
	form.SecretPaths, form.fromPaths, form.WholeFrom = valuesFromOf(d.Addon)
	form.fromPaths = unreadPaths(d.Addon, form.from)
	if r.Method != http.MethodPost {
		form.fill(current)
		s.render(w, "edit", http.StatusOK, d)
		return
	}
	seen := seenOf(r)
	if err := seen.Check(d.Addon); err != nil || seen.UID == "" || seen.Generation == 0 {
		// NOTE: the form's values were read from an older spec: saving them
		// would put back what someone changed since, and drop a key they
		// added. The form is shown again with the values of now.
		form.fill(current)
		d.Error = "This add-on was changed since the form was opened (by someone else, or by a commit to git), so nothing was saved: the form now shows its values of now. Make your change again, and save."
		if seen.UID != "" && seen.UID != d.Addon.UID {
			d.Error = "The add-on this form was opened for was removed, and this is a new add-on of the same name, so nothing was saved: the form now shows its values. Make your change again, and save."
		}
		s.render(w, "edit", http.StatusConflict, d)
		return
	}
	switch mode := r.PostFormValue("mode"); {
	case mode == formModeYAML:
		// NOTE: a form opened as the YAML editor alone (its chart could
		// not be fetched then) holds every value in its YAML, and no field
		// input: were the fields of the chart fetched now read, every
		// unticked box whose default is true would be saved as false.
		if form.HasSchema {
			form.FetchError = "this form was opened without it; open Edit values again to see its fields"
		}
		form.Fields, form.HasSchema = nil, false
	case mode != formModeFields || !form.HasSchema:
		// A form that does not say what it showed (made by an older
		// server), or that showed fields the chart no longer has: what it
		// sends cannot be read back safely.
		form.fill(current)
		d.Error = "This form does not match the chart's form of now, so nothing was saved: the form now shows the add-on's values. Make your change again, and save."
		s.render(w, "edit", http.StatusConflict, d)
		return
	}
	vals, inputs, typed, err := form.read(r, current)
	switch {
	case err != nil:
		d.Error = "Values: " + err.Error()
	case !typed:
		d.Error = "Some values are not of their field's type."
	case form.NoValues && len(vals)+len(inputs) > 0:
		d.Error = "This add-on renders a git folder, which takes no values."
	case form.GitManaged != "" && len(inputs) > 0:
		d.Error = "A secret input cannot be committed to git: leave its field empty, and name a Secret in the definition's valuesFrom."
	}
	if d.Error == "" && art != nil {
		errs, secret, err := form.check(art, d.Addon.Name, vals, inputs, current)
		switch {
		case err != nil:
			d.Error = err.Error()
		case len(secret) > 0:
			var turned, lists []string
			form.Fields, turned, lists = remarkSecretFields(form.Fields, art.Chart.Chart, vals, current, form.from)
			holdPaths(form.Fields, form.SecretPaths)
			form.Problems = markErrors(form.Fields, errs)
			d.Error = secretValuesMessage(secret, vals, turned, lists, "nothing was saved")
		case len(errs) > 0:
			form.Problems = markErrors(form.Fields, errs)
			d.Error = fmt.Sprintf("%d value(s) break the chart's schema; nothing was changed.", len(errs))
		}
	}
	if d.Error != "" {
		s.render(w, "edit", http.StatusUnprocessableEntity, d)
		return
	}
	done, err := s.saveValues(r.Context(), sess.user, c, d.Addon, seen, repo, current, vals, inputs)
	if err != nil {
		e := errorFor(err)
		d.Error = e.Message
		s.render(w, "edit", e.Code, d)
		return
	}
	s.Log.Info("Page write", "user", sess.user.Name, "verb", "edit", "addon", key.String())
	http.Redirect(w, r, "/addons/"+url.PathEscape(key.Namespace)+"/"+url.PathEscape(key.Name)+"?done="+done, http.StatusSeeOther)
}

// fill fills the form with the add-on's values: each field with its value,
// and the YAML editor with the values no field shows. A secret input's field
// says that it has a value.
func (form *editForm) fill(current map[string]any) {
	rest := fillFields(form.Fields, current)
	if len(rest) > 0 {
		out, _ := yaml.Marshal(rest)
		form.YAML = string(out)
	}
	holdPaths(form.Fields, form.SecretPaths)
}

// read reads the posted form: the fields, each kept as the add-on has it
// when it comes back as the form showed it, and the YAML editor merged over
// them. typed is false when a field's value is not of its type.
func (form *editForm) read(r *http.Request, current map[string]any) (vals map[string]any, inputs map[string]string, typed bool, err error) {
	form.YAML = r.PostFormValue("yaml")
	vals, inputs = map[string]any{}, map[string]string{}
	keepSecretFields(form.Fields, r)
	typed = formValues(form.Fields, r, vals, inputs, current)
	holdPaths(form.Fields, form.SecretPaths)
	vals, err = mergeYAML(vals, form.YAML)
	return vals, inputs, typed, err
}

// seenOf is the version of the Addon that a posted form was made from:
// its UID and generation, from the form's hidden fields; zero when they
// are missing or not a number.
func seenOf(r *http.Request) addons.Seen {
	gen, _ := strconv.ParseInt(r.PostFormValue("generation"), 10, 64)
	return addons.Seen{UID: types.UID(r.PostFormValue("uid")), Generation: gen}
}

// holdPaths marks the secret fields at paths as holding a value.
func holdPaths(fields []formField, paths []string) {
	for i := range fields {
		f := &fields[i]
		f.Held = f.Held || (f.WriteOnly && slices.Contains(paths, f.Path))
		holdPaths(f.Children, paths)
	}
}

// The modes of the edit form, which it posts as "mode": it showed the
// chart's fields, or the YAML editor alone.
const (
	formModeFields = "fields"
	formModeYAML   = "yaml"
)

// editArtifact fetches the add-on's chart for its form, for a user who may
// patch the Addon (as a save does). A chart that cannot be fetched leaves
// the YAML editor, and says why; so does, when the form is only being
// opened, a fetch refused because every turn is taken. The error is a
// refusal of the page: the user may not change the Addon, or, for a save,
// every page fetch is taken, or the chart of a form that showed its fields
// (yamlOnly false) cannot be fetched.
//
// NOTE: a save whose fetch fails is not made: the posted form may hold
// the chart's fields, which only the chart's schema reads back, and read
// without them the save would drop every value a field showed. A form
// that was the YAML editor alone holds every value in its YAML, so it is
// saved without the schema's check when only that fetch fails, as a chart
// the page cannot fetch (one behind credentials) is edited.
//
// Once the chart is fetched, the ConfigMaps of the add-on's valuesFrom are
// read with c, the user's own client (configMapLayers), for the form's
// secret fields and the save's check; those that cannot be read are
// named in form.Unread.
func (s *Server) editArtifact(ctx context.Context, w http.ResponseWriter, u User, c client.Reader, a *capstanv1.Addon, current map[string]any, form *editForm, saving, yamlOnly bool) (*source.Artifact, error) {
	if a.Spec.Chart == nil {
		form.NoValues = true
		return nil, nil
	}
	if s.Fetcher == nil {
		form.FetchError = "this server fetches no charts"
		return nil, nil
	}
	// NOTE: a chart behind credentials is not fetched here: the page has
	// no right to the add-on's Secrets. Its values are edited as YAML.
	art, err := s.pageFetch(ctx, u, "patch", client.ObjectKeyFromObject(a), a.Spec)
	if e, ok := err.(apiError); ok && e.Code == http.StatusTooManyRequests && !saving {
		form.FetchError = e.Message
		return nil, nil
	}
	if e, ok := pageRefusal(w, err); ok {
		return nil, e
	}
	if err != nil && saving && !yamlOnly {
		return nil, apiError{Code: http.StatusServiceUnavailable, Reason: "ServiceUnavailable",
			Message: fmt.Sprintf("The chart could not be fetched (%v), and the form's fields are read through its schema, so nothing was saved. Go back to the form, and save again in a moment.", err)}
	}
	if err != nil {
		form.FetchError = err.Error()
		return nil, nil
	}
	form.from, form.Unread = s.configMapLayers(ctx, c, a)
	if doc := art.Chart.Chart.Schema; len(doc) > 0 {
		fields, err := chartForm(art.Chart.Chart, current, form.from)
		if err != nil {
			form.FetchError = err.Error()
			return art, nil
		}
		form.HasSchema, form.Fields = true, fields
	}
	return art, nil
}

// saveValues replaces the add-on's values with next, whole, with the
// secret inputs written first, or, for an add-on that the AddonRepository
// repo manages, by a commit of the changes from current to next onto the
// values in git. It returns the flash to show.
func (s *Server) saveValues(ctx context.Context, u User, c client.Client, a *capstanv1.Addon, seen addons.Seen, repo *capstanv1.AddonRepository, current, next map[string]any, inputs map[string]string) (string, error) {
	if repo != nil {
		_, err := s.commitChange(ctx, u, repo, a, "edit", "patch", func(ctx context.Context, wr *gitops.Writer, name string) (string, error) {
			// NOTE: the changes the form made, not the whole values: the
			// Addon the form was filled from can lag git by the syncer's
			// interval, and writing it back whole would undo a commit it
			// has not caught up with. A change whose value in git is not
			// the one the form showed is refused.
			return wr.ChangeValues(ctx, name, gitops.ValueChanges(current, next))
		})
		return "commit", err
	}
	exact, err := exactValues(a)
	if err != nil {
		return "", err
	}
	// NOTE: the whole values, bound to the generation the form was filled
	// from, not a merge patch of the changes: in a merge patch a null
	// deletes its key, so a null typed to remove a chart default was
	// dropped, the default came back, and the schema check had judged
	// other values than those saved.
	_, err = addons.ReplaceValues(s.warnInLog(ctx, u.Name), c, client.ObjectKeyFromObject(a), seen, keepExact(exact, current, next), inputs)
	return "edit", err
}

// exactValues reads spec.values as a map whose numbers are json.Number,
// which marshals back to the digits spec.values has.
func exactValues(a *capstanv1.Addon) (map[string]any, error) { return decodeValues(a, true) }

// keepExact is next with every value that is the same JSON in current and
// next (in maps, key by key) taken from exact, spec.values as it is
// written; a changed value, and a null, is next's.
//
// NOTE: current and next read numbers as float64, which holds no integer
// past 2^53 and writes 1e+23 for 100000000000000000000000: since the
// values are saved whole, a number nobody changed would be saved rounded
// or respelled, and a GitOps tool that compares spec.values sees drift.
func keepExact(exact, current, next map[string]any) map[string]any {
	out := make(map[string]any, len(next))
	for k, n := range next {
		out[k] = n
		cur, had := current[k]
		ex, known := exact[k]
		if !had || !known || n == nil {
			continue
		}
		if gitops.SameValue(cur, n) {
			out[k] = ex
			continue
		}
		curMap, ok1 := cur.(map[string]any)
		nextMap, ok2 := n.(map[string]any)
		exMap, ok3 := ex.(map[string]any)
		if ok1 && ok2 && ok3 {
			out[k] = keepExact(exMap, curMap, nextMap)
		}
	}
	return out
}

// specValues reads spec.values as a map.
func specValues(a *capstanv1.Addon) (map[string]any, error) { return decodeValues(a, false) }

// decodeValues reads spec.values as a map, its numbers as json.Number when
// exact, else as float64.
func decodeValues(a *capstanv1.Addon, exact bool) (map[string]any, error) {
	out := map[string]any{}
	if a.Spec.Values == nil || len(a.Spec.Values.Raw) == 0 {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(a.Spec.Values.Raw))
	if exact {
		dec.UseNumber()
	}
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("spec.values is not a JSON object: %v", err)
	}
	return out, nil
}

// fillFields sets each field's Value from vals and returns the values no
// field shows, for the YAML editor. A secret's or a generated value's
// field stays empty.
func fillFields(fields []formField, vals map[string]any) map[string]any {
	rest := runtime.DeepCopyJSON(vals)
	var fill func(fields []formField)
	fill = func(fields []formField) {
		for i := range fields {
			f := &fields[i]
			if f.Kind == "object" {
				fill(f.Children)
				continue
			}
			path := strings.Split(f.Path, ".")
			v, ok := render.FieldAt(vals, path)
			if !ok {
				continue
			}
			if f.Held = f.WriteOnly || f.Generated; !f.Held {
				f.Value = f.valueOf(v)
			}
			deletePath(rest, path)
		}
	}
	fill(fields)
	return rest
}

// valuesFromOf reads the add-on's valuesFrom, which the page does not
// read the objects of: secret lists the targetPaths that Secrets set,
// Capstan's own values Secrets and a person's alike, so the form can say
// that they have a value without showing it; paths lists the targetPaths
// of every entry, Secret or ConfigMap, which the form's check stands in
// for; whole names the entries that merge a whole document, which may set
// any value.
func valuesFromOf(a *capstanv1.Addon) (secret, paths, whole []string) {
	for _, ref := range a.Spec.ValuesFrom {
		switch {
		case ref.TargetPath == "":
			whole = append(whole, ref.Kind+" "+ref.Name)
		case ref.Kind == "Secret":
			secret = append(secret, ref.TargetPath)
			paths = append(paths, ref.TargetPath)
		default:
			paths = append(paths, ref.TargetPath)
		}
	}
	return secret, paths, whole
}

// unreadPaths are the targetPaths of a's valuesFrom entries that from, the
// ConfigMaps the page read, does not hold: the Secrets', which the page
// never reads, and the ConfigMaps' it could not read.
func unreadPaths(a *capstanv1.Addon, from []values.Layer) []string {
	read := map[int]bool{}
	for _, l := range from {
		read[l.Index] = true
	}
	var out []string
	for i, ref := range a.Spec.ValuesFrom {
		if ref.TargetPath != "" && !read[i] {
			out = append(out, ref.TargetPath)
		}
	}
	return out
}

// check checks the values a save would write, and its secret inputs,
// against the chart's schema, as the controller will layer them with the
// add-on's valuesFrom: the ConfigMaps the page read, in their order, and
// each other targetPath entry as a stand-in that is not judged, since the
// page does not read its object. errs are the errors
// that refuse the save, and secret the secret inputs that vals would write
// into spec.values (secretValueErrors), which always refuse it.
//
// NOTE: a whole-document entry of valuesFrom may set any value, a required
// one among them, and the page may not read it: with one, no error of
// the schema but a secret input in spec.values refuses the save, and the
// controller's plan judges the values with every layer.
func (form *editForm) check(art *source.Artifact, name string, vals map[string]any, inputs map[string]string, current map[string]any) (errs []capstanv1.ValuesError, secret []values.SecretInputPath, err error) {
	if errs, err = checkFormValues(art, name, vals, inputs, form.fromPaths, form.from); err != nil {
		return nil, nil, err
	}
	errs, secret = secretValueErrors(errs, vals, current)
	if len(form.WholeFrom) > 0 && len(secret) == 0 {
		errs = nil
	}
	return errs, secret, nil
}

// deletePath removes the value at path, and the maps it leaves empty.
func deletePath(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	next, ok := m[path[0]].(map[string]any)
	if !ok {
		return
	}
	deletePath(next, path[1:])
	if len(next) == 0 {
		delete(m, path[0])
	}
}

// warnInLog returns ctx with the warnings of package addons' writers, a
// values Secret of replaced secret inputs that is kept with the old value,
// said in the server's log with the user whose write it followed.
func (s *Server) warnInLog(ctx context.Context, user string) context.Context {
	return addons.WithWarn(ctx, func(msg string) { s.Log.Info("Secret of replaced secret inputs kept", "user", user, "reason", msg) })
}
