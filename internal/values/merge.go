package values

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/mask"
	"capstan.dev/capstan/internal/render"
)

// DefaultPlatformKey is the reserved top-level values key the controller sets
// last, with the platform's facts.
const DefaultPlatformKey = "capstan"

// Sources are an add-on's own values inputs, as Read found them: spec.values
// and one Layer per spec.valuesFrom entry, in order.
type Sources struct {
	// Spec is spec.values.
	Spec map[string]any
	// From holds the valuesFrom entries, in the order of spec.valuesFrom.
	From []Layer
}

// Layer is the content of one valuesFrom entry.
type Layer struct {
	// Index is the entry's position in spec.valuesFrom.
	Index int
	// Ref is the entry, with valuesKey defaulted.
	Ref capstanv1.ValuesReference
	// Missing is true when the object or key is absent and the entry is
	// optional; such a layer adds nothing.
	Missing bool
	// Doc is the key's YAML, when the entry has no targetPath.
	Doc map[string]any
	// Raw is the key's string, when the entry has a targetPath. It is set
	// as it is, never parsed, unless it is a secret input the schema types
	// (typed).
	Raw string

	path targetPath
	// typed stands for Raw when the entry is a secret input whose schema
	// refuses a string and Raw reads as true, false or a number
	// (typeSecretInputs); nil otherwise.
	typed any
}

// SecretInputLayer is the layer that a secret input stored by
// WriteSecretInputs composes as: an entry of spec.valuesFrom, at index,
// that reads a key of the Secret secret and sets raw at the targetPath
// path. A writer that checks values before it writes (the page) composes
// its secret inputs with it, exactly as the controller will read them, a
// writeOnly number or boolean typed as Compose types it.
func SecretInputLayer(index int, secret, path, raw string) (Layer, error) {
	p, err := parseTargetPath(path)
	if err != nil {
		return Layer{}, err
	}
	ref := capstanv1.ValuesReference{Kind: "Secret", Name: secret, ValuesKey: path, TargetPath: path}
	return Layer{Index: index, Ref: ref, Raw: raw, path: p}, nil
}

// Pointer is the JSON pointer of the layer's targetPath, as Compose's
// errors place a value at it ("servers[0].pin" is /servers/0/pin, "a\\.b"
// is /a.b), or "" for a layer without one.
func (l Layer) Pointer() string {
	if l.path == nil {
		return ""
	}
	return pointer(l.path.strings())
}

// value is what a targetPath entry sets at its path.
func (l Layer) value() any {
	if l.typed != nil {
		return l.typed
	}
	return l.Raw
}

// FromSecret reports whether the layer's values come from a Secret.
func (l Layer) FromSecret() bool { return l.Ref.Kind == "Secret" }

// Name describes the layer for messages, such as
// "spec.valuesFrom[1] (Secret app-values-x7k2p, key values.yaml)".
func (l Layer) Name() string {
	return fmt.Sprintf("%s (%s %s, key %s)", l.field(), l.Ref.Kind, l.Ref.Name, l.Ref.ValuesKey)
}

func (l Layer) field() string { return fmt.Sprintf("spec.valuesFrom[%d]", l.Index) }

// tree returns the layer alone as a values map: the document, or the raw
// string set at the targetPath in an empty map. Compose merges a targetPath
// layer differently (applyTo); tree is for looking at what a layer holds.
func (l Layer) tree() map[string]any {
	if l.Missing {
		return nil
	}
	if l.path != nil {
		m := map[string]any{}
		l.path.set(m, l.value())
		return m
	}
	return copyMap(l.Doc)
}

// applyTo returns the user values merged so far with the layer over them.
// A document merges as Helm merges a values file. A targetPath sets its one
// value into the values merged so far, as Helm's --set sets into the -f
// files and Flux's targetPath into the values before it: an element of a
// list an earlier layer wrote keeps its other keys, and its siblings stay.
// The lists on the way are copied, never changed in place.
func (l Layer) applyTo(user map[string]any) map[string]any {
	if l.path != nil {
		l.path.set(user, l.value())
		return user
	}
	return loader.MergeMaps(user, copyMap(l.Doc))
}

