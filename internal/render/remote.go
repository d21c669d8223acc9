package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"
)

// RemoteError is a kustomization that names something kustomize would fetch
// over the network: a git repository or an http(s) file. Capstan refuses it
// rather than let kustomize fetch it without the fetch guard.
type RemoteError struct {
	// Kustomization is the kustomization file that names it, or the
	// plugin configuration file (under generators, transformers or
	// validators) that does.
	Kustomization string
	// Field is the field, such as resources, or a plugin's kind and
	// field, such as "PatchTransformer path".
	Field string
	// Reference is what it names, without its user information, query
	// and fragment, any of which can hold a token (redactReference).
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

// redactReference drops what in a remote reference can be a secret: the
// user information (a token as the user, or user:password) and the query
// and fragment (?private_token=…, a signed URL's signature). The user
// information is found as text, not by a URL parser: a password may hold a
// "/", which a parser takes for the start of the path, and so would keep
// the password as the host and path. It is everything from the scheme's
// "://" to the last "@"; a reference with an "@" in its path or query
// shows less than it could, never a secret. A reference with no scheme
// loses what comes before its last "@" when that holds a ":" or "/"
// (user:password@host:path); a plain user (git@host:path) stays.
func redactReference(ref string) string {
	prefix, rest := "", ref
	if i := strings.Index(ref, "://"); i > 0 && isScheme(ref[:i]) {
		prefix, rest = ref[:i+3], ref[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
	} else if at := strings.LastIndex(rest, "@"); at >= 0 {
		// NOTE: git@host:org/repo, an SSH address in scp's form, names
		// the user every forge takes; anything else before the host
		// (tok3n@host/org, tok3n@host:443/org) may be a token.
		if rest[:at] != "git" {
			rest = rest[at+1:]
		}
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	return prefix + rest
}

// refuseRemote reads the kustomization of dir and of every local folder it
// builds on, and refuses the first field that names a remote, and any Helm
// chart inflation, which runs the helm binary and fetches charts. seen
// stops a cycle.
//
// It follows into a local folder every field whose entries kustomize
// builds as a kustomization of their own: resources (and bases),
// components, and generators, transformers and validators. What a folder
// under those last three builds is plugin configurations, and so is a
// file, or inline YAML, listed in them; each configuration's paths are
// checked too (see refusePluginRemote), as the plugin loads them through
// the same loader.
//
// NOTE: the refusal depends on listing what kustomize loads, because
// kustomize cannot be given a loader that does not fetch: krusty builds
// its own file loader, which GETs an http(s) file with a plain
// http.Client whatever file system it is given, and runs git clone for a
// repository; krusty's options (load restrictions, plugin configuration)
// do not reach either.
func refuseRemote(fsys filesys.FileSystem, dir string, seen map[string]bool) error {
	return refuseRemoteIn(fsys, dir, false, seen)
}

// pluginFields are the kustomization fields whose entries kustomize loads
// as plugin configurations: inline YAML, files, or folders it builds.
var pluginFields = map[string]bool{"generators": true, "transformers": true, "validators": true}

// refuseRemoteIn is refuseRemote for dir, whose resources are plugin
// configurations when plugins is set: dir was reached through generators,
// transformers or validators.
func refuseRemoteIn(fsys filesys.FileSystem, dir string, plugins bool, seen map[string]bool) error {
	key := dir
	if plugins {
		// NOTE: a folder reached both ways is checked both ways: only as
		// plugin configurations are its files' paths read.
		key = "plugins:" + dir
	}
	if seen[key] {
		return nil
	}
	seen[key] = true
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

	if len(k.OpenAPI) > 0 {
		// NOTE: kustomize keeps the schema a build names in kyaml's
		// process-wide state, and every later build of every add-on reads
		// its merge keys from there: a schema that replaces a list would
		// make each strategic merge patch drop the rest of that list.
		return fmt.Errorf("render: %s sets openapi, which would change how kustomize merges patches for every add-on this controller builds, not only this one: "+
			"remove the openapi field, and patch the lists of custom resources with JSON 6902 patches (op, path, value) instead", shown)
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
		"validators", "patches", "patchesJson6902", "patchesStrategicMerge", "replacements",
		"configMapGenerator", "secretGenerator"} {
		asPlugins := plugins || pluginFields[field]
		for _, ref := range refs[field] {
			if ref == "" {
				continue
			}
			if pluginFields[field] {
				// As kustomize: an entry that reads as YAML objects is
				// inline plugin configuration, anything else a path.
				if inline, ok := yamlObjects(ref); ok {
					if err := refusePluginRemote(shown, inline); err != nil {
						return err
					}
					continue
				}
			} else if strings.Contains(ref, "\n") {
				// An inline patch is YAML, not a reference.
				continue
			}
			if isRemote(ref) {
				return &RemoteError{Kustomization: shown, Field: field, Reference: redactReference(ref)}
			}
			if field != "resources" && field != "components" && !pluginFields[field] {
				continue
			}
			next := path.Join(dir, ref)
			switch {
			case fsys.IsDir(next):
				if err := refuseRemoteIn(fsys, next, asPlugins, seen); err != nil {
					return err
				}
			case asPlugins && fsys.Exists(next):
				data, err := fsys.ReadFile(next)
				if err != nil {
					return fmt.Errorf("render: read %s: %w", strings.TrimPrefix(next, "/"), err)
				}
				// Not YAML objects: kustomize says so itself.
				if configs, ok := yamlObjects(string(data)); ok {
					if err := refusePluginRemote(strings.TrimPrefix(next, "/"), configs); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// pluginPathKeys are the fields of kustomize's built-in plugins that name
// a file they load: the patch transformers' path and paths, the
// replacement transformer's replacements[].path, and the ConfigMap and
// Secret generators' files, envs and env.
var pluginPathKeys = map[string]bool{"path": true, "paths": true, "files": true, "envs": true, "env": true}

// refusePluginRemote refuses plugin configurations, read from file, that
// name a remote file in a field the plugin loads, or that inflate a Helm
// chart.
func refusePluginRemote(file string, configs []map[string]any) error {
	for _, c := range configs {
		kind, _ := c["kind"].(string)
		if kind == "HelmChartInflationGenerator" {
			return fmt.Errorf("render: %s inflates a Helm chart (HelmChartInflationGenerator), which runs the helm binary and fetches charts without the fetch guard: "+
				"make the chart an Addon of its own", file)
		}
		var found *RemoteError
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for key, child := range v {
					if found != nil {
						return
					}
					if pluginPathKeys[key] {
						for _, ref := range pathValues(child) {
							if key == "files" {
								if _, p, ok := strings.Cut(ref, "="); ok {
									ref = p
								}
							}
							if isRemote(ref) {
								found = &RemoteError{Kustomization: file, Field: kind + " " + key, Reference: redactReference(ref)}
								return
							}
						}
					}
					walk(child)
				}
			case []any:
				for _, child := range v {
					walk(child)
				}
			}
		}
		walk(c)
		if found != nil {
			return found
		}
	}
	return nil
}

// pathValues returns v when it is a string, and its strings when it is a
// list.
func pathValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// yamlObjects reads s as a stream of YAML documents and returns its
// objects, and whether it holds any; a document that is not an object,
// such as a path, is not one.
func yamlObjects(s string) ([]map[string]any, bool) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	var out []map[string]any
	for {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false
		}
		var doc any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, false
		}
		if m, ok := doc.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, len(out) > 0
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

// isScheme reports whether s is a URL's scheme, kustomize's forced getter
// included (git::https): letters, digits, "+", "-", "." and ":".
func isScheme(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+-.:", r))
	}) < 0
}

// maxPatchApplications bounds what a folder's kustomizations may ask of
// kustomize before it runs: each patch with a target is applied to every
// object it selects, one at a time, so the cost is patches times objects.
// 1,000 ConfigMaps and 10 patches that select them all took 3.7 s on a
// loaded machine, 5,000 and 32 took 69 s: the bound is some 40 s there.
const maxPatchApplications = 100_000

// maxScannedObjects bounds the objects the patch scan gathers, each base
// counted once per kustomization that lists it, as the scan holds them:
// bases listed twice at each of a few levels would otherwise double them
// at every level. A folder kustomize could build within an add-on's
// object bound gathers far fewer, even over many levels.
const maxScannedObjects = 1_000_000

// fileObject is what the patch bound reads of one object in a resource
// file, before kustomize runs: its apiVersion, kind and name, each empty
// when a cheap read of the document did not find it.
type fileObject struct {
	apiVersion, kind, name string
}

// patchScan counts the patch applications a folder's kustomizations may
// ask of kustomize, as kustomize applies them: a kustomization's patches
// with a target (JSON 6902 patches always have one) to the objects that
// kustomization gathers (its resource files', and those of the
// kustomizations and components it builds on), each to the objects its
// target could select. kustomize builds a folder again each time a
// kustomization lists it, so a folder reached twice counts twice: done
// keeps what each folder gave, and visiting stops a cycle.
type patchScan struct {
	fsys     filesys.FileSystem
	done     map[string]scanned
	visiting map[string]bool
	// patches counts the patches with a target, applications the objects
	// they could select, summed over the patches; gathered counts the
	// objects gathered, over all kustomizations.
	patches, applications, gathered int
}

// scanned is what walking one folder gave: the objects it gathers, the
// targets it leaves to the kustomization that lists it, and the patches
// and applications it counted itself, those of the folders it builds on
// included.
type scanned struct {
	objs                  []fileObject
	pending               []*types.Selector
	patches, applications int
}

// newPatchScan starts a scan of fsys.
func newPatchScan(fsys filesys.FileSystem) *patchScan {
	return &patchScan{fsys: fsys, done: map[string]scanned{}, visiting: map[string]bool{}}
}

// over reports whether the count has passed maxPatchApplications, after
// which the scan stops: the build is refused whatever is left.
func (s *patchScan) over() bool {
	return s.applications > maxPatchApplications || s.gathered > maxScannedObjects
}

// walk reads the kustomization of dir and returns the objects it gathers.
// The patches of a component apply to the objects of the kustomization
// that lists it, so a component returns them (pending) for that one to
// count; a kustomization counts its own and its components'.
func (s *patchScan) walk(dir string, component bool) (objs []fileObject, pending []*types.Selector) {
	key := dir
	if component {
		key += "\x00component"
	}
	if r, ok := s.done[key]; ok {
		s.patches += r.patches
		s.applications += r.applications
		return r.objs, r.pending
	}
	if s.visiting[dir] || s.over() {
		return nil, nil
	}
	s.visiting[dir] = true
	defer delete(s.visiting, dir)
	patches, applications := s.patches, s.applications
	objs, pending = s.gather(dir, component)
	if s.over() {
		return objs, pending
	}
	s.done[key] = scanned{objs: objs, pending: pending, patches: s.patches - patches, applications: s.applications - applications}
	return objs, pending
}

// gather is walk's work on one folder not walked before.
func (s *patchScan) gather(dir string, component bool) (objs []fileObject, pending []*types.Selector) {
	var data []byte
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if p := path.Join(dir, name); s.fsys.Exists(p) && !s.fsys.IsDir(p) {
			data, _ = s.fsys.ReadFile(p)
			break
		}
	}
	var k types.Kustomization
	if data == nil || k.Unmarshal(data) != nil {
		// NOTE: what does not read as a kustomization, kustomize refuses itself.
		return nil, nil
	}
	k.FixKustomization()
	for _, p := range slices.Concat(k.Patches, k.PatchesJson6902) { //nolint:staticcheck // deprecated, still applied
		if p.Target != nil {
			pending = append(pending, p.Target)
		}
	}
	read := func(ref string, component bool) {
		next := path.Join(dir, ref)
		switch {
		case s.over() || isRemote(ref):
		case s.fsys.IsDir(next):
			o, p := s.walk(next, component)
			if s.gathered += len(o); !s.over() {
				objs, pending = append(slices.Clip(objs), o...), append(slices.Clip(pending), p...)
			}
		case s.fsys.Exists(next):
			if data, err := s.fsys.ReadFile(next); err == nil {
				o := fileObjects(data)
				s.gathered += len(o)
				objs = append(objs, o...)
			}
		}
	}
	for _, ref := range k.Resources {
		read(ref, false)
	}
	for _, ref := range k.Components {
		read(ref, true)
	}
	if component {
		return objs, pending
	}
	for _, target := range pending {
		if s.over() {
			break
		}
		s.patches++
		s.applications += selectable(target, objs, maxPatchApplications-s.applications)
	}
	return objs, nil
}

// fileObjects reads the apiVersion, kind and name of each document of a
// resource file with a line scan, which costs little next to decoding: a
// document's top-level apiVersion and kind, and the first name at the
// first indentation of its metadata. A document of comments alone is
// none.
func fileObjects(data []byte) []fileObject {
	var out []fileObject
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		raw, err := reader.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// NOTE: kustomize refuses what is not YAML; until then,
				// it is one object that any target may select.
				out = append(out, fileObject{})
			}
			return out
		}
		if !holdsContent(raw) {
			continue
		}
		var o fileObject
		inMetadata, indent := false, ""
		for line := range strings.SplitSeq(string(raw), "\n") {
			line = strings.TrimRight(line, " \r\t")
			trimmed := strings.TrimLeft(line, " ")
			switch {
			case trimmed == "" || trimmed[0] == '#':
			case len(trimmed) == len(line):
				inMetadata = line == "metadata:"
				if m := flowName.FindStringSubmatch(line); m != nil {
					o.name = unquote(m[1])
				}
				if v, ok := strings.CutPrefix(line, "apiVersion:"); ok {
					o.apiVersion = unquote(v)
				} else if v, ok := strings.CutPrefix(line, "kind:"); ok {
					o.kind = unquote(v)
				}
			case inMetadata:
				ind := line[:len(line)-len(trimmed)]
				if indent == "" {
					indent = ind
				}
				if v, ok := strings.CutPrefix(trimmed, "name:"); ok && ind == indent && o.name == "" {
					o.name = unquote(v)
				}
			}
		}
		if strings.HasSuffix(o.kind, "List") {
			// NOTE: kustomize takes a List's items one by one; any
			// target may select each.
			o = fileObject{}
			n := bytes.Count(raw, []byte("\n- ")) + bytes.Count(raw, []byte("\n  - "))
			for range max(n, 1) {
				out = append(out, o)
			}
			continue
		}
		out = append(out, o)
	}
}

