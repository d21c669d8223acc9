package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Argo CD's hook annotations. The objects of a git folder may carry them,
// as manifests written for Argo CD do: a migration Job marked PreSync must
// run before the rest is applied, and a cleanup Job marked PostDelete must
// not run at all until the add-on is uninstalled. A folder's hooks run as
// Argo CD runs them, Helm's annotations among them; a chart's hooks are
// Helm's to say, so a chart's objects are read as Helm reads them.
const (
	// ArgoHookAnnotation makes an object a hook of the phases it names,
	// comma-separated: PreSync, Sync, PostSync, SyncFail, PreDelete and
	// PostDelete; Skip alone leaves the object out of the add-on.
	ArgoHookAnnotation = "argocd.argoproj.io/hook"
	// ArgoHookDeleteAnnotation names an Argo CD hook's delete policies:
	// BeforeHookCreation (the default), HookSucceeded and HookFailed.
	ArgoHookDeleteAnnotation = "argocd.argoproj.io/hook-delete-policy"
)

// The sync-wave annotations, Capstan's and Argo CD's, which order the
// hooks of one phase as they order objects (see apply.WaveOf); when both
// are set, Capstan's decides.
var waveAnnotations = []string{"capstan.dev/sync-wave", "argocd.argoproj.io/sync-wave"}

// The Argo CD phases, lowercased.
const (
	phasePreSync    = "presync"
	phaseSync       = "sync"
	phasePostSync   = "postsync"
	phasePreDelete  = "predelete"
	phasePostDelete = "postdelete"
	phaseSkip       = "skip"
	phaseSyncFail   = "syncfail"
)

// argoPhases maps the Argo CD hook phases Capstan runs to the hook events
// it runs them at. Capstan runs hooks on an install and an upgrade, where
// Argo CD runs them on every sync: PreSync before the apply, Sync and
// PostSync after it, PostSync once every applied object is Current
// (Hook.AfterHealthy), SyncFail when the apply failed (SyncFailEvent). A
// folder's upgrade runs them only when it changes an object, as Argo CD
// syncs only what is out of sync.
var argoPhases = map[string][]string{
	phasePreSync:    {string(release.HookPreInstall), string(release.HookPreUpgrade)},
	phaseSync:       {string(release.HookPostInstall), string(release.HookPostUpgrade)},
	phasePostSync:   {string(release.HookPostInstall), string(release.HookPostUpgrade)},
	phaseSyncFail:   {SyncFailEvent},
	phasePreDelete:  {string(release.HookPreDelete)},
	phasePostDelete: {string(release.HookPostDelete)},
}

// SyncFailEvent is the hook event of a folder's Argo CD SyncFail hooks: an
// apply that began and failed for good runs them, where Helm has no such
// event.
const SyncFailEvent = "sync-fail"

// ArgoPhases names the Argo CD hook phases Capstan runs, as Argo CD
// spells them.
const ArgoPhases = "PreSync, Sync, PostSync, SyncFail, PreDelete and PostDelete"

// helmPhases maps Helm's hook events to the Argo CD phase a folder runs
// them at, as Argo CD maps the install and upgrade events: a chart
// rendered into git runs its hooks as Argo CD would run them there. The
// delete events map to the delete phases, which Argo CD may not do.
// Rollback events have no phase.
var helmPhases = map[string]string{
	string(release.HookPreInstall):  phasePreSync,
	string(release.HookPreUpgrade):  phasePreSync,
	string(release.HookPostInstall): phasePostSync,
	string(release.HookPostUpgrade): phasePostSync,
	string(release.HookPreDelete):   phasePreDelete,
	string(release.HookPostDelete):  phasePostDelete,
}

// argoDeletePolicies maps Argo CD's delete policies, lowercased, to Helm's,
// which mean the same.
var argoDeletePolicies = map[string]string{
	"beforehookcreation": "before-hook-creation",
	"hooksucceeded":      "hook-succeeded",
	"hookfailed":         "hook-failed",
}

// folderHook is what a folder's object is: a plain object, a hook, or left
// out.
type folderHook struct {
	hook   Hook
	isHook bool
	skip   bool
	// notice says what in its annotations Capstan read otherwise than
	// they ask, or "".
	notice string
}