// setsKey reports whether the layer sets something under the top-level key.
func (l Layer) setsKey(key string) bool {
	if l.path != nil {
		return l.path[0].key == key
	}
	_, ok := l.Doc[key]
	return ok
}

// maxOverridesNamed bounds the paths one override notice names.
const maxOverridesNamed = 5

// overrideNotices says, for each valuesFrom entry, which values it sets
// over ones spec.values sets: in Capstan valuesFrom wins, the reverse of
// Flux's HelmRelease, so a HelmRelease moved as it is would silently render
// its shared defaults over its own values. The platform key has its own
// notice. The notices name paths only, never values.
func overrideNotices(src Sources, platformKey string) []Notice {
	if len(src.Spec) == 0 {
		return nil
	}
	var out []Notice
	for _, l := range src.From {
		if l.Missing {
			continue
		}
		over := l.Doc
		if l.path != nil {
			over = l.tree()
		}
		var paths [][]string
		for _, k := range sortedKeys(over) {
			if sv, ok := src.Spec[k]; ok && k != platformKey {
				overridden(sv, over[k], []string{k}, func(p []string) { paths = append(paths, p) })
			}
		}
		if len(paths) == 0 {
			continue
		}
		named := make([]string, 0, maxOverridesNamed)
		for _, p := range paths[:min(len(paths), maxOverridesNamed)] {
			named = append(named, dotted(p))
		}
		list := strings.Join(named, ", ")
		if more := len(paths) - len(named); more > 0 {
			list += fmt.Sprintf(" and %d more", more)
		}
		out = append(out, Notice{
			Path: pointer(paths[0]),
			Message: fmt.Sprintf("%s sets %s, which spec.values sets too, and wins: in Capstan a valuesFrom entry wins over spec.values, the reverse of Flux's HelmRelease; set each value in one place",
				l.Name(), list),
		})
	}
	return out
}

// overridden calls fn with each path at which over, merged over spec,
// replaces what spec holds there: maps merge key by key, and anything else,
// null included, replaces.
func overridden(spec, over any, path []string, fn func([]string)) {
	sm, ok1 := spec.(map[string]any)
	om, ok2 := over.(map[string]any)
	if !ok1 || !ok2 {
		fn(path)
		return
	}
	for _, k := range sortedKeys(om) {
		if sv, ok := sm[k]; ok {
			overridden(sv, om[k], append(path[:len(path):len(path)], k), fn)
		}
	}
}

// mergeOver returns user with spec.values and each valuesFrom entry merged
// over it, in order. Missing optional entries add nothing.
func (src Sources) mergeOver(user map[string]any) map[string]any {
	user = loader.MergeMaps(user, copyMap(src.Spec))
	for _, l := range src.From {
		if !l.Missing {
			user = l.applyTo(user)
		}
	}
	return user
}

// Inputs is everything Compose merges.
type Inputs struct {
	// Chart is the chart as it was loaded, with its subcharts. It gives the
	// defaults (values.yaml of the chart and its subcharts) and the schemas
	// (their values.schema.json). Compose resolves its dependencies for the
	// values first, as Helm does. Nil means no defaults and no schema.
	Chart *chartv2.Chart
	// Generated are the generated-once values from EnsureGenerated.
	Generated map[string]any
	// Sources are spec.values and valuesFrom, from Read.
	Sources Sources
	// Platform is the platform key's content, from Platform.Values.
	Platform map[string]any
	// PlatformKey is the reserved key; empty means DefaultPlatformKey.
	PlatformKey string
}

// Notice is something the plan should show that does not block it, such as
// a user value under the platform key being overwritten.
type Notice struct {
	// Path is the JSON path the notice is about.
	Path string `json:"path"`
	// Message says what happened. It never holds a value.
	Message string `json:"message"`
}

