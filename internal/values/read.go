package values

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Read reads an add-on's values inputs: spec.values and, in order, the key
// of each Secret or ConfigMap that spec.valuesFrom names, from the Addon's
// namespace.
//
// In the restricted profile it reads only the add-on's own values objects:
// "<addon>-values-*" labelled capstan.dev/addon=<addon>, and
// "<addon>-generated". An entry naming any other object is refused before
// anything is read. In the cluster profile any Secret or ConfigMap of the
// namespace may be named.
//
// Each object is read once and each of its keys parsed once, however many
// entries name them, and the documents together may hold at most
// MaxTotalBytes: past that nothing more is parsed.
//
// Problems a person must fix come back together as an *InvalidError; an
// error from the API server is returned as it is, to be retried.
func Read(ctx context.Context, r client.Reader, addon *capstanv1.Addon, profile capstanv1.Profile) (Sources, error) {
	var src Sources
	var errs errorList
	sizes := documentSizes{}
	objects := map[objectRef]client.Object{}
	parsed := map[documentRef]map[string]any{}
	if addon.Spec.Values != nil && len(addon.Spec.Values.Raw) > 0 {
		sizes.add("spec.values", len(addon.Spec.Values.Raw))
		doc, err := parseDocument(addon.Spec.Values.Raw, "spec.values")
		if err != nil {
			errs = append(errs, err.Errors...)
		} else {
			src.Spec = doc
		}
	}
	for i, ref := range addon.Spec.ValuesFrom {
		if ref.ValuesKey == "" {
			ref.ValuesKey = DefaultValuesKey
		}
		l := Layer{Index: i, Ref: ref}
		field := l.field()
		if ref.TargetPath != "" {
			p, err := parseTargetPath(ref.TargetPath)
			if err != nil {
				errs.add(field, "valuesFrom.targetPath", "%s: %v", l.Name(), err)
				continue
			}
			l.path = p
		}
		if profile != capstanv1.ProfileCluster && !isValuesName(addon.Name, ref.Name) {
			errs.add(field, "valuesFrom.restricted",
				"%s: a restricted add-on reads only its own values objects, named %s* or %s and labelled %s=%s; write secret inputs through Capstan, or create a values object with such a name and label",
				l.Name(), ValuesPrefix(addon.Name), GeneratedName(addon.Name), capstanv1.AddonLabel, addon.Name)
			continue
		}
		data, gone, err := readKey(ctx, r, addon, profile, l, objects)
		if err != nil {
			if ie, ok := err.(*InvalidError); ok {
				errs = append(errs, ie.Errors...)
				continue
			}
			return Sources{}, err
		}
		if gone {
			if ref.Optional {
				l.Missing = true
				src.From = append(src.From, l)
				continue
			}
			errs.add(field, "valuesFrom.missing", "%s: the %s does not exist; create it, or mark the entry optional", l.Name(), ref.Kind)
			continue
		}
		if len(data) > MaxDocumentBytes {
			errs.add(field, "valuesFrom.tooLarge", "%s is %d bytes; a values document may be at most %d bytes (1 MiB)",
				l.Name(), len(data), MaxDocumentBytes)
			continue
		}
		doc := documentRef{objectRef{ref.Kind, ref.Name}, ref.ValuesKey}
		if sizes.add(fmt.Sprintf("%s %s, key %s", ref.Kind, ref.Name, ref.ValuesKey), len(data)) > MaxTotalBytes {
			continue // reported once, below; nothing more is parsed
		}
		if l.path != nil {
			l.Raw = string(data)
		} else if d, ok := parsed[doc]; ok {
			// NOTE: shared, not copied: a layer's document is only read,
			// and copied where it is merged.
			l.Doc = d
		} else {
			d, perr := parseDocument(data, l.Name())
			if perr != nil {
				for _, e := range perr.Errors {
					e.Path = field
					errs = append(errs, e)
				}
				continue
			}
			parsed[doc], l.Doc = d, d
		}
		src.From = append(src.From, l)
	}
	if sizes.total > MaxTotalBytes {
		errs.add("spec.valuesFrom", "valuesFrom.tooLarge",
			"the add-on's values documents hold %d bytes together, and may hold at most %d bytes (2 MiB): %s; merge them into fewer or smaller documents, and name each one once",
			sizes.total, MaxTotalBytes, sizes)
	}
	if err := errs.err(); err != nil {
		return Sources{}, err
	}
	return src, nil
}