// parseFolderHook reads a folder's object as Argo CD reads it. Its
// argocd.argoproj.io/hook annotation, when present, makes it a hook of the
// phases it names, trimmed and in any case (Argo CD reads them exactly,
// and would never run a hook marked "postsync"); one that names no phase
// Argo CD knows gives way to helm.sh/hook, whose events map to phases
// (helmPhases); Helm's test hooks are left out, and crd-install is a plain
// object. Skip, alone, leaves the object out. A phase Argo CD does not know
// is left out of the hook's, with a notice; a hook of no phase Capstan
// runs never runs, as in Argo CD. Its
// wave (sync-wave, else helm.sh/hook-weight) is its weight; one that is
// not a whole number, or is out of the range of 32 bits, is 0, with a
// notice. Delete policies, Argo CD's or Helm's, are Helm's.
func parseFolderHook(obj *unstructured.Unstructured, template string) folderHook {
	annotations := obj.GetAnnotations()
	var phases, ignored []string
	annotation := ArgoHookAnnotation
	argoValue, isArgo := annotations[ArgoHookAnnotation]
	argoKnown := false
	for _, p := range splitList(argoValue) {
		key := strings.ToLower(p)
		_, runs := argoPhases[key]
		switch {
		case runs || key == phaseSkip:
			if !slices.Contains(phases, key) {
				phases = append(phases, key)
			}
			argoKnown = true
		default:
			ignored = append(ignored, p)
		}
	}
	helmValue, isHelm := annotations[release.HookAnnotation]
	if !argoKnown && isHelm {
		events := splitList(strings.ToLower(helmValue))
		switch {
		case !isArgo && slices.Equal(events, []string{"crd-install"}):
			// NOTE: Helm 2's crd-install is no hook to Argo CD either: the
			// CRD is applied with the rest.
			return folderHook{}
		case !isArgo && len(events) > 0 && !slices.ContainsFunc(events, func(e string) bool { return !isTestEvent(e) }):
			return folderHook{skip: true}
		}
		annotation, ignored = release.HookAnnotation, nil
		for _, e := range events {
			p, ok := helmPhases[e]
			switch {
			case ok:
				if !slices.Contains(phases, p) {
					phases = append(phases, p)
				}
			case !isTestEvent(e) && e != "crd-install":
				ignored = append(ignored, e)
			}
		}
	}
	if !isArgo && !isHelm {
		return folderHook{}
	}
	if slices.Equal(phases, []string{phaseSkip}) {
		return folderHook{skip: true, notice: fmt.Sprintf("%s %s is marked %s: Skip, so it is left out: Capstan neither applies nor runs it",
			obj.GetKind(), obj.GetName(), ArgoHookAnnotation)}
	}
	h := Hook{Object: obj, Template: template, Events: []string{}, Annotation: annotation, Folder: true}
	for _, p := range phases {
		for _, e := range argoPhases[p] {
			if !slices.Contains(h.Events, e) {
				h.Events = append(h.Events, e)
			}
		}
	}
	// NOTE: a hook of both Sync and PostSync runs once, at the earlier.
	h.AfterHealthy = slices.Contains(phases, phasePostSync) && !slices.Contains(phases, phaseSync)
	out := folderHook{hook: h, isHook: true}
	var notes []string
	switch {
	case len(ignored) > 0:
		what := "so it runs only at the others"
		if len(h.Events) == 0 {
			what = "so it never runs"
		}
		notes = append(notes, fmt.Sprintf("names %s, which Capstan does not run (it runs %s hooks), %s",
			strings.Join(ignored, ", "), ArgoPhases, what))
	case len(h.Events) == 0:
		notes = append(notes, "names no phase, so it never runs, as in Argo CD")
	}
	wave, key := "", ""
	for _, k := range append(slices.Clone(waveAnnotations), release.HookWeightAnnotation) {
		if v, set := annotations[k]; set {
			wave, key = v, k
			break
		}
	}
	if key != "" {
		// NOTE: ParseInt gives the nearest bound with ErrRange, which
		// would run the hook first or last of its phase where the notice
		// says it runs at 0.
		w, err := strconv.ParseInt(strings.TrimSpace(wave), 10, 32)
		switch {
		case errors.Is(err, strconv.ErrRange):
			w = 0
			notes = append(notes, fmt.Sprintf("has %s %q, out of the range of a wave (a 32-bit whole number), so it runs at 0 in its phase", key, wave))
		case err != nil:
			w = 0
			notes = append(notes, fmt.Sprintf("has %s %q, not a whole number, so it runs at 0 in its phase", key, wave))
		}
		out.hook.Weight = int(w)
	}
	for _, k := range []string{ArgoHookDeleteAnnotation, release.HookDeleteAnnotation} {
		policies, set := annotations[k]
		if !set {
			continue
		}
		for _, p := range splitAnnotation(policies) {
			if helm, known := argoDeletePolicies[p]; known {
				p = helm
			}
			out.hook.DeletePolicies = append(out.hook.DeletePolicies, p)
		}
		break
	}
	if len(notes) > 0 {
		out.notice = fmt.Sprintf("hook %s %s %s", obj.GetKind(), hookName(obj), strings.Join(notes, "; it "))
	}
	return out
}

