package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/lru"
	"sigs.k8s.io/yaml"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// errNotObject is a document that is YAML but not a Kubernetes object,
// for a reason notObject cannot name.
var errNotObject = errors.New("document has no apiVersion or kind")

// notObjectError is a document that is YAML but not a Kubernetes object,
// with what is wrong in Capstan's own words: the key that is missing, or
// the shape of the document. It quotes nothing of the document, so it can
// be shown where a rendered value must not be.
type notObjectError struct{ problem string }

func (e *notObjectError) Error() string { return e.problem }

// notObject says why the JSON document j, which did not decode as a
// Kubernetes object, is not one. It falls back to errNotObject when it
// finds nothing to name.
func notObject(j []byte) error {
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return errNotObject
	}
	return notObjectValue(v, 0)
}

// notListItems says which item of the List document j is not an object,
// when the List did not decode.
func notListItems(j []byte) error {
	var list struct {
		Items []any `json:"items"`
	}
	if err := json.Unmarshal(j, &list); err != nil {
		return errNotObject
	}
	for i, item := range list.Items {
		if _, ok := item.(map[string]any); !ok {
			return notObjectValue(item, i+1)
		}
	}
	return errNotObject
}

// notObjectValue says why v, a decoded document or, when item is above 0,
// the 1-based item of a List, is not a Kubernetes object.
func notObjectValue(v any, item int) error {
	what := "the document"
	if item > 0 {
		what = fmt.Sprintf("item %d of the List", item)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		shape := "null"
		if v != nil {
			shape = kindOfValue(v)
		}
		return &notObjectError{fmt.Sprintf("%s is %s, not an object: each document must be one Kubernetes object with apiVersion and kind", what, shape)}
	}
	var missing []string
	for _, key := range []string{"apiVersion", "kind"} {
		switch s, isString := obj[key].(string); {
		case obj[key] == nil:
			missing = append(missing, "no "+key)
		case !isString:
			missing = append(missing, "a "+key+" that is not a string")
		case s == "":
			missing = append(missing, "an empty "+key)
		}
	}
	if len(missing) == 0 {
		return errNotObject
	}
	return &notObjectError{fmt.Sprintf("%s has %s: a Kubernetes object needs both apiVersion and kind", what, strings.Join(missing, " and "))}
}

// documentCacheSize bounds the decoded-document cache: enough for a warm
// render of a chart of a thousand objects, or for the resyncs of about a
// hundred add-ons of twenty. Past that, add-ons resync in a cycle longer
// than the cache, so an LRU of any size short of every document hits
// nothing, and a larger one only holds memory (16,384 documents were 22 MiB
// of the controller's heap at a thousand add-ons): decoding them again
// costs a resync of a thousand add-ons a few seconds of CPU in 5 minutes.
const documentCacheSize = 2048

// documentCacheMaxDocument is the largest document the cache keeps the
// first time it is decoded, in bytes of text. A count alone does not bound
// memory: a chart that renders one large document that changes every
// render (randAlphaNum 4000000) would add a new entry each time until the
// count is reached, gigabytes later. A larger document is kept the second
// time its text is decoded (documentCacheLargeSeen): a large CRD (cert-
// manager's, 325 KB, kyverno's, 1.4 MB) is the same text at every render,
// and decoding it again costs 35 to 80 ms a resync.
const documentCacheMaxDocument = 256 << 10

// documentCacheLargeSeen bounds the hashes of the large documents decoded
// once and not kept: 32 bytes each.
const documentCacheLargeSeen = 1024

// documentCacheMaxBytes bounds the text of all the cached documents
// together, so documents just under documentCacheMaxDocument cannot fill
// the count either. A decoded document takes about as much heap as its
// text, a few times more for one of many small fields.
const documentCacheMaxBytes = 64 << 20

// documents caches decoded documents by the sha256 of their text. Decoding
// YAML is most of a render's work once a chart is loaded, and a resync
// renders the same text again; keyed by content, a hit is exact.
var documents = newDocumentCache(documentCacheSize, documentCacheMaxBytes)

// documentCache is an LRU of decoded documents bounded by count and by the
// bytes of their text.
type documentCache struct {
	// mu serialises changes, so each entry's bytes are counted once:
	// the LRU's own lock does not cover bytes, and its Add replaces an
	// entry already there without telling the eviction func.
	mu       sync.Mutex
	lru      *lru.Cache
	bytes    int
	maxBytes int
	// seen holds the hashes of large documents decoded once, to keep
	// each the second time.
	seen *lru.Cache
}

// cachedDocument is a decoded document (its objects, and a List's own
// object), or the error it gave, and the size of its text.
type cachedDocument struct {
	objs []*unstructured.Unstructured
	list *unstructured.Unstructured
	err  error
	size int
}

func newDocumentCache(size, maxBytes int) *documentCache {
	c := &documentCache{maxBytes: maxBytes, seen: lru.New(documentCacheLargeSeen)}
	// NOTE: the eviction func runs inside lru.Add, RemoveOldest and
	// Clear, which are only called with mu held.
	c.lru = lru.NewWithEvictionFunc(size, func(_ lru.Key, v any) {
		c.bytes -= v.(cachedDocument).size
	})
	return c
}

