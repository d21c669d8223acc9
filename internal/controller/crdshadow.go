package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/apply"
)

// Whether stored objects still validate against a changed CRD is a question
// for the API server: only it runs the schema, the formats, the defaults
// and the CEL rules exactly as it will when the objects are next written.
// It cannot be asked of the new CRD before it is applied, so Capstan
// creates a shadow: a copy of the new CRD under a group of its own
// (<hash>.crdcheck.capstan.dev), and dry-run creates the sampled objects
// against it. Nothing is stored under the shadow, and it is deleted at once
// after. The group's hash covers the Addon as well as the CRD, so two
// add-ons that render one CRD never share, or delete, each other's shadow.
// A shadow that a crash left behind is deleted by its add-on's next check,
// by any check once it is shadowMaxAge old, and by the controller's sweep
// (sweepShadows).

const (
	// shadowLabel marks shadow CRDs, so leftovers can be found (the label
	// alone does not make a CRD one: see isShadow); its value is the
	// Addon's shadowOwner.
	shadowLabel = "capstan.dev/crd-check"
	// shadowGroupSuffix ends every shadow's group.
	shadowGroupSuffix = ".crdcheck.capstan.dev"
	// shadowMaxAge is how old a shadow must be to count as left behind.
	shadowMaxAge = 10 * time.Minute
)

// errNoShadow says that the check cannot use a shadow CRD, and why.
var errNoShadow = errors.New("no shadow CRD")

// notApplied is why a plan that is not about to be applied makes no
// shadow, for the notice.
const notApplied = "the plan is not applied now, so no shadow CRD is made; the API server judges them against one before the sync applies the CRD"

// crdSample is what checkExisting found of one version's existing objects.
type crdSample struct {
	checked, invalid int
	// first names the first invalid object, and why.
	first string
	// how says how they were judged, for the notice.
	how string
	// deleting counts the objects being deleted that were passed over: no
	// write keeps them. terminating counts those in a Terminating
	// namespace, which takes no new object, the dry run included: not
	// judged. inController counts those whose dry run the API server
	// refused for another reason (its RBAC, an admission policy), judged
	// in the controller instead.
	deleting, terminating, inController int
}

// checkExisting validates a sample of the live objects, read as version
// readAs, against the new schema of version v: on the API server through
// the change's shadow CRD (shadows) when the plan applies now, or in the
// controller when it does not or no shadow can be made. The sample is up
// to crdSampleSize objects not being deleted: the list is read on past
// those, so that a namespace being deleted, whose objects come first,
// does not leave the others unjudged, for at most crdSamplePages pages: a
// collection whose objects are all stuck on a finalizer would otherwise be
// read whole at every preview, until its continue token expired.
// crdSamplePages bounds the pages of crdSampleSize objects that
// checkExisting reads to find its sample.
const crdSamplePages = 10

func (r *AddonReconciler) checkExisting(ctx context.Context, s *scope, cur *apiextensionsv1.CustomResourceDefinition, shadows *shadowCheck, v apiextensionsv1.CustomResourceDefinitionVersion, readAs string, applies func() bool) (crdSample, error) {
	var sample crdSample
	items := make([]unstructured.Unstructured, 0, crdSampleSize)
	for cont, page := "", 1; ; page++ {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(cur.Spec.Group + "/" + readAs)
		list.SetKind(cur.Spec.Names.Kind + "List")
		if err := s.applier.List(ctx, list, client.Limit(crdSampleSize), client.Continue(cont)); err != nil {
			return crdSample{}, fmt.Errorf("listing existing %s to check the new schema: %w", cur.Spec.Names.Plural, err)
		}
		for _, item := range list.Items {
			if len(items) == crdSampleSize {
				break
			}
			if item.GetDeletionTimestamp() != nil {
				sample.deleting++
				continue
			}
			items = append(items, item)
		}
		if cont = list.GetContinue(); cont == "" || len(items) == crdSampleSize || page == crdSamplePages {
			break
		}
	}
	if len(items) == 0 {
		sample.how = "none being left"
		return sample, nil
	}
	if !applies() {
		var err error
		sample.checked, sample.invalid, sample.first, err = validateInController(cur, v, items)
		sample.how = "in the controller, without the CEL rules (" + notApplied + ")"
		return sample, err
	}
	judged, err := shadows.dryRun(ctx, s.applier, shadowOwner(s.addon), v, items)
	if errors.Is(err, errNoShadow) {
		sample.how = "in the controller, without the CEL rules (" + err.Error() + ")"
		sample.checked, sample.invalid, sample.first, err = validateInController(cur, v, items)
		return sample, err
	}
	judged.deleting = sample.deleting
	judged.how = "by the API server (a dry run against a shadow of the new CRD)"
	return judged, err
}

