package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
	"capstan.dev/capstan/internal/conditions"
)

// Limits that keep a plan in status far below etcd's object size limit,
// even for a chart of a thousand objects. `capstan plan` shows every diff,
// each up to MaxFullDiffBytes.
const (
	// MaxDiffBytes is the most of one object's diff that status keeps.
	MaxDiffBytes = 16 << 10
	// MaxTotalDiffBytes is the most of all diffs together that status keeps.
	MaxTotalDiffBytes = 128 << 10
	// MaxFullDiffBytes is the most of one object's diff that a whole plan
	// (Input.Full: `capstan plan`, the API's plan) shows: as much as status
	// keeps of all diffs together. A ConfigMap of megabytes or a large
	// CRD would otherwise print a diff of any size to a terminal, and to
	// an API answer held whole in the controller's memory.
	MaxFullDiffBytes = MaxTotalDiffBytes
	// MaxListed is the most guardrail violations, and the most values
	// errors, that status lists: one values document can break a schema
	// once per item of a list of tens of thousands, and a status that
	// lists them all is more than the API server stores, so every write
	// of it would fail and the add-on would never show as Blocked.
	MaxListed = 100
	// MaxListedBytes is the most bytes of each of those lists that status
	// keeps: an entry's path and message can be as long as the values a
	// tenant writes (an unknown key of 10 KB, in inline JSON values), so a
	// count alone does not bound them.
	MaxListedBytes = 32 << 10
	// maxListedField is the most bytes of one listed entry's path, rule
	// or message that status keeps; past it the text is cut, marked with
	// "...".
	maxListedField = 1 << 10
)

// What a plan lists only in part, as a notice's Path names it.
const (
	listedViolations   = "violations"
	listedValuesErrors = "valuesErrors"
)

// listedNote is the notice of a list cut to MaxListed or MaxListedBytes;
// it begins with listedCount, which listedTotal reads the count back by.
const (
	listedCount = "status lists the first %d of %d"
	listedNote  = listedCount + " %s; run `capstan plan` to list them all"
)

// listed cuts list to MaxListed entries and MaxListedBytes unless full,
// each entry as clip cuts it (clip returns its size too) once hide has
// hidden the secret values in its texts, and says how many there are in a
// notice of p when it lists fewer.
//
// NOTE: hide runs before the cut: a value cut at the mark no longer
// matches the mask, and its start would show (a values error quoting a
// password of a few kilobytes).
func listed[T any](p *capstanv1.Plan, list []T, what, words string, full bool, hide func(T) T, clip func(T) (T, int)) []T {
	if len(list) == 0 {
		return list
	}
	if full {
		out := make([]T, len(list))
		for i, e := range list {
			out[i] = hide(e)
		}
		return out
	}
	out := make([]T, 0, min(len(list), MaxListed))
	budget := MaxListedBytes
	for _, e := range list {
		cut, size := clip(hide(e))
		if len(out) == MaxListed || size > budget {
			break
		}
		budget -= size
		out = append(out, cut)
	}
	if len(out) < len(list) {
		p.Notices = append(p.Notices, capstanv1.Notice{Path: what, Message: fmt.Sprintf(listedNote, len(out), len(list), words)})
	}
	return out
}

// clipViolation cuts v's texts to maxListedField, and sizes it.
func clipViolation(v capstanv1.Violation) (capstanv1.Violation, int) {
	v.Path, v.Rule, v.Message = clipField(v.Path), clipField(v.Rule), clipField(v.Message)
	o := v.Object
	return v, len(o.APIVersion) + len(o.Kind) + len(o.Namespace) + len(o.Name) + len(v.Path) + len(v.Rule) + len(v.Message)
}

// clipValuesError cuts e's texts to maxListedField, and sizes it.
func clipValuesError(e capstanv1.ValuesError) (capstanv1.ValuesError, int) {
	e.Path, e.Rule, e.Message = clipField(e.Path), clipField(e.Rule), clipField(e.Message)
	return e, len(e.Path) + len(e.Rule) + len(e.Message)
}

