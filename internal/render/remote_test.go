package render

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestRefuseRemote checks the decision alone: no test here builds what it
// refuses, so no remote named here is ever fetched.
func TestRefuseRemote(t *testing.T) {
	const deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"
	cases := []struct {
		name  string
		files map[string]string
		// wantFile and wantField name the refusal; wantErr is a refusal
		// that is not a *RemoteError; neither is no refusal.
		wantFile, wantField, wantRef, wantErr string
	}{
		{
			name: "remote resource under a local folder of generators",
			files: map[string]string{
				"app/kustomization.yaml":     "resources: [deploy.yaml]\ngenerators: [gen]\n",
				"app/gen/kustomization.yaml": "resources:\n  - https://raw.example/gen.yaml\n",
			},
			wantFile: "app/gen/kustomization.yaml", wantField: "resources", wantRef: "https://raw.example/gen.yaml",
		},
		{
			name: "git base under a local folder of transformers",
			files: map[string]string{
				"app/kustomization.yaml":    "resources: [deploy.yaml]\ntransformers: [./tr]\n",
				"app/tr/kustomization.yaml": "resources:\n  - git::https://git.example/org/repo//tr\n",
			},
			wantFile: "app/tr/kustomization.yaml", wantField: "resources", wantRef: "git::https://git.example/org/repo//tr",
		},
		{
			name: "remote component under a local folder of validators",
			files: map[string]string{
				"app/kustomization.yaml":     "resources: [deploy.yaml]\nvalidators: [val]\n",
				"app/val/kustomization.yaml": "components:\n  - github.com/org/repo/val?ref=v1\n",
			},
			wantFile: "app/val/kustomization.yaml", wantField: "components", wantRef: "github.com/org/repo/val",
		},
		{
			name: "folders of transformers nested in a base",
			files: map[string]string{
				"app/kustomization.yaml":        "resources: [../base]\n",
				"base/kustomization.yaml":       "resources: [deploy.yaml]\ntransformers: [t1]\n",
				"base/t1/kustomization.yaml":    "resources: [t2]\n",
				"base/t1/t2/kustomization.yaml": "resources: [https://raw.example/t.yaml]\n",
			},
			wantFile: "base/t1/t2/kustomization.yaml", wantField: "resources", wantRef: "https://raw.example/t.yaml",
		},
		{
			name: "patch transformer file with a remote path",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [deploy.yaml]\ntransformers: [patch.yaml]\n",
				"app/patch.yaml":         "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: https://raw.example/patch.yaml\n",
			},
			wantFile: "app/patch.yaml", wantField: "PatchTransformer path", wantRef: "https://raw.example/patch.yaml",
		},
		{
			name: "inline replacement transformer with a remote path",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [deploy.yaml]\ntransformers:\n  - |\n    apiVersion: builtin\n    kind: ReplacementTransformer\n    metadata:\n      name: r\n    replacements:\n      - path: https://raw.example/r.yaml\n",
			},
			wantFile: "app/kustomization.yaml", wantField: "ReplacementTransformer path", wantRef: "https://raw.example/r.yaml",
		},
		{
			name: "one-line inline generator with a remote file",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [deploy.yaml]\ngenerators:\n  - '{apiVersion: builtin, kind: ConfigMapGenerator, metadata: {name: c}, files: [k=https://user:tok3n@raw.example/c]}'\n",
			},
			wantFile: "app/kustomization.yaml", wantField: "ConfigMapGenerator files", wantRef: "https://raw.example/c",
		},
		{
			name: "generator config in a folder of generators with a remote env file",
			files: map[string]string{
				"app/kustomization.yaml":     "resources: [deploy.yaml]\ngenerators: [gen]\n",
				"app/gen/kustomization.yaml": "resources: [secret.yaml]\n",
				"app/gen/secret.yaml":        "apiVersion: builtin\nkind: SecretGenerator\nmetadata:\n  name: s\nenvs:\n  - https://raw.example/s.env\n",
			},
			wantFile: "app/gen/secret.yaml", wantField: "SecretGenerator envs", wantRef: "https://raw.example/s.env",
		},
		{
			name: "strategic merge transformer with remote paths",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [deploy.yaml]\ntransformers: [smp.yaml]\n",
				"app/smp.yaml":           "apiVersion: builtin\nkind: PatchStrategicMergeTransformer\nmetadata:\n  name: p\npaths:\n  - local.yaml\n  - https://raw.example/p.yaml\n",
			},
			wantFile: "app/smp.yaml", wantField: "PatchStrategicMergeTransformer paths", wantRef: "https://raw.example/p.yaml",
		},
		{
			name: "helm chart inflation as a generator",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [deploy.yaml]\ngenerators: [helm.yaml]\n",
				"app/helm.yaml":          "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata:\n  name: h\nname: x\nrepo: https://charts.example\n",
			},
			wantErr: "HelmChartInflationGenerator",
		},
		{
			name: "token in the query",
			files: map[string]string{
				"app/kustomization.yaml": "resources:\n  - https://git.example/api/v4/projects/1/repository/files/d.yaml/raw?private_token=tok3n\n",
			},
			wantFile: "app/kustomization.yaml", wantField: "resources", wantRef: "https://git.example/api/v4/projects/1/repository/files/d.yaml/raw",
		},
		{
			name: "remote generator entry",
			files: map[string]string{
				"app/kustomization.yaml": "resources: [deploy.yaml]\ngenerators: [https://raw.example/gen.yaml]\n",
			},
			wantFile: "app/kustomization.yaml", wantField: "generators", wantRef: "https://raw.example/gen.yaml",
		},
		{
			name: "remote base under a folder of resources",
			files: map[string]string{
				"app/kustomization.yaml":      "resources: [base]\n",
				"app/base/kustomization.yaml": "resources: [https://raw.example/b.yaml]\n",
			},
			wantFile: "app/base/kustomization.yaml", wantField: "resources", wantRef: "https://raw.example/b.yaml",
		},
		{
			name: "local plugins only",
			files: map[string]string{
				"app/kustomization.yaml":     "resources: [deploy.yaml]\ngenerators: [gen]\ntransformers: [labels.yaml, patch.yaml]\n",
				"app/gen/kustomization.yaml": "resources: [cm.yaml]\n",
				"app/gen/cm.yaml":            "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: c\nliterals: [url=https://example.org]\nfiles: [k=local.txt]\n",
				"app/labels.yaml":            "apiVersion: builtin\nkind: LabelTransformer\nmetadata:\n  name: l\nlabels: {a: b}\nfieldSpecs:\n  - path: metadata/labels\n    create: true\n",
				"app/patch.yaml":             "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: patches/p.yaml\n",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := filesys.MakeFsInMemory()
			for name, data := range tc.files {
				if err := fsys.WriteFile("/"+name, []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
			if err := fsys.WriteFile("/app/deploy.yaml", []byte(deploy)); err != nil {
				t.Fatal(err)
			}
			err := refuseRemote(fsys, "/app", map[string]bool{})
			var re *RemoteError
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one naming %s", err, tc.wantErr)
				}
			case tc.wantFile == "":
				if err != nil {
					t.Fatalf("error = %v, want none", err)
				}
			case !errors.As(err, &re):
				t.Fatalf("error = %v, want a *RemoteError", err)
			case re.Kustomization != tc.wantFile || re.Field != tc.wantField || re.Reference != tc.wantRef:
				t.Errorf("refused %q in %s naming %q; want %q in %s naming %q", re.Field, re.Kustomization, re.Reference, tc.wantField, tc.wantFile, tc.wantRef)
			}
			if err != nil && strings.Contains(err.Error(), "tok3n") {
				t.Errorf("the error carries a password: %v", err)
			}
		})
	}
}

