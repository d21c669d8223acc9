package plan

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
)

// randomChart is a chart whose new Secret holds a password from
// randAlphaNum, with user set from the values, and whose pre-install and
// post-install hooks, of one kind, each name themselves and their token
// at random.
func randomChart() *chartv2.Chart {
	return &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: "v2", Name: "random", Version: "1.0.0"},
		Values:   map[string]any{"user": "app"},
		Templates: []*common.File{
			{Name: "templates/secret.yaml", Data: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n" +
				"stringData:\n  user: {{ .Values.user | quote }}\n  password: {{ randAlphaNum 8 | quote }}\n")},
			{Name: "templates/hook.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed-{{ randAlphaNum 6 | lower }}\n" +
				"  annotations:\n    helm.sh/hook: pre-install\ndata:\n  token: {{ randAlphaNum 12 | quote }}\n")},
			{Name: "templates/post.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed-{{ randAlphaNum 6 | lower }}\n" +
				"  annotations:\n    helm.sh/hook: post-install\ndata:\n  token: {{ randAlphaNum 12 | quote }}\n")},
		},
	}
}

// planOf renders randomChart with values, previews its objects as creates
// on an empty cluster and builds the plan, with the chart's generated
// fields passed in as the controller passes them.
func planOf(t *testing.T, values map[string]any) *capstanv1.Plan {
	t.Helper()
	art := &source.Artifact{Chart: &source.Chart{Chart: randomChart(), Name: "random", Version: "1.0.0"}}
	res, err := render.Render(context.Background(), art, values, render.Options{ReleaseName: "r", Namespace: "apps",
		Capabilities: &render.Capabilities{KubeVersion: "v1.33.2"}})
	if err != nil {
		t.Fatal(err)
	}
	objects, hooks := render.Generated{}, render.Generated{}
	for _, g := range res.Generated {
		if g.Hook {
			hooks = g
		} else {
			objects = g
		}
	}
	if len(objects.Paths) == 0 || !hooks.RandomName() {
		t.Fatalf("the render finds generated %+v, want the Secret's password and the hook's name", res.Generated)
	}
	generated := func(hook bool) Generated {
		g := Generated{Paths: map[string][][]string{}, Inputs: res.Hash}
		for _, f := range res.Generated {
			if f.Hook == hook {
				ref := capstanv1.ObjectRef{APIVersion: f.APIVersion, Kind: f.Kind, Namespace: "apps", Name: f.Name}
				g.Paths[ref.Key()] = f.Paths
			}
		}
		return g
	}
	for _, o := range res.Objects {
		o.SetNamespace("apps")
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "capstan-system", Name: "random"}}
	p, err := PreviewObjects(context.Background(), &countingCluster{}, PreviewInput{Addon: addon, Objects: res.Objects, Now: time.Now(),
		Generated: generated(false)})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Rendered: res.Objects, Objects: p.Objects}
	gh := generated(true)
	for _, h := range res.Hooks {
		h.Object.SetNamespace("apps")
		in.Hooks = append(in.Hooks, HookResult{PlannedHook: capstanv1.PlannedHook{ObjectRef: capstanv1.RefOf(h.Object), Events: h.Events},
			Digest: gh.ManifestDigest(h.Object), RandomName: gh.RandomName(h.Object)})
	}
	return Build(in)
}

// TestPlanHashCoversWhatCanBeReviewed renders a chart with a random
// password in a new Secret and two hooks of one kind named at random
// twice: each render differs, and the plan's hash is the same, so an
// approval of the first still holds for the second. A change of a field that is not random (the
// user, from the values) changes the hash.
func TestPlanHashCoversWhatCanBeReviewed(t *testing.T) {
	first, second := planOf(t, nil), planOf(t, nil)
	if first.Hooks[0].Name == second.Hooks[0].Name {
		t.Fatalf("both renders name the hook %s: the chart should name it at random", first.Hooks[0].Name)
	}
	if first.Hash != second.Hash {
		t.Errorf("two renders with the same inputs give the plan hashes %s and %s; want one, as only random values differ", first.Hash, second.Hash)
	}
	if changed := planOf(t, map[string]any{"user": "admin"}); changed.Hash == first.Hash {
		t.Errorf("a changed user (not generated) keeps the plan hash %s; want another", first.Hash)
	}
}

// TestGeneratedChangeDigest: an update that adds a generated field the
// live object lacks is covered as GeneratedPlaceholder, while a kept
// generated field and any other change count as they are.
func TestGeneratedChangeDigest(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Secret", Namespace: "apps", Name: "db"}
	g := Generated{Paths: map[string][][]string{ref.Key(): {{"stringData", "password"}}}, Inputs: "sha256:in"}
	secret := obj(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"namespace": "apps", "name": "db"}})
	live := map[string]any{"data": map[string]any{"user": "YXBw"}}
	with := func(user, password string) map[string]any {
		return map[string]any{"data": map[string]any{"user": user, "password": password}}
	}
	a, b := g.changeDigest(secret, live, with("YXBw", "b25l")), g.changeDigest(secret, live, with("YXBw", "dHdv"))
	if a != b {
		t.Errorf("a new generated password gives the digests %s and %s; want one", a, b)
	}
	if c := g.changeDigest(secret, live, with("cm9vdA==", "dHdv")); c == a {
		t.Errorf("a changed user keeps the digest %s; want another", a)
	}
	kept := map[string]any{"data": map[string]any{"user": "YXBw", "password": "b25l"}}
	if got, want := g.changeDigest(secret, kept, with("cm9vdA==", "b25l")), ChangeDigest(kept, with("cm9vdA==", "b25l")); got != want {
		t.Errorf("a kept password: digest %s, want ChangeDigest's %s", got, want)
	}
}

// TestPlanHashOfHooksNamedAtRandomIgnoresTheirOrder: two hooks named at
// random of one event, weight and kind run in the order of their names,
// which every render draws anew, so the plan's hash is the same in either
// order. Hooks with fixed names run in an order a person can review, and
// another order is another hash.
func TestPlanHashOfHooksNamedAtRandomIgnoresTheirOrder(t *testing.T) {
	hook := func(name, digest string, random bool) HookResult {
		return HookResult{PlannedHook: capstanv1.PlannedHook{ObjectRef: capstanv1.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: "apps", Name: name},
			Events: []string{"pre-install"}}, Digest: digest, RandomName: random}
	}
	hashOf := func(hooks ...HookResult) string { return Build(Input{Hooks: hooks}).Hash }
	if a, b := hashOf(hook("x-abcde", "sha256:migrate", true), hook("x-fghij", "sha256:seed", true)),
		hashOf(hook("x-klmno", "sha256:seed", true), hook("x-pqrst", "sha256:migrate", true)); a != b {
		t.Errorf("two hooks named at random give the plan hashes %s and %s as their names order them; want one", a, b)
	}
	// A hook with a fixed name runs before or after one named at random
	// as their names sort: the hash is the same either way.
	if a, b := hashOf(hook("db-migrate", "sha256:migrate", false), hook("job-xyzab", "sha256:seed", true)),
		hashOf(hook("a-xyzab", "sha256:seed", true), hook("db-migrate", "sha256:migrate", false)); a != b {
		t.Errorf("a hook with a fixed name beside one named at random gives the plan hashes %s and %s as their names order them; want one", a, b)
	}
	if a, b := hashOf(hook("migrate", "sha256:migrate", false), hook("seed", "sha256:seed", false)),
		hashOf(hook("seed", "sha256:seed", false), hook("migrate", "sha256:migrate", false)); a == b {
		t.Errorf("hooks with fixed names in another order keep the plan hash %s; want another", a)
	}
}