func clipField(s string) string { return conditions.Truncate(s, maxListedField) }

// hideViolation is v with mask applied to its texts; a nil mask hides
// nothing.
func hideViolation(mask func(string) string) func(capstanv1.Violation) capstanv1.Violation {
	return func(v capstanv1.Violation) capstanv1.Violation {
		if mask != nil {
			v.Path, v.Rule, v.Message = mask(v.Path), mask(v.Rule), mask(v.Message)
		}
		return v
	}
}

// hideValuesError is e with mask applied to its texts; a nil mask hides
// nothing.
func hideValuesError(mask func(string) string) func(capstanv1.ValuesError) capstanv1.ValuesError {
	return func(e capstanv1.ValuesError) capstanv1.ValuesError {
		if mask != nil {
			e.Path, e.Rule, e.Message = mask(e.Path), mask(e.Rule), mask(e.Message)
		}
		return e
	}
}

// listedTotal returns how many entries a list of p has, whose n are listed
// (what is listedViolations or listedValuesErrors): the count the notice
// of a cut list gives, else n.
func listedTotal(p *capstanv1.Plan, what string, n int) int {
	for _, no := range p.Notices {
		var first, total int
		if no.Path != what {
			continue
		}
		if _, err := fmt.Sscanf(no.Message, listedCount, &first, &total); err == nil && total > n {
			return total
		}
	}
	return n
}

// ObjectResult is the preview of one rendered object.
type ObjectResult struct {
	Ref capstanv1.ObjectRef
	Comparison
	// Adopted is true when the object runs already and the add-on has not
	// applied it before.
	Adopted bool
	// Owned are the fields the dry run of Capstan's apply of an object
	// adopted without a change shows it would own: the adoption makes
	// them Capstan's (apply.Applier.ClaimAdopted).
	Owned *metav1.FieldsV1
	// ManagedBy names another Addon that applied the object and still holds
	// it in its inventory: "namespace/name". An object of a kind never
	// deleted, which add-ons may share, is marked only when the plan would
	// change it.
	ManagedBy string
	// Error is the API server's message when the dry run failed.
	Error string
	// Unverified is true for a create the API server could not dry-run
	// yet: its Namespace or its CRD is created first in the same sync.
	// The sync dry-runs it once they exist, before it applies anything
	// else.
	Unverified bool
	// Recreate is true for an object the API server refuses to change in
	// place, which the sync deletes and creates anew (spec.recreate).
	// RecreateUID is the UID of the object the preview saw, which the
	// delete is bound to and the plan's hash covers.
	Recreate    bool
	RecreateUID types.UID
	// AfterDelete is, for a Recreate, the Create it turns into once the
	// delete is done: a sync stopped between the two (a create that
	// failed, a controller stopped while the delete was waited for) plans
	// it so on its retry, which is still the change approved (Changes).
	AfterDelete *ObjectResult
	// RandomName is true for a create of an object that the chart names
	// at random: the plan's hash covers its name as GeneratedPlaceholder.
	RandomName bool
}

// HookResult is one hook a sync would run.
type HookResult struct {
	capstanv1.PlannedHook
	// Digest identifies the hook's manifest.
	Digest string
	// RandomName is true for a hook that the chart names at random: the
	// plan's hash covers its name as GeneratedPlaceholder.
	RandomName bool
}

