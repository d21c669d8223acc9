// Package addons holds what a person does to an add-on: read its plan,
// approve it, suspend and resume it, write its secret inputs and remove it.
// The CLI calls it, and so will the HTTP API and the web page, so that each
// operation has one implementation and one set of rules whatever surface a
// person uses. It never applies anything itself: it changes the Addon, and
// the controller does the rest.
package addons

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/source"
	"capstan.dev/capstan/internal/strictjson"
	"capstan.dev/capstan/internal/values"
)

// Get reads an Addon.
func Get(ctx context.Context, c client.Reader, key client.ObjectKey) (*capstanv1.Addon, error) {
	a := &capstanv1.Addon{}
	if err := c.Get(ctx, key, a); err != nil {
		return nil, fmt.Errorf("reading addon %s: %w", key, err)
	}
	return a, nil
}

// FetcherOptions say how a plan fetches sources.
type FetcherOptions struct {
	// Guard is the fetch guard. The API server of Config is always added to
	// its deny-list.
	Guard netguard.Config
	// CABundle is PEM certificates to trust for chart repositories,
	// registries and git, besides the system's.
	CABundle []byte
	// AllowFileGit allows file:// git URLs. A controller refuses them
	// unless told, since they read its own disk; a person's CLI reads the
	// person's own disk, as capstan render does.
	AllowFileGit bool
}

// NewFetcher builds the fetcher a plan uses: guarded as the controller's
// is, and never toward the cluster's API server.
func NewFetcher(cfg *rest.Config, o FetcherOptions) (*source.Fetcher, error) {
	g := o.Guard
	g.Deny = append(append([]string(nil), g.Deny...), netguard.APIServerDenyEntries(cfg.Host)...)
	return source.NewFetcher(source.Options{Guard: g, CABundle: o.CABundle, AllowFileGit: o.AllowFileGit})
}

// Planner computes plans on demand with the identities of the person who
// asks: their client reads and dry-runs, and a cluster-profile add-on is
// dry-run by impersonating the add-ons account with their credentials.
type Planner struct {
	Client     client.Client
	RestConfig *rest.Config
	Fetcher    *source.Fetcher
	// PlatformReader reads the platform ConfigMap (Config.PlatformConfigMap)
	// in the controller's namespace. A server that plans for others passes
	// the controller's own reader: the facts are the platform's, the same
	// for every add-on, and a tenant has no right on that namespace. Nil
	// reads it with Client, as the CLI does in the person's own process.
	PlatformReader client.Reader
	// Config is the controller's configuration, the one its reconciler runs
	// with. A server that plans for others passes the controller's own, so
	// that a plan renders in the same sandbox (a chart's template can loop
	// for ever, and must never run unbounded in the server's process), gives
	// each namespace the same profile and reads the same platform facts as
	// the controller does. The CLI passes what its flags say of the
	// controller's, and renders in the person's own process.
	Config controller.Config
	// Judge, when set, is asked about a change before it is planned, once
	// the Addon is read and its shard checked and before anything is
	// fetched: current is the Addon as it is, changed as the patch would
	// make it, and neither may be changed. An error stops the plan. A
	// server has the API server judge the change with a dry run, so that a
	// change the CRD's rules refuse is refused as the same edit is.
	Judge func(ctx context.Context, current, changed *capstanv1.Addon) error
}

// Plan computes an Addon's whole plan now, with every diff uncut up to
// plan.MaxFullDiffBytes (128 KiB) each, and writes nothing: no status, no
// apply, no generated values, no adoption of values objects; only dry runs
// reach the API server.
func (p Planner) Plan(ctx context.Context, key client.ObjectKey) (*capstanv1.Addon, *capstanv1.Plan, error) {
	return p.PlanChange(ctx, key, nil)
}

// PlanChange computes the plan that a change to an Addon's spec would
// produce, and saves nothing: specPatch is a JSON merge patch of the spec
// (new values, a version, another source). A form shows with it what a
// change would do before anything is written. An empty patch plans the
// spec as it is.
func (p Planner) PlanChange(ctx context.Context, key client.ObjectKey, specPatch []byte) (*capstanv1.Addon, *capstanv1.Plan, error) {
	a, err := Get(ctx, p.Client, key)
	if err != nil {
		return nil, nil, err
	}
	// NOTE: another shard's controller plans it with its own trusted
	// namespaces and platform: this one's would give a profile and
	// violations (ProfileChanged, say) that the sync never meets.
	if !p.Config.Selects(a.Labels) {
		return a, nil, fmt.Errorf("%w: Addon %s %s, which this controller's --watch-label-selector %s does not select, "+
			"so a plan here would use this controller's trusted namespaces and not that controller's: ask the API of the controller whose selector selects it",
			ErrOtherShard, key, shardOf(a.Labels), p.Config.Selector)
	}
	changed, err := PatchedSpec(a, specPatch)
	if err != nil {
		return a, nil, err
	}
	if p.Judge != nil {
		if err := p.Judge(ctx, a, changed); err != nil {
			return a, nil, err
		}
	}
	r := &controller.AddonReconciler{Client: p.Client, APIReader: p.Client, PlatformReader: p.PlatformReader,
		RestConfig: p.RestConfig, Fetcher: p.Fetcher, Config: p.Config.WithDefaults()}
	pl, err := r.Plan(ctx, changed)
	if err != nil {
		return a, nil, fmt.Errorf("planning %s: %w", key, err)
	}
	return changed, pl, nil
}

// ErrOtherShard says that an Addon is, or would be, another controller's
// to reconcile: its labels are not selected by this controller's
// --watch-label-selector.
var ErrOtherShard = errors.New("this Addon is reconciled by another controller")

// ForShard labels a, an Addon to create for a person through this
// controller's API or page, with the shard its selector requires
// (cfg.Shard), as the syncer labels a repository's Addons, so that this
// controller, and not another shard's, reconciles it. An Addon the
// selector would still not select is refused, naming the selector: no
// controller behind this API would reconcile it, or another would, with
// another profile.
func ForShard(a *capstanv1.Addon, cfg controller.Config) error {
	if shard := cfg.Shard(); shard != "" {
		if a.Labels == nil {
			a.Labels = map[string]string{}
		}
		a.Labels[gitops.ShardLabel] = shard
	}
	if !cfg.Selects(a.Labels) {
		return fmt.Errorf("%w: Addon %s/%s would carry the labels %s, and this controller's --watch-label-selector %s requires %s of them, so it would not reconcile it: "+
			"the API and the page label an Addon they create with %s alone, and only when the selector names one shard; "+
			"create it through the API or page of a controller whose selector it meets, or apply it with the labels the selector requires",
			ErrNotSelected, a.Namespace, a.Name, labelsOf(a.Labels), cfg.Selector, unmet(cfg, a.Labels), gitops.ShardLabel)
	}
	return nil
}

// ErrNotSelected says that an Addon to create would not be selected by
// this controller's --watch-label-selector, so no controller behind this
// API might reconcile it.
var ErrNotSelected = errors.New("this controller would not reconcile the Addon")

// labelsOf says an Addon's labels, sorted, or "none".
func labelsOf(addonLabels map[string]string) string {
	if len(addonLabels) == 0 {
		return "none"
	}
	return "{" + labels.Set(addonLabels).String() + "}"
}

// unmet is the requirements of cfg's selector that addonLabels fail.
func unmet(cfg controller.Config, addonLabels map[string]string) string {
	reqs, _ := cfg.Selector.Requirements()
	var out []string
	for _, r := range reqs {
		if !r.Matches(labels.Set(addonLabels)) {
			out = append(out, strconv.Quote(r.String()))
		}
	}
	return strings.Join(out, " and ")
}

// shardOf says which shard an Addon's labels put it in.
func shardOf(addonLabels map[string]string) string {
	if shard, ok := addonLabels[gitops.ShardLabel]; ok {
		return fmt.Sprintf("has the label %s=%s", gitops.ShardLabel, shard)
	}
	return "has no " + gitops.ShardLabel + " label"
}

// ErrBadPatch says that a spec patch is not a JSON merge patch of a valid
// spec.
var ErrBadPatch = errors.New("the spec patch is not valid")