// shadowOwner names an Addon in its shadows' group and label: a short hash
// of its namespace, name and UID, so that an Addon made anew under the
// same name does not take over a shadow the old one left.
func shadowOwner(a *capstanv1.Addon) string {
	sum := sha256.Sum256([]byte(a.Namespace + "/" + a.Name + "/" + string(a.UID)))
	return hex.EncodeToString(sum[:])[:shadowOwnerHex]
}

// shadowCheck is a shadow of one new CRD, made at the first dry run of a
// CRD change and deleted when the change is checked (done): the shadow
// serves every version, so the versions of one change share it.
//
// NOTE: a shadow made anew for each version is named alike, and the
// second met the first one still being deleted (the API server's CRD
// finalizer runs after the delete returns), failing the check by timing.
type shadowCheck struct {
	crd *apiextensionsv1.CustomResourceDefinition
	// a made shadow, which done deletes.
	a      *apply.Applier
	shadow *apiextensionsv1.CustomResourceDefinition
	// err is why no shadow was made, errNoShadow for every version.
	err error
}

// dryRun dry-run creates each item as version v against owner's shadow of
// the new CRD, with strict field validation, so that a field the new
// schema would prune is an error too, making the shadow at its first
// call. It returns errNoShadow when the CRD converts with a webhook (the
// shadow would call it) or the account may not create CRDs. An item in a
// Terminating namespace is not judged (terminating); one whose dry run
// the API server refused for another reason is judged in the controller
// (inController).
func (sc *shadowCheck) dryRun(ctx context.Context, a *apply.Applier, owner string, v apiextensionsv1.CustomResourceDefinitionVersion, items []unstructured.Unstructured) (crdSample, error) {
	if sc.shadow == nil && sc.err == nil {
		sc.err = sc.make(ctx, a, owner)
	}
	if sc.err != nil {
		return crdSample{}, sc.err
	}
	crd, shadow := sc.crd, sc.shadow
	var out crdSample
	var refused []unstructured.Unstructured
	for _, item := range items {
		obj := &unstructured.Unstructured{Object: map[string]any{}}
		for k, val := range item.Object {
			if k != "metadata" && k != "status" {
				obj.Object[k] = val
			}
		}
		obj.SetAPIVersion(shadow.Spec.Group + "/" + v.Name)
		obj.SetName(item.GetName())
		obj.SetNamespace(item.GetNamespace())
		obj.SetLabels(item.GetLabels())
		obj.SetAnnotations(item.GetAnnotations())
		// NOTE: without strict field validation the API server prunes the
		// fields the new schema does not name, with only a warning: the
		// dry run would pass an object whose data the next write drops.
		err := a.Client.Create(ctx, obj, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
		switch {
		case err == nil:
			out.checked++
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// NOTE: a Terminating namespace takes no new object; this
			// one goes with it, and the refusal says nothing of the schema.
			out.terminating++
		case apierrors.IsForbidden(err):
			// NOTE: the account's RBAC in the shadow's group, or an
			// admission policy that matches the copy, refused it: that
			// is no verdict on the schema, which must still be judged.
			refused = append(refused, item)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			out.checked++
			out.invalid++
			if out.first == "" {
				out.first = itemName(item) + ": " + err.Error()
			}
		default:
			return crdSample{}, fmt.Errorf("dry-running %s against a shadow of %s: %w", item.GetName(), crd.Name, err)
		}
	}
	if len(refused) > 0 {
		checked, invalid, first, err := validateInController(crd, v, refused)
		if err != nil {
			return crdSample{}, err
		}
		out.checked += checked
		out.invalid += invalid
		out.inController = checked
		if out.first == "" && first != "" {
			out.first = first + " (judged in the controller: the API server refused the dry run)"
		}
	}
	return out, nil
}

// itemName is a sampled object's namespace/name, or name.
func itemName(item unstructured.Unstructured) string {
	if ns := item.GetNamespace(); ns != "" {
		return ns + "/" + item.GetName()
	}
	return item.GetName()
}

// make creates owner's shadow of the new CRD, and waits for it to serve.
func (sc *shadowCheck) make(ctx context.Context, a *apply.Applier, owner string) error {
	crd := sc.crd
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return fmt.Errorf("%w: the CRD converts with a webhook", errNoShadow)
	}
	shadow, err := newShadow(crd, owner)
	if err != nil {
		return err
	}
	cleanShadows(ctx, a.Client, owner, shadow.Name, time.Now())
	if err := a.Client.Create(ctx, shadow); err != nil {
		switch {
		case apierrors.IsForbidden(err):
			return fmt.Errorf("%w: the account may not create CRDs", errNoShadow)
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("creating a shadow of %s to check its new schema: %w", crd.Name, err)
		}
		// NOTE: a crash left this add-on's shadow of the same new CRD;
		// it is the same schema, so it serves, and is deleted after.
		old := &apiextensionsv1.CustomResourceDefinition{}
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(shadow), old); err != nil {
			return fmt.Errorf("reading the shadow of %s that an earlier check left: %w", crd.Name, err)
		}
		if old.DeletionTimestamp != nil {
			return fmt.Errorf("the shadow of %s that an earlier check left is still being deleted; the check is retried", crd.Name)
		}
	}
	sc.a, sc.shadow = a, shadow
	if err := a.WaitEstablished(ctx, shadow.Name); err != nil {
		return fmt.Errorf("waiting for a shadow of %s: %w", crd.Name, err)
	}
	return nil
}