// flowName finds the name in a metadata written on one line, as
// "metadata: {name: web, labels: ...}".
var flowName = regexp.MustCompile(`^metadata:\s*\{\s*name:\s*([^,}]+)`)

// unquote reads a YAML scalar as the line scan finds it: trimmed, without
// the quotes around it or a comment after it. A value the scan cannot
// read for sure is "", which any target may select: a tag (!!str), an
// anchor or alias, a flow collection, a double-quoted value with an
// escape, quotes that do not close, and a SOPS value (ENC[...]), as the
// scan reads the file before it is decrypted.
func unquote(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	switch q := v[0]; q {
	case '"', '\'':
		end := strings.IndexByte(v[1:], q)
		if end < 0 || q == '"' && strings.ContainsRune(v[1:end+1], '\\') {
			return ""
		}
		inner, rest := v[1:end+1], strings.TrimSpace(v[end+2:])
		if q == '\'' && strings.HasPrefix(rest, "'") {
			// NOTE: '' is a quote inside a single-quoted value.
			return ""
		}
		if rest != "" && rest[0] != '#' {
			return ""
		}
		return inner
	case '!', '&', '*', '[', '{', '|', '>', '%', '@', '`':
		return ""
	}
	if c := strings.Index(v, " #"); c >= 0 {
		v = v[:c]
	}
	if c := strings.Index(v, "\t#"); c >= 0 {
		v = v[:c]
	}
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "ENC[") {
		return ""
	}
	return v
}