// PatchedSpec returns a copy of a with the JSON merge patch specPatch
// applied to its spec: the Addon a would be once Edit applied it, written
// nowhere, so a writer can check it first.
func PatchedSpec(a *capstanv1.Addon, specPatch []byte) (*capstanv1.Addon, error) {
	out := a.DeepCopy()
	trimmed := bytes.TrimSpace(specPatch)
	if len(trimmed) == 0 {
		return out, nil
	}
	// NOTE: a merge patch that is not an object replaces the whole
	// document: null would wipe the spec, and the API server's answer to
	// the empty spec would not say why.
	if trimmed[0] != '{' {
		return nil, fmt.Errorf(`%w: it is %s, not a JSON object; send {"spec": {...}} with only the fields to change (set a field to null to remove it), or leave "spec" out to keep the spec as it is`, ErrBadPatch, describeJSON(trimmed))
	}
	// NOTE: JSON is UTF-8. A key or value with other bytes would be kept
	// raw in spec.values and read back replaced, so that the same edit
	// gives another spec each time it is applied.
	if !utf8.Valid(specPatch) {
		return nil, fmt.Errorf("%w: the patch is not valid UTF-8; send its text encoded as UTF-8", ErrBadPatch)
	}
	orig, err := json.Marshal(a.Spec)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(orig, specPatch)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPatch, err)
	}
	// NOTE: decoded case-sensitively, as the API server reads the spec:
	// encoding/json would take {"DeletionPolicy":"Delete"} as the
	// deletionPolicy field, or, next to the current deletionPolicy, keep
	// whichever of the two comes last.
	var spec capstanv1.AddonSpec
	if err := strictjson.Unmarshal(merged, &spec); err != nil {
		var unknown *strictjson.UnknownField
		if errors.As(err, &unknown) {
			unknown.Path = "spec." + unknown.Path
		}
		return nil, fmt.Errorf("%w: %w", ErrBadPatch, err)
	}
	out.Spec = spec
	return out, nil
}