// done deletes the shadow, if one was made.
func (sc *shadowCheck) done(ctx context.Context) {
	if sc.shadow == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = sc.a.Client.Delete(dctx, sc.shadow)
	sc.shadow = nil
}

// newShadow copies crd, for owner, under a group of its own, named after
// the owner, the CRD and its new spec, with the names that could clash
// with other kinds removed.
func newShadow(crd *apiextensionsv1.CustomResourceDefinition, owner string) (*apiextensionsv1.CustomResourceDefinition, error) {
	raw, err := crd.Spec.Marshal()
	if err != nil {
		return nil, err
	}
	// NOTE: "served" names shadows that serve every version (below), so
	// that one an older Capstan left, which did not, is not taken for one.
	sum := sha256.Sum256(append([]byte(owner+"\x00"+crd.Name+"\x00served\x00"), raw...))
	group := "c" + hex.EncodeToString(sum[:])[:shadowGroupHex] + shadowGroupSuffix
	spec := *crd.Spec.DeepCopy()
	spec.Group = group
	spec.Names.ShortNames, spec.Names.Categories = nil, nil
	spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	for i := range spec.Versions {
		// NOTE: a version on its way out (served: false) may still hold
		// stored objects; the shadow serves it, so that they are dry-run
		// against its schema as well.
		spec.Versions[i].Served = true
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Names.Plural + "." + group, Labels: map[string]string{shadowLabel: owner}},
		Spec:       spec,
	}, nil
}