// Input is everything a plan is made of.
type Input struct {
	Generation int64
	Source     capstanv1.PlanSource
	Rendered   []*unstructured.Unstructured
	Objects    []ObjectResult
	Prune      []capstanv1.ObjectRef
	// Confirm are those of Prune marked to be pruned only with a person's
	// confirmation: in the hash, so that an approval given before one was
	// marked does not cover its delete.
	Confirm []capstanv1.ObjectRef
	// PruneUIDs are the UIDs of the objects of Prune and Confirm as the
	// preview read them, by ObjectRef.Key; none for an object found gone.
	// In the hash, so that an approval of a delete covers only the object
	// its approver saw, not another created in its place under its name.
	PruneUIDs    map[string]types.UID
	Hooks        []HookResult
	Violations   []capstanv1.Violation
	ValuesErrors []capstanv1.ValuesError
	// Notices block nothing and are not part of the hash.
	Notices []capstanv1.Notice
	// EnsuredNamespace is the namespace of spec.createNamespace. It is
	// created when missing and never changed, so whether it exists yet is
	// not part of the hash: an approval stays valid when another add-on
	// creates it first.
	EnsuredNamespace string
	// Cluster identifies the cluster the plan applies to and the account
	// that applies it there (remote.Config.Identity), for a remote one;
	// empty for the controller's own cluster.
	Cluster string
	// Full keeps every diff whole up to MaxFullDiffBytes, for `capstan plan`;
	// status leaves it false.
	Full bool
	// Mask hides secret values in the texts of the violations and values
	// errors before they are cut to what status keeps; nil hides nothing.
	// The plan's other texts are whole, for the caller to mask.
	Mask func(string) string
}

