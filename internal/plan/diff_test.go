package plan

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func obj(y map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: y} }

func configMap(data map[string]any, extraMeta map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": "cm", "namespace": "ns"}
	for k, v := range extraMeta {
		meta[k] = v
	}
	return obj(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
}

func TestCompareIgnoresWhatAlwaysDiffers(t *testing.T) {
	live := configMap(map[string]any{"a": "1"}, map[string]any{
		"resourceVersion": "7", "uid": "u1", "generation": int64(3), "creationTimestamp": "2026-01-01T00:00:00Z",
		"managedFields": []any{map[string]any{"manager": "kubectl"}},
	})
	dry := configMap(map[string]any{"a": "1"}, map[string]any{
		"resourceVersion": "8", "uid": "u1",
		"labels":        map[string]any{capstanv1.AddonLabel: "x", capstanv1.AddonNamespaceLabel: "ns", capstanv1.ManagedByLabel: "capstan"},
		"managedFields": []any{map[string]any{"manager": "capstan"}},
	})
	dry.Object["status"] = map[string]any{"x": "y"}
	c, err := Compare(configMap(map[string]any{"a": "1"}, nil), live, dry)
	if err != nil {
		t.Fatal(err)
	}
	if c.Action != capstanv1.ActionUnchanged {
		t.Fatalf("action = %s, want Unchanged; diff:\n%s", c.Action, c.Diff)
	}
}

func TestCompareUpdateShowsDiff(t *testing.T) {
	live := configMap(map[string]any{"a": "1"}, nil)
	dry := configMap(map[string]any{"a": "2"}, nil)
	c, err := Compare(dry, live, dry)
	if err != nil {
		t.Fatal(err)
	}
	if c.Action != capstanv1.ActionUpdate || !strings.Contains(c.Diff, "-  a: \"1\"") || !strings.Contains(c.Diff, "+  a: \"2\"") {
		t.Fatalf("got %s with diff:\n%s", c.Action, c.Diff)
	}
	if !strings.Contains(c.Diff, "live/ConfigMap/ns/cm") {
		t.Fatalf("the diff should name the object:\n%s", c.Diff)
	}
}

func secret(data map[string]any, annotations map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": "s", "namespace": "ns"}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return obj(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data, "type": "Opaque"})
}

func TestSecretValuesNeverAppear(t *testing.T) {
	live := secret(map[string]any{"same": "U0FNRQ==", "old": "T0xEU0VDUkVU", "gone": "R09ORQ=="},
		map[string]any{lastApplied: `{"data":{"old":"T0xEU0VDUkVU"}}`})
	dry := secret(map[string]any{"same": "U0FNRQ==", "old": "TkVXU0VDUkVU", "added": "QURERUQ="},
		map[string]any{lastApplied: `{"data":{"old":"T0xEU0VDUkVU"}}`})
	manifest := secret(map[string]any{"same": "U0FNRQ==", "old": "TkVXU0VDUkVU", "added": "QURERUQ="}, nil)
	c, err := Compare(manifest, live, dry)
	if err != nil {
		t.Fatal(err)
	}
	if c.Action != capstanv1.ActionUpdate {
		t.Fatalf("action = %s", c.Action)
	}
	for _, v := range []string{"U0FNRQ==", "T0xEU0VDUkVU", "TkVXU0VDUkVU", "R09ORQ==", "QURERUQ="} {
		if strings.Contains(c.Diff, v) {
			t.Fatalf("diff shows a secret value %q:\n%s", v, c.Diff)
		}
	}
	for _, want := range []string{"-  old: '(hidden: old value)'", "+  old: '(hidden: new value)'", "-  gone: (hidden)", "+  added: (hidden)"} {
		if !strings.Contains(c.Diff, want) {
			t.Fatalf("diff lacks %q:\n%s", want, c.Diff)
		}
	}
	for _, line := range strings.Split(c.Diff, "\n") {
		if strings.Contains(line, "same") && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")) {
			t.Fatalf("an unchanged key should not be shown as changed:\n%s", c.Diff)
		}
	}

	// A change of value alone must change the digest, so an approval of one
	// secret value does not apply another.
	dry2 := secret(map[string]any{"same": "U0FNRQ==", "old": "T1RIRVI=", "added": "QURERUQ="},
		map[string]any{lastApplied: `{"data":{"old":"T0xEU0VDUkVU"}}`})
	c2, err := Compare(manifest, live, dry2)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Diff != c.Diff {
		t.Fatalf("the shown diffs should be equal; got\n%s\n%s", c.Diff, c2.Diff)
	}
	if c2.Digest == c.Digest {
		t.Fatalf("different secret values must give different digests")
	}
}