// isTestEvent reports whether e is one of Helm's test events, which a
// folder leaves out as a chart does.
func isTestEvent(e string) bool {
	return e == string(release.HookTest) || e == "test-success" || e == "test-failure"
}

// splitList splits a comma-separated annotation and trims its items,
// leaving out empty ones.
func splitList(v string) []string {
	var out []string
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// folderHooks takes a folder's hooks out of its objects (parseFolderHook),
// and those it leaves out (Skip, test hooks), with a notice for each object
// Skip leaves out and each annotation read otherwise than it asks. A hook with generateName and no name is named
// (generatedHookName): Capstan runs a hook by its name, which a sync
// stopped half-way must find again.
func folderHooks(objs []*unstructured.Unstructured, template, hash string) (objects []*unstructured.Unstructured, hooks []Hook, left []*unstructured.Unstructured, notices []Notice) {
	for i, obj := range objs {
		f := parseFolderHook(obj, template)
		if f.notice != "" {
			notices = append(notices, Notice{Path: "hooks/" + obj.GetKind() + "/" + hookName(obj), Message: f.notice})
		}
		switch {
		case f.skip:
			left = append(left, obj)
			continue
		case !f.isHook:
			objects = append(objects, obj)
			continue
		}
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(generatedHookName(obj, hash, i))
		}
		hooks = append(hooks, f.hook)
	}
	return objects, hooks, left, notices
}

// generatedHookName names a hook that has only a generateName: its
// generateName and ten hex digits of the render hash, its kind, namespace
// and place in the render, at most 63 characters, as a Job's name may be.
// It is the same within one render, and new with each.
func generatedHookName(obj *unstructured.Unstructured, hash string, place int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\n%s\n%s\n%s\n%d", hash, obj.GetAPIVersion(), obj.GetKind(), obj.GetNamespace(), place))
	digits := hex.EncodeToString(sum[:])[:10]
	base := obj.GetGenerateName()
	return base[:min(len(base), 63-len(digits))] + digits
}

// hookName names an object for a message, by generateName when it has no
// name.
func hookName(obj *unstructured.Unstructured) string {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		return obj.GetGenerateName() + "*"
	}
	return obj.GetName()
}

// reparseHook reads a hook again after spec.patches changed it, as the
// render read it. A hook stays a hook, and Skip cannot take it out.
func reparseHook(obj *unstructured.Unstructured, was Hook) (Hook, error) {
	if was.Folder {
		f := parseFolderHook(obj, was.Template)
		switch {
		case f.skip:
			return Hook{}, fmt.Errorf("spec.patches left hook %s %s out (Skip, or a test hook): a hook stays a hook; change its phases instead", obj.GetKind(), obj.GetName())
		case !f.isHook:
			return Hook{}, fmt.Errorf("spec.patches removed the hook annotations of hook %s %s: a hook stays a hook; change its phases instead", obj.GetKind(), obj.GetName())
		}
		return f.hook, nil
	}
	if was.List {
		// NOTE: the List's annotations made the item a hook, and
		// spec.patches cannot reach them: patches see the List's items,
		// not the List.
		was.Object = obj
		return was, nil
	}
	h, ok := parseHook(obj, was.Template)
	switch {
	case !ok:
		return Hook{}, fmt.Errorf("spec.patches removed the helm.sh/hook annotation of hook %s %s: a hook stays a hook; change its events instead", obj.GetKind(), obj.GetName())
	case h.IsTest() != was.IsTest() || h.TestOnly() != was.TestOnly():
		return Hook{}, fmt.Errorf("spec.patches made hook %s %s a test hook, or a test hook one of another event: a test stays a test, and a hook a hook of the events it runs with a sync", obj.GetKind(), obj.GetName())
	}
	return h, nil
}

// madeHook says how spec.patches made an object of the render a hook, or
// "" when it did not: a chart's hooks are its templates' to say, and a
// folder's its manifests'.
func madeHook(patched, was *unstructured.Unstructured, folder bool) string {
	keys := []string{release.HookAnnotation}
	if folder {
		keys = append(keys, ArgoHookAnnotation)
	}
	for _, key := range keys {
		if _, now := patched.GetAnnotations()[key]; now {
			if _, before := was.GetAnnotations()[key]; !before {
				return key
			}
		}
	}
	return ""
}
