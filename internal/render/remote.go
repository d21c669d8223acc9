package render

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// RemoteError is a kustomization that names something kustomize would fetch
// over the network: a git repository or an http(s) file. Capstan refuses it
// rather than let kustomize fetch it without the fetch guard.
type RemoteError struct {
	// Kustomization is the kustomization file that names it.
	Kustomization string
	// Field is the field, such as resources.
	Field string
	// Reference is what it names, with any user and password removed.
	Reference string
}

// Error says what was refused and what to do instead.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("render: %s: %s names the remote %q, which Capstan does not fetch: "+
		"vendor it into the repository, or make it an Addon of its own", e.Kustomization, e.Field, e.Reference)
}

// userBeforeHost matches a reference that starts with "user@host", such as
// git@github.com:org/repo: kustomize clones it.
var userBeforeHost = regexp.MustCompile(`^[^/]+@`)

// isRemote reports whether kustomize would fetch ref: it has a scheme, the
// "git::" prefix, a user before the host, or it starts with github.com, as
// kustomize's own repository-spec parser accepts them.
func isRemote(ref string) bool {
	lower := strings.ToLower(strings.TrimSpace(ref))
	return strings.HasPrefix(lower, "git::") ||
		strings.Contains(lower, "://") ||
		strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") ||
		userBeforeHost.MatchString(lower)
}

// redactReference drops the user information of a URL reference, which can
// be a token, and the password of an scp-style one (user:password@host:path);
// the plain user of an scp-style reference (git@host:path) stays.
func redactReference(ref string) string {
	if u, err := url.Parse(ref); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	if user, rest, ok := strings.Cut(ref, "@"); ok && strings.Contains(user, ":") && !strings.Contains(user, "/") {
		return rest
	}
	return ref
}

// refuseRemote reads the kustomization of dir and of every local folder it
// builds on (resources, bases and components), and refuses the first field
// that names a remote, and any Helm chart inflation, which runs the helm
// binary and fetches charts. seen stops a cycle.
func refuseRemote(fsys filesys.FileSystem, dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	file := ""
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if p := path.Join(dir, name); fsys.Exists(p) && !fsys.IsDir(p) {
			file = p
			break
		}
	}
	if file == "" {
		return nil
	}
	data, err := fsys.ReadFile(file)
	if err != nil {
		return fmt.Errorf("render: read %s: %w", file, err)
	}
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return fmt.Errorf("render: %s is not a kustomization: %w", strings.TrimPrefix(file, "/"), err)
	}
	k.FixKustomization()
	shown := strings.TrimPrefix(file, "/")
	if len(k.HelmCharts) > 0 || len(k.HelmChartInflationGenerator) > 0 || k.HelmGlobals != nil {
		return fmt.Errorf("render: %s inflates Helm charts (helmCharts), which runs the helm binary and fetches charts without the fetch guard: "+
			"make each chart an Addon of its own", shown)
	}

	refs := map[string][]string{
		"resources":      k.Resources,
		"components":     k.Components,
		"crds":           k.Crds,
		"configurations": k.Configurations,
		"generators":     k.Generators,
		"transformers":   k.Transformers,
		"validators":     k.Validators,
	}
	if p := k.OpenAPI["path"]; p != "" {
		refs["openapi.path"] = []string{p}
	}
	for _, p := range k.Patches {
		refs["patches"] = append(refs["patches"], p.Path)
	}
	// Deprecated fields still work in kustomize, so their paths are checked too.
	for _, p := range k.PatchesJson6902 { //nolint:staticcheck // see above
		refs["patchesJson6902"] = append(refs["patchesJson6902"], p.Path)
	}
	for _, p := range k.PatchesStrategicMerge { //nolint:staticcheck // see above
		refs["patchesStrategicMerge"] = append(refs["patchesStrategicMerge"], string(p))
	}
	for _, r := range k.Replacements {
		refs["replacements"] = append(refs["replacements"], r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		refs["configMapGenerator"] = append(refs["configMapGenerator"], generatorFiles(g.KvPairSources)...)
	}
	for _, g := range k.SecretGenerator {
		refs["secretGenerator"] = append(refs["secretGenerator"], generatorFiles(g.KvPairSources)...)
	}

	for _, field := range []string{"resources", "components", "crds", "configurations", "generators", "transformers",
		"validators", "openapi.path", "patches", "patchesJson6902", "patchesStrategicMerge", "replacements",
		"configMapGenerator", "secretGenerator"} {
		for _, ref := range refs[field] {
			// An inline patch or plugin configuration is YAML, not a reference.
			if ref == "" || strings.Contains(ref, "\n") {
				continue
			}
			if isRemote(ref) {
				return &RemoteError{Kustomization: shown, Field: field, Reference: redactReference(ref)}
			}
			if field != "resources" && field != "components" {
				continue
			}
			if next := path.Join(dir, ref); fsys.IsDir(next) {
				if err := refuseRemote(fsys, next, seen); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// generatorFiles lists the files a ConfigMap or Secret generator reads:
// "key=path" and "path" file sources, and env files.
func generatorFiles(s types.KvPairSources) []string {
	var out []string
	for _, f := range s.FileSources {
		if _, p, ok := strings.Cut(f, "="); ok {
			f = p
		}
		out = append(out, f)
	}
	out = append(out, s.EnvSources...)
	if s.EnvSource != "" {
		out = append(out, s.EnvSource)
	}
	return out
}