// readKey reads the entry's key. gone says the object does not exist,
// which an optional entry allows. A key the object lacks is an
// *InvalidError, optional or not, as Flux's HelmRelease has it: optional
// covers an object not made yet, and a misspelt valuesKey in one that
// exists would otherwise render without the value and report Ready.
// objects holds what earlier entries read, by kind and name: an object, or
// nil for one that does not exist.
func readKey(ctx context.Context, r client.Reader, addon *capstanv1.Addon, profile capstanv1.Profile, l Layer, objects map[objectRef]client.Object) (data []byte, gone bool, err error) {
	key := types.NamespacedName{Namespace: addon.Namespace, Name: l.Ref.Name}
	var obj client.Object
	switch l.Ref.Kind {
	case "Secret":
		obj = &corev1.Secret{}
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	default:
		return nil, false, invalid(l.field(), "valuesFrom.kind", "%s: kind must be Secret or ConfigMap", l.Name())
	}
	ref := objectRef{l.Ref.Kind, l.Ref.Name}
	if seen, ok := objects[ref]; ok {
		if seen == nil {
			return nil, true, nil
		}
		obj = seen
	} else if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			objects[ref] = nil
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("read %s %s/%s for %s: %w", l.Ref.Kind, key.Namespace, key.Name, l.field(), err)
	} else {
		objects[ref] = obj
	}
	if profile != capstanv1.ProfileCluster {
		if _, err := claim(obj, addon, fmt.Sprintf("%s %s", l.Ref.Kind, l.Ref.Name)); err != nil {
			return nil, false, invalid(l.field(), "valuesFrom.restricted", "%s: %v", l.field(), err)
		}
	}
	var ok bool
	switch o := obj.(type) {
	case *corev1.Secret:
		data, ok = secretData(o, l.Ref.ValuesKey)
	case *corev1.ConfigMap:
		data, ok = configMapData(o, l.Ref.ValuesKey)
	}
	if !ok {
		fix := "add the key, or correct valuesKey"
		if l.Ref.Optional {
			fix += " (optional covers a missing object, not a missing key)"
		}
		return nil, false, invalid(l.field(), "valuesFrom.missing", "%s: the %s has no key %s; %s", l.Name(), l.Ref.Kind, l.Ref.ValuesKey, fix)
	}
	return data, false, nil
}

// objectRef names a values object of the add-on's namespace.
type objectRef struct{ kind, name string }

// documentRef names one key of a values object.
type documentRef struct {
	object objectRef
	key    string
}

// documentSizes adds up the sizes of an add-on's values documents, and
// says which hold them.
type documentSizes struct {
	total int
	order []string
	each  map[string]int // bytes, by document
	times map[string]int // how many entries name it
}

// add counts one more document of n bytes, named what, and returns the
// total so far.
func (s *documentSizes) add(what string, n int) int {
	if s.each == nil {
		s.each, s.times = map[string]int{}, map[string]int{}
	}
	if s.times[what] == 0 {
		s.order = append(s.order, what)
	}
	s.each[what] = n
	s.times[what]++
	s.total += n
	return s.total
}

// String lists the documents and their sizes, largest share first.
func (s documentSizes) String() string {
	order := slices.Clone(s.order)
	slices.SortStableFunc(order, func(a, b string) int { return s.each[b]*s.times[b] - s.each[a]*s.times[a] })
	parts := make([]string, 0, len(order))
	for _, what := range order {
		if s.times[what] > 1 {
			parts = append(parts, fmt.Sprintf("%s (%d bytes, named by %d entries)", what, s.each[what], s.times[what]))
		} else {
			parts = append(parts, fmt.Sprintf("%s (%d bytes)", what, s.each[what]))
		}
	}
	return strings.Join(parts, ", ")
}

// lineRE finds the line number in a YAML parser's message.
var lineRE = regexp.MustCompile(`line (\d+)`)

