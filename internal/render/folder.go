package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/sops"
	"capstan.dev/capstan/internal/source"
)

// Folder renders a folder of a git checkout. A folder with a kustomization
// (kustomization.yaml, kustomization.yml or Kustomization) is built with
// kustomize's krusty, as `kustomize build` does, over an in-memory copy of
// fsys, so that bases in sibling folders work; a remote base, resource or
// file is refused before the build, because krusty would fetch it without
// the fetch guard. A folder without one whose subfolders hold a
// kustomization is built so too, with the kustomization Flux's
// kustomize-controller generates for it (generateKustomization), which,
// unlike Flux's, lists what symlinked folders in the repository hold, each
// real folder once (scanFolder). Any other folder
// yields every .yaml and .yml file in it and its subfolders, taken
// as is: files in path order (byte-wise, slash separated), documents in
// file order, List kinds expanded into their items, empty documents
// skipped. Without a kustomization, files and folders whose names start
// with "." are skipped. In all, the nodes that YAML aliases add to the
// files read are bounded by MaxAliasNodes.
//
// dir is a slash-separated path in fsys; "" and "." are its root. src
// identifies the folder (commit and path) for the render hash. Objects
// that Argo CD's or Helm's hook annotations make hooks are the render's
// hooks, read as Argo CD reads them (see folderHooks).
func Folder(fsys fs.FS, dir string, src SourceIdentity) (*Result, error) {
	return FolderWith(fsys, dir, src, FolderInputs{})
}

// FolderInputs are what a folder's render takes besides its files.
type FolderInputs struct {
	// Variables are substituted in the objects and hooks after the build
	// (substitute.go); nil substitutes nothing, and an empty map still
	// reads every ${ as a variable.
	Variables map[string]string
	// Decrypt, when set, is given each file the build reads, by its path
	// in the tree, and returns what to read instead: the file decrypted.
	// Only the files the folder reaches are given to it.
	Decrypt func(name string, data []byte) ([]byte, error)
	// MaxBytes bounds the bytes of the files the render reads, each file
	// counted at every path it is reached by through symlinks. Zero is
	// the git tree's own limit, source.DefaultLimits.MaxUncompressedBytes.
	MaxBytes int64
	// Namespace is the namespace that the folder's namespaced objects
	// that name none are put in after the render (an add-on's target
	// namespace). The render hash covers it, as a chart's covers its
	// release namespace: a new namespace moves the objects, a new render.
	// "" leaves it out of the hash.
	Namespace string
	// MaxObjects, when above zero, bounds the objects and hooks the folder
	// renders: a plain folder's documents are counted as they are read,
	// and the first one past it is not decoded; a kustomization's objects
	// are counted as soon as kustomize built them.
	MaxObjects int

	// budget bounds what the variables' values add to the render; nil is a
	// budget of the folder's own. Render shares one with the patches.
	budget *substituteBudget
}