// describeJSON names the kind of a JSON value by its first byte.
func describeJSON(v []byte) string {
	switch v[0] {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// Edit changes an Addon's spec with a JSON merge patch and, when given,
// writes secret inputs into a new create-only values Secret that replaces
// the valuesFrom entries of their targetPaths. The write carries the
// resourceVersion that was read, so a concurrent change is a conflict, not
// a lost edit, and the new Secret of a refused edit is deleted again. Like
// every spec change, it makes a new plan, which a manual-sync add-on waits
// to have approved.
func Edit(ctx context.Context, c client.Client, key client.ObjectKey, specPatch []byte, inputs map[string]string) (*capstanv1.Addon, error) {
	return EditSeen(ctx, c, key, Seen{}, specPatch, inputs)
}

// ErrChanged says that an Addon is not as the person saw it: its spec
// changed since (a newer generation), or it is another Addon of the same
// name (a new UID).
var ErrChanged = errors.New("the Addon changed since it was read")

// Seen is the version of an Addon that a person's change starts from: a
// form shows an Addon, and the change it sends is made only to that Addon
// with that spec. Its zero value checks nothing.
//
// NOTE: the spec's generation, not the resourceVersion: the controller
// writes the status on every reconcile, which moves the resourceVersion,
// and a form open for a minute would always be refused. A spec change, by
// anyone, moves the generation.
type Seen struct {
	// UID is the Addon's UID; any when empty.
	UID types.UID
	// Generation is the Addon's metadata.generation; any when zero.
	Generation int64
}

// Check says whether a is the Addon that was seen, with the spec that was
// seen; the error wraps ErrChanged and says what to do.
func (s Seen) Check(a *capstanv1.Addon) error {
	key := client.ObjectKeyFromObject(a)
	switch {
	case s.UID != "" && a.UID != s.UID:
		return fmt.Errorf("addon %s: %w: it was deleted and created again, and this is a new Addon of the same name; look at it again, nothing was changed", key, ErrChanged)
	case s.Generation != 0 && a.Generation != s.Generation:
		return fmt.Errorf("addon %s: %w: its spec is at generation %d, and the change was made to generation %d; look at it again, nothing was changed", key, ErrChanged, a.Generation, s.Generation)
	}
	return nil
}

// getSeen reads the Addon that seen names, refusing with ErrChanged one
// that changed since it was seen (Seen.Check).
func getSeen(ctx context.Context, c client.Client, key client.ObjectKey, seen Seen) (*capstanv1.Addon, error) {
	a, err := Get(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if err := seen.Check(a); err != nil {
		return nil, err
	}
	return a, nil
}

// addSecretInputs writes the secret inputs, when given, into a new Secret
// of changed's and points changed's spec.valuesFrom at it. It returns the
// Secret's references, which a refused write of changed deletes again
// (dropSecretInputs).
func addSecretInputs(ctx context.Context, c client.Client, changed *capstanv1.Addon, inputs map[string]string) ([]capstanv1.ValuesReference, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	refs, err := values.WriteSecretInputs(ctx, c, changed, inputs)
	if err != nil {
		return nil, err
	}
	changed.Spec.ValuesFrom = replaceTargets(changed.Spec.ValuesFrom, refs)
	return refs, nil
}

// EditSeen is Edit of the Addon that seen names, as it was seen: an Addon
// whose spec changed since, or that is another Addon of the same name, is
// refused with ErrChanged, and nothing is written. The patch is locked to
// the resourceVersion of the Addon that passed that check.
func EditSeen(ctx context.Context, c client.Client, key client.ObjectKey, seen Seen, specPatch []byte, inputs map[string]string) (*capstanv1.Addon, error) {
	a, err := getSeen(ctx, c, key, seen)
	if err != nil {
		return nil, err
	}
	changed, err := PatchedSpec(a, specPatch)
	if err != nil {
		return nil, err
	}
	refs, err := addSecretInputs(ctx, c, changed, inputs)
	if err != nil {
		return nil, err
	}
	if err := beforeWrite(ctx); err != nil {
		return nil, dropSecretInputs(ctx, c, key.Namespace, refs, fmt.Errorf("editing addon %s: %w", key, err))
	}
	if err := c.Patch(ctx, changed, client.MergeFromWithOptions(a, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, dropSecretInputs(ctx, c, key.Namespace, refs, fmt.Errorf("editing addon %s: %w", key, err))
	}
	if len(refs) > 0 {
		dropReplacedSecretInputs(ctx, c, a, changed)
	}
	return changed, nil
}

// ReplaceValues sets an Addon's spec.values to vals, whole, and, when
// given, writes secret inputs as Edit does, on the Addon that seen names as
// it was seen: an Addon whose spec changed since, or that is another Addon
// of the same name, is refused with ErrChanged, and nothing is written.
// Unlike Edit's merge patch, in which a null deletes a key, the nulls of
// vals stay in spec.values, where they delete the chart's defaults as
// Helm's key: null does. Empty vals remove spec.values.
//
// NOTE: a JSON Patch that tests the UID and the generation that passed the
// check, not the resourceVersion: the controller writes the status on
// every reconcile, which would refuse the write for nothing, and any spec
// change moves the generation.
func ReplaceValues(ctx context.Context, c client.Client, key client.ObjectKey, seen Seen, vals map[string]any, inputs map[string]string) (*capstanv1.Addon, error) {
	a, err := getSeen(ctx, c, key, seen)
	if err != nil {
		return nil, err
	}
	changed := a.DeepCopy()
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	ops := []op{{"test", "/metadata/uid", a.UID}, {"test", "/metadata/generation", a.Generation}}
	switch {
	case len(vals) > 0:
		raw, err := json.Marshal(vals)
		if err != nil {
			return nil, fmt.Errorf("%w: the values are not JSON: %v", ErrBadPatch, err)
		}
		changed.Spec.Values = &apiextensionsv1.JSON{Raw: raw}
		ops = append(ops, op{"add", "/spec/values", json.RawMessage(raw)})
	case a.Spec.Values != nil:
		changed.Spec.Values = nil
		ops = append(ops, op{Op: "remove", Path: "/spec/values"})
	}
	refs, err := addSecretInputs(ctx, c, changed, inputs)
	if err != nil {
		return nil, err
	}
	if len(refs) > 0 {
		ops = append(ops, op{"add", "/spec/valuesFrom", changed.Spec.ValuesFrom})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return writePatch(ctx, c, key, a, changed, patch, refs, Seen{UID: a.UID, Generation: a.Generation}.Check)
}

// writePatch sends patch, a JSON Patch that tests what was read, to make
// the Addon key into changed. A test that failed is the API server's 422,
// which says only that a value differed: when the patch is refused, the
// Addon read again is given to stale, whose error says that it changed
// meanwhile and what to do. The API server's answer stays wrapped in the
// error, and the Secret of the secret inputs refs name is deleted again.
// Once written, the values Secrets of secret inputs that changed replaced
// are deleted (dropReplacedSecretInputs).
func writePatch(ctx context.Context, c client.Client, key client.ObjectKey, read, changed *capstanv1.Addon, patch []byte,
	refs []capstanv1.ValuesReference, stale func(now *capstanv1.Addon) error) (*capstanv1.Addon, error) {
	if err := beforeWrite(ctx); err != nil {
		return nil, dropSecretInputs(ctx, c, key.Namespace, refs, fmt.Errorf("editing addon %s: %w", key, err))
	}
	if err := c.Patch(ctx, changed, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		if now, gerr := Get(ctx, c, key); gerr == nil {
			if serr := stale(now); serr != nil {
				err = fmt.Errorf("%w (%w)", serr, err)
			}
		}
		return nil, dropSecretInputs(ctx, c, key.Namespace, refs, fmt.Errorf("editing addon %s: %w", key, err))
	}
	if len(refs) > 0 {
		dropReplacedSecretInputs(ctx, c, read, changed)
	}
	return changed, nil
}

// Update changes an Addon's spec.values, spec.valuesFrom and spec.chart's
// version, digest and oci with change and, when given, writes secret
// inputs as Edit does. It writes them with a JSON Patch of those fields
// alone: unlike Edit's merge patch, in which a null deletes a key, the
// nulls that change leaves in spec.values stay there, where they delete
// the chart's defaults as Helm's --set key=null does. The patch tests the
// resourceVersion that was read, so a concurrent change is a conflict,
// not a lost edit, and the new Secret of a refused edit is deleted again.
//
// NOTE: not an update of the whole object: the Addon is read into this
// binary's types, which drop the fields of a newer Capstan's CRDs, and
// written back whole it would lose them (health checks, windows, patches
// a CLI older than the cluster does not know). A change to any other
// field is refused, as the patch would not write it.
func Update(ctx context.Context, c client.Client, key client.ObjectKey, change func(*capstanv1.Addon) error, inputs map[string]string) (*capstanv1.Addon, error) {
	a, err := Get(ctx, c, key)
	if err != nil {
		return nil, err
	}
	changed := a.DeepCopy()
	if err := change(changed); err != nil {
		return nil, err
	}
	// NOTE: checked before the secret inputs make their Secret, and
	// built again after, with the valuesFrom entries that name it.
	if _, err := updatePatch(a, changed); err != nil {
		return nil, err
	}
	refs, err := addSecretInputs(ctx, c, changed, inputs)
	if err != nil {
		return nil, err
	}
	patch, err := updatePatch(a, changed)
	if err != nil {
		return nil, dropSecretInputs(ctx, c, key.Namespace, refs, unsent{err})
	}
	return writePatch(ctx, c, key, a, changed, patch, refs, func(now *capstanv1.Addon) error {
		if now.ResourceVersion == a.ResourceVersion {
			return nil
		}
		return apierrors.NewConflict(capstanv1.GroupVersion.WithResource("addons").GroupResource(), key.Name,
			errors.New("it changed since it was read: run the command again"))
	})
}

// updatePatch is the JSON Patch (RFC 6902) that makes read into changed,
// for Update: a test of read's resourceVersion, then an add or a remove of
// each of spec.values, spec.valuesFrom and spec.chart's version, digest
// and oci that differs. A difference in any other field is an error.
func updatePatch(read, changed *capstanv1.Addon) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	ops := []op{{"test", "/metadata/resourceVersion", read.ResourceVersion}}
	set := func(path string, differs, empty bool, value any) {
		switch {
		case !differs:
		case empty:
			ops = append(ops, op{Op: "remove", Path: path})
		default:
			ops = append(ops, op{"add", path, value})
		}
	}
	var oldValues, newValues []byte
	if read.Spec.Values != nil {
		oldValues = read.Spec.Values.Raw
	}
	if changed.Spec.Values != nil {
		newValues = changed.Spec.Values.Raw
	}
	set("/spec/values", !bytes.Equal(oldValues, newValues), len(newValues) == 0, json.RawMessage(newValues))
	set("/spec/valuesFrom", !apiequality.Semantic.DeepEqual(read.Spec.ValuesFrom, changed.Spec.ValuesFrom), len(changed.Spec.ValuesFrom) == 0, changed.Spec.ValuesFrom)
	rest := changed.DeepCopy()
	rest.Spec.Values, rest.Spec.ValuesFrom = read.Spec.Values, read.Spec.ValuesFrom
	if old, now := read.Spec.Chart, changed.Spec.Chart; old != nil && now != nil {
		set("/spec/chart/version", old.Version != now.Version, now.Version == "", now.Version)
		set("/spec/chart/digest", old.Digest != now.Digest, now.Digest == "", now.Digest)
		set("/spec/chart/oci", old.OCI != now.OCI, now.OCI == "", now.OCI)
		rest.Spec.Chart.Version, rest.Spec.Chart.Digest, rest.Spec.Chart.OCI = old.Version, old.Digest, old.OCI
	}
	if !apiequality.Semantic.DeepEqual(read, rest) {
		return nil, fmt.Errorf("addon %s/%s: the edit changes more than spec.values, spec.valuesFrom and spec.chart's version, digest and oci, which are all it may write", read.Namespace, read.Name)
	}
	return json.Marshal(ops)
}

// Approval is a sync request that approves one plan.
type Approval struct {
	// Hash is the approved plan's hash.
	Hash string
	// SyncRequest is the raised spec.syncRequest.
	SyncRequest int64
	// Summary says what the plan in status changes, when the approval took
	// the hash from status.
	Summary string
}

// Errors of an approval that the person must resolve by reviewing again.
var (
	// ErrNoPlan says that an Addon has no plan in status to approve yet.
	ErrNoPlan = errors.New("no plan in status yet")
	// ErrStalePlan says that the reviewed plan is no longer the Addon's:
	// the spec or what runs changed since.
	ErrStalePlan = errors.New("the reviewed plan is not the current plan")
	// ErrPlanBlocked says that the plan has guardrail violations, values
	// errors, an object the dry run refused or an object another add-on
	// holds, which no approval can override (Blocked).
	ErrPlanBlocked = errors.New("the plan is blocked")
	// ErrSuspended says that the Addon is suspended: it is only planned,
	// and an approval of it would wait until some later resume.
	ErrSuspended = errors.New("a suspended add-on applies nothing")
	// ErrProfileChanged says that the controller holds the Addon's sync
	// because its namespace is no longer trusted (ProfileChanged): its
	// plan was computed under the cluster profile, and is approved only
	// once the namespace is trusted again.
	ErrProfileChanged = errors.New("its sync is held since its profile changed")
)

// RefuseHeld is the refusal of an approval of a, the Addon key names,
// while the controller holds its sync because it was installed under the
// cluster profile and its namespace is no longer trusted (Ready reason
// ProfileChanged), or nil. It quotes the hold's message, which says what
// to do.
//
// NOTE: the plan in status is the one computed before the trust changed,
// and nothing is planned while the hold lasts. An approval of it would be
// left behind to apply whenever the trust came back, long after anyone
// looked at the add-on; the controller uses up a sync request it finds
// while it holds one, so the approval would be lost anyway.
func RefuseHeld(a *capstanv1.Addon, key client.ObjectKey) error {
	c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady)
	if c == nil || c.Reason != controller.ReasonProfileChanged {
		return nil
	}
	return fmt.Errorf("addon %s is Blocked (%s), and %w: no plan of it is approved until the namespace is trusted again and a new plan is reviewed. %s",
		key, c.Reason, ErrProfileChanged, c.Message)
}

// RefuseSuspended is the refusal of a sync (an approval) of a, the Addon
// key names, when it is suspended, or nil when it is not. It says how to resume it: by
// Install, which approves exactly the reviewed plan in the same write, or,
// for an Addon that git manages, by a commit. For a plan that no approval
// could apply (Blocked) it says why, and that resume lets the plan that
// follows the fix apply.
//
// flags end each command it names: the CLI gives its --kubeconfig and
// --context, so that a pasted command acts on the same cluster; other
// callers give "".
//
// NOTE: a suspended add-on is only planned, so the sync would wait in vain,
// and the approval left behind would apply the plan at some later resume
// that meant no sync.
func RefuseSuspended(a *capstanv1.Addon, key client.ObjectKey, flags string) error {
	return refuseSuspended(a, key, flags, a.Labels[gitops.ManagedByGitLabel] != "")
}

// RefuseSuspendedOutsideGit is RefuseSuspended for a caller that has read
// the AddonRepository of a's managed-by-git label and found it gone: no
// repository manages a any more, so it is resumed in the cluster, by
// Install, as an Addon without the label is, and the refusal says so.
//
// NOTE: a commit to a repository that is gone resumes nothing, and Install
// of such an Addon is not refused, so pointing to the commit would leave
// the person with no way that works.
func RefuseSuspendedOutsideGit(a *capstanv1.Addon, key client.ObjectKey) error {
	err := refuseSuspended(a, key, "", false)
	if err == nil || errors.Is(err, ErrProfileChanged) {
		return err
	}
	gone := fmt.Sprintf("its AddonRepository %s is gone, so no repository manages it any more", a.Labels[gitops.ManagedByGitLabel])
	p := a.Status.Plan
	switch {
	case p == nil || p.Generation != a.Generation:
		// NOTE: get --diff prints no install command for an Addon with
		// the label, so refuseSuspended's pointer to it is not given.
		return fmt.Errorf("addon %s is suspended, and %w; %s: once the controller has planned its spec, install it in the cluster (the API's POST …/install with the plan's hash, or the page's Install)",
			key, ErrSuspended, gone)
	case Blocked(p) != nil:
		// NOTE: install refuses a blocked plan: resume is what works.
		return fmt.Errorf("%w; %s: resume it in the cluster (the API's POST …/resume, or the page's Resume)", err, gone)
	}
	return fmt.Errorf("%w; %s: install it in the cluster (the API's POST …/install with the plan's hash, or the page's Install)", err, gone)
}

// refuseSuspended is RefuseSuspended; inGit says whether a repository
// manages a, which is then resumed by a commit.
func refuseSuspended(a *capstanv1.Addon, key client.ObjectKey, flags string, inGit bool) error {
	if !a.Spec.Suspend {
		return nil
	}
	if err := RefuseHeld(a, key); err != nil {
		// NOTE: install would be refused as well, so it is not offered.
		return err
	}
	if repo := a.Labels[gitops.ManagedByGitLabel]; inGit && repo != "" {
		return fmt.Errorf("addon %s is suspended, and %w; git manages it (AddonRepository %s): resume it by a commit with `capstan addon resume %s --gitops URL`, then sync it",
			key, ErrSuspended, repo, key.Name)
	}
	if p := a.Status.Plan; p != nil && p.Generation == a.Generation {
		// NOTE: a blocked plan is refused by install as well, and get
		// prints no command for it: resume, which approves nothing, is
		// what lets the plan that follows the fix apply.
		if err := Blocked(p); err != nil {
			return fmt.Errorf("addon %s is suspended, and %w, and its plan cannot be installed: %w; once the cause is fixed, `capstan addon resume %s -n %s%s` lets the plan that follows apply",
				key, ErrSuspended, err, key.Name, key.Namespace, flags)
		}
		return fmt.Errorf("addon %s is suspended, and %w: `capstan addon install %s -n %s --plan %s%s` resumes it and applies exactly its plan",
			key, ErrSuspended, key.Name, key.Namespace, p.Hash, flags)
	}
	return fmt.Errorf("addon %s is suspended, and %w: `capstan addon get %s -n %s --diff%s` shows its plan and the install command that resumes it and applies exactly that plan",
		key, ErrSuspended, key.Name, key.Namespace, flags)
}

// Approve approves exactly the plan with hash and raises spec.syncRequest.
// With an empty hash it approves the plan in status. It refuses a suspended
// Addon (RefuseSuspended: Install is its approval), a plan that was written
// for an older generation (the person has not seen the plan that would
// apply), a hash that is not the current plan's, and a plan that no
// approval could apply (Blocked): violations, values errors, a failed dry
// run, another add-on's object. It refuses an Addon whose sync the
// controller holds since its profile changed (RefuseHeld). If the plan
// still changes before the controller applies it, nothing is applied and
// the Addon says why.
func Approve(ctx context.Context, c client.Client, key client.ObjectKey, hash string) (Approval, error) {
	return approve(ctx, c, key, hash, false)
}

// Install installs a suspended add-on with exactly the reviewed plan: in one
// write it clears spec.suspend and approves hash, so that the controller
// applies that plan and no other. It is refused as Approve is, except that
// the Addon may be suspended: a blocked plan is refused too, and the Addon
// stays suspended. (Resume, which approves nothing, lets a plan apply once
// its cause is fixed.)
func Install(ctx context.Context, c client.Client, key client.ObjectKey, hash string) (Approval, error) {
	return approve(ctx, c, key, hash, true)
}

// approve approves the plan with hash; resume clears spec.suspend in the
// same write, and without it a suspended Addon is refused.
func approve(ctx context.Context, c client.Client, key client.ObjectKey, hash string, resume bool) (Approval, error) {
	a, err := Get(ctx, c, key)
	if err != nil {
		return Approval{}, err
	}
	// NOTE: before the suspend check, whose refusal offers an install
	// that this one refuses too.
	if err := RefuseHeld(a, key); err != nil {
		return Approval{}, err
	}
	if !resume {
		// NOTE: the patch below carries the resourceVersion read here, so
		// an Addon suspended after this check refuses the write.
		if err := RefuseSuspended(a, key, ""); err != nil {
			return Approval{}, err
		}
	}
	p, err := Reviewable(a, hash)
	if err != nil {
		return Approval{}, fmt.Errorf("addon %s: %w", key, err)
	}
	out := Approval{Hash: p.Hash, Summary: plan.String(p)}
	patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if resume {
		a.Spec.Suspend = false
	}
	a.Spec.ApprovedPlan = p.Hash
	// NOTE: above the last request handled, not one above the spec's: an
	// older manifest applied again (as GitOps does) can leave the spec's
	// below it, and one more would still not be a new request.
	a.Spec.SyncRequest = max(a.Spec.SyncRequest, a.Status.LastSyncRequest) + 1
	if err := c.Patch(ctx, a, patch); err != nil {
		return Approval{}, fmt.Errorf("approving the plan of addon %s: %w", key, err)
	}
	out.SyncRequest = a.Spec.SyncRequest
	return out, nil
}

// Reviewable returns the plan in status if hash may approve it: the
// controller does not hold the add-on since its profile changed
// (RefuseHeld), the plan was written for the current generation, it is
// hash (or hash is empty), and nothing blocks it.
func Reviewable(a *capstanv1.Addon, hash string) (*capstanv1.Plan, error) {
	if err := RefuseHeld(a, client.ObjectKeyFromObject(a)); err != nil {
		return nil, err
	}
	p := a.Status.Plan
	switch {
	case p == nil:
		if c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); c != nil && a.Status.Phase == capstanv1.PhaseFailed {
			// A failure before the plan (a fetch, a render) leaves none to
			// come: waiting would not help.
			return nil, fmt.Errorf("%w: the add-on failed before it could be planned (%s: %s); fix that, and a plan follows", ErrNoPlan, c.Reason, c.Message)
		}
		return nil, fmt.Errorf("%w; wait for the controller, which writes it in status", ErrNoPlan)
	case p.Generation != a.Generation:
		return nil, fmt.Errorf("%w: the plan in status was written for generation %d, but the Addon is at %d; wait for the new plan and review it", ErrStalePlan, p.Generation, a.Generation)
	case hash != "" && hash != p.Hash:
		return nil, fmt.Errorf("%w: you reviewed %s, and the plan is now %s; review the new plan", ErrStalePlan, hash, p.Hash)
	}
	if err := Blocked(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Blocked says why no approval of p could ever apply it, or nil: the
// controller's own gates that no approval passes (plan.Unapprovable) stop
// it, by guardrail violations, values errors, an object the API server
// refused in the dry run, or an object another add-on holds. The error
// wraps ErrPlanBlocked.
//
// NOTE: the controller's gates themselves, so that what a person may
// approve cannot drift from what the controller would apply. A dry run's
// error is part of the plan's hash: an approval of such a plan would stay
// behind once the cause is fixed, and hold the plan that follows as stale.
func Blocked(p *capstanv1.Plan) error {
	s := plan.State{Plan: p}
	for _, gate := range plan.Unapprovable {
		if v, stopped := gate(s); stopped {
			return fmt.Errorf("%w (%s): %s; no approval of this plan could ever apply it: fix that, then review the plan that follows", ErrPlanBlocked, v.Reason, v.Message)
		}
	}
	return nil
}

// SetSuspend suspends an Addon (plan only: it is fetched, rendered and
// previewed, and nothing is applied) or resumes it. An Addon that git
// manages is suspended by a commit instead (gitops.Writer), or the syncer
// would undo this.
func SetSuspend(ctx context.Context, c client.Client, key client.ObjectKey, suspend bool) error {
	a, err := Get(ctx, c, key)
	if err != nil {
		return err
	}
	// NOTE: the patch is sent even when nothing changes, so that the API
	// server checks the caller's right to change the Addon every time.
	patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
	a.Spec.Suspend = suspend
	if err := c.Patch(ctx, a, patch); err != nil {
		return fmt.Errorf("setting suspend to %v on addon %s: %w", suspend, key, err)
	}
	return nil
}

// ErrPaused is a refresh or a test of a paused Addon: it does nothing
// while the capstan.dev/paused annotation is "true".
var ErrPaused = errors.New("the Addon is paused (annotation capstan.dev/paused=true), and a paused Addon fetches, applies and tests nothing; remove the annotation, then ask again")

// ErrBeingRemoved is a refresh or a test of an Addon that is being
// deleted.
var ErrBeingRemoved = errors.New("the Addon is being removed: there is nothing to refresh or test")

// Refresh asks the controller to reconcile an Addon at once and to read its
// source again past every cache: a chart repository's index (a version
// range's newest version), a chart pushed again under the same OCI tag or
// URL, a git branch. It writes the capstan.dev/refresh annotation with
// now's time, which it returns: status.lastHandledRefresh holds that value
// once a reconcile handled the request, and that reconcile's outcome is the
// refresh's. A refresh changes no gate: a manual-sync add-on still waits for
// its new plan's approval, and a suspended one only plans.
func Refresh(ctx context.Context, c client.Client, key client.ObjectKey, now time.Time) (string, error) {
	return request(ctx, c, key, now, "a refresh", capstanv1.RefreshAnnotation, func(a *capstanv1.Addon) string { return a.Status.LastHandledRefresh })
}

// RequestTest asks the controller to run the chart's test hooks once, as
// `helm test` runs them, once every object the add-on runs is Current,
// whatever spec.test says. It writes the capstan.dev/test annotation with
// now's time, which it returns: status.lastTest.request holds that value
// once the tests ran, with their result.
func RequestTest(ctx context.Context, c client.Client, key client.ObjectKey, now time.Time) (string, error) {
	return request(ctx, c, key, now, "a test", capstanv1.TestAnnotation, func(a *capstanv1.Addon) string {
		if t := a.Status.LastTest; t != nil {
			return t.Request
		}
		return ""
	})
}

// request writes a new value, now's time, of an annotation that asks the
// controller for something once; handled is the value status says it
// handled last.
func request(ctx context.Context, c client.Client, key client.ObjectKey, now time.Time, what, annotation string, handled func(*capstanv1.Addon) string) (string, error) {
	a, err := Get(ctx, c, key)
	if err != nil {
		return "", err
	}
	switch {
	case !a.DeletionTimestamp.IsZero():
		return "", fmt.Errorf("addon %s: %w", key, ErrBeingRemoved)
	case a.Annotations[capstanv1.PausedAnnotation] == "true":
		return "", fmt.Errorf("addon %s: %w", key, ErrPaused)
	}
	req := now.UTC().Format(time.RFC3339Nano)
	if req == a.Annotations[annotation] || req == handled(a) {
		req += "+1" // NOTE: the same instant twice would not be a new request.
	}
	patch := client.MergeFrom(a.DeepCopy())
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	a.Annotations[annotation] = req
	if err := c.Patch(ctx, a, patch); err != nil {
		return "", fmt.Errorf("requesting %s of addon %s: %w", what, key, err)
	}
	return req, nil
}

// RemoveOptions say what removing an Addon does besides deleting it.
type RemoveOptions struct {
	// Uninstall removes the software too (the Delete policy), whatever the
	// Addon's deletion policy says.
	Uninstall bool
	// KeepValues hands a restricted add-on's values Secrets and generated
	// values back instead of deleting them, for a later add-on of the same
	// name.
	KeepValues bool
	// UID, when set, removes only the Addon with that UID: a removal asked
	// from an old page never deletes a newer Addon of the same name.
	UID types.UID
}

// ErrNoValuesToKeep is a removal with KeepValues of an add-on of the
// cluster profile: its values Secrets, generated ones included, stay when
// it is removed, so there is nothing to hand back.
var ErrNoValuesToKeep = errors.New("keepValues is for restricted add-ons: this add-on is in the cluster profile, whose values Secrets (generated ones too) stay when it is removed; remove it without keepValues")

// Remove deletes an Addon. The annotations that Uninstall and KeepValues
// set are written before the delete, so the controller's deletion sees
// them; the deletion policy then decides what happens to the software.
// KeepValues on an add-on the controller placed in the cluster profile is
// refused before anything is written, and so is a removal the caller may
// not make: a dry run of the delete asks the API server first.
func Remove(ctx context.Context, c client.Client, key client.ObjectKey, o RemoveOptions) error {
	a, err := Get(ctx, c, key)
	if err != nil {
		return err
	}
	if err := (Seen{UID: o.UID}).Check(a); err != nil {
		return err
	}
	if o.KeepValues && a.Status.Profile == capstanv1.ProfileCluster {
		return fmt.Errorf("addon %s: %w", key, ErrNoValuesToKeep)
	}
	// NOTE: a mark left on an Addon that stays is a trap: a later removal,
	// meant to keep the software, would uninstall it. So the API server
	// judges the delete, with the caller's own rights, before any mark is
	// written.
	if err := c.Delete(ctx, a, client.DryRunAll, client.Preconditions{UID: &a.UID}); err != nil {
		return fmt.Errorf("deleting addon %s: %w", key, err)
	}
	// NOTE: the delete is bound to the object just read, so a removal never
	// deletes a newer Addon of the same name.
	return WithRemovalMarks(ctx, c, a, o, func(ctx context.Context) error {
		// NOTE: a request that went away before the delete was sent
		// removed nothing, so its marks are taken back. Once sent, the
		// delete is not cut short by the caller going away, only by its
		// own bound: an error with no answer then means that the
		// connection was lost, not that the request was cancelled.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("deleting addon %s: the request ended before the delete was sent, so nothing was deleted: %w", key, err)
		}
		deleteCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		err := c.Delete(deleteCtx, a, client.Preconditions{UID: &a.UID})
		var status apierrors.APIStatus
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &status):
			return &unansweredError{fmt.Errorf("deleting addon %s: %w", key, err)}
		}
		return fmt.Errorf("deleting addon %s: %w", key, err)
	})
}

// deleteTimeout bounds the delete of a removal once it is sent.
const deleteTimeout = 30 * time.Second

// unansweredError is a removal's error that came with no answer from the
// API server: the removal may have been made.
type unansweredError struct{ error }

func (e *unansweredError) Unwrap() error { return e.error }

// Unanswered wraps the error of a removal that may have been made all the
// same, such as a commit whose push is in the branch although its answer
// was lost: WithRemovalMarks then keeps the marks.
func Unanswered(err error) error { return &unansweredError{err} }

// WithRemovalMarks writes on a the annotations that o asks for (uninstall,
// keep values), then runs remove, which deletes the Addon or commits its
// removal. If remove fails, the marks this call wrote are taken back, so
// that the Addon does not keep a mark nobody sees; a mark that was there
// before stays. When taking them back fails too, the error says so and
// what to do. The caller checks first that it may remove the Addon.
//
// Only an error that remove wraps with Unanswered keeps the marks: a
// cancelled context or a timeout is a failure like any other, since a
// commit or a delete that was never sent removed nothing, and a mark left
// on an Addon that stays would make a later removal, meant to keep the
// software, uninstall it.
func WithRemovalMarks(ctx context.Context, c client.Client, a *capstanv1.Addon, o RemoveOptions, remove func(context.Context) error) error {
	var set []string
	for _, m := range []struct {
		annotation string
		want       bool
	}{{capstanv1.UninstallAnnotation, o.Uninstall}, {capstanv1.KeepValuesAnnotation, o.KeepValues}} {
		if m.want && a.Annotations[m.annotation] != "true" {
			set = append(set, m.annotation)
		}
	}
	if len(set) == 0 {
		return remove(ctx)
	}
	key := client.ObjectKeyFromObject(a)
	// NOTE: bound to the Addon read by its UID, not its resourceVersion:
	// the controller writes its status often, and a lock on it would fail
	// a removal for nothing.
	marks := func(value any) client.Patch {
		annotations := map[string]any{}
		for _, annotation := range set {
			annotations[annotation] = value
		}
		p, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": a.UID, "annotations": annotations}})
		return client.RawPatch(types.MergePatchType, p)
	}
	var err error
	if perr := c.Patch(ctx, a, marks("true")); perr != nil {
		err = fmt.Errorf("marking addon %s for removal: %w", key, perr)
		if status := apierrors.APIStatus(nil); errors.As(perr, &status) {
			return err
		}
		// NOTE: with no answer (the request went away as the API server
		// wrote the marks), the marks may be on: they are taken back, as
		// after a failed removal, since nothing was removed.
	} else {
		err = remove(ctx)
		var unanswered *unansweredError
		if err == nil || errors.As(err, &unanswered) {
			// NOTE: an error with no answer (a lost connection) may follow a
			// removal that was made: the controller may be reading the marks
			// now, and taking them back would undo what the person asked for.
			return err
		}
	}
	// NOTE: the marks are taken back even when the request that asked for
	// the removal has gone away, and never from an Addon being deleted.
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	live := &capstanv1.Addon{}
	if gerr := c.Get(undoCtx, key, live); gerr == nil && live.DeletionTimestamp != nil {
		return err
	}
	if uerr := c.Patch(undoCtx, a, marks(nil)); uerr != nil {
		return fmt.Errorf("%w; taking back the annotations %v failed too (%v): remove them from the Addon before you remove it again, or the software is handled as they say", err, set, uerr)
	}
	return err
}

// Add creates an Addon suspended, so that it is planned and nothing is
// applied until someone installs the reviewed plan. Secret inputs
// (targetPath to raw string) go first into a new, create-only values Secret
// that the Addon's valuesFrom then names: if the caller may not create
// Secrets, nothing is created at all, and if the Addon cannot be created
// (its name is taken), the Secret is deleted again.
func Add(ctx context.Context, c client.Client, a *capstanv1.Addon, inputs map[string]string) (*capstanv1.Addon, error) {
	a = a.DeepCopy()
	a.Spec.Suspend = true
	var refs []capstanv1.ValuesReference
	if len(inputs) > 0 {
		var err error
		if refs, err = values.WriteSecretInputs(ctx, c, a, inputs); err != nil {
			return nil, err
		}
		a.Spec.ValuesFrom = replaceTargets(a.Spec.ValuesFrom, refs)
	}
	if err := beforeWrite(ctx); err != nil {
		return nil, dropSecretInputs(ctx, c, a.Namespace, refs, fmt.Errorf("creating addon %s/%s: %w", a.Namespace, a.Name, err))
	}
	if err := c.Create(ctx, a); err != nil {
		return nil, dropSecretInputs(ctx, c, a.Namespace, refs, fmt.Errorf("creating addon %s/%s: %w", a.Namespace, a.Name, err))
	}
	return a, nil
}

// unsent is the error of an Addon write that was never sent to the API
// server: no Addon names the Secret made for its secret inputs.
type unsent struct{ error }

func (u unsent) Unwrap() error { return u.error }

// beforeWrite is the error, unsent, of a context that ended before the
// Addon write was sent: an interrupted command or a request gone.
//
// NOTE: checked just before the write, since client-go would fail it
// with the same context error whether it was sent or not.
func beforeWrite(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unsent{fmt.Errorf("stopped before the write was sent: %w", err)}
	}
	return nil
}