// TestRedactReference checks that no user, password, query or fragment of
// a refused reference reaches the error, which status and events carry.
func TestRedactReference(t *testing.T) {
	for ref, want := range map[string]string{
		"https://raw.example/d.yaml":                                 "https://raw.example/d.yaml",
		"https://user:tok3n@raw.example/d.yaml":                      "https://raw.example/d.yaml",
		"https://tok3n@raw.example/d.yaml":                           "https://raw.example/d.yaml",
		"https://user:pa/ss-tok3n@raw.example/d.yaml":                "https://raw.example/d.yaml",
		"https://user:p@ss-tok3n@raw.example/d.yaml":                 "https://raw.example/d.yaml",
		"https://raw.example/d.yaml?private_token=tok3n":             "https://raw.example/d.yaml",
		"https://raw.example/d.yaml#tok3n":                           "https://raw.example/d.yaml",
		"git::https://user:tok3n@git.example/org/repo//app?ref=v1":   "git::https://git.example/org/repo//app",
		"github.com/org/repo/app?ref=v1&token=tok3n":                 "github.com/org/repo/app",
		"git@github.com:org/repo.git":                                "git@github.com:org/repo.git",
		"user:tok3n@git.example:org/repo.git":                        "git.example:org/repo.git",
		"user:pa/ss-tok3n@git.example:org/repo.git":                  "git.example:org/repo.git",
		"ssh://git:tok3n@git.example/org/repo.git?ref=main#fragment": "ssh://git.example/org/repo.git",
		"example.com/repo?private_token=tok3n&next=https://x/y":      "example.com/repo",
		"tok3n@github.com/org/repo//app":                             "github.com/org/repo//app",
		"tok3n@git.example:443/org/repo":                             "git.example:443/org/repo",
	} {
		got := redactReference(ref)
		if got != want || strings.Contains(got, "tok3n") {
			t.Errorf("redactReference(%q) = %q, want %q", ref, got, want)
		}
	}
}