// FolderWith is Folder with its inputs.
func FolderWith(fsys fs.FS, dir string, src SourceIdentity, in FolderInputs) (*Result, error) {
	vars := in.Variables
	if in.budget == nil {
		in.budget = newSubstituteBudget()
	}
	dir = path.Clean("/" + dir)[1:]
	if dir == "" {
		dir = "."
	}
	info, err := fs.Stat(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("render: folder %q: %w: check the source's path", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("render: %q is a file, not a folder: set the source's path to its folder", dir)
	}
	var objs []*unstructured.Unstructured
	if kustomizationFile(fsys, dir) != "" {
		objs, err = kustomize(fsys, dir, in, nil)
	} else {
		var entries []folderEntry
		if entries, err = scanFolder(fsys, dir, followFolderLinksOnce); err != nil {
			return nil, err
		}
		fluxLayout := slices.ContainsFunc(entries, func(e folderEntry) bool { return e.kustomized })
		if fluxLayout {
			objs, err = kustomize(fsys, dir, in, entries)
		} else {
			// NOTE: a plain folder is read as a checkout on disk is, every
			// path of a file counted, and a link to a folder that holds it
			// is an error, so it is scanned again. A scan that walks each
			// real folder once finds every kustomization a full one finds.
			if entries, err = scanFolder(fsys, dir, followFolderLinks); err != nil {
				return nil, err
			}
			objs, err = plainYAML(fsys, dir, entries, in)
		}
	}
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if encryptedObject(o) {
			// NOTE: applied as it is, it would put SOPS's ciphertext in the
			// cluster, or be refused for its unknown field.
			return nil, fmt.Errorf("render: %s %s is encrypted with SOPS (it has a sops field): set spec.decryption to a Secret that holds its age key, decrypt it, or annotate it %s: disabled if it is meant to be applied encrypted",
				o.GetKind(), o.GetName(), sops.FluxDecryptAnnotation)
		}
	}
	if src.Path == "" {
		src.Path = dir
	}
	hash, err := folderHash(src, vars, in.Namespace)
	if err != nil {
		return nil, err
	}
	former := ""
	if in.Namespace != "" {
		if former, err = folderHash(src, vars, ""); err != nil {
			return nil, err
		}
	}
	objs, hooks, left, notices := folderHooks(objs, dir, hash)
	return &Result{Objects: objs, Hooks: hooks, Left: left, Hash: hash, FormerHash: former, Notices: notices, Folder: true}, nil
}

// folderHash is a folder's render hash: its source, its namespace and its
// variables. Without a namespace it is the hash a folder had before the
// namespace was part of it, so that Result.FormerHash can say which
// render an add-on applied then.
func folderHash(src SourceIdentity, vars map[string]string, namespace string) (string, error) {
	hash, err := Hash(src, nil, "", namespace)
	if err != nil {
		return "", err
	}
	return substituteHash(hash, vars)
}

// kustomizationFile names the kustomization file of dir, or "" if it has none.
func kustomizationFile(fsys fs.FS, dir string) string {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := path.Join(dir, name)
		if info, err := fs.Stat(fsys, p); err == nil && !info.IsDir() {
			return p
		}
	}
	return ""
}