func (c *documentCache) get(key [sha256.Size]byte) (cachedDocument, bool) {
	v, ok := c.lru.Get(key)
	if !ok {
		return cachedDocument{}, false
	}
	return v.(cachedDocument), true
}

// add keeps d, evicting the least recently used documents until the
// bytes are within the bound; a document over documentCacheMaxDocument only
// the second time its text is added.
func (c *documentCache) add(key [sha256.Size]byte, d cachedDocument) {
	if d.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.lru.Get(key); ok {
		return
	}
	if d.size > documentCacheMaxDocument {
		if _, ok := c.seen.Get(key); !ok {
			c.seen.Add(key, struct{}{})
			return
		}
		c.seen.Remove(key)
	}
	c.lru.Add(key, d)
	c.bytes += d.size
	for c.bytes > c.maxBytes {
		c.lru.RemoveOldest()
	}
}

// size returns the number of cached documents and the bytes of their text.
func (c *documentCache) size() (n, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

// Clear empties the cache, as a cold render starts.
func (c *documentCache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Clear()
	c.seen.Clear()
}

// decodeCached is decodeListDocument through the document cache. It
// returns copies, so callers may change the objects.
func decodeCached(doc []byte) (objs []*unstructured.Unstructured, list *unstructured.Unstructured, err error) {
	key := sha256.Sum256(doc)
	c, ok := documents.get(key)
	if !ok {
		j, err := yaml.YAMLToJSON(doc)
		if err == nil {
			c.objs, c.list, err = decodeListDocument(j)
		}
		c.err, c.size = err, len(doc)
		documents.add(key, c)
	}
	if c.err != nil {
		return nil, nil, c.err
	}
	objs = make([]*unstructured.Unstructured, len(c.objs))
	for i, o := range c.objs {
		objs[i] = o.DeepCopy()
	}
	if c.list != nil {
		list = c.list.DeepCopy()
	}
	return objs, list, nil
}

// decodeDocument turns one YAML document into objects: none for an empty
// document (only comments, or null), the items of a List kind, or the object.
// Integers stay int64, as the API machinery expects.
func decodeDocument(doc []byte) ([]*unstructured.Unstructured, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	return decodeJSONDocument(j)
}

// decodeJSONDocument is decodeDocument for a document already read into JSON.
func decodeJSONDocument(j []byte) ([]*unstructured.Unstructured, error) {
	objs, _, err := decodeListDocument(j)
	return objs, err
}

// decodeListDocument is decodeJSONDocument that also returns, for a List,
// the List's own object without its items: Helm reads a List document's
// metadata, not its items', to tell a hook from a manifest.
func decodeListDocument(j []byte) (objs []*unstructured.Unstructured, head *unstructured.Unstructured, err error) {
	j = bytes.TrimSpace(j)
	if len(j) == 0 || bytes.Equal(j, []byte("null")) {
		return nil, nil, nil
	}
	if j[0] != '{' {
		return nil, nil, notObject(j)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, nil, notObject(j)
	}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, nil, notObject(j)
	}
	if !isList(u) {
		return []*unstructured.Unstructured{u}, nil, nil
	}
	list := &unstructured.UnstructuredList{}
	if err := list.UnmarshalJSON(j); err != nil {
		return nil, nil, notListItems(j)
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		item := &list.Items[i]
		if item.GetAPIVersion() == "" || item.GetKind() == "" {
			return nil, nil, notObjectValue(item.Object, i+1)
		}
		out = append(out, item)
	}
	delete(u.Object, "items")
	return out, u, nil
}

// isList reports whether u is a list to expand, as kubectl and Helm's
// resource builder expand one: its kind ends in "List" and it has items.
func isList(u *unstructured.Unstructured) bool {
	if !strings.HasSuffix(u.GetKind(), "List") {
		return false
	}
	_, ok := u.Object["items"].([]any)
	return ok
}

// holdsContent says whether a YAML document holds more than blank lines
// and comments: a document of comments alone, such as a license header
// before the first "---", decodes to no object and is not counted as one.
func holdsContent(doc []byte) bool {
	for len(doc) > 0 {
		line := doc
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			line, doc = doc[:i], doc[i+1:]
		} else {
			doc = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return true
		}
	}
	return false
}

// helmDocuments splits a rendered template as Helm's manifest sorter does,
// in document order.
func helmDocuments(content string) []string {
	entries := releaseutil.SplitManifests(content)
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		s := releaseutil.BySplitManifestsOrder{a, b}
		switch {
		case s.Less(0, 1):
			return -1
		case s.Less(1, 0):
			return 1
		}
		return 0
	})
	docs := make([]string, 0, len(keys))
	for _, k := range keys {
		docs = append(docs, entries[k])
	}
	return docs
}

// kindRank orders kinds as Helm's install order does; kinds it does not list
// come after, by name.
func kindRank(order releaseutil.KindSortOrder) map[string]int {
	rank := make(map[string]int, len(order))
	for i, k := range order {
		rank[k] = i
	}
	return rank
}