// selectable counts the objects that target could select, never fewer
// than kustomize would: its kind, group and version are matched as
// kustomize matches them (these a build does not change); its name the
// same, or, since a prefix or suffix may be added on the way, as a
// pattern of literal characters and "." that the object's name fits
// within; any other regular expression, and a label, annotation or
// namespace selector, is taken to select every object of its kind. An
// object the line scan could not read may be selected by any target.
//
// It stops counting once the count passes limit: the bound is passed.
func selectable(target *types.Selector, objs []fileObject, limit int) int {
	sr, err := types.NewSelectorRegex(target)
	if err != nil {
		// NOTE: kustomize refuses a target it cannot compile.
		return 0
	}
	literal := !strings.ContainsAny(target.Name, `\*+?()[]{}|^$`)
	n := 0
	for _, o := range objs {
		if o.kind != "" {
			if !sr.MatchGvk(gvkOf(o)) {
				continue
			}
		}
		if o.name != "" && literal && !sr.MatchName(o.name) && !fitsWithin(target.Name, o.name) {
			continue
		}
		if n++; n > limit {
			break
		}
	}
	return n
}

// gvkOf is the group, version and kind of an object as its apiVersion and
// kind say.
func gvkOf(o fileObject) resid.Gvk {
	group, version, ok := strings.Cut(o.apiVersion, "/")
	if !ok {
		group, version = "", o.apiVersion
	}
	return resid.Gvk{Group: group, Version: version, Kind: o.kind}
}