// kustomize builds dir with krusty over an in-memory copy of fsys, each
// file it reads decrypted by in.Decrypt when that is set, and substitutes
// in.Variables in what it built when they are set. generated, when set, is
// what scanFolder found in dir, a folder without a kustomization: the
// build then reads the kustomization that Flux's kustomize-controller
// generates for it (see generateKustomization), written in the copy only.
func kustomize(fsys fs.FS, dir string, in FolderInputs, generated []folderEntry) ([]*unstructured.Unstructured, error) {
	vars := in.Variables
	mem := filesys.MakeFsInMemory()
	// NOTE: the whole tree is copied, not only dir, because overlays name
	// bases in sibling folders (../base) and, as Flux builds them, files
	// there too (a patch in ../common): kustomize may load any file of
	// the copy, and the copy holds the repository and nothing else.
	// NOTE: a symlink that cannot be followed here (a dangling one, or
	// one that leaves the repository) is left out, not refused: it may be
	// anywhere in the tree, and the build says which file it misses if it
	// needs that one.
	budget := newReadBudget(in.MaxBytes)
	err := walkLinks(fsys, ".", false, followFolderLinks, func(p string, dir bool) error {
		if dir {
			return mem.MkdirAll("/" + p)
		}
		if err := budget.take(fsys, p); err != nil {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, data)
	})
	if err != nil {
		return nil, fmt.Errorf("render: read the folder: %w", err)
	}
	root := path.Join("/", dir)
	what := "kustomize build " + dir
	if generated != nil {
		// NOTE: the kustomization is written in the build's own copy, never
		// in the repository's checkout, which other add-ons on the same
		// commit read.
		if err := generateKustomization(mem, dir, generated); err != nil {
			return nil, fmt.Errorf("render: write the kustomization Flux generates for %s: %w", dir, err)
		}
		what = "kustomize build " + dir + " (a folder without a kustomization, built with the one Flux generates: its YAML files and its subfolders that hold a kustomization)"
	}
	if err := refuseRemote(aliasBoundFS{FileSystem: mem, budget: &aliasBudget{}}, root, map[string]bool{}); err != nil {
		return nil, err
	}
	if err := refusePatchCost(mem, root, dir); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	// As `kustomize build`: a kustomization's sortOptions decide the order,
	// and without them kustomize's legacy order (namespaces and CRDs first).
	opts.Reorder = krusty.ReorderOptionUnspecified
	// NOTE: as Flux's kustomize-controller builds: a kustomization may read
	// a file outside its own folder. Root-only loading buys nothing here:
	// the in-memory copy holds only the repository (walkLinks leaves out a
	// link that leaves it), so no path reaches beyond it.
	opts.LoadRestrictions = types.LoadRestrictionsNone
	files := filesys.FileSystem(mem)
	if in.Decrypt != nil {
		files = decryptingFS{FileSystem: mem, decrypt: in.Decrypt, read: map[string]decrypted{}}
	}
	m, err := runKustomize(opts, aliasBoundFS{FileSystem: files, budget: &aliasBudget{}}, root)
	if err != nil {
		if generated != nil {
			if named := notObjects(files, dir, generated); named != nil {
				return nil, named
			}
		}
		return nil, fmt.Errorf("render: %s: %w", what, err)
	}
	if in.MaxObjects > 0 && m.Size() > in.MaxObjects {
		return nil, tooManyInFolder(dir, in.MaxObjects)
	}
	if vars != nil {
		// NOTE: in place, as kyaml holds each resource: a scalar's quotes
		// say whether a substituted number stays a string, and every value
		// is read as the build without variables reads it.
		var problems []string
		for _, r := range m.Resources() {
			problems = append(problems, substituteObject(r.YNode(), vars, in.budget)...)
		}
		if problems != nil {
			return nil, in.budget.failed(problems)
		}
	}
	out, err := resMapObjects(m)
	if err != nil {
		return nil, fmt.Errorf("render: %s: %w", what, err)
	}
	for _, o := range out {
		if err := CheckMetadata(o); err != nil {
			return nil, fmt.Errorf("render: %s: %w", what, err)
		}
	}
	return out, nil
}

// kustomizeMu lets one kustomize build run at a time in the process, as
// Flux's kustomize-controller does: kyaml keeps its schema in process-wide
// state, and reads the maps of that schema outside its own lock, so
// keepDefaultSchema replacing them while another build reads them is a
// concurrent map read and write, which crashes the process.
var kustomizeMu sync.Mutex

// runKustomize builds the kustomization in dir of fsys with opts, the only
// build running, with kustomize's built-in schema before and after it.
func runKustomize(opts *krusty.Options, fsys filesys.FileSystem, dir string) (resmap.ResMap, error) {
	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	keepDefaultSchema()
	defer keepDefaultSchema()
	return krusty.MakeKustomizer(opts).Run(fsys, dir)
}

// keepDefaultSchema puts kyaml's built-in Kubernetes schema back when a
// build left another in its place. kustomize keeps the schema a
// kustomization names (its openapi field) in process-wide state, and reads
// every later build's merge keys from it, whichever add-on that build is
// for. refuseRemote refuses the field, so no build should change it; this
// is the second line, run around every build, under kustomizeMu.
func keepDefaultSchema() {
	if openapi.GetSchemaVersion() != openapi.DefaultOpenAPI {
		openapi.ResetOpenAPI()
	}
}

