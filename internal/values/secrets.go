package values

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// UnreferencedGrace is how long Cleanup leaves a values Secret that the
// add-on never adopted and nothing references. A writer creates the Secret
// first and points the Addon at it after; the grace covers that gap.
const UnreferencedGrace = time.Hour

// nameAttempts bounds the random names WriteSecretInputs tries for a new
// values Secret when the ones drawn are taken.
const nameAttempts = 5

// secretKeyRE is what a Secret's data key may be.
var secretKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// WriteSecretInputs stores secret inputs in a new Secret
// "<addon>-values-<random suffix>", labelled for the add-on, and returns the
// valuesFrom entries that point each input's targetPath at it. inputs maps a
// targetPath (such as auth.password) to the raw string.
//
// It only creates: it never reads, updates or deletes a Secret, so the
// caller needs the create verb on Secrets for it. Every write is a new
// Secret, which is immutable and carries SecretInputsAnnotation; the
// controller deletes the old ones once nothing references them in the
// restricted profile, and the writers of package addons delete the ones
// they replace. The caller replaces the add-on's valuesFrom
// entries for these targetPaths with the returned ones.
func WriteSecretInputs(ctx context.Context, c client.Client, addon *capstanv1.Addon, inputs map[string]string) ([]capstanv1.ValuesReference, error) {
	if len(inputs) == 0 {
		return nil, errors.New("no secret inputs to write")
	}
	paths := make([]string, 0, len(inputs))
	for p := range inputs {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var errs errorList
	data := map[string][]byte{}
	keys := map[string]string{}
	total := 0
	for i, p := range paths {
		if _, err := parseTargetPath(p); err != nil {
			errs.add(p, "valuesFrom.targetPath", "secret input %d: %v", i, err)
			continue
		}
		total += len(inputs[p])
		key := p
		if !secretKeyRE.MatchString(key) || len(key) > 253 {
			key = "input-" + strconv.Itoa(i)
		}
		for _, taken := data[key]; taken; _, taken = data[key] {
			key += "-"
		}
		data[key] = []byte(inputs[p])
		keys[p] = key
	}
	if total > MaxDocumentBytes {
		errs.add("/", "values.tooLarge", "the secret inputs are %d bytes together; at most %d bytes (1 MiB) fit in a Secret", total, MaxDocumentBytes)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}

	// NOTE: the name is made here, not by GenerateName: the API server cuts
	// a GenerateName to 58 characters, which for an Addon name of 51 or
	// more would cut off the "-values-" that Read requires of the
	// add-on's own values objects. A name taken already is drawn again.
	var secret *corev1.Secret
	for attempt := 1; ; attempt++ {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:        ValuesPrefix(addon.Name) + utilrand.String(5),
				Namespace:   addon.Namespace,
				Labels:      addon.OwnerLabels(),
				Annotations: map[string]string{SecretInputsAnnotation: "true"},
			},
			Type:      corev1.SecretTypeOpaque,
			Immutable: ptr.To(true),
			Data:      data,
		}
		// NOTE: no owner reference: the writer may run before the Addon
		// exists, and an owned Secret that nothing references yet would
		// look unused to Cleanup. The controller adopts it once the Addon
		// names it.
		err := c.Create(ctx, secret)
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) || attempt == nameAttempts {
			return nil, fmt.Errorf("create the values Secret for add-on %s/%s: %w", addon.Namespace, addon.Name, err)
		}
	}
	refs := make([]capstanv1.ValuesReference, 0, len(paths))
	for _, p := range paths {
		refs = append(refs, capstanv1.ValuesReference{
			Kind:       "Secret",
			Name:       secret.Name,
			ValuesKey:  keys[p],
			TargetPath: p,
		})
	}
	return refs, nil
}

