package gitops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// longhorn is the Longhorn definition of the docs' examples.
var longhorn = readTestdata("longhorn.yaml")

// readTestdata reads a file of testdata/; a missing one is a broken checkout.
func readTestdata(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

var umami = readTestdata("umami.yaml")

func TestParseLonghornExample(t *testing.T) {
	def, err := Parse("addons/longhorn.yaml", []byte(longhorn))
	if err != nil {
		t.Fatal(err)
	}
	a, err := def.Addon(Origin{Namespace: "capstan-system", Repository: "gitops", URL: "https://git.example/gitops.git", Commit: "abc", File: "addons/longhorn.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "longhorn" || a.Namespace != "capstan-system" || a.Spec.TargetNamespace != "longhorn-system" ||
		!a.Spec.CreateNamespace || a.Spec.Chart == nil || a.Spec.Chart.Repo != "https://charts.longhorn.io/" ||
		a.Spec.Chart.Name != "longhorn" || a.Spec.Chart.Version != "v1.10.2" || a.Spec.ReleaseName != "longhorn" ||
		!a.Spec.Adopt || !a.Spec.ManualSync || a.Spec.Prune || a.Spec.Title != "Longhorn" || a.Spec.Category != "storage" {
		t.Fatalf("unexpected Addon: %+v", a.Spec)
	}
	if got := string(a.Spec.Values.Raw); got != `{"preUpgradeChecker":{"jobEnabled":false}}` {
		t.Fatalf("values = %s", got)
	}
	if a.Labels[ManagedByGitLabel] != "gitops" || a.Annotations[GitFileAnnotation] != "addons/longhorn.yaml" || a.Annotations[GitCommitAnnotation] != "abc" {
		t.Fatalf("labels %v annotations %v", a.Labels, a.Annotations)
	}

	def, err = Parse("addons/umami.yaml", []byte(umami))
	if err != nil {
		t.Fatal(err)
	}
	ref := &capstanv1.LocalObjectReference{Name: "gitops-auth"}
	a, err = def.Addon(Origin{Namespace: "capstan-system", Repository: "gitops", URL: "https://git.example/gitops.git", Commit: "0123abcd", File: "addons/umami.yaml", SecretRef: ref})
	if err != nil {
		t.Fatal(err)
	}
	if g := a.Spec.Git; g == nil || g.URL != "https://git.example/gitops.git" || g.Revision != "0123abcd" || g.Path != "umami" || g.SecretRef != ref {
		t.Fatalf("git source not pinned to the gitops commit: %+v", a.Spec.Git)
	}
}

func TestParseEveryField(t *testing.T) {
	src := `name: full
helm:
  oci: oci://ghcr.io/org/charts/full
  version: 1.2.3
  digest: sha256:` + strings.Repeat("a", 64) + `
  secretRef: {name: registry}
valuesFrom:
  - kind: Secret
    name: full-values
    valuesKey: extra.yaml
  - kind: ConfigMap
    name: tag
    targetPath: image.tag
    optional: true
adopt: true
allowAdoptChanges: true
suspend: true
hookTimeout: 15m
deletionPolicy: Delete
ignore:
  - paths: [/spec/replicas]
    target: {group: apps, kind: Deployment, name: full}
  - paths: [/metadata/annotations/example.com~1hash]
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: full}
      spec: {replicas: 2}
  - patch: '[{"op": "add", "path": "/metadata/labels/team", "value": "a"}]'
    target: {kind: ConfigMap, labelSelector: "app=full"}
images:
  - {name: nginx, newName: mirror.example/nginx, newTag: "1.27"}
syncWindows:
  - {kind: allow, schedule: "0 22 * * 1-5", duration: 2h, timeZone: Europe/Amsterdam}
  - {kind: deny, schedule: "0 0 24 12 *", duration: 72h, manualSync: true}
healthChecks:
  - apiVersion: postgresql.cnpg.io/v1
    kind: Cluster
    current: status.phase == 'Cluster in healthy state'
    failed: has(status.phase) && status.phase.startsWith('Failed')
`
	def, err := Parse("addons/full.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a, err := def.Addon(Origin{Namespace: "ns", Repository: "r", File: "addons/full.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	s := a.Spec
	if s.Chart.OCI != "oci://ghcr.io/org/charts/full" || s.Chart.Digest == "" || s.Chart.SecretRef.Name != "registry" ||
		len(s.ValuesFrom) != 2 || s.ValuesFrom[1].TargetPath != "image.tag" || !s.ValuesFrom[1].Optional ||
		!s.AllowAdoptChanges || !s.Suspend || s.HookTimeout.Duration != 15*time.Minute || s.DeletionPolicy != capstanv1.DeletionDelete ||
		len(s.Ignore) != 2 || s.Ignore[0].Paths[0] != "/spec/replicas" || s.Ignore[0].Target.Group == nil || *s.Ignore[0].Target.Group != "apps" ||
		s.Ignore[0].Target.Kind != "Deployment" || s.Ignore[0].Target.Name != "full" || s.Ignore[1].Target.Group != nil ||
		len(s.Patches) != 2 || !strings.Contains(s.Patches[0].Patch, "replicas: 2") || s.Patches[0].Target != nil ||
		s.Patches[1].Target == nil || s.Patches[1].Target.LabelSelector != "app=full" || s.Patches[1].Target.Kind != "ConfigMap" ||
		len(s.Images) != 1 || s.Images[0].NewName != "mirror.example/nginx" || s.Images[0].NewTag != "1.27" ||
		len(s.SyncWindows) != 2 || s.SyncWindows[0].Kind != capstanv1.SyncWindowAllow || s.SyncWindows[0].Duration.Duration != 2*time.Hour ||
		s.SyncWindows[0].TimeZone != "Europe/Amsterdam" || s.SyncWindows[1].Schedule != "0 0 24 12 *" || !s.SyncWindows[1].ManualSync ||
		len(s.HealthChecks) != 1 || s.HealthChecks[0].Kind != "Cluster" || !strings.HasPrefix(s.HealthChecks[0].Failed, "has(") {
		t.Fatalf("unexpected spec: %+v", s)
	}

	archive := "name: arc\nhelm:\n  url: https://example.com/c-1.0.0.tgz\n  digest: sha256:" + strings.Repeat("b", 64) + "\n"
	if _, err := Parse("addons/arc.yaml", []byte(archive)); err != nil {
		t.Fatal(err)
	}
	other := "name: ext\ngit:\n  url: https://example.com/manifests.git\n  revision: v1\n  path: deploy/prod\n  secretRef: {name: creds}\n" +
		"substitute:\n  cluster_name: prod\nsubstituteFrom:\n  - {kind: ConfigMap, name: cluster-vars}\n  - {kind: Secret, name: cluster-secrets, optional: true}\n" +
		"decryption: {provider: sops, secretRef: {name: sops-age}}\n"
	def, err = Parse("addons/ext.yaml", []byte(other))
	if err != nil {
		t.Fatal(err)
	}
	a, _ = def.Addon(Origin{URL: "https://gitops", Commit: "c1"})
	if a.Spec.Git.URL != "https://example.com/manifests.git" || a.Spec.Git.Revision != "v1" || a.Spec.Git.SecretRef.Name != "creds" {
		t.Fatalf("an external git source must keep its own URL and revision: %+v", a.Spec.Git)
	}
	if a.Spec.Substitute["cluster_name"] != "prod" || len(a.Spec.SubstituteFrom) != 2 || a.Spec.SubstituteFrom[0].Name != "cluster-vars" ||
		a.Spec.SubstituteFrom[1].Kind != "Secret" || !a.Spec.SubstituteFrom[1].Optional ||
		a.Spec.Decryption == nil || a.Spec.Decryption.Provider != "sops" || a.Spec.Decryption.SecretRef.Name != "sops-age" {
		t.Fatalf("variables: %+v %+v", a.Spec.Substitute, a.Spec.SubstituteFrom)
	}
}

func TestParseRefusesBadInput(t *testing.T) {
	bomb := "name: bomb\nhelm: {repo: https://x, chart: c}\nvalues:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
	huge := "name: huge\nhelm: {repo: https://x, chart: c}\nvalues:\n  blob: \"" + strings.Repeat("x", 50<<20) + "\"\n"
	cases := []struct {
		name, file, src string
		want            string // a substring of the error, with file and line
	}{
		{"unknown field", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\ncolour: blue\n", "addons/a.yaml:3: colour: unknown field"},
		{"unknown nested field", "addons/a.yaml", "name: a\nhelm:\n  repo: https://x\n  chart: c\n  tag: 1\n", "addons/a.yaml:5: helm.tag: unknown field"},
		{"wrong type", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nadopt: yes please\n", "addons/a.yaml:3: adopt: must be true or false"},
		{"number for a string", "addons/a.yaml", "name: a\nhelm:\n  repo: https://x\n  chart: c\n  version: 1.10\n", "addons/a.yaml:5: helm.version: must be a string, not the number 1.10"},
		{"missing name", "addons/a.yaml", "helm: {repo: https://x, chart: c}\n", "addons/a.yaml:1: name: required"},
		{"name differs from file", "addons/a.yaml", "\nname: b\nhelm: {repo: https://x, chart: c}\n", "addons/a.yaml:2: name: \"b\" differs from the file's name \"a\""},
		{"duplicate field", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nprune: true\nprune: false\n", "addons/a.yaml:4"},
		{"no source", "addons/a.yaml", "name: a\n", "addons/a.yaml:1: the definition has no source"},
		{"two sources", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\ngit: {path: a}\n", "addons/a.yaml:3: git: set exactly one source"},
		{"http chart repo", "addons/a.yaml", "name: a\nhelm:\n  repo: http://x\n  chart: c\n", "addons/a.yaml:3: helm.repo"},
		{"url with version", "addons/a.yaml", "name: a\nhelm:\n  url: https://x/c.tgz\n  version: 1.0.0\n", "addons/a.yaml:4: helm.version: cannot be set with helm.url"},
		{"bad version range", "addons/a.yaml", "name: a\nhelm:\n  repo: https://x\n  chart: c\n  version: \">=1.0.0 <<2\"\n", "addons/a.yaml:5: helm.version: \">=1.0.0 <<2\" is neither a version nor a semver range"},
		{"not a version", "addons/a.yaml", "name: a\nhelm:\n  repo: https://x\n  chart: c\n  version: not-a-version\n", "addons/a.yaml:5: helm.version: \"not-a-version\" is neither"},
		{"oci bad range", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://r/c\n  version: \">=1 <<2\"\n", "addons/a.yaml:4: helm.version: \">=1 <<2\" is neither"},
		{"hook timeout past its digits", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nhookTimeout: 0000001h\n", "addons/a.yaml:3: hookTimeout"},
		{"oci without version", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://r/c\n", "addons/a.yaml:3: helm.oci: an oci chart needs a version"},
		{"verify both", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://r/c\n  version: 1.0.0\n  verify: {provenance: {secretRef: {name: k}}, cosign: {secretRef: {name: k}}}\n", "addons/a.yaml:5: helm.verify: takes one of provenance"},
		{"verify neither", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://r/c\n  version: 1.0.0\n  verify: {}\n", "addons/a.yaml:5: helm.verify: takes one of provenance"},
		{"provenance of an oci chart", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://r/c\n  version: 1.0.0\n  verify:\n    provenance: {secretRef: {name: k}}\n", "addons/a.yaml:6: helm.verify.provenance: an oci chart is signed with cosign"},
		{"cosign of an archive", "addons/a.yaml", "name: a\nhelm:\n  url: https://x/c.tgz\n  verify:\n    cosign: {secretRef: {name: k}}\n", "addons/a.yaml:5: helm.verify.cosign: cosign checks charts from an OCI registry"},
		{"verify without keys", "addons/a.yaml", "name: a\nhelm:\n  repo: https://x\n  chart: c\n  verify:\n    provenance: {key: keyring}\n", "helm.verify.provenance.secretRef.name: name is required"},
		{"verify unknown kind", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://r/c\n  version: 1.0.0\n  verify:\n    notation: {secretRef: {name: k}}\n", "addons/a.yaml:6: helm.verify.notation: unknown field"},
		{"bad digest", "addons/a.yaml", "name: a\nhelm:\n  url: https://x/c.tgz\n  digest: md5:1\n", "addons/a.yaml:4: helm.digest"},
		{"bad deletion policy", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\ndeletionPolicy: Keep\n", "addons/a.yaml:3: deletionPolicy: must be Orphan or Delete"},
		{"bad hook timeout", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nhookTimeout: 48h\n", "addons/a.yaml:3: hookTimeout"},
		{"allowAdoptChanges alone", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nallowAdoptChanges: true\n", "addons/a.yaml:3: allowAdoptChanges: needs adopt: true"},
		{"depends on itself", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\ndependsOn:\n  - name: b\n  - name: a\n", "addons/a.yaml:5: dependsOn[1].name: \"a\" is this add-on itself"},
		{"dependency without a name", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\ndependsOn:\n  - namespace: x\n", "addons/a.yaml:4: dependsOn[0].name: name is required"},
		{"ignore an object's name", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nignore:\n  - paths: [/spec/replicas, /metadata/name]\n", "addons/a.yaml:4: ignore[0].paths[1]: \"/metadata/name\": of metadata, only one annotation or label"},
		{"ignore not a pointer", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nignore:\n  - paths:\n      - spec/replicas\n", "addons/a.yaml:5: ignore[0].paths[0]: \"spec/replicas\" is not a JSON pointer"},
		{"ignore without paths", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nignore:\n  - target: {kind: Deployment}\n", "addons/a.yaml:4: ignore[0].paths: name 1 to 16 fields"},
		{"ignore an unknown target field", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nignore:\n  - paths: [/spec/replicas]\n    target: {kinds: Deployment}\n", "addons/a.yaml:5: ignore[0].target.kinds: unknown field"},
		{"patch with a copy", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\npatches:\n  - patch: '[{\"op\": \"copy\", \"from\": \"/spec\", \"path\": \"/x\"}]'\n    target: {kind: Deployment}\n", "addons/a.yaml:4: patches[0].patch: operation 0 is a JSON 6902 copy"},
		{"patch of several documents with a target", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\npatches:\n  - patch: \"kind: A\\nmetadata: {name: a}\\n---\\nkind: B\\nmetadata: {name: b}\\n\"\n    target: {kind: A}\n", "addons/a.yaml:4: patches[0].patch: the patch holds 2 strategic merge patches and a target"},
		{"patch with an alias in its second document", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\npatches:\n  - patch: \"kind: A\\nmetadata: {name: a}\\n---\\nkind: B\\nmetadata: &m {name: b}\\nspec: *m\\n\"\n", "addons/a.yaml:4: patches[0].patch: document 2 of the patch uses YAML anchors or aliases"},
		{"patch empty", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\npatches:\n  - target: {kind: Deployment}\n", "addons/a.yaml:4: patches[0].patch: is required"},
		{"patch target unknown field", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\npatches:\n  - patch: '{}'\n    target: {selector: x}\n", "addons/a.yaml:5: patches[0].target.selector: unknown field"},
		{"image without a change", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nimages:\n  - name: nginx\n", "addons/a.yaml:4: images[0]: set newName, newTag or digest"},
		{"image bad tag", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nimages:\n  - name: nginx\n    newTag: 'a b'\n", "addons/a.yaml:5: images[0].newTag: \"a b\" is not an image tag"},
		{"window bad schedule", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nsyncWindows:\n  - kind: allow\n    schedule: 0 22 * *\n    duration: 1h\n", "addons/a.yaml:5: syncWindows[0].schedule: \"0 22 * *\" is not a cron schedule"},
		{"window bad kind", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nsyncWindows:\n  - {kind: sometimes, schedule: '@daily', duration: 1h}\n", "addons/a.yaml:4: syncWindows[0].kind: \"sometimes\" is neither allow nor deny"},
		{"window bad duration", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nsyncWindows:\n  - kind: deny\n    schedule: '@daily'\n    duration: forever\n", "addons/a.yaml:6: syncWindows[0].duration: \"forever\" is not a duration"},
		{"window long", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nsyncWindows:\n  - {kind: deny, schedule: '@daily', duration: 200h}\n", "addons/a.yaml:4: syncWindows[0].duration: 200h0m0s is not more than 0s and at most 168h"},
		{"window zone", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nsyncWindows:\n  - kind: deny\n    schedule: '@daily'\n    duration: 1h\n    timeZone: Mars/Olympus\n", "addons/a.yaml:7: syncWindows[0].timeZone"},
		{"health check that does not compile", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nhealthChecks:\n  - apiVersion: example.com/v1\n    kind: DB\n    current: status.phase ==\n", "addons/a.yaml:6: healthChecks[0].current: ERROR: <input>:1:16: Syntax error"},
		{"health check twice", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nhealthChecks:\n  - {apiVersion: example.com/v1, kind: DB, current: 'true'}\n  - {apiVersion: example.com/v1, kind: DB, current: 'false'}\n", "addons/a.yaml:5: healthChecks[1]: example.com/v1 DB has a check already, healthChecks[0]"},
		{"health check without current", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nhealthChecks:\n  - {apiVersion: example.com/v1, kind: DB}\n", "addons/a.yaml:4: healthChecks[0].current: is required"},
		{"bad valuesFrom kind", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nvaluesFrom:\n  - kind: Pod\n    name: p\n", "addons/a.yaml:4: valuesFrom[0].kind"},
		{"bad valuesFrom name", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nvaluesFrom:\n  - kind: Secret\n    name: Bad Name\n", "addons/a.yaml:5: valuesFrom[0].name: must be a Secret's or ConfigMap's name"},
		{"bad substituteFrom name", "addons/a.yaml", "name: a\ngit: {path: a}\nsubstituteFrom:\n  - {kind: ConfigMap, name: vars_prod}\n", "addons/a.yaml:4: substituteFrom[0].name: must be a Secret's or ConfigMap's name"},
		{"substitute for a chart", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nsubstitute: {x: y}\n", "addons/a.yaml:3: substitute: substitute and substituteFrom apply to git folders only"},
		{"bad variable name", "addons/a.yaml", "name: a\ngit: {path: a}\nsubstitute:\n  ok: y\n  cluster-name: y\n", "addons/a.yaml:5: substitute.cluster-name: \"cluster-name\" is not a variable name"},
		{"long variable value", "addons/a.yaml", "name: a\ngit: {path: a}\nsubstitute:\n  ok: y\n  long: " + strings.Repeat("x", 4097) + "\n", "addons/a.yaml:5: substitute.long: the value is 4097 characters, more than 4096"},
		{"decryption for a chart", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\ndecryption: {provider: sops, secretRef: {name: k}}\n", "addons/a.yaml:3: decryption: decryption applies to git folders only"},
		{"decryption by pgp", "addons/a.yaml", "name: a\ngit: {path: a}\ndecryption: {provider: pgp, secretRef: {name: k}}\n", "addons/a.yaml:3: decryption.provider: \"pgp\" is not a provider"},
		{"bad substituteFrom kind", "addons/a.yaml", "name: a\ngit: {path: a}\nsubstituteFrom:\n  - {kind: Pod, name: p}\n", "addons/a.yaml:4: substituteFrom[0].kind"},
		{"git path escapes", "addons/a.yaml", "name: a\ngit:\n  path: ../../etc\n", "addons/a.yaml:3: git.path: \"../../etc\" leaves the repository"},
		{"git path absolute", "addons/a.yaml", "name: a\ngit:\n  path: /etc\n", "addons/a.yaml:3: git.path"},
		{"git url with a password", "addons/a.yaml", "name: a\ngit:\n  url: https://user:hunter2@git.example.com/r.git\n  path: a\n", "addons/a.yaml:3: git.url: must not hold credentials (a password, or a token as the user): put them in a Secret and name it in git.secretRef"},
		{"git url with a token as the user", "addons/a.yaml", "name: a\ngit:\n  url: https://0123456789abcdef0123456789abcdef01234567@gitea.example.com/r.git\n  path: a\n", "addons/a.yaml:3: git.url: must not hold credentials"},
		{"git url with a prefixed token", "addons/a.yaml", "name: a\ngit:\n  url: https://ghp_abc@github.com/o/r.git\n  path: a\n", "addons/a.yaml:3: git.url: must not hold credentials"},
		{"git url with a bare % in its password", "addons/a.yaml", "name: a\ngit:\n  url: https://deploy:hunter2%zz@git.example.com/org/manifests.git\n  path: app\n", "addons/a.yaml:3: git.url: is not a URL git can read"},
		{"git url with a leading space and a password", "addons/a.yaml", "name: a\ngit:\n  url: \" https://deploy:hunter2@git.example.com/x.git\"\n  path: app\n", "addons/a.yaml:3: git.url: is not a URL git can read"},
		{"scp-like git url with a password", "addons/a.yaml", "name: a\ngit:\n  url: deploy:hunter2@git.example.com:org/x.git\n  path: app\n", "addons/a.yaml:3: git.url: must not hold credentials"},
		{"git url of another scheme with a password", "addons/a.yaml", "name: a\ngit:\n  url: git://hunter2@git.example.com/x.git\n  path: app\n", "addons/a.yaml:3: git.url: must be https://"},
		{"git url of another scheme", "addons/a.yaml", "name: a\ngit:\n  url: ftp://git.example.com/x.git\n  path: app\n", "addons/a.yaml:3: git.url: \"ftp://git.example.com/x.git\" must be https://"},
		{"helm repo with a password", "addons/a.yaml", "name: a\nhelm:\n  repo: https://admin:hunter2@charts.example.com/\n  chart: c\n", "addons/a.yaml:3: helm.repo: must not hold credentials (a password, or a token as the user): put them in a Secret and name it in helm.secretRef"},
		{"helm repo with a token as the user", "addons/a.yaml", "name: a\nhelm:\n  repo: https://0123456789abcdef0123456789abcdef01234567@charts.example.com/\n  chart: c\n", "addons/a.yaml:3: helm.repo: must not hold credentials"},
		{"helm repo with a user alone", "addons/a.yaml", "name: a\nhelm:\n  repo: https://ghp_hunter2@charts.example.com/\n  chart: c\n", "addons/a.yaml:3: helm.repo: must not hold credentials"},
		{"http helm repo with a password", "addons/a.yaml", "name: a\nhelm:\n  repo: http://admin:hunter2@charts.example.com/\n  chart: c\n", "addons/a.yaml:3: helm.repo: must not hold credentials"},
		{"helm repo with a bare % in its password", "addons/a.yaml", "name: a\nhelm:\n  repo: https://admin:hunter2%zz@charts.example.com/\n  chart: c\n", "addons/a.yaml:3: helm.repo: is not a URL"},
		{"helm repo of another scheme with an @", "addons/a.yaml", "name: a\nhelm:\n  repo: ftp:hunter2@charts.example.com/\n  chart: c\n", "addons/a.yaml:3: helm.repo: must be an https:// chart repository URL, of at most"},
		{"helm repo over http", "addons/a.yaml", "name: a\nhelm:\n  repo: http://charts.example.com/\n  chart: c\n", "addons/a.yaml:3: helm.repo: \"http://charts.example.com/\" must be an https:// chart repository URL"},
		{"helm url with a password", "addons/a.yaml", "name: a\nhelm:\n  url: https://admin:hunter2@charts.example.com/c-1.0.0.tgz\n", "addons/a.yaml:3: helm.url: must not hold credentials"},
		{"helm url with a token as the user", "addons/a.yaml", "name: a\nhelm:\n  url: https://ghp_hunter2@charts.example.com/c-1.0.0.tgz\n", "addons/a.yaml:3: helm.url: must not hold credentials"},
		{"helm oci with a password", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://robot:hunter2@registry.example.com/charts/c\n  version: 1.0.0\n", "addons/a.yaml:3: helm.oci: must not hold credentials"},
		{"helm oci with a user alone", "addons/a.yaml", "name: a\nhelm:\n  oci: oci://hunter2@registry.example.com/charts/c\n  version: 1.0.0\n", "addons/a.yaml:3: helm.oci: must not hold credentials"},
		{"revision without url", "addons/a.yaml", "name: a\ngit:\n  path: a\n  revision: main\n", "addons/a.yaml:4: git.revision"},
		{"a list", "addons/a.yaml", "- name: a\n- name: b\n", "addons/a.yaml:1: the file holds a list"},
		{"a scalar", "addons/a.yaml", "just text\n", "addons/a.yaml:1: the file holds a single value"},
		{"empty", "addons/a.yaml", "", "addons/a.yaml: the file is empty"},
		{"two documents", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\n---\nname: b\n", "addons/a.yaml:3: the file holds more than one YAML document"},
		{"two documents after an empty one", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\n---\n---\nname: b\n", "addons/a.yaml:4: the file holds more than one YAML document"},
		{"a null second document", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\n--- ~\n", "addons/a.yaml:3: the file holds more than one YAML document"},
		{"syntax error", "addons/a.yaml", "name: a\nhelm: [\n", "addons/a.yaml:"},
		{"alias bomb", "addons/bomb.yaml", bomb, "addons/bomb.yaml:4: YAML anchors and aliases"},
		{"50 MiB", "addons/huge.yaml", huge, "addons/huge.yaml: the file is 52428"},
		{"not UTF-8", "addons/a.yaml", "name: a\ntitle: caf\xe9\n", "addons/a.yaml:2: the file is not valid UTF-8"},
		{"NaN value", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nvalues:\n  x: .nan\n", "addons/a.yaml:4: values.x: NaN"},
		{"values a list", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\nvalues: [1]\n", "addons/a.yaml:3: values: must be a mapping"},
		{"empty key", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\n\"\": 1\n", "addons/a.yaml:3: unknown field"},
		{"empty key as a mapping", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c}\n\"\": {x: 1}\n", "addons/a.yaml:3: unknown field"},
		{"empty key in helm", "addons/a.yaml", "name: a\nhelm: {repo: https://x, chart: c, \"\": 1}\n", "addons/a.yaml:2: helm.: unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			def, err := Parse(tc.file, []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted: %+v", def)
			}
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("error is %T, not *InvalidError: %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n%v\ndoes not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "0123456789abcdef01") {
				t.Fatalf("the error quotes the credentials: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestCheckSourceRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "apps", "real"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "apps", "real", "cm.yaml"), []byte("kind: ConfigMap\n"), 0o644))
	must(os.Symlink("/etc", filepath.Join(dir, "out")))
	must(os.Symlink("real", filepath.Join(dir, "apps", "inside")))
	must(os.MkdirAll(filepath.Join(dir, "leaky"), 0o755))
	must(os.Symlink("../../secret", filepath.Join(dir, "leaky", "x.yaml")))
	cases := []struct{ path, want string }{
		{"apps/real", ""},
		{"out", "leads out of the repository"},
		{"apps/inside", "is a symbolic link"},
		{"leaky", "\"leaky/x.yaml\", a symbolic link that leads out"},
		{"missing", "does not exist"},
		{"apps/real/cm.yaml", "is a file"},
	}
	for _, tc := range cases {
		def, err := Parse("addons/a.yaml", []byte("name: a\n\ngit:\n  path: "+tc.path+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckSource(def, "addons/a.yaml", DirTree(dir))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "addons/a.yaml:4: git.path:")):
			t.Errorf("%s: got %v, want addons/a.yaml:4 and %q", tc.path, err, tc.want)
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	def, err := Parse("addons/longhorn.yaml", []byte(longhorn))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Encode(def)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("addons/longhorn.yaml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	a, _ := json.Marshal(def)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Fatalf("round trip changed the definition:\n%s\n%s", a, b)
	}
}

// FuzzParse feeds any file to the definition parser. A definition is
// refused with its problems listed, or it is named after its file, converts
// to an Addon, and encodes to a file that parses to the same definition.
// TestDecoderRefusesAnUnknownType checks that a field type the decoder has
// no case for is a problem of the file, not a panic of the syncer.
func TestDecoderRefusesAnUnknownType(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("1\n"), &n); err != nil {
		t.Fatal(err)
	}
	var x struct {
		Count int `yaml:"count"`
	}
	d := &decoder{}
	d.decode(n.Content[0], reflect.ValueOf(&x).Elem().Field(0), "count")
	if len(d.problems) != 1 || !strings.Contains(d.problems[0].Message, "no decoder for int") {
		t.Fatalf("problems = %+v", d.problems)
	}
}

// TestParseBoundsItsProblems checks that a file full of mistakes gives a
// short error: the first problems, the allowed fields named once, and a
// count of the rest.
func TestParseBoundsItsProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: a\nhelm: {repo: https://x, chart: c}\n")
	for i := 0; b.Len() < MaxFileSize-16; i++ {
		fmt.Fprintf(&b, "k%d: 1\n", i)
	}
	keys := strings.Count(b.String(), "\n") - 2
	_, err := Parse("addons/a.yaml", []byte(b.String()))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if len(msg) > 8<<10 {
		t.Fatalf("the error is %d bytes:\n%.2000s", len(msg), msg)
	}
	if want := fmt.Sprintf("and %d more problems", keys-maxProblems); !strings.Contains(msg, want) {
		t.Fatalf("error does not contain %q:\n%s", want, msg)
	}
	lines := strings.Split(msg, "\n")
	if n, ok := ProblemsLeftOut("addons/a.yaml", lines[len(lines)-1]); !ok || n != keys-maxProblems || len(lines) != maxProblems+1 {
		t.Fatalf("%d lines, the last read as %d, %v; want %d problems and a count of %d", len(lines), n, ok, maxProblems, keys-maxProblems)
	}
	if n := strings.Count(msg, "hookTimeout"); n != 1 {
		t.Fatalf("the allowed fields are named %d times, not once:\n%s", n, msg)
	}
	if !strings.Contains(msg, "addons/a.yaml:4: k1: unknown field; the fields here are listed at line 3") {
		t.Fatalf("later unknown fields do not point to the list:\n%s", msg)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("addons/longhorn.yaml", []byte(longhorn))
	f.Add("addons/umami.yaml", []byte(umami))
	f.Add("addons/w.yaml", []byte("name: w\nhelm: {repo: https://x, chart: c}\nsyncWindows:\n  - {kind: deny, schedule: '0 0 24 12 *', duration: 72h, timeZone: Europe/Amsterdam, manualSync: true}\n"+
		"patches:\n  - patch: '{}'\n    target: {kind: Secret}\nimages:\n  - {name: nginx, newTag: '1'}\n"))
	f.Add("addons/g.yaml", []byte("name: g\ngit: {path: app}\nsubstitute: {cluster: prod, port: '8080'}\nsubstituteFrom:\n  - {kind: Secret, name: s, optional: true}\n"))
	f.Add("addons/a.yaml", []byte("a: &a [*a]"))
	f.Add("addons/a.yaml", []byte("- 1\n- 2"))
	f.Fuzz(func(t *testing.T, file string, data []byte) {
		def, err := Parse(file, data)
		if err == nil {
			if def.Name != NameFromFile(file) {
				t.Fatalf("accepted name %q for file %q", def.Name, file)
			}
			if _, err := def.Addon(Origin{File: file}); err != nil {
				t.Fatalf("a parsed definition must convert: %v", err)
			}
			out, err := Encode(def)
			if err != nil {
				t.Fatalf("a parsed definition must encode: %v", err)
			}
			again, err := Parse(file, out)
			if err != nil {
				t.Fatalf("the encoded definition is refused: %v\n%s", err, out)
			}
			a, _ := json.Marshal(def)
			b, _ := json.Marshal(again)
			if !bytes.Equal(a, b) {
				t.Fatalf("encode and parse changed the definition:\n%s\n%s", a, b)
			}
			return
		}
		var inv *InvalidError
		if !errors.As(err, &inv) || len(inv.Problems) == 0 {
			t.Fatalf("error without problems: %v", err)
		}
	})
}

// TestParseVerify checks that a definition's helm.verify becomes the
// Addon's spec.chart.verify, as the controller checks it: without it, a
// chart committed with a signature check would install unchecked.
func TestParseVerify(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      capstanv1.ChartVerification
	}{
		{"cosign", "name: a\nhelm:\n  oci: oci://r/c\n  version: 1.0.0\n  verify:\n    cosign: {secretRef: {name: chart-keys}, key: team.pub}\n",
			capstanv1.ChartVerification{Cosign: &capstanv1.CosignVerification{SecretRef: capstanv1.LocalObjectReference{Name: "chart-keys"}, Key: "team.pub"}}},
		{"provenance", "name: a\nhelm:\n  repo: https://x\n  chart: c\n  verify:\n    provenance: {secretRef: {name: keyring}}\n",
			capstanv1.ChartVerification{Provenance: &capstanv1.ProvenanceVerification{SecretRef: capstanv1.LocalObjectReference{Name: "keyring"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def, err := Parse("addons/a.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			a, err := def.Addon(Origin{Namespace: "ns", Repository: "r", File: "addons/a.yaml"})
			if err != nil {
				t.Fatal(err)
			}
			if v := a.Spec.Chart.Verify; v == nil || !reflect.DeepEqual(*v, tc.want) {
				t.Fatalf("spec.chart.verify is %+v; want %+v", v, tc.want)
			}
			out, err := Encode(def)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := Parse("addons/a.yaml", out); err != nil || !reflect.DeepEqual(again.Helm.Verify, def.Helm.Verify) {
				t.Fatalf("the encoded definition does not parse back to its verify (%v):\n%s", err, out)
			}
		})
	}
}

// TestParseTakesWhatTheControllerTakes checks versions and timeouts the
// controller accepts: an OCI chart's plain tag (one with an x too), pulled
// as it is, a range, and the longest hook timeout the CRD allows.
func TestParseTakesWhatTheControllerTakes(t *testing.T) {
	for _, src := range []string{
		"name: a\nhelm:\n  oci: oci://r/c\n  version: latest\n",
		"name: a\nhelm:\n  oci: oci://r/c\n  version: next\n",
		"name: a\nhelm:\n  oci: oci://r/c\n  version: linux-x64\n",
		"name: a\nhelm:\n  oci: oci://r/c\n  version: \">=1.0.0 <2.0.0\"\n",
		"name: a\nhelm:\n  repo: https://x\n  chart: c\n  version: v1.10.2\n",
		"name: a\nhelm: {repo: https://x, chart: c}\nhookTimeout: 23h59m59.5s\n",
	} {
		if _, err := Parse("addons/a.yaml", []byte(src)); err != nil {
			t.Errorf("refused:\n%s\n%v", src, err)
		}
	}
}

// TestParseIgnoresEmptyTrailingDocuments: a trailing --- starts a document
// that holds nothing, which is no second definition.
func TestParseIgnoresEmptyTrailingDocuments(t *testing.T) {
	const valid = "name: a\nhelm: {repo: https://x, chart: c}\n"
	for _, src := range []string{valid + "---\n", valid + "---", valid + "---\n# the end\n", valid + "---\n...\n", valid + "---\n---\n"} {
		if _, err := Parse("addons/a.yaml", []byte(src)); err != nil {
			t.Errorf("refused:\n%s\n%v", src, err)
		}
	}
}

// TestParseCountsCharacters: the CRD's maxLength counts characters, so a
// title, category, variable or URL in Japanese, three bytes a character,
// is taken up to the same length as one in ASCII, and refused past it.
func TestParseCountsCharacters(t *testing.T) {
	kana := func(n int) string { return strings.Repeat("監", n) }
	for _, tc := range []struct {
		name, src, refused string
	}{
		{"title", "name: a\nhelm: {repo: https://x, chart: c}\ntitle: " + kana(128) + "\n", "title: is longer than 128 characters"},
		{"category", "name: a\nhelm: {repo: https://x, chart: c}\ncategory: " + kana(63) + "\n", "category: is longer than 63 characters"},
		{"substitute", "name: a\ngit: {path: a}\nsubstitute: {V: " + kana(4096) + "}\n", "substitute.V: the value is 4097 characters"},
		{"ignore path", "name: a\nhelm: {repo: https://x, chart: c}\nignore:\n  - paths: [/" + kana(255) + "]\n", "ignore[0].paths[0]: is longer than 256 characters"},
		{"helm.repo", "name: a\nhelm: {repo: https://x/" + kana(2038) + ", chart: c}\n", "must be an https:// chart repository URL"},
		{"helm.oci", "name: a\nhelm: {oci: oci://x/" + kana(2040) + ", version: 1.0.0}\n", "must look like oci://registry/path/chart"},
		{"helm.url", "name: a\nhelm: {url: https://x/" + kana(2038) + "}\n", "must be an https:// chart archive URL"},
		{"git.url", "name: a\ngit: {url: https://x/" + kana(2038) + "}\n", "of at most 2048 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse("addons/a.yaml", []byte(tc.src)); err != nil {
				t.Fatalf("refused at the CRD's length:\n%v", err)
			}
			more := strings.Replace(tc.src, kana(1), kana(2), 1)
			if _, err := Parse("addons/a.yaml", []byte(more)); err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("one character more: %v; want %q", err, tc.refused)
			}
		})
	}
}