// dropSecretInputs deletes the values Secret that this call made for
// secret inputs (refs name it) when the Addon write that was to name it
// failed with err: nothing would name or own it, and it holds secrets. It
// returns err, saying also when the Secret could not be deleted.
//
// NOTE: only when the API server answered the write with a refusal, or
// the write was never sent (unsent). An error with no answer (a
// connection lost, a context that ended during the write) may hide a write
// that was made, and then the Addon names the Secret: the error names the
// Secret, for the person to delete if no Addon names it.
func dropSecretInputs(ctx context.Context, c client.Client, namespace string, refs []capstanv1.ValuesReference, err error) error {
	if len(refs) == 0 {
		return err
	}
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	var status apierrors.APIStatus
	var notSent unsent
	if !errors.As(err, &status) && !errors.As(err, &notSent) {
		return fmt.Errorf("%w; the Secret made for the secret inputs, %s in namespace %s, is left if the write did not reach the API server: "+
			"delete it unless the Addon's spec.valuesFrom names it", err, strings.Join(slices.Compact(names), ", "), namespace)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var left []string
	for _, name := range slices.Compact(names) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		if derr := c.Delete(ctx, secret); derr != nil && !apierrors.IsNotFound(derr) {
			left = append(left, fmt.Sprintf("%s (%v)", name, derr))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("%w; the Secret made for the secret inputs could not be deleted: %s; delete it, since nothing names it", err, strings.Join(left, ", "))
	}
	return err
}

// WriteSecretInputs stores secret inputs (targetPath to raw string) in a
// new, immutable values Secret, and points the Addon's valuesFrom entries
// for those targetPaths at it: existing entries are replaced where they
// stand, new ones are appended. The caller needs only to create Secrets
// and patch Addons; the values are never read back.
func WriteSecretInputs(ctx context.Context, c client.Client, key client.ObjectKey, inputs map[string]string) error {
	a, err := Get(ctx, c, key)
	if err != nil {
		return err
	}
	refs, err := values.WriteSecretInputs(ctx, c, a, inputs)
	if err != nil {
		return err
	}
	read := a.DeepCopy()
	patch := client.MergeFromWithOptions(read, client.MergeFromWithOptimisticLock{})
	a.Spec.ValuesFrom = replaceTargets(a.Spec.ValuesFrom, refs)
	if err := beforeWrite(ctx); err != nil {
		return dropSecretInputs(ctx, c, key.Namespace, refs, fmt.Errorf("pointing addon %s at its new values Secret: %w", key, err))
	}
	if err := c.Patch(ctx, a, patch); err != nil {
		return dropSecretInputs(ctx, c, key.Namespace, refs, fmt.Errorf("pointing addon %s at its new values Secret: %w", key, err))
	}
	dropReplacedSecretInputs(ctx, c, read, a)
	return nil
}

// dropReplacedSecretInputs deletes, once changed is written with new
// secret inputs, the values Secrets that read's spec.valuesFrom named and
// that nothing names any more, of those values.WriteSecretInputs made for
// this Addon (its name prefix and owner labels, and its
// values.SecretInputsAnnotation): a new secret input, a rotated password,
// goes into a new Secret, and the old one would keep the old password in
// the namespace for ever, as the controller cleans values Secrets up in
// the restricted profile alone.
//
// A Secret is kept that changed's valuesFrom or substituteFrom names, or
// that any other Addon of the namespace names in either: in the cluster
// profile any Addon may read any Secret of its namespace, and one Addon
// may share another's password. A git-managed Addon keeps all of them, as
// its definition in git may name one, and its repository's next sync
// writes that definition back. A Secret without the annotation, made by a
// person or by an older Capstan, is kept.
//
// The write stands whatever happens here: what could not be checked or
// deleted is kept, and said through the context's Warn (WithWarn).
//
// NOTE: what runs was rendered from the values already; a plan of the
// new spec reads the new Secret. The delete is bound to the UID and
// resourceVersion read, so a Secret made again since is kept.
func dropReplacedSecretInputs(ctx context.Context, c client.Client, read, changed *capstanv1.Addon) {
	named := map[string]bool{}
	nameAll := func(a *capstanv1.Addon) {
		for _, r := range a.Spec.ValuesFrom {
			if r.Kind == "Secret" {
				named[r.Name] = true
			}
		}
		for _, r := range a.Spec.SubstituteFrom {
			if r.Kind == "Secret" {
				named[r.Name] = true
			}
		}
	}
	nameAll(changed)
	var replaced []string
	for _, r := range read.Spec.ValuesFrom {
		if r.Kind == "Secret" && !named[r.Name] && strings.HasPrefix(r.Name, values.ValuesPrefix(read.Name)) && !slices.Contains(replaced, r.Name) {
			replaced = append(replaced, r.Name)
		}
	}
	if len(replaced) == 0 {
		return
	}
	key := client.ObjectKeyFromObject(read)
	if _, ok := read.Labels[gitops.ManagedByGitLabel]; ok {
		warn(ctx, fmt.Sprintf("addon %s is managed by git, whose definition may name the values Secrets it replaced: %s kept; delete them once git's definition names none of them",
			key, strings.Join(replaced, ", ")))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var all capstanv1.AddonList
	if err := c.List(ctx, &all, client.InNamespace(read.Namespace)); err != nil {
		warn(ctx, fmt.Sprintf("addon %s: the values Secrets it replaced (%s) are kept, as the Addons of namespace %s could not be listed to check that none names them (%v); delete them once none does",
			key, strings.Join(replaced, ", "), read.Namespace, err))
		return
	}
	for i := range all.Items {
		if all.Items[i].UID != read.UID {
			nameAll(&all.Items[i])
		}
	}
	owner := read.OwnerLabels()
	var left []string
	for _, name := range replaced {
		if named[name] {
			continue
		}
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: read.Namespace, Name: name}, secret); err != nil {
			if !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s (%v)", name, err))
			}
			continue
		}
		if secret.Annotations[values.SecretInputsAnnotation] != "true" ||
			secret.Labels[capstanv1.AddonLabel] != owner[capstanv1.AddonLabel] || secret.Labels[capstanv1.AddonNamespaceLabel] != owner[capstanv1.AddonNamespaceLabel] {
			continue
		}
		uid, rv := secret.UID, secret.ResourceVersion
		if err := c.Delete(ctx, secret, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
			// NOTE: an admission policy's refusal of a Secret's delete may
			// quote the old value.
			left = append(left, fmt.Sprintf("%s (%s)", name, apply.SecretRefusal(err)))
		}
	}
	if len(left) > 0 {
		warn(ctx, fmt.Sprintf("addon %s: the values Secrets of secret inputs it replaced could not be deleted, and still hold the old values: %s; delete them, since nothing names them",
			key, strings.Join(left, "; ")))
	}
}