// Build assembles a plan, its summary and its hash. The hash covers what
// would be applied (Secret values included, through digests) and where,
// and not the generation, so raising spec.syncRequest does not make an
// approval stale.
func Build(in Input) *capstanv1.Plan {
	p := &capstanv1.Plan{
		Generation: in.Generation,
		Source:     in.Source,
		Workloads:  Workloads(in.Rendered),
		Notices:    slices.Clip(in.Notices),
	}
	// NOTE: the hash covers every violation and values error below, not
	// only those listed.
	p.Violations = listed(p, in.Violations, listedViolations, "guardrail violations", in.Full, hideViolation(in.Mask), clipViolation)
	p.ValuesErrors = listed(p, in.ValuesErrors, listedValuesErrors, "values errors", in.Full, hideValuesError(in.Mask), clipValuesError)
	material := []any{"source", in.Source.URL, in.Source.Chart, in.Source.Version, in.Source.Digest, in.Source.Commit, in.Source.Path}
	if in.Cluster != "" {
		// NOTE: the kubeconfig Secret can be repointed with no change of
		// the Addon, and another cluster can hold what the approved one
		// did (an empty one gives an install the same creates): an
		// approval binds the cluster too. Only a remote cluster adds to
		// the material, so the controller's own cluster is the constant
		// of none, and the hashes of its plans stay as they were.
		material = append(material, "cluster", in.Cluster)
	}
	budget := MaxTotalDiffBytes
	waves := wavesOf(in.Rendered)
	for _, o := range in.Objects {
		po := capstanv1.PlannedObject{ObjectRef: o.Ref, Action: o.Action, Adopted: o.Adopted, ManagedBy: o.ManagedBy, Error: o.Error, Recreate: o.Recreate,
			Wave: waves[o.Ref.Key()]}
		if o.Diff != "" {
			po.Diff, budget = capDiff(o.Diff, budget, in.Full)
			if po.Diff != o.Diff || o.DiffTooLarge {
				// NOTE: marked on the object too: an empty diff is no
				// sign of a cut, since a create whose namespace this sync
				// makes first has none to show.
				po.DiffTruncated, p.DiffsTruncated = true, true
			}
		}
		if o.DiffNotKept {
			po.DiffTruncated, p.DiffsTruncated = true, true
		}
		count(&p.Summary, o.Action)
		// NOTE: status lists what a sync would do; an object it would
		// leave as it is, not adopted and not refused, is only counted.
		// The inventory names every applied object, and the Addon stays
		// small: every status write costs the API server in proportion to
		// its size. `capstan plan` (Full) lists every object.
		if in.Full || o.Action != capstanv1.ActionUnchanged || o.Adopted || o.ManagedBy != "" || o.Error != "" {
			p.Objects = append(p.Objects, po)
		}
		if o.Ref.Kind == "Namespace" && o.Ref.APIVersion == "v1" && o.Ref.Name == in.EnsuredNamespace && o.Error == "" {
			continue
		}
		// NOTE: ManagedBy is left out: who holds an object depends on who
		// may read the other Addon, and the gate blocks such a plan anyway.
		material = append(material, "object", reviewableKey(o.Ref, o.RandomName), o.Action, o.Digest, o.Adopted, o.Error)
		if o.Recreate {
			// NOTE: only when set, so that the hashes of plans without it,
			// and the approvals of them, stay as they were. The UID makes
			// an approval delete only the object its approver saw.
			material = append(material, "recreate", string(o.RecreateUID))
		}
	}
	if notice, ok := waveNotice(waves, len(in.Rendered)); ok {
		p.Notices = append(p.Notices, notice)
	}
	if n := unverified(in.Objects); n > 0 {
		p.Notices = append(p.Notices, capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
			"%d object(s) to create wait for a Namespace or CustomResourceDefinition that this sync creates first, so the API server checks them only once those exist; if it refuses one, the sync stops with nothing applied but the CRDs and Namespaces", n)})
	}
	// NOTE: an approval of a prune, as of a recreate, covers only the
	// object with the UID the preview read. A plan may wait for its
	// approval for days (a mass prune, Prune=confirm, a sync window), and
	// an object deleted and created anew under the same name with
	// Capstan's labels meanwhile would otherwise keep the hash, and the
	// approval would delete an object no one saw; so would a used
	// approval whose hash came back. Only a UID read adds to the
	// material, as for a recreate.
	uid := func(r capstanv1.ObjectRef) []any {
		if u := in.PruneUIDs[r.Key()]; u != "" {
			return []any{"uid", string(u)}
		}
		return nil
	}
	var gone []capstanv1.ObjectRef
	for _, r := range in.Prune {
		// NOTE: still in the hash as it was (with no UID), so that an
		// approval binds what the preview saw: the prune deletes no
		// object under the name that the plan found gone
		// (apply.Deleting.Planned).
		material = append(append(material, "prune", refKey(r)), uid(r)...)
		if in.PruneUIDs[r.Key()] == "" {
			gone = append(gone, r)
			continue
		}
		p.Objects = append(p.Objects, capstanv1.PlannedObject{ObjectRef: r, Action: capstanv1.ActionDelete})
		count(&p.Summary, capstanv1.ActionDelete)
	}
	if notice, ok := goneNotice(gone); ok {
		p.Notices = append(p.Notices, notice)
	}
	for _, r := range in.Confirm {
		material = append(append(material, "confirm", refKey(r)), uid(r)...)
	}
	for _, h := range in.Hooks {
		p.Hooks = append(p.Hooks, h.PlannedHook)
	}
	for _, h := range reviewableOrder(in.Hooks) {
		material = append(material, "hook", reviewableKey(h.ObjectRef, h.RandomName), strings.Join(h.Events, ","), h.Weight, h.Digest)
	}
	p.Summary.Hooks = len(in.Hooks)
	for _, v := range in.Violations {
		material = append(material, "violation", refKey(v.Object), v.Path, v.Rule)
	}
	for _, e := range in.ValuesErrors {
		material = append(material, "values", e.Path, e.Rule)
	}
	p.Hash = digest(material...)
	return p
}

