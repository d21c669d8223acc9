package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// A chart upgrade that changes a CRD can break the data stored under it,
// and the API server takes some of those changes without a word. Before
// such a change is applied, Capstan compares the rendered CRD with the live
// one and refuses, as violations in the plan, unless
// spec.allowUnsafeCRDChanges is set:
//   - a version that status.storedVersions still lists is dropped;
//   - the storage version changes with no conversion webhook, to a version
//     whose schema differs from the old storage version's;
//   - the conversion webhook is removed while objects are stored in a
//     version whose schema differs from the storage version's;
//   - existing objects no longer validate against the new schema of their
//     version, or hold fields it would prune: a sample of them is dry-run
//     created, by the API server itself and with strict field validation,
//     against a shadow of the new CRD (see crdshadow.go), so its schema,
//     formats, defaults, pruning and x-kubernetes-validations rules all
//     judge. When no shadow can be made (a conversion webhook, or an
//     account that may not create CRDs), the sample is pruned with the
//     API server's pruning and validated with kube-openapi's schema
//     validator in the controller instead, without the CEL rules, and the
//     notice says so.
//
// Only a CRD that the plan updates, or that a hook the sync runs applies
// over a live one, with a version's schema, the set of served and
// storage versions, or a conversion webhook removed, is checked: one the preview merely read, or
// re-verified after VerifyTTL or a restart, breaks nothing. A
// shadow is a cluster-scoped write that every API server rebuilds its
// OpenAPI and discovery for, so it is made only when the plan is about to
// be applied; a plan that is not (capstan plan and the API's plans, a
// suspended add-on, one that waits for an approval, a window or a
// dependency) is checked in the controller, and says so.

// crdSampleSize bounds how many existing objects of each version are
// validated against a new schema.
const crdSampleSize = 50

// crdSafety returns the violations of the rendered CRDs the plan changes
// against the live ones, and notices of what was checked: the objects the
// plan updates, and the hooks the sync runs, which are applied over the
// live CRD as plain objects are. applies reports whether the plan is about
// to be applied, and so whether a shadow CRD may be made; it is asked only
// when a CRD needs its objects checked.
func (r *AddonReconciler) crdSafety(ctx context.Context, s *scope, applies func() bool) ([]capstanv1.Violation, []capstanv1.Notice, error) {
	var violations []capstanv1.Violation
	var notices []capstanv1.Notice
	updates := map[string]bool{}
	for _, p := range s.previews {
		if p.Action == capstanv1.ActionUpdate {
			updates[p.Ref.Key()] = true
		}
	}
	seen := map[string]bool{}
	for _, obj := range s.objects {
		if !isCRD(obj) {
			continue
		}
		ref := capstanv1.RefOf(obj)
		seen[ref.Key()] = true
		live := s.live[ref.Key()]
		if live == nil || !updates[ref.Key()] {
			continue // new, or unchanged
		}
		v, n, err := r.crdChange(ctx, s, ref, obj, live, applies)
		if err != nil {
			return nil, nil, err
		}
		violations, notices = append(violations, v...), append(notices, n...)
	}
	// NOTE: a chart that ships its CRDs as pre-install and pre-upgrade
	// hooks, to have them in before anything that uses them, has them
	// applied by the hook runner, over the live CRD and never previewed:
	// each is read here, and versionsToCheck alone decides whether it
	// changes anything stored. Only the hooks this sync runs are
	// checked: a pre-install CRD hook is not applied again by an upgrade.
	runs := map[string]bool{}
	for _, h := range s.plannedHooks() {
		runs[h.Key()] = true
	}
	for _, h := range s.hooks {
		ref := capstanv1.RefOf(h.Object)
		if !isCRD(h.Object) || !runs[ref.Key()] || seen[ref.Key()] {
			continue
		}
		seen[ref.Key()] = true
		live, err := s.applier.Get(ctx, ref)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the live %s, which a hook applies: %w", ref.Describe(), err)
		}
		if live == nil {
			continue // new
		}
		v, n, err := r.crdChange(ctx, s, ref, h.Object, live, applies)
		if err != nil {
			return nil, nil, err
		}
		violations, notices = append(violations, v...), append(notices, n...)
	}
	return violations, notices, nil
}

func isCRD(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "CustomResourceDefinition" && obj.GroupVersionKind().Group == "apiextensions.k8s.io"
}

