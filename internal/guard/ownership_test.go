package guard

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// liveState is a lookup over a fixed set of live objects, keyed "Kind/name".
type liveState map[string]struct{ owned bool }

func (l liveState) lookup(calls *[]string) LookupFunc {
	return func(_ context.Context, gvk schema.GroupVersionKind, ns, name string) (bool, bool, error) {
		*calls = append(*calls, gvk.GroupVersion().String()+" "+gvk.Kind+" "+ns+"/"+name)
		if name == "unreadable" {
			return false, false, errors.New(`secrets "unreadable" is forbidden`)
		}
		o, ok := l[gvk.Kind+"/"+name]
		return ok, o.owned, nil
	}
}

func TestOwnership(t *testing.T) {
	live := liveState{
		"Secret/platform-db":     {owned: false},
		"ConfigMap/blog-conf":    {owned: true},
		"Deployment/web":         {owned: true},
		"ServiceAccount/default": {owned: false},
	}
	cases := []clauseCase{
		{"a Secret of the platform", "apiVersion: v1\nkind: Secret\nmetadata: {name: platform-db}", []string{"not-owned@metadata.name"}},
		{"the namespace's default account", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default}", []string{"not-owned@metadata.name"}},
		{"a live object that cannot be read", "apiVersion: v1\nkind: Secret\nmetadata: {name: unreadable}", []string{"ownership-unknown@metadata.name"}},
		{"near-miss: objects this Addon owns", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: blog-conf}\n---\n" + deployment("containers: [{name: app, image: nginx}]"), nil},
		{"near-miss: a Secret of the same name but another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform-db}", nil},
		{"near-miss: a new object", "apiVersion: v1\nkind: Secret\nmetadata: {name: blog-session}", nil},
	}
	var calls []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls = nil
			c := testContext()
			c.Lookup = live.lookup(&calls)
			got := ruleKeys(Check(context.Background(), parse(t, tc.manifest), c))
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			for _, call := range calls {
				if !strings.Contains(call, " "+testNamespace+"/") {
					t.Errorf("lookup outside the Addon's namespace: %s", call)
				}
			}
		})
	}
}

func TestOwnershipAsksOncePerObjectAndSkipsRefused(t *testing.T) {
	var calls []string
	c := testContext()
	c.Lookup = liveState{}.lookup(&calls)
	manifest := "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n" +
		"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: kube-system}\n" +
		"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {template: {spec: {containers: [{name: a, image: b}]}}}"
	Check(context.Background(), parse(t, manifest), c)
	want := []string{"v1 Secret apps/s", "apps/v1 Deployment apps/web"}
	if strings.Join(calls, ",") != strings.Join(want, ",") {
		t.Errorf("lookups: got %q, want %q", calls, want)
	}
}

func TestOwnedBy(t *testing.T) {
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: "apps", UID: types.UID("uid-1")}}
	ref := func(apiVersion, kind, name, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid)}
	}
	cases := []struct {
		name   string
		labels map[string]string
		refs   []metav1.OwnerReference
		want   bool
	}{
		{"owner reference to the Addon", nil, []metav1.OwnerReference{ref("capstan.dev/v1alpha1", "Addon", "blog", "uid-1")}, true},
		{"owner reference in a later version", nil, []metav1.OwnerReference{ref("capstan.dev/v1", "Addon", "blog", "uid-1")}, true},
		{"both labels", map[string]string{capstanv1.AddonLabel: "blog", capstanv1.AddonNamespaceLabel: "apps"}, nil, true},
		{"owner reference to another Addon", nil, []metav1.OwnerReference{ref("capstan.dev/v1alpha1", "Addon", "wiki", "uid-2")}, false},
		{"owner reference to a former Addon of the name", nil, []metav1.OwnerReference{ref("capstan.dev/v1alpha1", "Addon", "blog", "uid-0")}, false},
		{"owner reference to another kind named blog", nil, []metav1.OwnerReference{ref("apps/v1", "Deployment", "blog", "uid-1")}, false},
		{"owner reference to another group's Addon", nil, []metav1.OwnerReference{ref("example.com/v1", "Addon", "blog", "uid-1")}, false},
		{"the name label alone", map[string]string{capstanv1.AddonLabel: "blog"}, nil, false},
		{"labels of the same name in another namespace", map[string]string{capstanv1.AddonLabel: "blog", capstanv1.AddonNamespaceLabel: "other"}, nil, false},
		{"nothing", nil, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "x", Namespace: "apps", Labels: tc.labels, OwnerReferences: tc.refs}
			if got := OwnedBy(obj, addon); got != tc.want {
				t.Errorf("OwnedBy = %v, want %v", got, tc.want)
			}
		})
	}
	if OwnedBy(&metav1.ObjectMeta{}, nil) {
		t.Error("no Addon owns anything")
	}
}