// parseDocument parses a values document: YAML (or JSON) that must be a map.
// Its errors name the document and, where the parser gave one, the line,
// and never quote the parser's message, which can hold the content.
func parseDocument(data []byte, what string) (map[string]any, *InvalidError) {
	if len(data) > MaxDocumentBytes {
		return nil, invalid(what, "values.tooLarge", "%s is %d bytes; a values document may be at most %d bytes (1 MiB)",
			what, len(data), MaxDocumentBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, nil
	}
	doc, err := loader.LoadValues(bytes.NewReader(data))
	if err != nil {
		msg := err.Error()
		if !strings.Contains(msg, "converting YAML to JSON") && strings.Contains(msg, "cannot unmarshal") {
			return nil, invalid(what, "values.notMap", "%s is not a map of values: it must be a YAML map, such as \"key: value\"; use targetPath to set a single string", what)
		}
		where := ""
		if m := lineRE.FindStringSubmatch(msg); m != nil {
			where = " at line " + m[1]
		}
		return nil, invalid(what, "values.notYAML", "%s is not valid YAML%s; fix the document (its content is not shown because it may be secret)", what, where)
	}
	return doc, nil
}

// MaxValuesFrom is the most valuesFrom entries an Addon may have: the
// CRD's MaxItems on spec.valuesFrom, which the API server enforces when
// the Addon is written. ReadConfigMaps, which runs before that write,
// reads none past it.
const MaxValuesFrom = 64

// maxUnreadNotes bounds the notes UnreadNotes gives, one for each entry,
// and one more that counts the rest.
const maxUnreadNotes = 10

// UnreadNotes says, for a writer's check, which valuesFrom entries
// ReadConfigMaps left out and why: one note for each of the first 10, and
// one more that counts the rest, so that a check's warnings (an API
// answer's Warning headers) stay short however many entries were given.
func UnreadNotes(unread []UnreadLayer) []string {
	var notes []string
	for i, u := range unread {
		if i == maxUnreadNotes {
			notes = append(notes, fmt.Sprintf("and %d more valuesFrom entries, which could not be read either", len(unread)-i))
			break
		}
		notes = append(notes, fmt.Sprintf("%s, which could not be read (%s)", u.Name, u.Reason))
	}
	return notes
}

// UnreadLayer is a valuesFrom entry ReadConfigMaps left out.
type UnreadLayer struct {
	// Name is the entry's (Layer.Name); Reason says why it was not read.
	Name, Reason string
}

// ReadConfigMaps reads, for a writer's check of spec.values before it
// writes (a secret input a ConfigMap's mode: ldap makes writeOnly), the
// ConfigMaps that spec.valuesFrom names, as Read reads them, with r, which
// must read as the writer: their layers, in the order of spec.valuesFrom,
// for Compose to merge over spec.values as the controller will. The
// entries that name a Secret are left out, unread: a writer's check must
// not pull secret values into a server for a form, and the controller
// alone judges what they select. A ConfigMap that cannot be read (missing
// and not optional, refused, too large, not YAML, or an error of the API
// server) is left out too, and unread says which and why, so that the
// check goes on without it and says so. Only the first MaxValuesFrom
// entries are read: the API server refuses an Addon with more, and
// unread says so, once, for the rest.
func ReadConfigMaps(ctx context.Context, r client.Reader, addon *capstanv1.Addon, profile capstanv1.Profile) (layers []Layer, unread []UnreadLayer) {
	objects := map[objectRef]client.Object{}
	total := 0
	refs := addon.Spec.ValuesFrom
	if n := len(refs); n > MaxValuesFrom {
		refs = refs[:MaxValuesFrom]
		defer func() {
			unread = append(unread, UnreadLayer{Name: fmt.Sprintf("spec.valuesFrom[%d:%d]", MaxValuesFrom, n),
				Reason: fmt.Sprintf("valuesFrom has %d entries, and an Addon may have at most %d; the API server refuses it", n, MaxValuesFrom)})
		}()
	}
	for i, ref := range refs {
		if ref.Kind != "ConfigMap" {
			continue
		}
		if ref.ValuesKey == "" {
			ref.ValuesKey = DefaultValuesKey
		}
		l := Layer{Index: i, Ref: ref}
		skip := func(format string, args ...any) {
			unread = append(unread, UnreadLayer{Name: l.Name(), Reason: fmt.Sprintf(format, args...)})
		}
		if ref.TargetPath != "" {
			p, err := parseTargetPath(ref.TargetPath)
			if err != nil {
				skip("%v", err)
				continue
			}
			l.path = p
		}
		if profile != capstanv1.ProfileCluster && !isValuesName(addon.Name, ref.Name) {
			skip("a restricted add-on reads only its own values objects, named %s* or %s", ValuesPrefix(addon.Name), GeneratedName(addon.Name))
			continue
		}
		data, gone, err := readKey(ctx, r, addon, profile, l, objects)
		switch {
		case err != nil:
			skip("%v", err)
			continue
		case gone && ref.Optional:
			l.Missing = true
			layers = append(layers, l)
			continue
		case gone:
			skip("the ConfigMap does not exist")
			continue
		case len(data) > MaxDocumentBytes || total+len(data) > MaxTotalBytes:
			skip("the document is larger than a values document may be")
			continue
		}
		total += len(data)
		if l.path != nil {
			l.Raw = string(data)
		} else {
			d, perr := parseDocument(data, l.Name())
			if perr != nil {
				skip("%v", perr)
				continue
			}
			l.Doc = d
		}
		layers = append(layers, l)
	}
	return layers, unread
}