// reviewableOrder returns hooks in the order a plan's hash covers them:
// as they run, but within a run of hooks with one event, weight and kind
// that holds hooks named at random, the hooks with fixed names come first
// in their order, then those named at random by namespace and digest.
//
// NOTE: such hooks run in the order of their names (hooks.Select, as
// Helm orders them), and every render names them anew, so their place
// among the run, fixed names included, is as random as their names: a
// hash that followed it would change from one reconcile to the next.
// Runs without a hook named at random keep their order, and their plans
// the hashes they had.
func reviewableOrder(hooks []HookResult) []HookResult {
	out := slices.Clone(hooks)
	together := func(a, b HookResult) bool {
		return slices.Equal(a.Events, b.Events) && a.Weight == b.Weight && a.APIVersion == b.APIVersion && a.Kind == b.Kind
	}
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && together(out[i], out[j]) {
			j++
		}
		slices.SortStableFunc(out[i:j], func(a, b HookResult) int {
			switch {
			case a.RandomName && b.RandomName:
				return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Digest, b.Digest))
			case a.RandomName:
				return 1
			case b.RandomName:
				return -1
			}
			return 0
		})
		i = j
	}
	return out
}

// goneNotice says which objects of the inventory the prune found gone
// already (deleted by hand, or never created by an install that stopped
// before them). They are no delete: the sync drops them from the
// inventory and deletes nothing, so neither the summary, Pending, nor the
// approvals of manual sync and of a mass prune count them.
func goneNotice(gone []capstanv1.ObjectRef) (capstanv1.Notice, bool) {
	if len(gone) == 0 {
		return capstanv1.Notice{}, false
	}
	var names []string
	for i, r := range gone {
		if i == listedGone {
			names = append(names, fmt.Sprintf("and %d more", len(gone)-listedGone))
			break
		}
		names = append(names, r.Describe())
	}
	return capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
		"%d object(s) of the inventory that the render no longer applies are gone already (deleted by hand, or never created by a sync that stopped before them): the sync deletes nothing and drops them from the inventory, so they need no approval; one created under such a name before the sync runs is left running, and the next plan shows its delete: %s",
		len(gone), strings.Join(names, ", "))}, true
}

// listedGone is how many objects found gone goneNotice names.
const listedGone = 5

// unverified counts the objects the API server could not dry-run yet.
func unverified(objs []ObjectResult) int {
	n := 0
	for _, o := range objs {
		if o.Unverified {
			n++
		}
	}
	return n
}

// Pending reports whether applying the plan would change anything: objects
// to create, update or delete, or hooks to run. An object of the inventory
// found gone is no delete (goneNotice): dropping it from the inventory
// changes nothing that runs.
func Pending(p *capstanv1.Plan) bool {
	if p == nil {
		return false
	}
	s := p.Summary
	return s.Create+s.Update+s.Delete+s.Hooks > 0
}

func count(s *capstanv1.PlanSummary, a capstanv1.Action) {
	switch a {
	case capstanv1.ActionCreate:
		s.Create++
	case capstanv1.ActionUpdate:
		s.Update++
	case capstanv1.ActionUnchanged:
		s.Unchanged++
	case capstanv1.ActionDelete:
		s.Delete++
	}
}

// capDiff shortens a diff to what the per-object and total budgets allow,
// or, for a whole plan, to MaxFullDiffBytes (cutFull).
func capDiff(diff string, budget int, full bool) (string, int) {
	if full {
		return cutFull(diff), budget
	}
	limit := min(MaxDiffBytes, budget)
	if len(diff) <= limit {
		return diff, budget - len(diff)
	}
	if !diffRoom(limit) {
		return "", 0
	}
	cut := strings.LastIndexByte(diff[:limit-len(truncatedNote)], '\n')
	if cut < 0 {
		cut = 0
	}
	out := diff[:cut] + truncatedNote
	return out, budget - len(out)
}