// resMapObjects turns what krusty built into objects, in its order.
func resMapObjects(m resmap.ResMap) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, m.Size())
	for _, r := range m.Resources() {
		u := &unstructured.Unstructured{}
		// NOTE: kyaml's maps hold ints as int, which the API machinery's
		// deep copy refuses; a JSON round trip makes them int64.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%s %s is not a Kubernetes object: %w", r.GetKind(), r.GetName(), err)
		}
		out = append(out, u)
	}
	return out, nil
}

// folderEntry is a file or subfolder of a folder without a kustomization
// that the folder's render reads.
type folderEntry struct {
	// path is its path in the tree.
	path string
	// kustomized says it is a subfolder that holds a kustomization; else
	// it is a .yaml or .yml file.
	kustomized bool
}

// scanFolder lists what a render reads of dir, a folder without a
// kustomization, in the order Flux's kustomize-controller lists it when it
// generates a kustomization (each folder's entries by name, files and
// subfolders alike): every .yaml and .yml file of dir and its subfolders,
// and every subfolder that holds a kustomization, whose own files are not
// listed. Files and folders whose names start with "." are left out.
// folders says how symlinked folders are walked (folderLinks). Flux's walk
// (filepath.Walk) follows none; Capstan's follows those that stay in the
// repository, each real folder once (followFolderLinksOnce), so that a
// folder that links to its parent or to a sibling is neither a loop nor
// read twice, and what a link brings in from elsewhere in the repository
// is still listed.
func scanFolder(fsys fs.FS, dir string, folders folderLinks) ([]folderEntry, error) {
	var entries []folderEntry
	err := walkLinks(fsys, dir, true, folders, func(p string, isDir bool) error {
		if p == dir {
			return nil
		}
		if strings.HasPrefix(path.Base(p), ".") {
			if isDir {
				return fs.SkipDir
			}
			return nil
		}
		if isDir {
			if kustomizationFile(fsys, p) != "" {
				entries = append(entries, folderEntry{path: p, kustomized: true})
				return errFolderListed
			}
			return nil
		}
		if ext := path.Ext(p); ext == ".yaml" || ext == ".yml" {
			entries = append(entries, folderEntry{path: p})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("render: read folder %s: %w", dir, err)
	}
	// NOTE: in the order a walk of the paths lists them, each folder's
	// entries by name, which followFolderLinksOnce does not keep.
	slices.SortStableFunc(entries, func(a, b folderEntry) int {
		return slices.Compare(strings.Split(a.path, "/"), strings.Split(b.path, "/"))
	})
	return entries, nil
}

// generateKustomization writes to mem, the build's in-memory copy of the
// tree, the kustomization that Flux's kustomize-controller generates for
// dir, a folder without one: its resources are entries, what scanFolder
// found, each as a path relative to dir.
func generateKustomization(mem filesys.FileSystem, dir string, entries []folderEntry) error {
	k := types.Kustomization{TypeMeta: types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind}}
	for _, e := range entries {
		rel := e.path
		if dir != "." {
			rel = strings.TrimPrefix(rel, dir+"/")
		}
		k.Resources = append(k.Resources, "./"+rel)
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	return mem.WriteFile(path.Join("/", dir, konfig.DefaultKustomizationFileName()), data)
}

// notObjects names the first of entries, the files of a generated
// kustomization, that kustomize cannot read as Kubernetes objects when read
// from read as the build reads it, as Flux refuses it, with what to do; nil
// when every file reads. It runs only after the build has failed: it
// replaces kustomize's less helpful message, and a build that succeeds
// parses each file once.
func notObjects(read filesys.FileSystem, dir string, entries []folderEntry) error {
	rf := provider.NewDefaultDepProvider().GetResourceFactory()
	read = aliasBoundFS{FileSystem: read, budget: &aliasBudget{}}
	for _, e := range entries {
		if e.kustomized {
			continue
		}
		data, err := read.ReadFile("/" + e.path)
		if err != nil {
			continue
		}
		if _, err := rf.SliceFromBytes(data); err != nil {
			return fmt.Errorf("render: %s is not Kubernetes objects (%w): %s has no kustomization and holds a subfolder with one, "+
				"so it is built as Flux builds it, from every .yaml and .yml file in it and its subfolders: remove the file, "+
				"rename it so its name ends in neither (or starts with \".\"), or add a kustomization.yaml to %s that lists what to build",
				e.path, err, dir, dir)
		}
	}
	return nil
}

// plainYAML reads entries, the YAML files scanFolder found in dir and its
// subfolders, in path order, each decrypted by in.Decrypt when that is set, and
// substitutes in.Variables in them when they are set.
func plainYAML(fsys fs.FS, dir string, entries []folderEntry, in FolderInputs) ([]*unstructured.Unstructured, error) {
	vars := in.Variables
	files := make([]string, 0, len(entries))
	for _, e := range entries {
		files = append(files, e.path)
	}
	slices.Sort(files)
	var out []*unstructured.Unstructured
	var problems []string
	budget := newReadBudget(in.MaxBytes)
	aliases := &aliasBudget{}
	written := newSources(in.Namespace)
	written.max, written.dir = in.MaxObjects, dir
	for _, f := range files {
		if err := budget.take(fsys, f); err != nil {
			return nil, fmt.Errorf("render: read folder %s: %w", dir, err)
		}
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("render: read %s: %w", f, err)
		}
		if in.Decrypt != nil {
			if data, err = in.Decrypt(f, data); err != nil {
				return nil, fmt.Errorf("render: %w", err)
			}
		}
		if err := aliases.take(f, data); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		objs, err := decodeStream(data, f, vars, in.budget, &problems, written)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	if problems != nil {
		return nil, in.budget.failed(problems)
	}
	return out, nil
}

// decodeStream decodes the YAML documents of one file, named so in its
// errors, substituting vars in each when vars is set, their values taken
// from budget; the substitution's problems are added to problems. Each
// object is added to written, which refuses one written before.
func decodeStream(data []byte, name string, vars map[string]string, budget *substituteBudget, problems *[]string, written *sources) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("render: %s document %d is not YAML: %w", name, doc, err)
		}
		if holdsContent(raw) {
			if err := written.count(1); err != nil {
				return nil, err
			}
		}
		decode := decodeDocument
		if vars != nil && bytes.Contains(raw, []byte("${")) {
			var found []string
			if raw, found, err = substituteDocument(raw, vars, budget); err != nil {
				return nil, fmt.Errorf("render: %s document %d is not YAML: %w", name, doc, err)
			}
			if found != nil {
				*problems = append(*problems, found...)
				continue
			}
			// NOTE: substituteDocument gives JSON, whatever the variables hold.
			decode = decodeJSONDocument
		}
		objs, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("render: %s document %d: %w: every YAML file of a folder without a kustomization must hold Kubernetes objects",
				name, doc, err)
		}
		if len(objs) > 1 {
			if err := written.count(len(objs) - 1); err != nil {
				return nil, err
			}
		}
		for _, o := range objs {
			if err := CheckMetadata(o); err != nil {
				return nil, fmt.Errorf("render: %s document %d: %w%s", name, doc, err, yaml11(err))
			}
			if mayBeHook(o) {
				// NOTE: hooks are a stream of their own; two hooks of
				// one name for two phases are Argo CD's and Helm's way.
				continue
			}
			if err := written.add(o, fmt.Sprintf("%s (document %d)", name, doc)); err != nil {
				return nil, err
			}
		}
		out = append(out, objs...)
	}
	return out, nil
}