// TestCheckWithout: with the objects that break a rule left out, a
// reference to one of them is not to a rendered object, and that leaves
// out the object that makes it in turn. A reference to an object whose
// live state could not be read is ownership-unknown; one to an object
// that passes, or to one the platform hands over, passes.
func TestCheckWithout(t *testing.T) {
	live := liveState{
		"Secret/platform-db":                 {owned: false},
		"PersistentVolumeClaim/platform-pgd": {owned: false},
		"Secret/blog-db":                     {owned: true},
		"ConfigMap/platform-conf":            {owned: false},
	}
	secret := func(name string) string { return "apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + "}\n---\n" }
	claim := func(name, spec string) string {
		return "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: " + name + "}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}" + spec + "}\n---\n"
	}
	cases := []struct {
		name, manifest string
		want           []string // "Kind/name rule@path", what CheckWithout adds
	}{
		{"envFrom a Secret of the platform's the chart renders too",
			secret("platform-db") + job("containers: [{name: m, image: i, envFrom: [{secretRef: {name: platform-db}}]}]", true),
			[]string{"Job/migrate reference-not-rendered@spec.template.spec.containers[0].envFrom[0].secretRef.name"}},
		{"a claim of the platform's the chart renders too",
			claim("platform-pgd", "") + job("containers: [{name: m, image: i}]\nvolumes: [{name: d, persistentVolumeClaim: {claimName: platform-pgd}}]", true),
			[]string{"Job/migrate reference-not-rendered@spec.template.spec.volumes[0].persistentVolumeClaim.claimName"}},
		{"a clone of a claim of the platform's",
			claim("platform-pgd", "") + claim("copy", ", dataSource: {kind: PersistentVolumeClaim, name: platform-pgd}"),
			[]string{"PersistentVolumeClaim/copy claim-data-source@spec.dataSource"}},
		{"an account that names a Secret of the platform's",
			secret("platform-db") + "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner}\nimagePullSecrets: [{name: platform-db}]\n---\n" +
				job("serviceAccountName: runner\ncontainers: [{name: m, image: i}]", true),
			[]string{"Job/migrate reference-not-rendered@spec.template.spec.serviceAccountName",
				"ServiceAccount/runner reference-not-rendered@imagePullSecrets[0].name"}},
		{"a Secret whose live state could not be read",
			secret("unreadable") + job("containers: [{name: m, image: i, env: [{name: P, valueFrom: {secretKeyRef: {name: unreadable, key: p}}}]}]", true),
			[]string{"Job/migrate ownership-unknown@spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name"}},
		{"near-miss: the chart's own Secret, another object refused",
			secret("blog-db") + "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform-conf}\n---\n" +
				job("containers: [{name: m, image: i, envFrom: [{secretRef: {name: blog-db}}, {secretRef: {name: platform-pull}}]}]", true),
			nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			c := testContext()
			c.Lookup = live.lookup(&calls)
			objs := parse(t, tc.manifest)
			refused := Check(context.Background(), objs, c)
			if len(refused) == 0 {
				t.Fatal("Check found nothing; each case needs an object refused")
			}
			before := len(calls)
			got := []string{}
			for _, v := range CheckWithout(context.Background(), objs, refused, c) {
				got = append(got, v.Object.Kind+"/"+v.Object.Name+" "+v.Rule+"@"+v.Path)
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if len(calls) != before {
				t.Errorf("CheckWithout read live objects again: %q", calls[before:])
			}
		})
	}
}