func TestSecretCreateHidesValues(t *testing.T) {
	s := secret(map[string]any{"password": "aHVudGVyMg=="}, nil)
	s.Object["stringData"] = map[string]any{"token": "plain-token"}
	c, err := Compare(s, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Action != capstanv1.ActionCreate || strings.Contains(c.Diff, "aHVudGVyMg==") || strings.Contains(c.Diff, "plain-token") {
		t.Fatalf("got %s:\n%s", c.Action, c.Diff)
	}
	if !strings.Contains(c.Diff, "+  password: (hidden)") {
		t.Fatalf("a created key should be listed:\n%s", c.Diff)
	}
}

func TestBuildCapsDiffsAndHashes(t *testing.T) {
	big := strings.Repeat("+line of a long diff\n", 2000)
	var objs []ObjectResult
	for i := 0; i < 1000; i++ {
		objs = append(objs, ObjectResult{Ref: capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: strings.Repeat("x", 3) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))}, Comparison: Comparison{Action: capstanv1.ActionUpdate, Diff: big, Digest: "d"}})
	}
	p := Build(Input{Generation: 4, Objects: objs})
	total := 0
	for i, o := range p.Objects {
		if len(o.Diff) > MaxDiffBytes {
			t.Fatalf("diff of %d bytes kept", len(o.Diff))
		}
		// Every diff here is over the bound: each object says its diff
		// was cut, the first ones kept in part, the last ones not at all.
		if !o.DiffTruncated {
			t.Fatalf("object %d's diff of %d bytes is not marked as cut", i, len(o.Diff))
		}
		total += len(o.Diff)
	}
	if p.Objects[len(p.Objects)-1].Diff != "" {
		t.Fatalf("the last object kept a diff past the total bound")
	}
	small := Build(Input{Objects: []ObjectResult{{Ref: objs[0].Ref, Comparison: Comparison{Action: capstanv1.ActionUpdate, Diff: "+a\n", Digest: "d"}},
		{Ref: objs[1].Ref, Unverified: true, Comparison: Comparison{Action: capstanv1.ActionCreate, Digest: "d"}}}})
	if small.DiffsTruncated || small.Objects[0].DiffTruncated || small.Objects[1].DiffTruncated {
		t.Fatalf("a plan whose diffs fit says one was cut: %+v", small)
	}
	if total > MaxTotalDiffBytes || !p.DiffsTruncated {
		t.Fatalf("total %d, truncated %v", total, p.DiffsTruncated)
	}
	if p.Summary.Update != 1000 || !Pending(p) {
		t.Fatalf("summary %+v", p.Summary)
	}
	p2 := Build(Input{Generation: 5, Objects: objs})
	if p2.Hash != p.Hash {
		t.Fatalf("the generation must not change the hash")
	}
	objs[3].Digest = "other"
	if Build(Input{Objects: objs}).Hash == p.Hash {
		t.Fatalf("a different change must change the hash")
	}
	full := Build(Input{Objects: objs[:2], Full: true})
	if full.Objects[0].Diff != big {
		t.Fatalf("a full plan keeps whole diffs")
	}
}

func TestWorkloads(t *testing.T) {
	dep := obj(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"initContainers": []any{map[string]any{"name": "init", "image": "busybox:1"}},
			"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27", "ports": []any{
				map[string]any{"name": "http", "containerPort": int64(8080), "protocol": "TCP"}}}},
		}}}})
	cm := configMap(nil, nil)
	w := Workloads([]*unstructured.Unstructured{cm, dep})
	if len(w) != 1 || w[0].Name != "web" || len(w[0].Images) != 2 || w[0].Ports[0].Port != 8080 {
		t.Fatalf("workloads = %+v", w)
	}
}