// Adopt labels and, in the restricted profile, owns the values objects that
// spec.valuesFrom names and that belong to the add-on by the rules of Read,
// including Secrets kept by the removal of an add-on of the same name. It
// changes only labels, annotations and owner references, and returns the
// names of the objects it changed. Call it after Read succeeded.
func Adopt(ctx context.Context, c client.Client, addon *capstanv1.Addon, profile capstanv1.Profile) ([]string, error) {
	var changed []string
	for i, ref := range addon.Spec.ValuesFrom {
		if !isValuesName(addon.Name, ref.Name) {
			continue // the cluster profile may read other objects; they are not adopted
		}
		var obj client.Object
		switch ref.Kind {
		case "Secret":
			obj = &corev1.Secret{}
		case "ConfigMap":
			obj = &corev1.ConfigMap{}
		default:
			continue
		}
		key := types.NamespacedName{Namespace: addon.Namespace, Name: ref.Name}
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return changed, fmt.Errorf("read %s %s to adopt it: %w", ref.Kind, key, err)
		}
		if _, err := claim(obj, addon, fmt.Sprintf("%s %s", ref.Kind, ref.Name)); err != nil {
			if profile == capstanv1.ProfileCluster {
				continue
			}
			return changed, invalid(fmt.Sprintf("spec.valuesFrom[%d]", i), "valuesFrom.restricted", "%v", err)
		}
		if !adoptMeta(obj, addon, profile) {
			continue
		}
		if err := c.Update(ctx, obj); err != nil {
			return changed, fmt.Errorf("adopt %s %s: %w", ref.Kind, key, err)
		}
		changed = append(changed, obj.GetName())
	}
	return changed, nil
}

