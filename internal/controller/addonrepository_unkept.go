package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// maxUnkept bounds how many Addons the syncer remembers an unkept spec of
// (unkeptSpec), a few hundred bytes each; past it, once the entries older
// than unkeptRetry are dropped, an Addon more is not remembered, and costs
// an apply and an update at every interval as before.
//
// NOTE: not a memory that starts over: an older CRD drops a field from
// every git-managed Addon at once, and with more Addons than the bound,
// synced in the same order, starting over would have remembered none.
const maxUnkept = 4096

// maxUnkeptFields bounds the fields an unkept spec's message names.
const maxUnkeptFields = 5

// unkeptRetry is how long the syncer leaves an Addon whose spec the API
// server did not keep before it writes the file's spec again: a CRD
// installed or a policy removed since is then seen without a change of
// the file, at one apply and one update an hour.
const unkeptRetry = time.Hour

// unkeptSpec is a spec the syncer wrote to an Addon (intended) and the one
// the API server kept instead (kept), as digests, the message that says
// so, and when.
//
// NOTE: the API server may keep on changing what the syncer writes: an
// Addon CRD older than the controller prunes a field the file uses, a
// mutating admission policy sets one. Writing the file's spec again would
// change nothing and cost an apply and an update per Addon at every
// interval, unseen; so the syncer remembers, in memory, what it wrote and
// what was kept, writes again only when the file or the Addon's spec
// changes, after unkeptRetry, or after a restart, and reports the file as
// invalid meanwhile, naming the fields.
type unkeptSpec struct {
	intended, kept string
	file, message  string
	at             time.Time
}

// stillUnkept returns the message of the Addon uid when the spec the
// syncer would write now from file (intended) and the Addon's (live) are
// those that it wrote from that file and the API server kept last. A file
// moved is written again, so that the message names the file that holds
// the Addon now.
func (r *AddonRepositoryReconciler) stillUnkept(uid types.UID, file string, intended, live *capstanv1.AddonSpec) (string, bool) {
	r.mu.Lock()
	u, ok := r.unkept[uid]
	r.mu.Unlock()
	if !ok || u.file != file || r.now().Sub(u.at) >= unkeptRetry || u.intended != specDigest(intended) || u.kept != specDigest(live) {
		return "", false
	}
	return u.message, true
}

// rememberUnkept notes that the API server kept the spec kept of the
// Addon uid when the syncer wrote intended from file.
func (r *AddonRepositoryReconciler) rememberUnkept(uid types.UID, file string, intended, kept *capstanv1.AddonSpec, message string) {
	u := unkeptSpec{intended: specDigest(intended), kept: specDigest(kept), file: file, message: message, at: r.now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unkept == nil {
		r.unkept = map[types.UID]unkeptSpec{}
	}
	if _, ok := r.unkept[uid]; !ok && len(r.unkept) >= maxUnkept {
		for k, old := range r.unkept {
			if u.at.Sub(old.at) >= unkeptRetry {
				delete(r.unkept, k)
			}
		}
		if len(r.unkept) >= maxUnkept {
			return
		}
	}
	r.unkept[uid] = u
}

// forgetUnkept drops what the syncer remembers of the Addon uid: its spec
// matches the file.
func (r *AddonRepositoryReconciler) forgetUnkept(uid types.UID) {
	r.mu.Lock()
	delete(r.unkept, uid)
	r.mu.Unlock()
}

// unkeptMessage says, for the file's entry in the repository's status,
// which fields of the Addon the API server does not keep as the file
// sets them.
func unkeptMessage(file string, a *capstanv1.Addon, fields []string) string {
	if len(fields) > maxUnkeptFields {
		fields = append(slices.Clone(fields[:maxUnkeptFields]), fmt.Sprintf("and %d more", len(fields)-maxUnkeptFields))
	}
	return fmt.Sprintf("%s: the API server does not keep %s of the Addon %s/%s as the file sets it: is the Addon CRD older than the controller, "+
		"or does an admission policy change it? Install the controller's CRDs; the syncer writes the Addon again when the file or its spec changes, or in an hour",
		file, strings.Join(fields, ", "), a.Namespace, a.Name)
}

// unkeptFields lists, as spec.a.b, the fields in which two specs differ:
// the deepest object that holds the difference, a list as a whole.
func unkeptFields(a, b *capstanv1.AddonSpec) []string {
	var out []string
	diffJSON("spec", asJSON(a), asJSON(b), &out)
	sort.Strings(out)
	return out
}

func diffJSON(path string, a, b any, out *[]string) {
	x, okA := a.(map[string]any)
	y, okB := b.(map[string]any)
	if !okA || !okB {
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, path)
		}
		return
	}
	for k, v := range x {
		diffJSON(path+"."+k, v, y[k], out)
	}
	for k, v := range y {
		if _, ok := x[k]; !ok {
			diffJSON(path+"."+k, nil, v, out)
		}
	}
}

// asJSON is a spec as generic JSON, so that values compare by content.
func asJSON(s *capstanv1.AddonSpec) any {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

// specDigest is a digest of a spec's JSON, its keys sorted.
func specDigest(s *capstanv1.AddonSpec) string {
	raw, _ := json.Marshal(asJSON(s))
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
