package guard

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Harden sets the pod defaults of the restricted profile in every pod
// template of objs (Deployments and Jobs, hooks included), where the chart
// says nothing:
//
//   - spec.automountServiceAccountToken: false
//   - spec.securityContext.runAsNonRoot: true
//   - spec.securityContext.seccompProfile: {type: RuntimeDefault}
//   - on every container, init and ephemeral containers included:
//     securityContext.allowPrivilegeEscalation: false, and ALL in
//     securityContext.capabilities.drop
//
// What the chart set is kept: a value is only ever added, and ALL is added
// to a drop list the chart wrote that lacks it (spelt exactly so: all in
// lower case is kept, and ALL added after it). Harden is idempotent. It edits the maps in
// place and touches nothing else. A template of an unexpected shape is left
// as it is and named in the returned error; Check reports it as a violation,
// so callers that run Check next may ignore the error.
func Harden(objs []*unstructured.Unstructured) error {
	var errs []error
	for i, u := range objs {
		if u == nil || u.Object == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil {
			continue
		}
		gvk := gv.WithKind(u.GetKind())
		if gvk != gvkDeployment && gvk != gvkJob {
			continue
		}
		if err := hardenTemplate(u.Object); err != nil {
			errs = append(errs, fmt.Errorf("object %d (%s %q): %w", i+1, gvk.Kind, u.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// hardenTemplate hardens the pod template at spec.template of obj.
func hardenTemplate(obj map[string]any) error {
	spec, err := childMap(obj, "spec", false)
	if err != nil {
		return err
	}
	tmpl, err := childMap(spec, "template", false)
	if err != nil {
		return fmt.Errorf("spec.%w", err)
	}
	ps, err := childMap(tmpl, "spec", false)
	if err != nil {
		return fmt.Errorf("spec.template.%w", err)
	}
	var errs []error
	const base = "spec.template.spec"
	if err := setDefault(ps, "automountServiceAccountToken", false); err != nil {
		errs = append(errs, fmt.Errorf("%s.%w", base, err))
	}
	if psc, err := childMap(ps, "securityContext", true); err != nil {
		errs = append(errs, fmt.Errorf("%s.%w", base, err))
	} else {
		if err := setDefault(psc, "runAsNonRoot", true); err != nil {
			errs = append(errs, fmt.Errorf("%s.securityContext.%w", base, err))
		}
		if err := setDefault(psc, "seccompProfile", podSeccompDefault(tmpl)); err != nil {
			errs = append(errs, fmt.Errorf("%s.securityContext.%w", base, err))
		}
	}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		v, ok := ps[list]
		if !ok || v == nil {
			continue
		}
		cs, ok := v.([]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s.%s is a %s, not a list of containers", base, list, jsonKind(v)))
			continue
		}
		for i, c := range cs {
			cm, ok := c.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("%s.%s[%d] is a %s, not a container", base, list, i, jsonKind(c)))
				continue
			}
			if err := hardenContainer(cm); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s[%d].%w", base, list, i, err))
			}
		}
	}
	return errors.Join(errs...)
}

// hardenContainer sets a container's defaults.
func hardenContainer(c map[string]any) error {
	sc, err := childMap(c, "securityContext", true)
	if err != nil {
		return err
	}
	if err := setDefault(sc, "allowPrivilegeEscalation", false); err != nil {
		return fmt.Errorf("securityContext.%w", err)
	}
	caps, err := childMap(sc, "capabilities", true)
	if err != nil {
		return fmt.Errorf("securityContext.%w", err)
	}
	drop, ok := caps["drop"]
	if !ok || drop == nil {
		caps["drop"] = []any{"ALL"}
		return nil
	}
	list, ok := drop.([]any)
	if !ok {
		return fmt.Errorf("securityContext.capabilities.drop is a %s, not a list", jsonKind(drop))
	}
	// NOTE: only an exact ALL counts. Pod-security admission compares the
	// string ALL, so a namespace that enforces the restricted Pod Security
	// Standard rejects a pod whose drop list says all in another case,
	// whatever the runtime makes of it; ALL is appended beside it.
	for _, d := range list {
		if d == "ALL" {
			return nil
		}
	}
	caps["drop"] = append(list, "ALL")
	return nil
}

// podSeccompDefault is the pod's seccomp profile when it sets none: the one
// the legacy pod annotation names, so the field and the annotation agree as
// the API server requires, or else RuntimeDefault.
func podSeccompDefault(tmpl map[string]any) map[string]any {
	ann, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "annotations")
	v := strings.TrimSpace(ann[seccompPodAnnotation])
	if p, ok := strings.CutPrefix(v, "localhost/"); ok && p != "" {
		return map[string]any{"type": "Localhost", "localhostProfile": p}
	}
	return map[string]any{"type": "RuntimeDefault"}
}

// childMap returns m[key] as a map. With create, a missing or null key gets
// an empty map; without it, a missing key is an error.
func childMap(m map[string]any, key string, create bool) (map[string]any, error) {
	v, ok := m[key]
	if !ok || v == nil {
		if !create {
			return nil, fmt.Errorf("%s is missing", key)
		}
		c := map[string]any{}
		m[key] = c
		return c, nil
	}
	c, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is a %s, not an object", key, jsonKind(v))
	}
	return c, nil
}

// setDefault sets m[key] to v when the key is missing or null. A value of
// another JSON type than v's is an error and is left alone.
func setDefault(m map[string]any, key string, v any) error {
	cur, ok := m[key]
	if !ok || cur == nil {
		m[key] = v
		return nil
	}
	if jsonKind(cur) != jsonKind(v) {
		return fmt.Errorf("%s is a %s, not a %s", key, jsonKind(cur), jsonKind(v))
	}
	return nil
}

// jsonKind names the JSON type of an unstructured value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case int, int32, int64, float32, float64, uint, uint32, uint64:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}