// listValuesObjects lists the Secrets and ConfigMaps labelled for the
// add-on whose names are values names. Objects the add-on's chart applied
// carry the same label but also the managed-by label, and are left out.
func listValuesObjects(ctx context.Context, c client.Client, addon *capstanv1.Addon) ([]client.Object, error) {
	opts := []client.ListOption{client.InNamespace(addon.Namespace), client.MatchingLabels{capstanv1.AddonLabel: addon.Name}}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, opts...); err != nil {
		return nil, fmt.Errorf("list the values Secrets of add-on %s/%s: %w", addon.Namespace, addon.Name, err)
	}
	var configMaps corev1.ConfigMapList
	if err := c.List(ctx, &configMaps, opts...); err != nil {
		return nil, fmt.Errorf("list the values ConfigMaps of add-on %s/%s: %w", addon.Namespace, addon.Name, err)
	}
	var all []client.Object
	for i := range secrets.Items {
		all = append(all, &secrets.Items[i])
	}
	for i := range configMaps.Items {
		all = append(all, &configMaps.Items[i])
	}
	var out []client.Object
	for _, o := range all {
		if !isValuesName(addon.Name, o.GetName()) || o.GetLabels()[capstanv1.ManagedByLabel] == "capstan" {
			continue
		}
		if ns, ok := o.GetLabels()[capstanv1.AddonNamespaceLabel]; ok && ns != addon.Namespace {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// kindName names a values object as "Secret/<name>" or "ConfigMap/<name>".
func kindName(o client.Object) string {
	if _, ok := o.(*corev1.Secret); ok {
		return "Secret/" + o.GetName()
	}
	return "ConfigMap/" + o.GetName()
}

// Cleanup deletes the add-on's values Secrets and ConfigMaps that its spec
// no longer names, for any purpose (ReferencedObjects). It deletes one the add-on owns (it
// adopted it, so it was referenced once) at once, and an unowned one only
// after UnreferencedGrace, so a Secret written for an Addon that is not yet
// updated survives. The generated Secret is never cleaned up. It returns
// what it deleted, as "Kind/name". Call it in the restricted profile, after
// a successful apply of the current spec.
func Cleanup(ctx context.Context, c client.Client, addon *capstanv1.Addon, now time.Time) ([]string, error) {
	// NOTE: an object the spec names is in use whatever reads it: a
	// restricted add-on reads no variables from objects, yet its
	// credentials or keys may carry a values name and the add-on's label.
	referenced := map[string]bool{}
	for _, key := range ReferencedObjects(addon.Spec) {
		referenced[key] = true
	}
	objs, err := listValuesObjects(ctx, c, addon)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, o := range objs {
		if o.GetName() == GeneratedName(addon.Name) || referenced[kindName(o)] {
			continue
		}
		if !ownedBy(o, addon) && now.Sub(o.GetCreationTimestamp().Time) < UnreferencedGrace {
			continue
		}
		// The preconditions make sure the object deleted is the one judged
		// unreferenced, not one recreated or adopted since.
		uid, rv := o.GetUID(), o.GetResourceVersion()
		err := c.Delete(ctx, o, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !apierrors.IsNotFound(err) {
			if apierrors.IsConflict(err) {
				continue // changed since the list; the next cleanup judges it again
			}
			return deleted, fmt.Errorf("delete unreferenced values object %s in %s: %w", kindName(o), o.GetNamespace(), err)
		}
		deleted = append(deleted, kindName(o))
	}
	return deleted, nil
}

// Release hands the add-on's values Secrets and ConfigMaps and its
// generated Secret back when a removal keeps values: it drops their labels
// and the add-on's owner reference, so neither the garbage collector nor a
// cleanup deletes them, and marks them with ReleasedAnnotation, so a later
// add-on of the same name adopts them and no other add-on may. It returns
// what it released, as "Kind/name". Call it from the finalizer, before the
// Addon goes.
func Release(ctx context.Context, c client.Client, addon *capstanv1.Addon) ([]string, error) {
	objs, err := listValuesObjects(ctx, c, addon)
	if err != nil {
		return nil, err
	}
	var released []string
	for _, o := range objs {
		labels := o.GetLabels()
		delete(labels, capstanv1.AddonLabel)
		delete(labels, capstanv1.AddonNamespaceLabel)
		o.SetLabels(labels)
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[ReleasedAnnotation] = addon.Name
		o.SetAnnotations(ann)
		dropOwner(o, addon)
		if err := c.Update(ctx, o); err != nil {
			return released, fmt.Errorf("release values object %s in %s: %w", kindName(o), o.GetNamespace(), err)
		}
		released = append(released, kindName(o))
	}
	return released, nil
}

// Disown takes the add-on's owner reference off its values Secrets and
// ConfigMaps and its generated Secret, and leaves them otherwise as they
// are, so the garbage collector does not delete them with the Addon: a
// cluster add-on's removal keeps its values, and a restricted reconcile
// before its namespace was trusted may have owned them. It returns what it
// changed, as "Kind/name". Call it from the finalizer, before the Addon
// goes.
func Disown(ctx context.Context, c client.Client, addon *capstanv1.Addon) ([]string, error) {
	objs, err := listValuesObjects(ctx, c, addon)
	if err != nil {
		return nil, err
	}
	var disowned []string
	for _, o := range objs {
		if !dropOwner(o, addon) {
			continue
		}
		if err := c.Update(ctx, o); err != nil {
			return disowned, fmt.Errorf("take the add-on's owner reference off values object %s in %s: %w", kindName(o), o.GetNamespace(), err)
		}
		disowned = append(disowned, kindName(o))
	}
	return disowned, nil
}

// dropOwner takes off o every owner reference to an Addon of the add-on's
// name, and says whether it took any: one of an earlier Addon of that name
// too, whose deletion would otherwise let the garbage collector take o.
func dropOwner(o metav1.Object, addon *capstanv1.Addon) bool {
	var owners []metav1.OwnerReference
	for _, ref := range o.GetOwnerReferences() {
		if !(ref.Kind == "Addon" && strings.HasPrefix(ref.APIVersion, capstanv1.GroupVersion.Group+"/") && ref.Name == addon.Name) {
			owners = append(owners, ref)
		}
	}
	if len(owners) == len(o.GetOwnerReferences()) {
		return false
	}
	o.SetOwnerReferences(owners)
	return true
}

// DeleteAll deletes the add-on's values Secrets and ConfigMaps and its
// generated Secret, for a removal that does not keep values. The owner
// references would let the garbage collector do it in the restricted
// profile; this does not depend on one running. It returns what it deleted,
// as "Kind/name".
//
// One the spec names for a purpose other than values (the source's
// credentials, the verification or decryption keys, a kubeconfig, the
// Secrets and ConfigMaps of spec.substituteFrom), as Cleanup keeps it, is
// kept: it is the person's, made for the add-on's
// source, and an Addon made again with the same spec (a git move between
// folders deletes and recreates it) needs it on its first fetch. Its owner
// reference to the add-on is taken off, so the garbage collector keeps it
// too.
func DeleteAll(ctx context.Context, c client.Client, addon *capstanv1.Addon) ([]string, error) {
	other := map[string]bool{}
	for _, key := range otherPurposeObjects(addon.Spec) {
		other[key] = true
	}
	objs, err := listValuesObjects(ctx, c, addon)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, o := range objs {
		if other[kindName(o)] {
			if dropOwner(o, addon) {
				if err := c.Update(ctx, o); err != nil {
					return deleted, fmt.Errorf("take the add-on's owner reference off %s in %s, which the spec names: %w", kindName(o), o.GetNamespace(), err)
				}
			}
			continue
		}
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("delete values object %s in %s: %w", kindName(o), o.GetNamespace(), err)
		}
		deleted = append(deleted, kindName(o))
	}
	return deleted, nil
}