// cutFull shortens a diff of a whole plan to at most MaxFullDiffBytes, at
// the end of a line, and says how much of it is left out.
//
// NOTE: at a line's end, as status's diffs are cut: the plan's texts are
// masked after Build, and a secret value cut within a line would no
// longer match the mask.
func cutFull(diff string) string {
	if len(diff) <= MaxFullDiffBytes {
		return diff
	}
	cut := max(strings.LastIndexByte(diff[:MaxFullDiffBytes-maxFullNote], '\n'), 0)
	// NOTE: the newline at cut ends the last line kept, which the note's
	// own newline stands for: what is left out starts after it.
	left := diff
	if cut > 0 {
		left = diff[cut+1:]
	}
	return diff[:cut] + fmt.Sprintf(fullNote, MaxFullDiffBytes>>10, strings.Count(left, "\n"), len(left))
}

// fullNote ends a diff of a whole plan that cutFull cut: the bound in KiB,
// the lines and the bytes left out. No Capstan command shows more of one
// object's diff.
const fullNote = "\n... diff cut at %d KiB: %d more lines (%d bytes) left out; Capstan shows no more of one object's diff\n"

// maxFullNote is the room fullNote takes at most.
const maxFullNote = len(fullNote) + 3*20

// truncatedNote ends a diff that capDiff cut. A whole plan shows one
// object's diff up to MaxFullDiffBytes (128 KiB), no more.
const truncatedNote = "\n... diff truncated; run `capstan plan` for more of it: it shows each diff up to 128 KiB\n"

// diffRoom reports whether budget, what status keeps of the diffs still,
// has room for any of the next one.
func diffRoom(budget int) bool { return budget > len(truncatedNote) }

