package render

import (
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
// not run at all until the add-on is uninstalled. A chart's hooks are
// Helm's to say, so a chart's objects are read as Helm reads them.
const (
	// ArgoHookAnnotation makes an object a hook of the phases it names,
	// comma-separated: PreSync, Sync, PostSync, PreDelete and PostDelete;
	// Skip leaves the object out of the add-on.
	ArgoHookAnnotation = "argocd.argoproj.io/hook"
	// ArgoHookDeleteAnnotation names an Argo CD hook's delete policies:
	// BeforeHookCreation (the default), HookSucceeded and HookFailed.
	ArgoHookDeleteAnnotation = "argocd.argoproj.io/hook-delete-policy"
)

// The sync-wave annotations, Capstan's and Argo CD's, which order the
// hooks of one phase as they order objects (see apply.WaveOf); when both
// are set, Capstan's decides.
var waveAnnotations = []string{"capstan.dev/sync-wave", "argocd.argoproj.io/sync-wave"}

// argoPhases maps Argo CD's hook phases, lowercased, to the hook events
// Capstan runs them at. Capstan runs hooks on an install and on an upgrade,
// where Argo CD runs them on every sync: PreSync before the apply, Sync and
// PostSync after it, PostSync once every applied object is Current
// (Hook.AfterHealthy). A folder's upgrade runs them only when it changes an
// object, as Argo CD syncs only what is out of sync.
var argoPhases = map[string][]string{
	"presync":    {string(release.HookPreInstall), string(release.HookPreUpgrade)},
	"sync":       {string(release.HookPostInstall), string(release.HookPostUpgrade)},
	"postsync":   {string(release.HookPostInstall), string(release.HookPostUpgrade)},
	"predelete":  {string(release.HookPreDelete)},
	"postdelete": {string(release.HookPostDelete)},
}

// ArgoPhases names the Argo CD hook phases Capstan runs, as Argo CD
// spells them.
const ArgoPhases = "PreSync, Sync, PostSync, PreDelete and PostDelete"

// argoDeletePolicies maps Argo CD's delete policies, lowercased, to Helm's,
// which mean the same.
var argoDeletePolicies = map[string]string{
	"beforehookcreation": "before-hook-creation",
	"hooksucceeded":      "hook-succeeded",
	"hookfailed":         "hook-failed",
}

// parseArgoHook reads Argo CD's hook annotations of obj. It reports whether
// obj is an Argo CD hook at all, and skip when Skip leaves it out. Phases
// and delete policies are trimmed and read whatever their case. A phase
// Capstan does not run (SyncFail, or a misspelt one) is an unknown event:
// the hook never runs, and the plan says why. Its sync wave is its weight;
// one that is not a whole number is an error, as it is for an object.
func parseArgoHook(obj *unstructured.Unstructured, template string) (h Hook, skip, ok bool, err error) {
	annotations := obj.GetAnnotations()
	phases, ok := annotations[ArgoHookAnnotation]
	if !ok {
		return Hook{}, false, false, nil
	}
	h = Hook{Object: obj, Template: template, Events: []string{}, Annotation: ArgoHookAnnotation}
	postSync, sync := false, false
	for p := range strings.SplitSeq(phases, ",") {
		p = strings.TrimSpace(p)
		key := strings.ToLower(p)
		events, known := argoPhases[key]
		switch {
		case key == "skip":
			return Hook{}, true, true, nil
		case !known:
			h.UnknownEvents = append(h.UnknownEvents, p)
			continue
		case key == "postsync":
			postSync = true
		case key == "sync":
			sync = true
		}
		for _, e := range events {
			if !slices.Contains(h.Events, e) {
				h.Events = append(h.Events, e)
			}
		}
	}
	// NOTE: a hook of both Sync and PostSync runs once, at the earlier.
	h.AfterHealthy = postSync && !sync
	for _, key := range waveAnnotations {
		v, set := annotations[key]
		if !set {
			continue
		}
		w, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return Hook{}, false, true, fmt.Errorf("the %s annotation is %q; give a whole number such as -1, 0 or 5 (the hooks of one phase run lowest wave first, 0 when unset)", key, v)
		}
		h.Weight = int(w)
		break
	}
	if policies, set := annotations[ArgoHookDeleteAnnotation]; set {
		for _, p := range splitAnnotation(policies) {
			if helm, known := argoDeletePolicies[p]; known {
				p = helm
			}
			h.DeletePolicies = append(h.DeletePolicies, p)
		}
	}
	return h, false, true, nil
}