// fitsWithin says whether name, with some prefix and suffix, could be
// matched by pattern, a pattern of literal characters where "." matches
// any one.
func fitsWithin(pattern, name string) bool {
	for off := 0; off+len(name) <= len(pattern); off++ {
		fits := true
		for i := 0; i < len(name) && fits; i++ {
			fits = pattern[off+i] == '.' || pattern[off+i] == name[i]
		}
		if fits {
			return true
		}
	}
	return false
}

// refusePatchCost refuses a build whose patches with a target, each times
// the objects it could select, pass maxPatchApplications. The scan stops
// at the patch that passes it.
func refusePatchCost(fsys filesys.FileSystem, dir, shown string) error {
	s := newPatchScan(fsys)
	s.walk(dir, false)
	if s.gathered > maxScannedObjects {
		return fmt.Errorf("render: kustomize build %s: its kustomizations gather more than %d objects, counting a base once for each kustomization that lists it, "+
			"as kustomize builds it again for each: list each base from fewer kustomizations, or split the folder into several add-ons",
			shown, maxScannedObjects)
	}
	if s.over() {
		return fmt.Errorf("render: kustomize build %s: its kustomizations hold patches with a target that could select more than the %d patch applications a folder may ask for "+
			"(the count passed it at patch %d), as kustomize applies each patch to each object it selects, and builds a base again for each kustomization that lists it: "+
			"narrow the targets (a kind and a name select one object), patch in the files themselves, or split the folder into several add-ons",
			shown, maxPatchApplications, s.patches)
	}
	return nil
}