// refKey names an object exactly, with its API version, for the plan's hash.
func refKey(r capstanv1.ObjectRef) string {
	return r.APIVersion + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

// reviewableKey is refKey, with a name the chart generates at random as
// GeneratedPlaceholder (see Generated).
func reviewableKey(r capstanv1.ObjectRef, randomName bool) string {
	if randomName {
		r.Name = GeneratedPlaceholder
	}
	return refKey(r)
}

// workloadKinds are the kinds whose pod templates a plan lists.
var workloadKinds = map[string][]string{
	"Deployment":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
	"Pod":         {"spec"},
}

// Workloads lists the objects that run containers, with their images and
// ports, in a stable order.
func Workloads(objs []*unstructured.Unstructured) []capstanv1.Workload {
	var out []capstanv1.Workload
	for _, obj := range objs {
		path, ok := workloadKinds[obj.GetKind()]
		if !ok {
			continue
		}
		spec, found, err := unstructured.NestedMap(obj.Object, path...)
		if err != nil || !found {
			continue
		}
		w := capstanv1.Workload{Kind: obj.GetKind(), Name: obj.GetName()}
		for _, field := range []string{"initContainers", "containers"} {
			containers, _, _ := unstructured.NestedSlice(spec, field)
			for _, c := range containers {
				cm, ok := c.(map[string]any)
				if !ok {
					continue
				}
				if image, ok := cm["image"].(string); ok && !slices.Contains(w.Images, image) {
					w.Images = append(w.Images, image)
				}
				ports, _, _ := unstructured.NestedSlice(cm, "ports")
				for _, p := range ports {
					pm, ok := p.(map[string]any)
					if !ok {
						continue
					}
					port, _, _ := unstructured.NestedInt64(pm, "containerPort")
					name, _, _ := unstructured.NestedString(pm, "name")
					proto, _, _ := unstructured.NestedString(pm, "protocol")
					w.Ports = append(w.Ports, capstanv1.WorkloadPort{Name: name, Port: int32(port), Protocol: proto})
				}
			}
		}
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// String summarises a plan in one line, for events and the CLI.
func String(p *capstanv1.Plan) string {
	s := p.Summary
	return fmt.Sprintf("%d to create, %d to update, %d to delete, %d unchanged, %d hooks", s.Create, s.Update, s.Delete, s.Unchanged, s.Hooks)
}

// wavesOf maps each rendered object in a wave other than 0 to its wave.
// The wave is in the object's manifest, and so in the plan's hash already.
func wavesOf(objs []*unstructured.Unstructured) map[string]int32 {
	var out map[string]int32
	for _, obj := range objs {
		if w := apply.Wave(obj); w != 0 {
			if out == nil {
				out = map[string]int32{}
			}
			out[capstanv1.RefOf(obj).Key()] = w
		}
	}
	return out
}

// waveNotice says, when the objects are in more than one wave, in which
// order they are applied and what each wave waits for. Of total rendered
// objects, those not in waves are in wave 0.
func waveNotice(waves map[string]int32, total int) (capstanv1.Notice, bool) {
	seen := map[int32]bool{}
	if len(waves) < total {
		seen[0] = true
	}
	for _, w := range waves {
		seen[w] = true
	}
	if len(seen) < 2 {
		return capstanv1.Notice{}, false
	}
	order := slices.Sorted(maps.Keys(seen))
	names := make([]string, len(order))
	for i, w := range order {
		names[i] = strconv.Itoa(int(w))
	}
	return capstanv1.Notice{Path: "objects", Message: fmt.Sprintf(
		"the objects are applied in sync waves %s (%s): each wave is applied once every object of the waves before it is Current, up to spec.healthTimeout (%s when unset); wave 0 holds the objects without the annotation",
		strings.Join(names, ", "), apply.WaveAnnotation, DefaultWaveTimeout)}, true
}

// DefaultWaveTimeout bounds the wait for a wave when spec.healthTimeout is
// unset. A sync that waits holds one of the controller's workers, as a
// running hook does.
const DefaultWaveTimeout = 10 * time.Minute

// Changes returns what applying a plan built of in would change, one
// short digest for each change, sorted: an object created, updated or
// adopted (its identity, whether it is adopted, and its Comparison's
// digest: a create's of its manifest, an update's of what it changes, a
// recreate's of its whole manifest with the UID it deletes, and the
// Create a recreate turns into once its delete is done), a delete of an
// object that exists (its identity and the UID read), a hook to run. A
// sync that stops half-way records those of the plan a person approved
// (status.syncInProgress.changes), and its retry goes on without another
// approval only while its own are among them (Within).
func Changes(in Input) []string {
	var out []string
	add := func(parts ...any) { out = append(out, strings.TrimPrefix(digest(parts...), "sha256:")[:16]) }
	object := func(o ObjectResult) {
		// NOTE: not the action, which the digest tells apart already.
		add("object", reviewableKey(o.Ref, o.RandomName), o.Digest, o.Adopted, o.Recreate, string(o.RecreateUID))
	}
	for _, o := range in.Objects {
		if o.Action == capstanv1.ActionUnchanged && !o.Adopted {
			continue
		}
		object(o)
		if o.Recreate && o.AfterDelete != nil {
			object(*o.AfterDelete)
		}
	}
	// NOTE: a delete of an object found gone (no UID read) changes
	// nothing: a prune stopped half-way leaves those it deleted in the
	// inventory, and its retry plans them so. One created since under the
	// name has a UID, and is a change of its own.
	for _, r := range in.Prune {
		if u := in.PruneUIDs[r.Key()]; u != "" {
			add("prune", refKey(r), string(u))
		}
	}
	for _, r := range in.Confirm {
		if u := in.PruneUIDs[r.Key()]; u != "" {
			add("confirm", refKey(r), string(u))
		}
	}
	for _, h := range in.Hooks {
		add("hook", reviewableKey(h.ObjectRef, h.RandomName), strings.Join(h.Events, ","), h.Weight, h.Digest)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Within reports whether every change of changes is one of approved
// (both as Changes returns them): the plan of a sync that goes on from an
// approved one that stopped half-way changes nothing its approver did
// not see. What the stopped sync applied shows as unchanged now; a
// manifest that differs, an object new to the render, or one the approved
// plan left as it was that drifted since is a change of its own.
func Within(changes, approved []string) bool {
	for _, c := range changes {
		if _, ok := slices.BinarySearch(approved, c); !ok {
			return false
		}
	}
	return true
}