// TestEnsuredNamespaceIsOutsideTheHash: whether the namespace of
// createNamespace exists yet (another add-on may create it first) does not
// make an approval stale; every other object's action does.
func TestEnsuredNamespaceIsOutsideTheHash(t *testing.T) {
	ns := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: "samples"}
	cm := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "samples", Name: "hello"}
	build := func(nsAction capstanv1.Action, ensured string) string {
		return Build(Input{EnsuredNamespace: ensured, Objects: []ObjectResult{
			{Ref: ns, Comparison: Comparison{Action: nsAction, Digest: "d-ns"}},
			{Ref: cm, Comparison: Comparison{Action: capstanv1.ActionCreate, Digest: "d-cm"}},
		}}).Hash
	}
	if build(capstanv1.ActionCreate, "samples") != build(capstanv1.ActionUnchanged, "samples") {
		t.Error("the ensured namespace's existence changed the hash")
	}
	if build(capstanv1.ActionCreate, "") == build(capstanv1.ActionUnchanged, "") {
		t.Error("a rendered Namespace's action must change the hash")
	}
}

// TestBuildListsOnlyWhatChanges: status names the objects a sync would
// change, adopt or could not dry-run, and only counts those it would leave
// as they are; the hash still covers every object, and a full plan lists
// them all.
func TestBuildListsOnlyWhatChanges(t *testing.T) {
	ref := func(name string) capstanv1.ObjectRef {
		return capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	objs := []ObjectResult{
		{Ref: ref("same"), Comparison: Comparison{Action: capstanv1.ActionUnchanged, Digest: "d1"}},
		{Ref: ref("adopted"), Adopted: true, Comparison: Comparison{Action: capstanv1.ActionUnchanged, Digest: "d2"}},
		{Ref: ref("refused"), Error: "invalid", Comparison: Comparison{Action: capstanv1.ActionUnchanged, Digest: "d3"}},
		{Ref: ref("new"), Unverified: true, Comparison: Comparison{Action: capstanv1.ActionCreate, Digest: "d4"}},
	}
	p := Build(Input{Objects: objs})
	var names []string
	for _, o := range p.Objects {
		names = append(names, o.Name)
	}
	if !slices.Equal(names, []string{"adopted", "refused", "new"}) {
		t.Errorf("status lists %v; want the adopted, the refused and the new object", names)
	}
	if p.Summary.Unchanged != 3 || p.Summary.Create != 1 {
		t.Errorf("summary %+v; want 3 unchanged and 1 create", p.Summary)
	}
	if len(p.Notices) != 1 || !strings.Contains(p.Notices[0].Message, "1 object(s) to create wait for a Namespace") {
		t.Errorf("notices %+v; want one about the object the API server checks later", p.Notices)
	}
	objs[0].Digest = "changed"
	if Build(Input{Objects: objs}).Hash == p.Hash {
		t.Error("an unchanged object left out of status must still be in the hash")
	}
	if full := Build(Input{Objects: objs, Full: true}); len(full.Objects) != 4 {
		t.Errorf("a full plan lists %d objects; want all 4", len(full.Objects))
	}
}

// TestRecreateIsInTheHash: an approval of a plan that updates an object
// in place does not approve deleting it and creating it anew, and a plan
// with nothing to recreate hashes as it did before spec.recreate was.
func TestRecreateIsInTheHash(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web"}
	update := ObjectResult{Ref: ref, Comparison: Comparison{Action: capstanv1.ActionUpdate, Digest: "sha256:1"}}
	recreate := update
	recreate.Recreate = true
	inPlace, anew := Build(Input{Objects: []ObjectResult{update}}), Build(Input{Objects: []ObjectResult{recreate}})
	if inPlace.Hash == anew.Hash {
		t.Fatal("recreating an object hashes as updating it in place")
	}
	other := recreate
	other.RecreateUID = "another"
	if Build(Input{Objects: []ObjectResult{other}}).Hash == anew.Hash {
		t.Fatal("an approval of recreating one object would delete another created in its place")
	}
	if !anew.Objects[0].Recreate || inPlace.Objects[0].Recreate {
		t.Fatalf("the plan's rows: %+v, %+v", inPlace.Objects, anew.Objects)
	}
	before := digest("source", "", "", "", "", "", "", "object", refKey(ref), capstanv1.ActionUpdate, "sha256:1", false, "")
	if inPlace.Hash != before {
		t.Fatalf("a plan with nothing to recreate hashes %s, where it hashed %s", inPlace.Hash, before)
	}
}

// TestConfirmIsInTheHash: an approval of a plan that prunes an object no
// one had marked Prune=confirm does not cover its delete once it is
// marked, and a plan with nothing to confirm hashes as it did before.
func TestConfirmIsInTheHash(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "precious"}
	plain := Build(Input{Prune: []capstanv1.ObjectRef{ref}})
	marked := Build(Input{Prune: []capstanv1.ObjectRef{ref}, Confirm: []capstanv1.ObjectRef{ref}})
	if plain.Hash == marked.Hash {
		t.Fatal("a prune of an object marked Prune=confirm hashes as one of an unmarked object")
	}
	if before := digest("source", "", "", "", "", "", "", "prune", refKey(ref)); plain.Hash != before {
		t.Fatalf("a plan with nothing to confirm hashes %s, where it hashed %s", plain.Hash, before)
	}
}