// yaml11 adds to err, a plain folder's label or annotation that is not a
// string, why a word may be read as true or false: such a folder is read
// as kubectl reads it, by YAML 1.1, where an unquoted yes, no, on, off, y
// or n is a boolean (kustomize, and Flux's build of a plain folder, read
// YAML 1.2, where only true and false are).
func yaml11(err error) string {
	var ns *notStringError
	if !errors.As(err, &ns) {
		return ""
	}
	if _, ok := ns.value.(bool); !ok {
		return ""
	}
	return " (in a folder without a kustomization, YAML 1.1 reads an unquoted yes, no, on, off, y or n as true or false too)"
}

// tooManyInFolder is a folder that renders more than max objects.
func tooManyInFolder(dir string, max int) error {
	return fmt.Errorf("render: folder %s holds more than %d objects, the limit per add-on (--max-objects-per-addon), so nothing was applied: "+
		"point the source's path at a smaller folder, split it into several add-ons, or raise the limit", dir, max)
}

// mayBeHook reports whether a folder's object has a hook annotation,
// Argo CD's or Helm's.
func mayBeHook(o *unstructured.Unstructured) bool {
	ann := o.GetAnnotations()
	_, argo := ann[ArgoHookAnnotation]
	_, helm := ann[release.HookAnnotation]
	return argo || helm
}