// Result is the outcome of Compose.
type Result struct {
	// Values are the user-supplied values, every source but the chart's
	// defaults merged in precedence order: what `helm template -f` would be
	// given. Pass these to Helm's rendering, which coalesces them with the
	// chart's defaults itself.
	Values map[string]any
	// Effective are Values coalesced with the chart's defaults: what the
	// templates see, and what the schema validated.
	Effective map[string]any
	// Errors are the values that break the schema or Capstan's rules. Any
	// error blocks the add-on.
	Errors []capstanv1.ValuesError
	// Notices are shown in the plan and block nothing.
	Notices []Notice
	// SecretPaths are the JSON paths of Effective whose values must never be
	// shown: writeOnly and generated properties, and everything that came
	// from a Secret. Redact masks them.
	SecretPaths []string
	// PlatformWithheld is true when the chart's schema does not allow the
	// platform key, so its facts were left out (a Notice says so).
	PlatformWithheld bool
	// Schema holds the schemas Effective was checked against: the chart's
	// and those of the subcharts the values enable, each under the name
	// the chart gives it. Nil when none of them has one.
	Schema *Schema
}

// Redacted returns Effective with every secret value masked, for the plan,
// events and logs.
func (r *Result) Redacted() map[string]any { return Redact(r.Effective, r.SecretPaths) }

// SecretValues returns the string forms of the values at SecretPaths, so a
// log or event can be checked for them. Never log what it returns.
func (r *Result) SecretValues() []string {
	var out []string
	r.secretLeaves(func(_ string, leaf any) {
		for _, s := range printedForms(leaf) {
			if s != "" {
				out = append(out, s)
			}
		}
	})
	return out
}

// secretLeaves calls fn with each scalar value at or under SecretPaths (a
// null, a map or a list is none), and the secret path it is at or under.
func (r *Result) secretLeaves(fn func(path string, leaf any)) {
	for _, p := range r.SecretPaths {
		v, ok := lookup(r.Effective, splitPointer(p))
		if !ok {
			continue
		}
		leaves(v, nil, func(_ []string, leaf any) {
			switch leaf.(type) {
			case nil, map[string]any, []any:
			default:
				fn(p, leaf)
			}
		})
	}
}

// MaxSecretValues and MaxSecretBytes bound the secret values of one add-on:
// the distinct strings the controller hides in every message it writes
// (those of mask.MinLen bytes and more), and their length together. A mask
// holds each value in several forms (escaped, in base64), and its cost
// grows with them; a writeOnly schema over a map or a list makes every
// value under it secret, the chart's own defaults too, so without a bound
// a chart's values.yaml could make every reconcile hide hundreds of
// thousands of values. Real add-ons hide a few dozen: passwords, tokens,
// keys and certificates, a CA bundle of some 200 KiB.
const (
	MaxSecretValues = 4096
	MaxSecretBytes  = 256 << 10
)

// RuleTooManySecrets is the Rule of the ValuesError that says the values
// hold more secret values than MaxSecretValues or MaxSecretBytes allow.
const RuleTooManySecrets = "tooManySecrets"

// RuleWriteOnly is the Rule of the ValuesError that says a secret input
// (writeOnly in the chart's schema) is in spec.values or a ConfigMap.
const RuleWriteOnly = "writeOnly"