// crdChange checks the rendered CRD obj against its live one, when a
// version's schema or the served and storage versions change.
func (r *AddonReconciler) crdChange(ctx context.Context, s *scope, ref capstanv1.ObjectRef, obj, live *unstructured.Unstructured, applies func() bool) ([]capstanv1.Violation, []capstanv1.Notice, error) {
	next, cur := &apiextensionsv1.CustomResourceDefinition{}, &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, next); err != nil {
		return nil, nil, fmt.Errorf("reading the rendered %s: %w", ref.Describe(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, cur); err != nil {
		return nil, nil, fmt.Errorf("reading the live %s: %w", ref.Describe(), err)
	}
	check, changed := versionsToCheck(cur, next)
	if !changed {
		return nil, nil, nil // a label, a printer column: nothing stored is at stake
	}
	return r.crdChanges(ctx, s, ref, cur, next, check, applies)
}

// versionsToCheck compares a live CRD with its rendered next one. changed
// is set when a stored object could be at stake: a version's schema, or
// which versions are served or stored, differs, or the conversion webhook
// is removed. check names the versions
// whose existing objects must be validated against the new schema: every
// served one when the served or storage versions change, else those whose
// schema changed.
func versionsToCheck(cur, next *apiextensionsv1.CustomResourceDefinition) (check []string, changed bool) {
	old := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	for _, v := range cur.Spec.Versions {
		old[v.Name] = v
	}
	all := len(cur.Spec.Versions) != len(next.Spec.Versions)
	for _, v := range next.Spec.Versions {
		o, ok := old[v.Name]
		if !ok || o.Served != v.Served || o.Storage != v.Storage {
			all = true
		}
	}
	for _, v := range next.Spec.Versions {
		o, ok := old[v.Name]
		if all || ok && !equality.Semantic.DeepEqual(o.Schema, v.Schema) {
			check = append(check, v.Name)
		}
	}
	return check, all || len(check) > 0 || webhookRemoved(cur, next)
}

// webhookRemoved reports whether next no longer converts with the webhook
// cur converts with, once applied: next sets another strategy, or says
// nothing of it where Capstan's apply set the webhook: from then on the API server reads an object stored
// in any version as every other with only its apiVersion changed.
func webhookRemoved(cur, next *apiextensionsv1.CustomResourceDefinition) bool {
	converts := func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
	}
	if !converts(cur) || converts(next) {
		return false
	}
	// NOTE: the apply is a server-side apply, which leaves a field another
	// manager set: a rendered CRD that says nothing of spec.conversion
	// removes the webhook only when Capstan's apply set it.
	return next.Spec.Conversion != nil && next.Spec.Conversion.Strategy != "" || ownsConversion(cur)
}

// ownsConversion reports whether Capstan's field manager owns
// spec.conversion in crd's managedFields.
func ownsConversion(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, mf := range crd.ManagedFields {
		if mf.Manager != capstanv1.FieldManager || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) == nil && fields.Spec["f:conversion"] != nil {
			return true
		}
	}
	return false
}

// unconvertedStoredVersions are the versions of cur.Status.StoredVersions
// whose objects next reads unconverted in a schema not theirs: when next
// removes cur's conversion webhook, each stored version but next's storage
// version whose schema (cur's, the one its objects were written in)
// differs from next's storage version's, prose aside. skip is a version
// crd-storage-version-changed already refuses for the same reason.
func unconvertedStoredVersions(cur, next *apiextensionsv1.CustomResourceDefinition, skip string) []string {
	to := storageVersion(next)
	if !webhookRemoved(cur, next) || to == "" {
		return nil
	}
	var out []string
	for _, stored := range cur.Status.StoredVersions {
		dropped := !slices.ContainsFunc(next.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == stored })
		if stored == to || stored == skip || dropped {
			continue // crd-stored-version-dropped refuses a dropped one
		}
		if !sameSchema(versionNamed(cur, stored), versionNamed(next, to)) {
			out = append(out, stored)
		}
	}
	return out
}

