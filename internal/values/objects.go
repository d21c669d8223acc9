package values

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
)

// Names, keys and annotations of an add-on's values objects.
const (
	// DefaultValuesKey is the key a valuesFrom entry reads when it names none.
	DefaultValuesKey = "values.yaml"
	// GeneratedKey is the key of the generated Secret that holds the
	// generated values, as a YAML document.
	GeneratedKey = "values.yaml"
	// ReleasedAnnotation names the add-on that kept a values Secret when it
	// was removed. A new add-on of that name adopts the Secret; no other may.
	ReleasedAnnotation = "capstan.dev/released-from"
	// SecretInputsAnnotation marks a values Secret that WriteSecretInputs
	// made: a writer that replaces its entries may delete it. A Secret
	// without it, made by a person, is never deleted so, whatever its name
	// and labels.
	SecretInputsAnnotation = "capstan.dev/secret-inputs"
	// MaxDocumentBytes caps one values document: spec.values, or one key of
	// a values Secret or ConfigMap. Kubernetes caps a whole object near
	// this size anyway; the cap keeps a huge document from reaching the parser.
	MaxDocumentBytes = 1 << 20
	// MaxTotalBytes caps the values documents of one add-on together:
	// spec.values and the key of each valuesFrom entry, counted once per
	// entry, since each entry is merged on its own. It leaves room for
	// spec.values and one full document beside it, and keeps what one
	// reconcile parses and merges bounded, whatever the number of entries.
	MaxTotalBytes = 2 << 20
)

// ValuesPrefix is the name prefix of an add-on's values objects:
// "<addon>-values-".
func ValuesPrefix(addon string) string { return addon + "-values-" }

// GeneratedName is the name of an add-on's generated Secret:
// "<addon>-generated".
func GeneratedName(addon string) string { return addon + "-generated" }

// ReferencedObjects lists the Secrets and ConfigMaps an add-on's spec names,
// for any purpose, as "Kind/name": valuesFrom, substituteFrom, the
// decryption keys, the kubeconfig, the source's credentials and the chart's
// verification keys. The controller wakes an add-on when one of them
// changes, and Cleanup never deletes one: one list serves both, so an
// object the add-on reads is never one that a cleanup judges unused.
func ReferencedObjects(spec capstanv1.AddonSpec) []string {
	var keys []string
	for _, ref := range spec.ValuesFrom {
		keys = append(keys, ref.Kind+"/"+ref.Name)
	}
	return append(keys, otherPurposeObjects(spec)...)
}

// otherPurposeObjects lists, as ReferencedObjects does, the Secrets and
// ConfigMaps the spec names for a purpose other than values: variables,
// keys, a kubeconfig, credentials.
func otherPurposeObjects(spec capstanv1.AddonSpec) []string {
	var keys []string
	for _, ref := range spec.SubstituteFrom {
		keys = append(keys, ref.Kind+"/"+ref.Name)
	}
	if d := spec.Decryption; d != nil {
		keys = append(keys, "Secret/"+d.SecretRef.Name)
	}
	if kc := spec.KubeConfig; kc != nil {
		keys = append(keys, "Secret/"+kc.SecretRef.Name)
	}
	if ref := source.SecretRef(spec); ref != nil {
		keys = append(keys, "Secret/"+ref.Name)
	}
	if c := spec.Chart; c != nil && c.Verify != nil {
		if v := c.Verify.Provenance; v != nil {
			keys = append(keys, "Secret/"+v.SecretRef.Name)
		}
		if v := c.Verify.Cosign; v != nil {
			keys = append(keys, "Secret/"+v.SecretRef.Name)
		}
	}
	return keys
}

// isValuesName reports whether name is one of the add-on's values objects.
func isValuesName(addon, name string) bool {
	if name == GeneratedName(addon) {
		return true
	}
	rest, ok := strings.CutPrefix(name, ValuesPrefix(addon))
	return ok && rest != ""
}

func ownedBy(obj metav1.Object, addon *capstanv1.Addon) bool {
	for _, o := range obj.GetOwnerReferences() {
		if addon.UID != "" && o.UID == addon.UID {
			return true
		}
	}
	return false
}

// claim decides whether a values object belongs to the add-on. It does when
// it is labelled for the add-on, or when it is unlabelled and a removal of an
// add-on of the same name kept it (ReleasedAnnotation). adopt is true when
// the controller should label it (and, in the restricted profile, own it).
func claim(obj metav1.Object, addon *capstanv1.Addon, what string) (adopt bool, err error) {
	label, labelled := obj.GetLabels()[capstanv1.AddonLabel]
	switch {
	case labelled && label == addon.Name:
		return false, nil
	case labelled:
		return false, fmt.Errorf("%s is labelled %s=%s: it belongs to the add-on %s, and an add-on reads only its own values objects",
			what, capstanv1.AddonLabel, label, label)
	case obj.GetAnnotations()[ReleasedAnnotation] == addon.Name:
		return true, nil
	default:
		return false, fmt.Errorf("%s is not labelled %s=%s: a restricted add-on reads only values objects labelled for it; label it, or write secret inputs through Capstan, which labels them",
			what, capstanv1.AddonLabel, addon.Name)
	}
}

// adoptMeta labels obj for the add-on, drops the released mark and, in the
// restricted profile, makes the add-on an owner. It reports whether anything
// changed.
func adoptMeta(obj metav1.Object, addon *capstanv1.Addon, profile capstanv1.Profile) bool {
	changed := false
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range addon.OwnerLabels() {
		if labels[k] != v {
			labels[k] = v
			changed = true
		}
	}
	obj.SetLabels(labels)
	if ann := obj.GetAnnotations(); ann != nil {
		if _, ok := ann[ReleasedAnnotation]; ok {
			delete(ann, ReleasedAnnotation)
			obj.SetAnnotations(ann)
			changed = true
		}
	}
	if profile == capstanv1.ProfileRestricted && addon.UID != "" && !ownedBy(obj, addon) {
		obj.SetOwnerReferences(append(obj.GetOwnerReferences(), addon.OwnerReference()))
		changed = true
	}
	return changed
}

// secretData returns a key of a Secret, or false when it is absent.
func secretData(s *corev1.Secret, key string) ([]byte, bool) {
	b, ok := s.Data[key]
	return b, ok
}

// configMapData returns a key of a ConfigMap, text or binary.
func configMapData(cm *corev1.ConfigMap, key string) ([]byte, bool) {
	if s, ok := cm.Data[key]; ok {
		return []byte(s), true
	}
	b, ok := cm.BinaryData[key]
	return b, ok
}