type warnKey struct{}

// WithWarn returns a context through which the writers of this package
// report, to fn, what went wrong after a write that stands: a values
// Secret of replaced secret inputs that is kept. Without it, they log it.
func WithWarn(ctx context.Context, fn func(string)) context.Context {
	return context.WithValue(ctx, warnKey{}, fn)
}

// warn reports msg through the function of WithWarn, or the logger.
func warn(ctx context.Context, msg string) {
	if fn, ok := ctx.Value(warnKey{}).(func(string)); ok && fn != nil {
		fn(msg)
		return
	}
	log.FromContext(ctx).Info("Secret of replaced secret inputs kept", "reason", msg)
}

// replaceTargets puts each of refs in place of the entry with its
// targetPath, or at the end.
func replaceTargets(from, refs []capstanv1.ValuesReference) []capstanv1.ValuesReference {
	out := append([]capstanv1.ValuesReference(nil), from...)
	for _, r := range refs {
		replaced := false
		for i := range out {
			if out[i].TargetPath != "" && out[i].TargetPath == r.TargetPath {
				out[i], replaced = r, true
			}
		}
		if !replaced {
			out = append(out, r)
		}
	}
	return out
}

// SecretValues names, dotted (auth.password), the values of spec.values
// that the chart's schema marks writeOnly: secret inputs, which the
// controller refuses in spec.values, where anyone who may view the Addon
// reads them. A writer checks before it writes, as the value would be
// stored, and readable, before the controller Blocks the Addon. The chart
// is fetched with fetcher, without credentials; an error says it could
// not be checked, but for an *values.InvalidError: the chart was read,
// and the values break a rule that holds whatever the writer does (more
// secret values than Capstan hides), which comes with the paths found.
// A git folder has no values, and no check.
// Each path comes with its segments, as values.Lookup takes them.
func SecretValues(ctx context.Context, fetcher *source.Fetcher, spec capstanv1.AddonSpec) ([]values.SecretInputPath, error) {
	// NOTE: with no values before, none is held: every one is set.
	set, _, err := SecretValuesChanged(ctx, func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
		return fetcher.Fetch(ctx, spec, nil)
	}, spec, nil)
	return set, err
}