// cleanShadows deletes the shadows left behind, as leftBehind decides at
// now: owner's, but for keep (the one it is about to use), whatever their
// age, and anyone's once shadowMaxAge old. An empty owner deletes only the
// old ones.
func cleanShadows(ctx context.Context, c client.Client, owner, keep string, now time.Time) {
	list := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, list, client.HasLabels{shadowLabel}); err != nil {
		return
	}
	for i := range list.Items {
		if sh := &list.Items[i]; leftBehind(sh, owner, keep, now) {
			_ = c.Delete(ctx, sh)
		}
	}
}

// leftBehind reports whether crd is a shadow to delete at now: one that
// isShadow recognises, not being deleted, and either owner's but for keep,
// or shadowMaxAge old.
//
// NOTE: an Addon's reconciles never run at once, and only they make its
// shadows, so one of owner's that is not keep is a leftover even when
// young. Another add-on's may be in use: only its age tells.
func leftBehind(crd *apiextensionsv1.CustomResourceDefinition, owner, keep string, now time.Time) bool {
	if crd.DeletionTimestamp != nil || !isShadow(crd) {
		return false
	}
	mine := owner != "" && crd.Labels[shadowLabel] == owner && crd.Name != keep
	return mine || now.Sub(crd.CreationTimestamp.Time) > shadowMaxAge
}

const (
	// shadowGroupHex is how many hex digits of its hash a shadow's group
	// holds (newShadow).
	shadowGroupHex = 12
	// shadowOwnerHex is how many hex digits of its hash shadowOwner gives.
	shadowOwnerHex = 16
)

var (
	// shadowGroup is the form of every shadow's group, as newShadow makes it.
	shadowGroup = regexp.MustCompile(fmt.Sprintf(`^c[0-9a-f]{%d}`, shadowGroupHex) + regexp.QuoteMeta(shadowGroupSuffix) + `$`)
	// shadowOwnerValue is the form of shadowOwner, the value of shadowLabel.
	shadowOwnerValue = regexp.MustCompile(fmt.Sprintf(`^[0-9a-f]{%d}$`, shadowOwnerHex))
)

// isShadow reports whether crd is a shadow that Capstan made: labelled
// with an owner, with a group of the form newShadow gives, and named, as
// every CRD must be, its plural and group.
//
// NOTE: the label alone proves nothing. Anyone who may patch CRDs can set
// it, on certificates.cert-manager.io say, and deleting that CRD deletes
// every Certificate. A CRD's group and name cannot change once it is
// created, and the groups under crdcheck.capstan.dev are Capstan's own,
// so only a CRD created as a shadow passes.
func isShadow(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return shadowOwnerValue.MatchString(crd.Labels[shadowLabel]) &&
		shadowGroup.MatchString(crd.Spec.Group) &&
		crd.Name == crd.Spec.Names.Plural+"."+crd.Spec.Group
}

// sweepShadows deletes, every shadowMaxAge, the shadows in the local
// cluster that are that old: those a crash left behind and no later check
// of their add-on deleted. A CRD that only carries shadowLabel is left
// alone (isShadow). It ends with ctx.
func sweepShadows(ctx context.Context, c client.Client) error {
	t := time.NewTicker(shadowMaxAge)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			cleanShadows(ctx, c, "", "", now)
		}
	}
}

// leftOut says, for the notice, which objects were passed over or judged
// otherwise, and why.
func (c crdSample) leftOut() string {
	var b strings.Builder
	if c.inController > 0 {
		fmt.Fprintf(&b, "; %d of them in the controller, without the CEL rules, as the API server refused their dry run (403: its RBAC or an admission policy)", c.inController)
	}
	if c.deleting > 0 {
		fmt.Fprintf(&b, "; %d more passed over: being deleted", c.deleting)
	}
	if c.terminating > 0 {
		fmt.Fprintf(&b, "; %d more not judged: in a Terminating namespace, which takes no new object", c.terminating)
	}
	return b.String()
}