func (r *AddonReconciler) crdChanges(ctx context.Context, s *scope, ref capstanv1.ObjectRef, cur, next *apiextensionsv1.CustomResourceDefinition, check []string, applies func() bool) ([]capstanv1.Violation, []capstanv1.Notice, error) {
	var out []capstanv1.Violation
	const fix = "; migrate the stored objects first, or set spec.allowUnsafeCRDChanges"
	names := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range next.Spec.Versions {
		names[next.Spec.Versions[i].Name] = &next.Spec.Versions[i]
	}
	for _, stored := range cur.Status.StoredVersions {
		if names[stored] == nil {
			out = append(out, capstanv1.Violation{Object: ref, Path: "spec.versions", Rule: "crd-stored-version-dropped",
				Message: fmt.Sprintf("the chart drops version %s, in which objects are still stored (status.storedVersions)%s", stored, fix)})
		}
	}
	moved := ""
	if from, to, unsafe := storageMoveUnsafe(cur, next); unsafe {
		moved = from
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.versions", Rule: "crd-storage-version-changed",
			Message: fmt.Sprintf("the storage version changes from %s to %s, whose schema differs, with no conversion webhook: stored objects are read as %s with only their apiVersion changed%s", from, to, to, fix)})
	}
	if unconverted := unconvertedStoredVersions(cur, next, moved); len(unconverted) > 0 {
		to := storageVersion(next)
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.conversion", Rule: "crd-conversion-removed",
			Message: fmt.Sprintf("the conversion webhook is removed while objects are still stored in %s, whose schema differs from %s's: they would be read as %s with only their apiVersion changed, and lose fields at their next write%s",
				strings.Join(unconverted, ", "), to, to, fix)})
	}
	var notices []capstanv1.Notice
	shadows := &shadowCheck{crd: next}
	defer shadows.done(ctx)
	for _, v := range next.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || !slices.Contains(check, v.Name) ||
			!v.Served && !v.Storage && (!slices.Contains(cur.Status.StoredVersions, v.Name) || sameSchema(versionNamed(cur, v.Name), v.Schema.OpenAPIV3Schema)) {
			// NOTE: no request reads or writes a version the new CRD
			// does not serve (one on its way out), but the API server
			// prunes an object it reads from etcd by the schema of the
			// version it is stored in, served or not: an unserved
			// version is checked only while objects may be stored in
			// it, or will be, and only when its own schema changes;
			// the pruning its schema does already is not the chart's
			// change.
			continue
		}
		readAs := readAsVersion(cur, next, v.Name)
		if readAs == "" {
			continue
		}
		sample, err := r.checkExisting(ctx, s, cur, shadows, v, readAs, applies)
		if err != nil {
			return nil, nil, err
		}
		checked, invalid, first := sample.checked, sample.invalid, sample.first
		if checked > 0 || sample.deleting > 0 || sample.terminating > 0 {
			as := ""
			if readAs != v.Name {
				as = " (read as " + readAs + ", which converts with no webhook)"
			}
			notices = append(notices, capstanv1.Notice{Path: "objects/CustomResourceDefinition/" + cur.Name,
				Message: fmt.Sprintf("validated %d existing %s of version %s%s against the new schema, %s (at most %d are sampled)%s", checked, cur.Spec.Names.Plural, v.Name, as, sample.how, crdSampleSize, sample.leftOut())})
		}
		if invalid > 0 {
			out = append(out, capstanv1.Violation{Object: ref, Path: "spec.versions[" + v.Name + "].schema", Rule: "crd-schema-invalidates-objects",
				Message: fmt.Sprintf("%d of %d existing %s (sampled) no longer validate against the new schema of %s, first %s%s", invalid, checked, cur.Spec.Names.Plural, v.Name, first, fix)})
		}
	}
	return out, notices, nil
}

// storageMoveUnsafe reports whether the storage version moves, from and
// to, in a way that changes stored objects unseen: with no conversion
// webhook, to a version whose schema is not the old storage version's.
// With conversion None the API server rewrites only the apiVersion of an
// object it reads, so under the same schema (prose aside) nothing is lost,
// and the sampled objects are validated against the new version's schema
// anyway (versionsToCheck, readAsVersion).
func storageMoveUnsafe(cur, next *apiextensionsv1.CustomResourceDefinition) (from, to string, unsafe bool) {
	from, to = storageVersion(cur), storageVersion(next)
	if from == "" || to == "" || from == to {
		return from, to, false
	}
	if next.Spec.Conversion != nil && next.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return from, to, false
	}
	return from, to, !sameSchema(versionNamed(cur, from), versionNamed(next, to))
}

// readAsVersion names the version of cur to list the existing objects of
// next's version as: the version itself when cur serves it; else, when it
// is next's new storage version, or one cur no longer serves that objects
// may still be stored in (status.storedVersions), and the CRD converts
// with no webhook (so an object reads the same in every version but for
// its apiVersion), cur's storage version if cur serves it; else none.
func readAsVersion(cur, next *apiextensionsv1.CustomResourceDefinition, version string) string {
	if served(cur, version) {
		return version
	}
	if version != storageVersion(next) && !slices.Contains(cur.Status.StoredVersions, version) ||
		next.Spec.Conversion != nil && next.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return ""
	}
	if from := storageVersion(cur); from != "" && served(cur, from) {
		return from
	}
	return ""
}