// compareKinds is Helm's lessByKind as a comparison: listed kinds by their
// place in the order, unlisted kinds after them by name, equal kinds equal.
func compareKinds(rank map[string]int, a, b string) int {
	ra, aok := rank[a]
	rb, bok := rank[b]
	switch {
	case aok && bok:
		return ra - rb
	case aok:
		return -1
	case bok:
		return 1
	}
	return strings.Compare(a, b)
}

// sources remembers where each object of a render's objects stream came
// from, to refuse a second object of the same identity: the API server
// holds one, so of two the last applied would win, and each sync would
// apply both again. Helm 3's install fails on the second, and kustomize
// refuses it in a build. Hooks are a stream of their own and may share an
// object's name, as Helm allows.
type sources struct {
	// namespace is where an object that names none is put.
	namespace string
	seen      map[string]string
	// clusterCRDs are the kinds (group/kind) that the CRDs added so far
	// define with the scope Cluster.
	clusterCRDs map[string]bool
	// documents counts the documents read; past max (when above zero),
	// the folder dir holds too many objects.
	documents, max int
	dir            string
}

// count counts n more objects: one for a document that holds something,
// before it is decoded, and then the rest of a List's items.
func (s *sources) count(n int) error {
	if s.documents += n; s.max > 0 && s.documents > s.max {
		return tooManyInFolder(s.dir, s.max)
	}
	return nil
}

func newSources(namespace string) *sources {
	return &sources{namespace: namespace, seen: map[string]string{}, clusterCRDs: map[string]bool{}}
}

// clusterKinds are the built-in kinds (group/kind) that no namespace
// holds: a namespace a render sets on one means nothing.
var clusterKinds = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true, "/ComponentStatus": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"apiextensions.k8s.io/CustomResourceDefinition": true, "apiregistration.k8s.io/APIService": true,
	"storage.k8s.io/StorageClass": true, "storage.k8s.io/CSIDriver": true, "storage.k8s.io/CSINode": true,
	"storage.k8s.io/VolumeAttachment": true, "scheduling.k8s.io/PriorityClass": true,
	"node.k8s.io/RuntimeClass": true, "networking.k8s.io/IngressClass": true,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration":   true,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":     true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy":        true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicy":          true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicyBinding":   true,
	"certificates.k8s.io/CertificateSigningRequest":                 true,
	"certificates.k8s.io/ClusterTrustBundle":                        true,
	"flowcontrol.apiserver.k8s.io/FlowSchema":                       true,
	"flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration":       true,
}

// isCRD says whether obj is a CustomResourceDefinition.
func isCRD(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "CustomResourceDefinition" && obj.GroupVersionKind().Group == "apiextensions.k8s.io"
}

// key is obj's identity in the cluster: group, kind, namespace and name,
// with the namespace it is put in when it names none, and no namespace
// for a kind known to be cluster-scoped.
func (s *sources) key(obj *unstructured.Unstructured) (key, where string) {
	gvk := obj.GroupVersionKind()
	gk := gvk.Group + "/" + gvk.Kind
	ns := obj.GetNamespace()
	if ns == "" {
		ns = s.namespace
	}
	if clusterKinds[gk] || s.clusterCRDs[gk] {
		ns = ""
	}
	where = obj.GetName()
	if ns != "" {
		where = ns + "/" + where
	}
	return gk + "/" + ns + "/" + obj.GetName(), where
}

// add records obj as coming from source, and refuses it when an object of
// the same group, kind, namespace and name came before it. An object
// without a name (generateName) is never the same as another.
func (s *sources) add(obj *unstructured.Unstructured, source string) error {
	if obj.GetName() == "" {
		return nil
	}
	key, where := s.key(obj)
	if first, ok := s.seen[key]; ok {
		return fmt.Errorf("render: %s %s is written twice, in %s and in %s: the cluster holds one object of a name, and two would be applied "+
			"over each other on every sync; remove one of them, or give each a name of its own", obj.GetKind(), where, first, source)
	}
	s.seen[key] = source
	s.learnScope(obj)
	return nil
}

// addCRD records a CRD of a chart's crds/ folder, from file, and says
// where the same CRD came from when an earlier crds/ file had it: helm
// install creates each file of crds/ in turn and skips a CRD that already
// exists, so the first copy is the one installed, and the later one is
// left out, not refused. An umbrella chart whose subcharts ship one CRD
// each would otherwise fail, and a chart from a registry cannot be edited.
func (s *sources) addCRD(obj *unstructured.Unstructured, file string) (first string, err error) {
	if !isCRD(obj) || obj.GetName() == "" {
		return "", s.add(obj, file)
	}
	key, _ := s.key(obj)
	if first, ok := s.seen[key]; ok {
		return first, nil
	}
	s.seen[key] = file
	s.learnScope(obj)
	return "", nil
}

// learnScope remembers the kind a cluster-scoped CRD defines.
func (s *sources) learnScope(obj *unstructured.Unstructured) {
	if !isCRD(obj) {
		return
	}
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
	if scope, _, _ := unstructured.NestedString(obj.Object, "spec", "scope"); scope == "Cluster" {
		s.clusterCRDs[group+"/"+kind] = true
	}
}