// checkSecretBound returns an *InvalidError when the secret values of r are
// more than MaxSecretValues or MaxSecretBytes allow. It counts what a
// person sees: each distinct value once, a number once though a mask hides
// it in each form a template prints it in. It names the source that holds
// the most of them, the one to change (sources, by secret path): a
// writeOnly path of the schema, or the valuesFrom entry of a values
// Secret.
func (r *Result) checkSecretBound(sources map[string]secretSource) error {
	var tally SecretTally
	per := map[secretSource]int{}
	r.secretLeaves(func(p string, leaf any) {
		forms := printedForms(leaf)
		if !slices.ContainsFunc(forms, mask.Worth) {
			return
		}
		// The digits of a number, as a person writes it.
		key := forms[len(forms)-1]
		if f, ok := leaf.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			key = strconv.FormatInt(int64(f), 10)
		}
		n := tally.Count()
		tally.Add(key)
		if tally.Count() > n {
			per[sources[p]]++
		}
	})
	if tally.Within() {
		return nil
	}
	var most secretSource
	for src, n := range per {
		if most.path == "" || n > per[most] || n == per[most] && src.name < most.name {
			most = src
		}
	}
	return invalid(most.path, RuleTooManySecrets,
		"the values hold %d secret values (%d KiB), more than the %d values and %d KiB Capstan hides in what it shows; %s holds %d of them: "+
			"a writeOnly schema over a map or a list, or a values Secret, makes every value under it secret, so keep only what is secret there (mark the secret keys writeOnly, not their map; move the rest out of the Secret)",
		tally.Count(), tally.KiB(), MaxSecretValues, MaxSecretBytes>>10, most.name, per[most])
}