func versionNamed(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.JSONSchemaProps {
	for _, v := range crd.Spec.Versions {
		if v.Name == name && v.Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	return nil
}

// sameSchema reports whether two schemas judge objects alike: equal once
// their prose (descriptions, titles, examples, external docs), which
// usually names the version, is removed.
func sameSchema(a, b *apiextensionsv1.JSONSchemaProps) bool {
	return equality.Semantic.DeepEqual(withoutProse(a), withoutProse(b))
}

// withoutProse returns a copy of s without the fields that only document.
func withoutProse(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s == nil {
		return nil
	}
	c := s.DeepCopy()
	dropProse(c)
	return c
}

func dropProse(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.Description, s.Title, s.Example, s.ExternalDocs = "", "", nil, nil
	for _, m := range []map[string]apiextensionsv1.JSONSchemaProps{s.Properties, s.PatternProperties, s.Definitions} {
		for k, p := range m {
			dropProse(&p)
			m[k] = p
		}
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.OneOf, s.AnyOf} {
		for i := range list {
			dropProse(&list[i])
		}
	}
	dropProse(s.Not)
	if s.Items != nil {
		dropProse(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			dropProse(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		dropProse(s.AdditionalProperties.Schema)
	}
	if s.AdditionalItems != nil {
		dropProse(s.AdditionalItems.Schema)
	}
	for k, d := range s.Dependencies {
		dropProse(d.Schema)
		s.Dependencies[k] = d
	}
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func served(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	return slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == version && v.Served
	})
}

// validateInController validates the sampled objects against the version's
// new schema in the controller, with the API server's pruning and with
// kube-openapi: the fallback when the API server cannot judge through a
// shadow CRD.
func validateInController(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion, items []unstructured.Unstructured) (checked, invalid int, first string, err error) {
	// NOTE: a CRD's schema is an OpenAPI v3 schema, which kube-openapi's
	// spec.Schema reads as it is; the x-kubernetes-* extensions are kept
	// as extensions and not enforced.
	raw, err := json.Marshal(v.Schema.OpenAPIV3Schema)
	if err != nil {
		return 0, 0, "", err
	}
	schema := &spec.Schema{}
	if err := json.Unmarshal(raw, schema); err != nil {
		return 0, 0, "", fmt.Errorf("reading the new schema of %s %s: %w", crd.Name, v.Name, err)
	}
	validator := validate.NewSchemaValidator(schema, nil, "", strfmt.Default)
	// NOTE: the API server applies a schema's defaults to a stored object
	// as it reads it, before any update of it is validated: a new required
	// field with a default breaks nothing, so the sample is defaulted first.
	var structural *structuralschema.Structural
	var internal apiextensions.JSONSchemaProps
	if apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil) == nil {
		structural, _ = structuralschema.NewStructural(&internal)
	}
	for _, item := range items {
		checked++
		why := ""
		if pruned := prunedFields(item, structural); len(pruned) > 0 {
			why = "the new schema drops " + strings.Join(pruned, ", ") + ", which the API server would prune"
		} else {
			// The object's own bookkeeping is not the schema's to judge,
			// nor is its status, as the shadow's dry-run create leaves
			// it out: its controller writes it again.
			obj := item.DeepCopy().Object
			delete(obj, "status")
			if structural != nil {
				defaulting.Default(obj, structural)
			}
			delete(obj, "metadata")
			delete(obj, "apiVersion")
			delete(obj, "kind")
			if errs := validator.Validate(obj).Errors; len(errs) > 0 {
				why = errs[0].Error()
			}
		}
		if why == "" {
			continue
		}
		invalid++
		if first == "" {
			name := item.GetName()
			if ns := item.GetNamespace(); ns != "" {
				name = ns + "/" + name
			}
			first = name + ": " + why
		}
	}
	return checked, invalid, first, nil
}

// prunedFields returns the paths of the fields of item, outside its
// metadata and status, that the API server would prune under the
// structural schema s: those the schema does not name, outside a subtree
// that keeps unknown fields. kube-openapi's validator allows them, but
// they are lost at the object's next write. It returns none when s is nil
// (a schema that is not structural, which a v1 CRD cannot have).
//
// NOTE: status is left out as the shadow's dry-run create leaves it out:
// it is its controller's to write again, and a create cannot carry it.
func prunedFields(item unstructured.Unstructured, s *structuralschema.Structural) []string {
	if s == nil {
		return nil
	}
	obj := item.DeepCopy().Object
	delete(obj, "status")
	return pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
}