// folderHooks takes a folder's hooks out of its objects. Argo CD's hook
// annotation decides when an object carries it, as in Argo CD; otherwise
// helm.sh/hook does, read as for a chart, so that a chart rendered into
// git keeps its hooks; test hooks are left out, as a chart's are. A hook
// with generateName and no name is named generateName and the first ten
// hex digits of the render's hash: Capstan runs a hook by its name, which
// a sync stopped half-way must find again, and each new render names it
// anew. Objects that Skip leaves out are reported.
func folderHooks(objs []*unstructured.Unstructured, template, hash string) ([]*unstructured.Unstructured, []Hook, []Notice, error) {
	var objects []*unstructured.Unstructured
	var hooks []Hook
	var notices []Notice
	for _, obj := range objs {
		h, skip, ok, err := parseArgoHook(obj, template)
		switch {
		case err != nil:
			return nil, nil, nil, fmt.Errorf("render: %s %s: %w", obj.GetKind(), hookName(obj), err)
		case skip:
			notices = append(notices, Notice{Path: "objects/" + obj.GetKind() + "/" + obj.GetName(),
				Message: fmt.Sprintf("%s %s is marked %s: Skip, so it is left out: Capstan neither applies nor runs it", obj.GetKind(), obj.GetName(), ArgoHookAnnotation)})
			continue
		case !ok:
			if h, ok = parseHook(obj, template); !ok {
				objects = append(objects, obj)
				continue
			}
			if h.isTest() {
				continue
			}
		}
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(generatedHookName(obj.GetGenerateName(), hash))
		}
		hooks = append(hooks, h)
	}
	return objects, hooks, notices, nil
}

// generatedHookName is a hook's name from its generateName and the render
// hash, at most 63 characters, as a Job's name may be.
func generatedHookName(generateName, hash string) string {
	digits := strings.TrimPrefix(hash, "sha256:")
	digits = digits[:min(10, len(digits))]
	return generateName[:min(len(generateName), 63-len(digits))] + digits
}

// hookName names an object for an error, by generateName when it has no name.
func hookName(obj *unstructured.Unstructured) string {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		return obj.GetGenerateName() + "*"
	}
	return obj.GetName()
}

// reparseHook reads a hook again after spec.patches changed it, with the
// annotation that made it a hook. A folder's Argo CD hook stays one, and
// Skip cannot take it out.
func reparseHook(obj *unstructured.Unstructured, was Hook) (Hook, error) {
	if was.Annotation == ArgoHookAnnotation {
		h, skip, ok, err := parseArgoHook(obj, was.Template)
		switch {
		case err != nil:
			return Hook{}, fmt.Errorf("spec.patches gave hook %s %s a wave that is not a number: %w", obj.GetKind(), obj.GetName(), err)
		case skip:
			return Hook{}, fmt.Errorf("spec.patches marked hook %s %s Skip: a hook stays a hook; change its phases instead", obj.GetKind(), obj.GetName())
		case !ok:
			return Hook{}, fmt.Errorf("spec.patches removed the %s annotation of hook %s %s: a hook stays a hook; change its phases instead", ArgoHookAnnotation, obj.GetKind(), obj.GetName())
		}
		return h, nil
	}
	h, ok := parseHook(obj, was.Template)
	switch {
	case !ok:
		return Hook{}, fmt.Errorf("spec.patches removed the helm.sh/hook annotation of hook %s %s: a hook stays a hook; change its events instead", obj.GetKind(), obj.GetName())
	case h.isTest():
		return Hook{}, fmt.Errorf("spec.patches made hook %s %s a test hook, which Capstan never runs: a hook stays a hook of the events it can run", obj.GetKind(), obj.GetName())
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