// printedForms returns the texts a template can make of a scalar value.
// A number in values is a float64 (YAML goes through JSON), which Go's %v
// prints as 2.0240917e+07 from a million up, while toYaml, toJson, int
// and printf "%d" print its digits, 20240917; a PIN or a numeric key from
// a Secret must be hidden in each form.
func printedForms(v any) []string {
	forms := []string{fmt.Sprint(v)}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return forms
		}
	default:
		return forms
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return forms
	}
	forms = append(forms, strconv.FormatFloat(f, 'f', -1, 64))
	if j, err := json.Marshal(f); err == nil {
		forms = append(forms, string(j))
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		forms = append(forms, strconv.FormatInt(int64(f), 10))
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// Compose merges an add-on's values in Capstan's precedence, lowest first:
// the chart's defaults, generated values, spec.values, each valuesFrom entry
// in order, and the platform key, which is set last and replaces whatever a
// user put under it (a Notice says so).
//
// The chart is taken as Helm renders it for these values: its dependencies
// resolved by Helm's own code (render.ChartValues), so a subchart that a
// condition or a tag disables is gone, an aliased one answers to its alias,
// and import-values are in the parent's defaults. The defaults, the
// schemas, the secret inputs and the effective values all come from that
// chart, so what is checked is what renders.
//
// The platform key is for charts written for Capstan. A chart whose
// values.schema.json does not allow it (a strict schema with
// additionalProperties: false, as cert-manager's) is rendered without it,
// exactly as helm install would render it, and a Notice says that the
// platform's facts were withheld. What users put under the key is dropped
// either way: only the platform sets it.
//
// The merge is Helm's: maps merge, lists and scalars replace, and null
// deletes a key. Helm itself deletes a key on null only where the chart has a
// default and otherwise leaves a null; Compose drops those nulls too, so that
// null always deletes, and Values stay exactly what Helm should be given.
//
// A secret input that a Secret's targetPath entry sets is a string, unless
// the schema refuses a string for it (typeSecretInputs).
//
// Compose reports secret inputs outside Secrets, schema violations and a
// schema that does not compile as Result.Errors. It returns an error when
// the chart's dependencies cannot be resolved, and an *InvalidError (rule
// RuleTooManySecrets) when the values hold more secret values than
// MaxSecretValues or MaxSecretBytes allow: such values are not composed,
// since nothing rendered from them could be shown with them hidden.
func Compose(in Inputs) (*Result, error) {
	res, err := compose(in)
	if err != nil {
		return nil, err
	}
	// NOTE: which inputs the schema types is known only once the values
	// are checked; values that need none, nearly all, are composed once.
	// The bound of two passes is what keeps an input the schema refused
	// as typed too a string: the second pass sets it back, and no third
	// types it again.
	for range 2 {
		src, changed := typeSecretInputs(in.Sources, res)
		if !changed {
			break
		}
		in.Sources = src
		if res, err = compose(in); err != nil {
			return nil, err
		}
	}
	noteUntypedInputs(in.Sources, res)
	return res, nil
}

// compose is Compose with every targetPath entry set as it is typed so far.
func compose(in Inputs) (*Result, error) {
	key := in.PlatformKey
	if key == "" {
		key = DefaultPlatformKey
	}
	res := &Result{}

	var platformSetters []string
	if _, ok := in.Sources.Spec[key]; ok {
		platformSetters = append(platformSetters, "spec.values")
	}
	for _, l := range in.Sources.From {
		if l.Missing {
			res.Notices = append(res.Notices, Notice{
				Path:    "/",
				Message: fmt.Sprintf("%s is optional and missing, so it adds no values", l.Name()),
			})
			continue
		}
		if l.setsKey(key) {
			platformSetters = append(platformSetters, l.Name())
		}
	}
	res.Notices = append(res.Notices, overrideNotices(in.Sources, key)...)
	if len(platformSetters) > 0 {
		res.Notices = append(res.Notices, Notice{
			Path: pointer([]string{key}),
			Message: fmt.Sprintf("%s set values under %q, the key the platform reserves: they are overwritten by the platform's facts",
				strings.Join(platformSetters, ", "), key),
		})
	}
	// Helm's own merge of values files: later wins, maps merge, nulls stay
	// until the chart's defaults are coalesced.
	user := in.Sources.mergeOver(copyMap(in.Generated))
	delete(user, key)
	if in.Platform != nil {
		user[key] = copyMap(in.Platform)
	}

	resolved, eff, err := resolve(in.Chart, user)
	if err != nil {
		return nil, err
	}
	if hasNulls(user) {
		// The nulls that delete nothing go, judged against the defaults of
		// the chart as these values resolve it: an import-values default
		// or an aliased subchart's is one a null deletes.
		defaults, err := coalesceDefaults(resolved)
		if err != nil {
			return nil, err
		}
		if pruneNulls(user, withSubchartGlobals(resolved, defaults)) {
			// NOTE: other values resolve the chart anew: import-values
			// copy them into the parent's defaults. Values with no null
			// to prune, nearly all, are resolved once.
			if resolved, eff, err = resolve(in.Chart, user); err != nil {
				return nil, err
			}
		}
	}

	var errs errorList
	v := &validator{}
	schemaErrs := v.checkResolved(resolved, eff)
	res.Values, res.Effective, res.Schema = user, eff, v.schema
	errs = append(errs, v.compileErrs...)
	if _, set := user[key]; set && len(schemaErrs) > 0 {
		// NOTE: a chart that does not know the platform key must render
		// as helm install renders it. If the key alone adds schema
		// errors, the key goes.
		without := copyMap(user)
		delete(without, key)
		effWithout, errsWithout, err := v.check(in.Chart, without)
		if err != nil {
			return nil, err
		}
		if addsErrors(schemaErrs, errsWithout) {
			res.Values, res.Effective, res.Schema, schemaErrs = without, effWithout, v.schema, errsWithout
			res.PlatformWithheld = true
			res.Notices = append(res.Notices, Notice{
				Path: pointer([]string{key}),
				Message: fmt.Sprintf("the chart's values.schema.json does not allow the key %q, so the platform's facts were withheld from it; a chart that reads them declares the property %q in its schema",
					key, key),
			})
		}
	}
	errs = append(errs, schemaErrs...)
	errs = append(errs, res.Schema.checkWriteOnly(in.Sources, res.Effective)...)
	sortErrors(errs)
	res.Errors = errs
	var sources map[string]secretSource
	res.SecretPaths, sources = secretPathsFrom(res.Schema, in, res.Effective)
	if err := res.checkSecretBound(sources); err != nil {
		// NOTE: with the writeOnly rule's errors, which name paths and
		// quote no value: a writer that checks for secret inputs in
		// spec.values (capstan addon add --set) refuses them past the
		// bound too, before it stores them where anyone may read them.
		var inv *InvalidError
		if errors.As(err, &inv) {
			for _, e := range errs {
				if e.Rule == RuleWriteOnly {
					inv.Errors = append(inv.Errors, e)
				}
			}
		}
		return nil, err
	}
	return res, nil
}

// SchemaFor compiles the schemas that Compose checks src against: the
// values.schema.json of the chart and of each subchart that the values of
// src enable, each under the name the chart gives it (its alias). It
// returns nil when none of them has a schema. Use it for what must be known
// before Compose, such as the properties to generate (EnsureGenerated).
func SchemaFor(ch *chartv2.Chart, src Sources) (*Schema, error) {
	if ch == nil {
		return nil, nil
	}
	// NOTE: the generated values and the platform key are not known yet,
	// and are left out. They are strings, and Helm's conditions and tags
	// read booleans: a subchart they could enable is one whose condition
	// names a generated property or a platform fact.
	resolved, _, err := resolve(ch, src.mergeOver(map[string]any{}))
	if err != nil {
		return nil, err
	}
	return SchemaForChart(resolved)
}

// resolve returns the chart with its dependencies resolved for the user
// values, as Helm resolves them before it checks and renders (conditions
// and tags applied, aliases renamed, values imported), and the values its
// templates see. ch is not changed.
func resolve(ch *chartv2.Chart, user map[string]any) (*chartv2.Chart, map[string]any, error) {
	if ch == nil {
		return nil, copyMap(user), nil
	}
	resolved, eff, err := render.ChartValues(ch, copyMap(user))
	if err != nil {
		return nil, nil, dependencyError(ch, user, err)
	}
	return resolved, eff, nil
}

// helmTypeMismatch begins the error Helm's coalesce returns when a
// subchart's key holds something other than a map.
const helmTypeMismatch = "type mismatch on "

// dependencyError is the error to report when Helm cannot resolve ch's
// dependencies for user. Helm says that a subchart's key is not a map with
// "type mismatch on <subchart>: %t" of the value, which prints the value
// itself, a Secret's as any other, so that text is never passed on: the
// error names the key that holds the value instead.
func dependencyError(ch *chartv2.Chart, user map[string]any, err error) error {
	msg := err.Error()
	i := strings.Index(msg, helmTypeMismatch)
	if i < 0 {
		return err
	}
	name, _, _ := strings.Cut(msg[i+len(helmTypeMismatch):], ": ")
	if !subchartNames(ch)[name] {
		return fmt.Errorf("chart %s: the values of one of its subcharts are not a map: each subchart's key must hold a map", ch.Name())
	}
	if p := nonMapSubchartKey(ch, user, name); p != nil {
		return fmt.Errorf("chart %s: %s holds the values of subchart %s and must be a map", ch.Name(), dotted(p), name)
	}
	return fmt.Errorf("chart %s: the values of subchart %s must be a map, and the chart's defaults set them to something else", ch.Name(), name)
}

// subchartNames returns the names ch and its subcharts, at any depth, give
// their subcharts: each one's name and its aliases.
func subchartNames(ch *chartv2.Chart) map[string]bool {
	names := map[string]bool{}
	var walk func(c *chartv2.Chart)
	walk = func(c *chartv2.Chart) {
		if c.Metadata != nil {
			for _, d := range c.Metadata.Dependencies {
				if d != nil {
					names[d.Name] = true
					names[d.Alias] = true
				}
			}
		}
		for _, d := range c.Dependencies() {
			names[d.Name()] = true
			walk(d)
		}
	}
	walk(ch)
	delete(names, "")
	return names
}

// nonMapSubchartKey returns the path to a key named name whose value in v
// is neither a map nor null, among the keys Helm reads as a subchart's
// values, or nil when there is none. Helm walks the chain of subcharts:
// each chart's subcharts by their key under the chart's own (an alias, or
// the chart's name, which it reads before it applies the alias of a
// subchart's subchart), and, as it resolves the subcharts of a subchart
// against the top-level values, the keys of those at the top level too. A
// key named like a subchart elsewhere (cache.redis, a URL) is no
// subchart's, and Helm never reads it.
func nonMapSubchartKey(ch *chartv2.Chart, v map[string]any, name string) []string {
	var walk func(c *chartv2.Chart, v map[string]any, p []string) []string
	walk = func(c *chartv2.Chart, v map[string]any, p []string) []string {
		for _, sub := range subchartKeys(c) {
			for _, key := range sub.keys {
				child := append(p[:len(p):len(p)], key)
				switch val := v[key].(type) {
				case map[string]any:
					if found := walk(sub.chart, val, child); found != nil {
						return found
					}
				case nil:
				default:
					if key == name {
						return child
					}
				}
			}
		}
		return nil
	}
	if p := walk(ch, v, nil); p != nil {
		return p
	}
	if _, isMap := v[name].(map[string]any); isMap || v[name] == nil {
		return nil
	}
	var nested func(c *chartv2.Chart) bool
	nested = func(c *chartv2.Chart) bool {
		for _, sub := range subchartKeys(c) {
			for _, subsub := range subchartKeys(sub.chart) {
				if slices.Contains(subsub.keys, name) {
					return true
				}
			}
			if nested(sub.chart) {
				return true
			}
		}
		return false
	}
	if nested(ch) {
		return []string{name}
	}
	return nil
}

// subchartKey is a subchart of a chart and the keys its values may be
// under: its alias, then its name.
type subchartKey struct {
	chart *chartv2.Chart
	keys  []string
}

// subchartKeys lists the subcharts of c in its Chart.yaml's order, each
// under its alias and its name, and then those its charts folder holds
// that Chart.yaml does not name.
func subchartKeys(c *chartv2.Chart) []subchartKey {
	loaded := map[string]*chartv2.Chart{}
	for _, d := range c.Dependencies() {
		loaded[d.Name()] = d
	}
	var out []subchartKey
	named := map[string]bool{}
	if c.Metadata != nil {
		for _, d := range c.Metadata.Dependencies {
			if d == nil || loaded[d.Name] == nil {
				continue
			}
			named[d.Name] = true
			keys := []string{d.Name}
			if d.Alias != "" && d.Alias != d.Name {
				keys = []string{d.Alias, d.Name}
			}
			out = append(out, subchartKey{chart: loaded[d.Name], keys: keys})
		}
	}
	for _, d := range c.Dependencies() {
		if !named[d.Name()] {
			out = append(out, subchartKey{chart: d, keys: []string{d.Name()}})
		}
	}
	return out
}

// coalesceDefaults returns a resolved chart's defaults, with those of its
// subcharts and Helm's globals.
func coalesceDefaults(resolved *chartv2.Chart) (map[string]any, error) {
	if resolved == nil {
		return map[string]any{}, nil
	}
	d, err := chartutil.CoalesceValues(resolved, map[string]any{})
	if err != nil {
		return nil, fmt.Errorf("coalesce the chart's default values: %w", err)
	}
	return d, nil
}

// withSubchartGlobals returns defaults, the coalesced defaults of the
// resolved chart ch, with the global of each chart holding the globals of
// its subcharts, at any depth, too. Helm copies globals down into the
// subcharts, never up, so a global only a subchart sets is not among its
// parent's; a null under global deletes it all the same, since the null
// flows down with the parent's globals. defaults is not changed.
func withSubchartGlobals(ch *chartv2.Chart, defaults map[string]any) map[string]any {
	if ch == nil || len(ch.Dependencies()) == 0 {
		return defaults
	}
	out := maps.Clone(defaults)
	global, _ := defaults[common.GlobalKey].(map[string]any)
	for _, d := range ch.Dependencies() {
		sub, ok := defaults[d.Name()].(map[string]any)
		if !ok {
			continue
		}
		sub = withSubchartGlobals(d, sub)
		out[d.Name()] = sub
		if g, ok := sub[common.GlobalKey].(map[string]any); ok {
			global = unionOf(global, g)
		}
	}
	if global != nil {
		out[common.GlobalKey] = global
	}
	return out
}

// unionOf returns a map with every key of a and b, at any depth through
// maps: a's value where it has one that is not null, else b's. Neither is
// changed; the result may share their maps.
func unionOf(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]any{}
	}
	for k, bv := range b {
		av, ok := out[k]
		am, aIsMap := av.(map[string]any)
		bm, bIsMap := bv.(map[string]any)
		switch {
		case !ok || av == nil:
			out[k] = bv
		case aIsMap && bIsMap:
			out[k] = unionOf(am, bm)
		}
	}
	return out
}