// ChartFetch fetches the chart of spec, which names no credentials.
type ChartFetch func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error)

// SecretInputNames returns the names of paths as a writer's message says
// them: the targetPath of each that one names, which secretInputs and
// --secret-input take back, and the bare JSON pointer of each with an empty
// key, which none can name; emptyKeys lists those pointers, to be given as
// EmptyKeySecrets says.
func SecretInputNames(paths []values.SecretInputPath) (names, emptyKeys []string) {
	for _, p := range paths {
		if p.Named {
			names = append(names, p.Name)
			continue
		}
		// NOTE: the Name of a path no targetPath can name carries advice
		// after its pointer; the bare pointer is written again.
		ptr, _ := values.TargetPathIn(nil, p.Segments)
		names = append(names, ptr)
		emptyKeys = append(emptyKeys, ptr)
	}
	return names, emptyKeys
}

// SecretValuesChanged is SecretValues of spec against the values stored
// before, old (nil for a new Addon): set names the writeOnly values that
// spec.values sets or changes, which a writer refuses; held those that old
// holds already, unchanged, which a writer lets through, saying so, as
// refusing them would make the Addon impossible to edit. Nothing is
// fetched when spec.values is empty or the same as old. Each path comes
// with its segments and whether a targetPath names it (SecretInputNames).
func SecretValuesChanged(ctx context.Context, fetch ChartFetch, spec capstanv1.AddonSpec, old *apiextensionsv1.JSON) (set, held []values.SecretInputPath, err error) {
	return NewChartCheck(fetch).SecretValuesChanged(ctx, spec, old)
}