// TestPruneUIDIsInTheHash: an approval of a plan that prunes an object,
// or prunes it once confirmed, does not cover the delete of another
// object created in its place under the same name: the same plan
// material with another UID is another hash. A prune of an object found
// gone, with no UID read, hashes as it did before the UID was in the hash.
func TestPruneUIDIsInTheHash(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "precious"}
	prune := []capstanv1.ObjectRef{ref}
	for _, tc := range []struct {
		name    string
		confirm []capstanv1.ObjectRef
	}{
		{"a prune", nil},
		{"a prune to confirm", prune},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hashOf := func(uid types.UID) string {
				return Build(Input{Prune: prune, Confirm: tc.confirm, PruneUIDs: map[string]types.UID{ref.Key(): uid}}).Hash
			}
			seen := hashOf("uid-seen")
			if hashOf("uid-seen") != seen {
				t.Fatal("one plan hashes differently each time")
			}
			if hashOf("uid-made-anew") == seen {
				t.Fatal("an approval of deleting one object would delete another created in its place")
			}
			if gone := hashOf(""); gone != Build(Input{Prune: prune, Confirm: tc.confirm}).Hash || gone == seen {
				t.Fatal("a prune of an object found gone hashes as one of an object read, or differently from one with no UIDs")
			}
		})
	}
	if before := digest("source", "", "", "", "", "", "", "prune", refKey(ref)); Build(Input{Prune: prune}).Hash != before {
		t.Fatal("a prune with no UID read hashes differently from before")
	}
}

// TestClusterIsInTheHash: an approval of an install into one cluster does
// not apply to another that a repointed kubeconfig Secret names, even when
// the plans are otherwise the same (an empty cluster gives the same
// creates), and a plan for the controller's own cluster hashes as it did
// before the cluster was in the hash.
func TestClusterIsInTheHash(t *testing.T) {
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "settings"}
	create := []ObjectResult{{Ref: ref, Comparison: Comparison{Action: capstanv1.ActionCreate, Digest: "sha256:1"}}}
	local := Build(Input{Objects: create})
	staging := Build(Input{Objects: create, Cluster: "sha256:staging"})
	prod := Build(Input{Objects: create, Cluster: "sha256:prod"})
	for _, tc := range []struct {
		name string
		a, b *capstanv1.Plan
	}{
		{"staging and prod", staging, prod},
		{"this cluster and a remote one", local, staging},
	} {
		if tc.a.Hash == tc.b.Hash {
			t.Errorf("%s: one hash for two clusters", tc.name)
		}
	}
	if again := Build(Input{Objects: create, Cluster: "sha256:staging"}); again.Hash != staging.Hash {
		t.Error("one cluster's plan hashes differently each time")
	}
	if before := digest("source", "", "", "", "", "", "", "object", refKey(ref), capstanv1.ActionCreate, "sha256:1", false, ""); local.Hash != before {
		t.Fatalf("a plan for this cluster hashes %s, where it hashed %s", local.Hash, before)
	}
}