// validator checks values against the schemas of the chart as the values
// resolve it. It compiles the schemas again only when other values enable
// other subcharts.
type validator struct {
	layout      string
	compiled    bool
	schema      *Schema
	compileErrs []capstanv1.ValuesError
}

// check returns the effective values of user and their schema errors.
func (v *validator) check(ch *chartv2.Chart, user map[string]any) (map[string]any, []capstanv1.ValuesError, error) {
	resolved, eff, err := resolve(ch, user)
	if err != nil {
		return nil, nil, err
	}
	return eff, v.checkResolved(resolved, eff), nil
}

// checkResolved returns the schema errors of eff, the effective values of
// the chart resolved for them (resolve).
func (v *validator) checkResolved(resolved *chartv2.Chart, eff map[string]any) []capstanv1.ValuesError {
	if l := layoutOf(resolved); !v.compiled || l != v.layout {
		v.layout, v.compiled, v.schema, v.compileErrs = l, true, nil, nil
		var err error
		if resolved != nil {
			v.schema, err = SchemaForChart(resolved)
		}
		if err != nil {
			v.compileErrs = []capstanv1.ValuesError{{Path: SchemaErrorPath, Rule: "schema", Message: err.Error()}}
		}
	}
	return v.schema.Validate(eff)
}

// layoutOf names the subcharts of a resolved chart, nested, as the values
// reach them: the schemas to check depend on nothing else.
func layoutOf(ch *chartv2.Chart) string {
	if ch == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(ch.Name())
	b.WriteByte('(')
	for _, d := range ch.Dependencies() {
		b.WriteString(layoutOf(d))
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// addsErrors reports whether with holds an error that without does not.
func addsErrors(with, without []capstanv1.ValuesError) bool {
	seen := map[string]bool{}
	for _, e := range without {
		seen[e.Path+"\x00"+e.Rule] = true
	}
	for _, e := range with {
		if !seen[e.Path+"\x00"+e.Rule] {
			return true
		}
	}
	return false
}

// pruneNulls removes the nulls of user values that delete nothing: those
// where the chart's defaults have no value. The nulls that remain delete a
// default when Helm coalesces. It reports whether it removed any.
func pruneNulls(user, defaults map[string]any) bool {
	pruned := false
	for k, v := range user {
		d, hasDefault := defaults[k]
		switch t := v.(type) {
		case nil:
			if !hasDefault || d == nil {
				delete(user, k)
				pruned = true
			}
		case map[string]any:
			dm, _ := d.(map[string]any)
			pruned = pruneNulls(t, dm) || pruned
		}
	}
	return pruned
}

// hasNulls reports whether user holds a null that pruneNulls could remove:
// one in a map, at any depth through maps.
func hasNulls(user map[string]any) bool {
	for _, v := range user {
		switch t := v.(type) {
		case nil:
			return true
		case map[string]any:
			if hasNulls(t) {
				return true
			}
		}
	}
	return false
}

func sortErrors(errs []capstanv1.ValuesError) {
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].Path != errs[j].Path {
			return errs[i].Path < errs[j].Path
		}
		return errs[i].Rule < errs[j].Rule
	})
}