// A ChartCheck holds the chart of one write and its schema for each of the
// write's checks (SecretValuesChanged, UnknownSecretInputs): the chart is
// fetched once, and the schema one check compiled serves the others, so
// that a write costs one access review, one fetch and one compile. It is
// for one write, by one goroutine.
type ChartCheck struct {
	fetch ChartFetch
	// chart is the chart fetched, art and err what its fetch gave.
	chart   *capstanv1.ChartSource
	fetched bool
	art     *source.Artifact
	err     error
	// schemas holds the schemas compiled for the chart, by the spec.values
	// (as given) they were resolved for.
	schemas map[string]*values.Schema
	// compiles counts the schemas compiled (Compiles).
	compiles int
	// layers reads the valuesFrom layers composed over spec.values
	// (Layers), once, into from.
	layers func(context.Context) []values.Layer
	from   []values.Layer
	read   bool
}

// Layers sets how c's checks read the valuesFrom layers they compose over
// spec.values, in the controller's order (values.Compose): the ConfigMaps
// the writer may read (values.ReadConfigMaps), so that a writeOnly that
// one of them selects (an if/then on mode: ldap) is judged as the
// controller judges it. They are read once, and only when a check
// composes. It returns c.
func (c *ChartCheck) Layers(read func(context.Context) []values.Layer) *ChartCheck {
	c.layers = read
	return c
}

// fromLayers are the layers Layers reads, read once.
func (c *ChartCheck) fromLayers(ctx context.Context) []values.Layer {
	if !c.read && c.layers != nil {
		c.from, c.read = c.layers(ctx), true
	}
	return c.from
}

// Compiles is how many times c compiled the chart's schema: once for a
// write whose checks read the same values.
func (c *ChartCheck) Compiles() int { return c.compiles }

// NewChartCheck returns a ChartCheck that fetches with fetch.
func NewChartCheck(fetch ChartFetch) *ChartCheck {
	return &ChartCheck{fetch: fetch, schemas: map[string]*values.Schema{}}
}

// Fetch is the ChartFetch of c: the chart of spec, fetched once.
func (c *ChartCheck) Fetch(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
	if !c.fetched || !apiequality.Semantic.DeepEqual(c.chart, spec.Chart) {
		c.chart, c.fetched = spec.Chart.DeepCopy(), true
		c.art, c.err = c.fetch(ctx, capstanv1.AddonSpec{Chart: spec.Chart})
	}
	return c.art, c.err
}

// schemaKey is what ChartCheck.schemas keeps a schema by.
func schemaKey(spec capstanv1.AddonSpec) string {
	if spec.Values == nil {
		return ""
	}
	return string(spec.Values.Raw)
}