// TestUpdateDigestCoversTheChangeOnly checks that an update's digest stays
// the same while another writer changes a field beside the change (an app
// that writes its own key into the chart's ConfigMap), and differs for any
// other change: another value before or after, a field added or removed,
// the same value at another path.
func TestUpdateDigestCoversTheChangeOnly(t *testing.T) {
	cm := func(data map[string]any) *unstructured.Unstructured { return configMap(data, nil) }
	digestOf := func(t *testing.T, live, dry map[string]any) string {
		t.Helper()
		c, err := Compare(cm(dry), cm(live), cm(dry))
		if err != nil {
			t.Fatal(err)
		}
		if c.Action != capstanv1.ActionUpdate {
			t.Fatalf("action %s, want Update", c.Action)
		}
		return c.Digest
	}
	approved := digestOf(t, map[string]any{"level": "info", "seen": "10"}, map[string]any{"level": "debug", "seen": "10"})
	for _, tc := range []struct {
		name      string
		live, dry map[string]any
		same      bool
	}{
		{name: "another writer's key moved beside the change", same: true,
			live: map[string]any{"level": "info", "seen": "11"}, dry: map[string]any{"level": "debug", "seen": "11"}},
		{name: "another writer added a key beside the change", same: true,
			live: map[string]any{"level": "info", "seen": "10", "zone": "b"}, dry: map[string]any{"level": "debug", "seen": "10", "zone": "b"}},
		{name: "another new value",
			live: map[string]any{"level": "info", "seen": "10"}, dry: map[string]any{"level": "trace", "seen": "10"}},
		{name: "another old value",
			live: map[string]any{"level": "warn", "seen": "10"}, dry: map[string]any{"level": "debug", "seen": "10"}},
		{name: "a field added too",
			live: map[string]any{"level": "info", "seen": "10"}, dry: map[string]any{"level": "debug", "seen": "10", "extra": "1"}},
		{name: "a field removed too",
			live: map[string]any{"level": "info", "seen": "10"}, dry: map[string]any{"level": "debug"}},
		{name: "the change at another key",
			live: map[string]any{"lvl": "info", "seen": "10"}, dry: map[string]any{"lvl": "debug", "seen": "10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := digestOf(t, tc.live, tc.dry); (got == approved) != tc.same {
				t.Errorf("digest equal to the approved change's: %v, want %v", got == approved, tc.same)
			}
		})
	}
}

// TestChangeDigest checks the structure of what an update's digest covers:
// nested maps and lists, a key that looks like an index, a path of two keys
// that reads like one key with a dot, and a value that moves to another
// type.
func TestChangeDigest(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"spec": map[string]any{
			"replicas": int64(1),
			"ports":    []any{map[string]any{"port": int64(80)}, map[string]any{"port": int64(443)}},
			"labels":   map[string]any{"0": "a"},
		}}
	}
	with := func(mut func(spec map[string]any)) map[string]any {
		o := base()
		mut(o["spec"].(map[string]any))
		return o
	}
	if ChangeDigest(base(), base()) != ChangeDigest(with(func(map[string]any) {}), base()) {
		t.Fatal("no change must give one digest")
	}
	changes := map[string]map[string]any{
		"a list item's field":    with(func(s map[string]any) { s["ports"].([]any)[1].(map[string]any)["port"] = int64(8443) }),
		"a list item added":      with(func(s map[string]any) { s["ports"] = append(s["ports"].([]any), map[string]any{"port": int64(9090)}) }),
		"a list item removed":    with(func(s map[string]any) { s["ports"] = s["ports"].([]any)[:1] }),
		"a key that is a digit":  with(func(s map[string]any) { s["labels"].(map[string]any)["0"] = "b" }),
		"a key with a dot":       with(func(s map[string]any) { s["labels"].(map[string]any)["0.x"] = "b" }),
		"a nested key":           with(func(s map[string]any) { s["labels"].(map[string]any)["0"] = map[string]any{"x": "b"} }),
		"a number to a string":   with(func(s map[string]any) { s["replicas"] = "1" }),
		"a number changed":       with(func(s map[string]any) { s["replicas"] = int64(2) }),
		"a field set to nothing": with(func(s map[string]any) { s["replicas"] = nil }),
	}
	seen := map[string]string{ChangeDigest(base(), base()): "no change"}
	for name, desired := range changes {
		d := ChangeDigest(base(), desired)
		if other, ok := seen[d]; ok {
			t.Errorf("%s and %s give one digest", name, other)
		}
		seen[d] = name
		if again := ChangeDigest(base(), desired); again != d {
			t.Errorf("%s: the digest is not stable", name)
		}
	}
}