// encryptedObject reports whether a rendered object still holds what SOPS
// encrypted, and is not one meant to be applied so: a Secret or a
// ConfigMap with a sops field, or an object whose kind itself is
// encrypted.
func encryptedObject(o *unstructured.Unstructured) bool {
	if _, ok := o.Object["sops"]; !ok {
		return false
	}
	ann := o.GetAnnotations()
	if strings.EqualFold(ann[sops.FluxDecryptAnnotation], "disabled") || strings.EqualFold(ann[sops.DecryptAnnotation], "disabled") {
		return false
	}
	switch kind := o.GetKind(); kind {
	case "Secret", "ConfigMap":
		return true
	default:
		return strings.HasPrefix(kind, "ENC[") || strings.HasPrefix(o.GetAPIVersion(), "ENC[")
	}
}

// decryptingFS is kustomize's file system with each file it reads given
// to decrypt first, so that only what the build reaches is decrypted.
// read remembers each file's answer for the one build it serves: a file
// the build reads twice, or that notObjects reads again after a failed
// build, is decrypted once, so a file that cannot be decrypted is one
// problem, not one per read, and its secrets are taken once.
type decryptingFS struct {
	filesys.FileSystem
	decrypt func(name string, data []byte) ([]byte, error)
	read    map[string]decrypted
}

// decrypted is what decrypt gave for one file.
type decrypted struct {
	data []byte
	err  error
}

func (d decryptingFS) ReadFile(name string) ([]byte, error) {
	key := path.Clean("/" + name)
	if got, ok := d.read[key]; ok {
		return got.data, got.err
	}
	data, err := d.FileSystem.ReadFile(name)
	if err != nil {
		return nil, err
	}
	data, err = d.decrypt(strings.TrimPrefix(name, "/"), data)
	d.read[key] = decrypted{data: data, err: err}
	return data, err
}

// A walk follows symlinks as kustomize and a checkout on disk do: the
// source's tree resolves them inside the repository and refuses any that
// leaves it. A link to a folder that holds it (itself, its parent, the
// root), directly or through other links, is a loop and is not followed.
// maxLinkDepth bounds how many symlinked folders a walk goes through one
// inside another, and maxLinkedFiles how many files it takes through them;
// a readBudget bounds the bytes the render reads. Without them, links that
// do not loop still multiply a tree: a folder of ten links to a folder of
// ten links to one file is a hundred files.
const (
	maxLinkDepth   = 8
	maxLinkedFiles = 10000
	// maxLinkHops bounds the links resolved to find where one link
	// points, as the kernel's ELOOP does and as the source's tree does.
	maxLinkHops = 40
)

// folderLinks says how walkLinks walks a symlink to a folder.
type folderLinks int