// SecretValuesChanged is the package's SecretValuesChanged, with the chart
// c fetches.
func (c *ChartCheck) SecretValuesChanged(ctx context.Context, spec capstanv1.AddonSpec, old *apiextensionsv1.JSON) (set, held []values.SecretInputPath, err error) {
	if spec.Chart == nil || spec.Values == nil || len(bytes.TrimSpace(spec.Values.Raw)) == 0 {
		return nil, nil, nil
	}
	vals := map[string]any{}
	if err := json.Unmarshal(spec.Values.Raw, &vals); err != nil {
		return nil, nil, fmt.Errorf("spec.values is not an object: %w", err)
	}
	if len(vals) == 0 {
		return nil, nil, nil
	}
	before := map[string]any{}
	if old != nil && len(bytes.TrimSpace(old.Raw)) > 0 {
		// NOTE: stored values that cannot be read hold nothing to keep.
		_ = json.Unmarshal(old.Raw, &before)
	}
	if gitops.SameValue(vals, before) {
		return nil, nil, nil
	}
	art, err := c.Fetch(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	if !art.IsChart() {
		return nil, nil, nil
	}
	c.compiles++
	res, err := values.Compose(values.Inputs{Chart: art.Chart.Chart, Sources: values.Sources{Spec: vals, From: c.fromLayers(ctx)}})
	var inv *values.InvalidError
	var found []capstanv1.ValuesError
	switch {
	case errors.As(err, &inv):
		// The values break a rule of their own (more secret values than
		// Capstan hides), which comes back with the writeOnly errors.
		found = inv.Errors
	case err != nil:
		return nil, nil, err
	default:
		found = res.Errors
		c.schemas[schemaKey(spec)] = res.Schema
	}
	set, held, _ = values.WriteOnlyPaths(found, vals, before)
	if inv != nil {
		return set, held, inv
	}
	return set, held, nil
}

// SecretValuesError refuses a write that would put secret inputs (values
// the chart's schema marks writeOnly) into spec.values, or into git.
type SecretValuesError struct {
	// Paths are the values, as targetPaths (servers[0].pin, a\.b).
	Paths []string
	// Where says where the write would have put them, and Instead how to
	// give them.
	Where, Instead string
	// Field is the request's field that held them: spec.values when
	// empty, or definition for a commit's.
	Field string
}

func (e *SecretValuesError) Error() string {
	return fmt.Sprintf("the chart's schema marks %s writeOnly, a secret input, which this write would put into %s: %s",
		strings.Join(e.Paths, ", "), e.Where, e.Instead)
}

// errPrivateChart stops a commit's check before it fetches a chart that
// needs credentials (GitValuesCheck).
var errPrivateChart = errors.New("the chart needs the credentials of spec.chart.secretRef")

// UncheckedValuesError refuses a commit whose values could not be checked
// for secret inputs because the chart could not be fetched: git's history
// would keep a secret input for good, so the commit waits for a check.
type UncheckedValuesError struct {
	// Name is the add-on's; Err is the fetch's error.
	Name string
	Err  error
}

func (e *UncheckedValuesError) Error() string {
	return fmt.Sprintf("the chart of add-on %s could not be fetched to check its values for secret inputs (%v), and git's history would keep one for good, so nothing was committed: "+
		"try again once the chart can be fetched, or leave the values the chart's schema marks writeOnly out of the definition and put them in a Secret named in valuesFrom", e.Name, e.Err)
}

func (e *UncheckedValuesError) Unwrap() error { return e.Err }

// GitValuesCheck is a gitops.Writer's CheckValues that refuses a
// definition whose values set or change secret inputs (SecretValuesError):
// a commit would keep them in git's history for good, readable by anyone
// who may clone the repository. Its chart is fetched with fetch, without
// the definition's credentials; a chart that cannot be fetched refuses the
// commit too (UncheckedValuesError), as nothing can take a secret back out
// of git. A chart that names credentials (spec.chart.secretRef) is not
// fetched: the check has none to fetch it with, and refusing would stop
// every values change of a private chart, so that is told to warn and the
// commit goes on, as it does for secret inputs that the file in git holds
// already, unchanged: the controller Blocks the Addon for them.
func GitValuesCheck(fetch ChartFetch, warn func(string)) func(ctx context.Context, next, cur *gitops.Definition) error {
	return func(ctx context.Context, next, cur *gitops.Definition) error {
		a, err := next.Addon(gitops.Origin{})
		if err != nil {
			return err
		}
		var old *apiextensionsv1.JSON
		if cur != nil && len(cur.Values) > 0 {
			raw, err := json.Marshal(cur.Values)
			if err != nil {
				return err
			}
			old = &apiextensionsv1.JSON{Raw: raw}
		}
		setPaths, heldPaths, err := SecretValuesChanged(ctx, func(ctx context.Context, spec capstanv1.AddonSpec) (*source.Artifact, error) {
			if a.Spec.Chart != nil && a.Spec.Chart.SecretRef != nil {
				return nil, errPrivateChart
			}
			return fetch(ctx, spec)
		}, a.Spec, old)
		var inv *values.InvalidError
		if errors.Is(err, errPrivateChart) {
			warn(fmt.Sprintf("the values of add-on %s were not checked for secret inputs: its chart is fetched with the credentials of spec.chart.secretRef, which a commit is not checked with; a value the chart's schema marks writeOnly belongs in a Secret named in valuesFrom, never in the definition's values, and the controller Blocks the Addon for one", next.Name))
			return nil
		}
		if err != nil && !errors.As(err, &inv) {
			return &UncheckedValuesError{Name: next.Name, Err: err}
		}
		set, emptyKeys := SecretInputNames(setPaths)
		named, more := BoundHeld(heldPaths)
		held, _ := SecretInputNames(named)
		if len(set) > 0 {
			instead := "leave it out of the definition's values, put it in a Secret and name that Secret in valuesFrom"
			if len(emptyKeys) > 0 {
				instead += "; " + EmptyKeySecrets(emptyKeys)
			}
			return &SecretValuesError{Paths: set, Field: "definition", Where: "git, whose history keeps it for good, readable by anyone who may clone the repository",
				Instead: instead + "; nothing was committed"}
		}
		if len(held) > 0 {
			move := "it: move it to a Secret named in valuesFrom"
			if len(heldPaths) > 1 {
				move = "them: move each of them to a Secret named in valuesFrom (one Secret may hold them all)"
			}
			warn(fmt.Sprintf("the definition of add-on %s already holds %s%s in its values, which the chart's schema marks writeOnly, a secret input, and the controller Blocks the Addon for %s",
				next.Name, strings.Join(held, ", "), MoreHeld(more), move))
		}
		if inv != nil {
			warn(fmt.Sprintf("the values of add-on %s break a rule the controller Blocks the Addon for: %v", next.Name, inv))
		}
		return nil
	}
}

// maxUnknownWarnings bounds the unknown secret inputs warned of one by
// one, and maxWarnedPath the bytes of a path a warning quotes; the rest
// are counted in one more warning. A request of many keys, or of long
// ones, would otherwise give an answer whose Warning headers no client or
// proxy takes, and a terminal a line for each.
const (
	maxUnknownWarnings = 10
	maxWarnedPath      = 200
)

// UnknownSecretInputs warns of the secret inputs (targetPaths) that the
// chart of spec has no place for: its schema neither marks the path
// writeOnly nor defines it, a misspelt name most often, whose value the
// chart would never read, rendering its default instead. Each message
// names the path and the nearest path the schema marks writeOnly. A path
// the schema defines without writeOnly is not warned of, as a Secret may
// hold any value; a chart without a schema, or a git folder, has nothing
// to say. The chart is fetched with fetch; an error says it could not be.
// At most maxUnknownWarnings paths are warned of by name, each cut to
// maxWarnedPath bytes, and one more message counts the rest.
func UnknownSecretInputs(ctx context.Context, fetch ChartFetch, spec capstanv1.AddonSpec, inputs map[string]string) ([]string, error) {
	return NewChartCheck(fetch).UnknownSecretInputs(ctx, spec, inputs)
}

// UnknownSecretInputs is the package's UnknownSecretInputs, with the
// chart c fetches and the schema a check before compiled for the same
// values.
func (c *ChartCheck) UnknownSecretInputs(ctx context.Context, spec capstanv1.AddonSpec, inputs map[string]string) ([]string, error) {
	if spec.Chart == nil || len(inputs) == 0 {
		return nil, nil
	}
	art, err := c.Fetch(ctx, spec)
	if err != nil {
		return nil, err
	}
	if !art.IsChart() {
		return nil, nil
	}
	schema, ok := c.schemas[schemaKey(spec)]
	if !ok {
		vals := map[string]any{}
		if spec.Values != nil && len(bytes.TrimSpace(spec.Values.Raw)) > 0 {
			// NOTE: values that cannot be read enable no subchart; the
			// controller says what is wrong with them.
			_ = json.Unmarshal(spec.Values.Raw, &vals)
		}
		c.compiles++
		if schema, err = values.SchemaFor(art.Chart.Chart, values.Sources{Spec: vals, From: c.fromLayers(ctx)}); err != nil {
			return nil, err
		}
		c.schemas[schemaKey(spec)] = schema
	}
	unknown := schema.UnknownInputs(slices.Collect(maps.Keys(inputs)))
	var out []string
	for i, u := range unknown {
		if i == maxUnknownWarnings {
			out = append(out, fmt.Sprintf("and %d more secret inputs the chart's schema neither marks writeOnly nor defines", len(unknown)-i))
			break
		}
		path := cutPath(u.Path)
		msg := fmt.Sprintf("secret input %s: the chart's schema neither marks this path writeOnly nor defines it, so the chart may never read it and render its default instead", path)
		if u.Closed {
			msg = fmt.Sprintf("secret input %s: the chart's schema does not allow this path (additionalProperties: false), and the controller will Block the Addon for it", path)
		}
		if u.Closest != "" {
			msg += fmt.Sprintf("; did you mean %s?", cutPath(u.Closest))
		}
		out = append(out, msg)
	}
	return out, nil
}

// cutPath returns p cut to maxWarnedPath bytes, at a character's start,
// with "…" where it was cut.
func cutPath(p string) string {
	if len(p) <= maxWarnedPath {
		return p
	}
	n := maxWarnedPath
	for n > 0 && !utf8.RuneStart(p[n]) {
		n--
	}
	return p[:n] + "…"
}