const (
	// followFolderLinks walks a symlinked folder as a folder at the
	// link's path, as a checkout on disk reads: a link to a folder that
	// holds it is a loop.
	followFolderLinks folderLinks = iota
	// followFolderLinksOnce walks each real folder (its path with every
	// link resolved) at most once: the folders reached without a link
	// first, then the linked ones, each at the first link's path. A link
	// to a folder already walked or being walked (itself, a parent, a
	// sibling) is left out, neither a loop nor a folder listed twice.
	followFolderLinksOnce
)

// errFolderListed is what a walkLinks visit returns for a folder that it
// takes whole (a kustomization) without walking it: fs.SkipDir, and with
// followFolderLinksOnce the folder counts as walked, so that a link to it
// is left out. A folder skipped with fs.SkipDir alone (a hidden one) is
// still walked through a link to it.
var errFolderListed = fmt.Errorf("folder listed whole: %w", fs.SkipDir)

// walkLinks calls visit with root and every folder and regular file under
// it, as fs.WalkDir does, but following symlinks: a link to a file is that
// file at the link's path, and a link to a folder is walked as a folder at
// the link's path. visit may return fs.SkipDir for a folder. Other special
// files are left out. strict says what a link that cannot be followed
// (dangling, leaving the repository, a loop, nested too deep) is: an
// error when set, else left out. With followFolderLinks the walk is in
// path order; with followFolderLinksOnce the linked folders come after
// the rest (see folderLinks), and a link to a folder already walked is
// left out whether strict is set or not.
//
// Loops are found when fsys can read links (fs.ReadLinkFS, as the
// source's tree and fstest.MapFS can); on another fs.FS, the depth, file
// and byte bounds still end the walk, and followFolderLinksOnce cannot
// tell one real folder from another.
func walkLinks(fsys fs.FS, root string, strict bool, folders folderLinks, visit func(p string, dir bool) error) error {
	linked := 0
	// real holds, for each folder being walked, its path with every link
	// resolved; it is nil when fsys cannot read links.
	var real []string
	if _, ok := fsys.(fs.ReadLinkFS); ok {
		r, err := realPath(fsys, root)
		if err != nil {
			return err
		}
		real = []string{r}
	}
	once := folders == followFolderLinksOnce
	// walked holds the real paths of the folders walked, and later the
	// linked folders left for after the rest, when once is set.
	walked := map[string]bool{}
	type later struct {
		p, real string
		depth   int
		holders []string
	}
	var linkedFolders []later
	var walk func(p string, depth int) error
	walk = func(p string, depth int) error {
		if once && real != nil && walked[real[len(real)-1]] {
			return nil
		}
		if err := visit(p, true); err != nil {
			if errors.Is(err, errFolderListed) && real != nil {
				walked[real[len(real)-1]] = true
			}
			if errors.Is(err, fs.SkipDir) {
				return nil
			}
			return err
		}
		if real != nil {
			walked[real[len(real)-1]] = true
		}
		entries, err := fs.ReadDir(fsys, p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			c := path.Join(p, e.Name())
			isDir, d, link := e.IsDir(), depth, e.Type()&fs.ModeSymlink != 0
			cReal := ""
			if real != nil && isDir {
				cReal = path.Join(real[len(real)-1], e.Name())
			}
			if link {
				info, err := fs.Stat(fsys, c)
				switch {
				case err != nil && strict:
					return fmt.Errorf("symlink %s cannot be followed: %w", c, err)
				case err != nil:
					continue
				}
				if isDir = info.IsDir(); isDir {
					if real != nil {
						if cReal, err = realPath(fsys, c); err != nil {
							if strict {
								return fmt.Errorf("symlink %s cannot be followed: %w", c, err)
							}
							continue
						}
						if held := holder(real, cReal); held != "" {
							if strict && !once {
								return fmt.Errorf("symlink %s points to %s, a folder that holds the link, so it would be walked without end: "+
									"remove the link or point it at a folder that does not hold it", c, held)
							}
							continue
						}
					}
					if d++; d > maxLinkDepth {
						if strict {
							return fmt.Errorf("symlink %s goes through more than %d symlinked folders: does it point to a folder above it?", c, maxLinkDepth)
						}
						continue
					}
					if once {
						linkedFolders = append(linkedFolders, later{p: c, real: cReal, depth: d, holders: slices.Clone(real)})
						continue
					}
				} else if !info.Mode().IsRegular() {
					continue
				}
			} else if !isDir && !e.Type().IsRegular() {
				continue
			}
			if d > 0 || link {
				if linked++; linked > maxLinkedFiles {
					return fmt.Errorf("symlinks under %s reach more than %d files and folders: does one point to a folder above it?", root, maxLinkedFiles)
				}
			}
			if isDir {
				if real != nil {
					real = append(real, cReal)
				}
				err = walk(c, d)
				if real != nil {
					real = real[:len(real)-1]
				}
			} else {
				err = visit(c, false)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, 0); err != nil {
		return err
	}
	// NOTE: the linked folders are walked after every folder reached
	// without a link, so that a folder is listed at its own path when it
	// has one, whichever name sorts first; a linked folder found in a
	// linked folder is queued behind them.
	for len(linkedFolders) > 0 {
		l := linkedFolders[0]
		linkedFolders = linkedFolders[1:]
		if real != nil {
			real = append(l.holders, l.real)
		}
		if linked++; linked > maxLinkedFiles {
			return fmt.Errorf("symlinks under %s reach more than %d files and folders: does one point to a folder above it?", root, maxLinkedFiles)
		}
		if err := walk(l.p, l.depth); err != nil {
			return err
		}
	}
	return nil
}

// holder returns the folder of walking, the real paths of the folders being
// walked, that target is or holds, or "" if there is none: walking target
// would then come back to that folder without end.
func holder(walking []string, target string) string {
	for _, w := range walking {
		if target == "." || target == w || strings.HasPrefix(w, target+"/") {
			return w
		}
	}
	return ""
}

// realPath returns name with every symlink in it resolved, as the tree
// resolves it when it is read. fsys must be an fs.ReadLinkFS.
func realPath(fsys fs.FS, name string) (string, error) {
	todo := strings.Split(name, "/")
	cur := "."
	for hops := 0; len(todo) > 0; {
		elem := todo[0]
		todo = todo[1:]
		if elem == "." || elem == "" {
			continue
		}
		next := path.Join(cur, elem)
		info, err := fs.Lstat(fsys, next)
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", fmt.Errorf("symlink %s: too many levels of symlinks", name)
		}
		target, err := fs.ReadLink(fsys, next)
		if err != nil {
			return "", err
		}
		resolved := path.Join(path.Dir(next), target)
		if path.IsAbs(target) || resolved == ".." || strings.HasPrefix(resolved, "../") {
			return "", fmt.Errorf("symlink %s points to %s, outside the repository", next, target)
		}
		todo = append(strings.Split(resolved, "/"), todo...)
		cur = "."
	}
	return cur, nil
}

// readBudget bounds the bytes a render reads from a folder's tree.
type readBudget struct {
	limit, used int64
}

// newReadBudget returns a budget of limit bytes; zero is the git tree's
// limit.
func newReadBudget(limit int64) *readBudget {
	if limit <= 0 {
		limit = source.DefaultLimits.MaxUncompressedBytes
	}
	return &readBudget{limit: limit}
}

// take counts the file at p, before it is read.
func (b *readBudget) take(fsys fs.FS, p string) error {
	info, err := fs.Stat(fsys, p)
	if err != nil {
		return err
	}
	if b.used += info.Size(); b.used > b.limit {
		// NOTE: the tree itself holds no more than this limit, so only a
		// file reached again and again through symlinked folders gets here.
		return fmt.Errorf("reading %s would take the files read past %d bytes, the limit of a git tree: "+
			"symlinked folders reach the same files many times over; remove the links on its path, "+
			"or point the source's path at a folder whose links reach fewer files", p, b.limit)
	}
	return nil
}
