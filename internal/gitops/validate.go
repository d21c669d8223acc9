package gitops

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/health"
	"capstan.dev/capstan/internal/ignore"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
)

// The rules below mirror the Addon CRD's validation, so that a definition the
// parser accepts is one the API server accepts too, and every mistake is
// reported with its line instead of as a failed apply. The CRD's maxLength
// counts characters, not bytes, so the free text's lengths are counted so
// too: a title in Japanese is three bytes a character.
var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	chartName    = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]*$`)
	ociReference = regexp.MustCompile(`^oci://[^/]+/.+`)
	sha256Digest = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	valuesKey    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	// blobHash is a git blob hash, whole or abbreviated as git abbreviates
	// it: the base of a Writer.Edit.
	blobHash = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	// durationSyntax and maxDurationLen are the CRD's rule for the
	// timeouts: at most 6 digits a part and 16 characters.
	durationSyntax = regexp.MustCompile(`^([0-9]{1,6}(\.[0-9]{1,9})?(ms|s|m|h))+$`)
	scpLikeGitURL  = regexp.MustCompile(`^[A-Za-z0-9._-]+@[^:]+:.+$`)
	imageTag       = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
)

// Limits taken from the Addon CRD.
const (
	maxAddonName    = 53
	maxReleaseName  = 53
	maxTitle        = 128
	maxCategory     = 63
	maxURL          = 2048
	maxVersion      = 128
	maxDurationLen  = 16
	maxRevision     = 255
	maxGitPath      = 1024
	maxValuesFrom   = 64
	maxDependsOn    = 32
	maxIgnoreRules  = 32
	maxIgnorePaths  = 16
	maxIgnorePath   = 256
	maxPatches      = 32
	maxImages       = 64
	maxImageName    = 512
	maxImageTag     = 128
	maxSyncWindows  = 16
	maxSchedule     = 128
	maxHealthChecks = 32
	// As the CRD's bounds on spec.substitute and spec.substituteFrom.
	maxVariables      = 256
	maxVariableValue  = 4096
	maxSubstituteFrom = 16
	maxExpression     = 1024
	maxHookTimeout    = 24 * time.Hour
)

type rules struct {
	root     *yaml.Node
	problems []Problem
}

// fail records a problem at the line of the field named by keys (strings for
// mapping keys, ints for list indexes).
func (r *rules) fail(message string, keys ...any) {
	var field []string
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			field = append(field, k)
		case int:
			field[len(field)-1] += fmt.Sprintf("[%d]", k)
		}
	}
	r.problems = append(r.problems, Problem{Line: lineOf(r.root, keys...), Field: strings.Join(field, "."), Message: message})
}

// lineOf finds the line of a field, or of its closest parent that exists.
func lineOf(n *yaml.Node, keys ...any) int {
	line := n.Line
	for _, k := range keys {
		var next *yaml.Node
		switch k := k.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				next = n.Content[k]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

func validate(def *Definition, root *yaml.Node, file string) []Problem {
	r := &rules{root: root}
	want := NameFromFile(file)
	switch {
	case def.Name == "":
		r.fail(fmt.Sprintf("required: add name: %s (the file's name)", want), "name")
	case !dnsLabel.MatchString(def.Name) || len(def.Name) > maxAddonName:
		r.fail(fmt.Sprintf("%q is not a valid add-on name: use at most %d lowercase letters, digits and '-', starting and ending with a letter or digit", def.Name, maxAddonName), "name")
	case def.Name != want:
		r.fail(fmt.Sprintf("%q differs from the file's name %q: rename the file to %s.yaml or set name: %s", def.Name, want, def.Name, want), "name")
	}
	if utf8.RuneCountInString(def.Title) > maxTitle {
		r.fail(fmt.Sprintf("is longer than %d characters", maxTitle), "title")
	}
	if utf8.RuneCountInString(def.Category) > maxCategory {
		r.fail(fmt.Sprintf("is longer than %d characters", maxCategory), "category")
	}
	if def.Namespace != "" && (!dnsLabel.MatchString(def.Namespace) || len(def.Namespace) > 63) {
		r.fail(fmt.Sprintf("%q is not a valid namespace name: use at most 63 lowercase letters, digits and '-'", def.Namespace), "namespace")
	}
	if def.ReleaseName != "" && (!dnsLabel.MatchString(def.ReleaseName) || len(def.ReleaseName) > maxReleaseName) {
		r.fail(fmt.Sprintf("%q is not a valid release name: use at most %d lowercase letters, digits and '-'", def.ReleaseName, maxReleaseName), "releaseName")
	}
	switch {
	case def.Helm == nil && def.Git == nil:
		r.fail("the definition has no source: add helm: (a chart) or git: (a folder)")
	case def.Helm != nil && def.Git != nil:
		r.fail("set exactly one source: remove either helm: or git:", "git")
	case def.Helm != nil:
		r.helm(def.Helm)
	default:
		r.git(def.Git)
	}
	if len(def.ValuesFrom) > maxValuesFrom {
		r.fail(fmt.Sprintf("has %d entries, more than %d", len(def.ValuesFrom), maxValuesFrom), "valuesFrom")
	}
	for i, ref := range def.ValuesFrom {
		r.valuesObject("valuesFrom", i, ref.Kind, ref.Name)
		if ref.ValuesKey != "" && (!valuesKey.MatchString(ref.ValuesKey) || len(ref.ValuesKey) > 253) {
			r.fail(fmt.Sprintf("%q is not a valid key: use letters, digits, '-', '_' and '.'", ref.ValuesKey), "valuesFrom", i, "valuesKey")
		}
		if utf8.RuneCountInString(ref.TargetPath) > 250 {
			r.fail("is longer than 250 characters", "valuesFrom", i, "targetPath")
		}
	}
	r.substitute(def)
	r.decryption(def)
	if len(def.DependsOn) > maxDependsOn {
		r.fail(fmt.Sprintf("has %d entries, more than %d", len(def.DependsOn), maxDependsOn), "dependsOn")
	}
	for i, d := range def.DependsOn {
		switch {
		case d.Name == "" || len(d.Name) > 253:
			r.fail("name is required (at most 253 characters): the name of the add-on to wait for", "dependsOn", i, "name")
		case d.Name == def.Name && d.Namespace == "":
			r.fail(fmt.Sprintf("%q is this add-on itself, which would wait for ever: remove it", d.Name), "dependsOn", i, "name")
		}
	}
	if len(def.Ignore) > maxIgnoreRules {
		r.fail(fmt.Sprintf("has %d rules, more than %d", len(def.Ignore), maxIgnoreRules), "ignore")
	}
	for i, rule := range def.Ignore {
		if len(rule.Paths) == 0 || len(rule.Paths) > maxIgnorePaths {
			r.fail(fmt.Sprintf("name 1 to %d fields as JSON pointers, such as /spec/replicas", maxIgnorePaths), "ignore", i, "paths")
		}
		for j, p := range rule.Paths {
			if utf8.RuneCountInString(p) > maxIgnorePath {
				r.fail(fmt.Sprintf("is longer than %d characters", maxIgnorePath), "ignore", i, "paths", j)
			} else if err := ignore.CheckPath(p); err != nil {
				r.fail(err.Error(), "ignore", i, "paths", j)
			}
		}
	}
	r.postRender(def)
	r.syncWindows(def)
	r.healthChecks(def)
	if def.AllowAdoptChanges && !def.Adopt {
		r.fail("needs adopt: true", "allowAdoptChanges")
	}
	if def.HookTimeout != "" {
		d, err := time.ParseDuration(def.HookTimeout)
		if err != nil || len(def.HookTimeout) > maxDurationLen || !durationSyntax.MatchString(def.HookTimeout) || d <= 0 || d > maxHookTimeout {
			r.fail(fmt.Sprintf("%q is not a duration between 0s and 24h such as 10m or 1h30m", def.HookTimeout), "hookTimeout")
		}
	}
	if def.DeletionPolicy != "" && def.DeletionPolicy != "Orphan" && def.DeletionPolicy != "Delete" {
		r.fail(fmt.Sprintf("must be Orphan or Delete, not %q", def.DeletionPolicy), "deletionPolicy")
	}
	return r.problems
}

// postRender checks patches and images as the CRD and the render do.
func (r *rules) postRender(def *Definition) {
	if len(def.Patches) > maxPatches {
		r.fail(fmt.Sprintf("has %d patches, more than %d", len(def.Patches), maxPatches), "patches")
	}
	size := 0
	for i, pt := range def.Patches {
		size += len(pt.Patch)
		switch {
		case strings.TrimSpace(pt.Patch) == "":
			r.fail("is required: a strategic merge patch (a partial object) or a JSON 6902 patch (a list of operations), as a string", "patches", i, "patch")
		case len(pt.Patch) > render.MaxPatchBytes:
			r.fail(fmt.Sprintf("is longer than %d bytes", render.MaxPatchBytes), "patches", i, "patch")
		default:
			if err := render.CheckPatch(pt.Patch, pt.Target != nil); err != nil {
				r.fail(err.Error(), "patches", i, "patch")
			}
		}
	}
	if size > render.MaxPatchBytes && len(def.Patches) > 1 {
		r.fail(fmt.Sprintf("are %d bytes together, more than %d", size, render.MaxPatchBytes), "patches")
	}
	if len(def.Images) > maxImages {
		r.fail(fmt.Sprintf("has %d entries, more than %d", len(def.Images), maxImages), "images")
	}
	for i, img := range def.Images {
		switch {
		case img.Name == "" || len(img.Name) > maxImageName:
			r.fail(fmt.Sprintf("is required (at most %d characters): the image as the render writes it, without its tag", maxImageName), "images", i, "name")
		case img.NewName == "" && img.NewTag == "" && img.Digest == "":
			r.fail("set newName, newTag or digest", "images", i)
		}
		if len(img.NewName) > maxImageName {
			r.fail(fmt.Sprintf("is longer than %d characters", maxImageName), "images", i, "newName")
		}
		if img.NewTag != "" && (len(img.NewTag) > maxImageTag || !imageTag.MatchString(img.NewTag)) {
			r.fail(fmt.Sprintf("%q is not an image tag", img.NewTag), "images", i, "newTag")
		}
		if img.Digest != "" && !sha256Digest.MatchString(img.Digest) {
			r.fail(fmt.Sprintf("%q is not sha256: and 64 hex digits", img.Digest), "images", i, "digest")
		}
	}
}

// syncWindows checks each window as the controller reads it.
func (r *rules) syncWindows(def *Definition) {
	if len(def.SyncWindows) > maxSyncWindows {
		r.fail(fmt.Sprintf("has %d windows, more than %d", len(def.SyncWindows), maxSyncWindows), "syncWindows")
	}
	for i, w := range def.SyncWindows {
		d, err := time.ParseDuration(w.Duration)
		if err != nil || len(w.Duration) > maxDurationLen || !durationSyntax.MatchString(w.Duration) {
			r.fail(fmt.Sprintf("%q is not a duration such as 2h or 30m", w.Duration), "syncWindows", i, "duration")
			continue
		}
		if utf8.RuneCountInString(w.Schedule) > maxSchedule {
			r.fail(fmt.Sprintf("is longer than %d characters", maxSchedule), "syncWindows", i, "schedule")
			continue
		}
		spec := capstanv1.SyncWindow{Kind: capstanv1.SyncWindowKind(w.Kind), Schedule: w.Schedule, Duration: metav1.Duration{Duration: d}, TimeZone: w.TimeZone}
		if _, _, err := plan.ParseWindow("", spec); err != nil {
			var we *plan.WindowError
			if errors.As(err, &we) {
				r.fail(we.Message, "syncWindows", i, strings.TrimPrefix(we.Field, "."))
			}
		}
	}
}

// substitute checks a git folder's variables: names that ${...} can
// name, and objects that exist as kinds.
func (r *rules) substitute(def *Definition) {
	if (def.Substitute != nil || len(def.SubstituteFrom) > 0) && def.Git == nil {
		r.fail("substitute and substituteFrom apply to git folders only; a chart takes values and valuesFrom", "substitute")
	}
	if len(def.Substitute) > maxVariables {
		r.fail(fmt.Sprintf("has %d variables, more than %d", len(def.Substitute), maxVariables), "substitute")
	}
	for _, k := range slices.Sorted(maps.Keys(def.Substitute)) {
		if !render.IsVariableName(k) {
			r.fail(fmt.Sprintf("%q is not a variable name: use letters, digits and underscores, not starting with a digit", k), "substitute", k)
		}
		if n := utf8.RuneCountInString(def.Substitute[k]); n > maxVariableValue {
			r.fail(fmt.Sprintf("the value is %d characters, more than %d: keep longer text in a file of the folder", n, maxVariableValue), "substitute", k)
		}
	}
	if len(def.SubstituteFrom) > maxSubstituteFrom {
		r.fail(fmt.Sprintf("has %d entries, more than %d", len(def.SubstituteFrom), maxSubstituteFrom), "substituteFrom")
	}
	for i, ref := range def.SubstituteFrom {
		r.valuesObject("substituteFrom", i, ref.Kind, ref.Name)
	}
}

// decryption checks a git folder's decryption: sops, and a Secret named.
func (r *rules) decryption(def *Definition) {
	d := def.Decryption
	switch {
	case d == nil:
	case def.Git == nil:
		r.fail("decryption applies to git folders only; a chart takes secret values from valuesFrom", "decryption")
	case d.Provider != "sops":
		r.fail(fmt.Sprintf("%q is not a provider Capstan decrypts with: use sops", d.Provider), "decryption", "provider")
	case d.SecretRef.Name == "" || len(d.SecretRef.Name) > 253:
		r.fail("name is required (at most 253 characters): the Secret of age keys", "decryption", "secretRef", "name")
	}
}

// valuesObject checks entry i of list, which names a Secret or a ConfigMap.
func (r *rules) valuesObject(list string, i int, kind, name string) {
	if kind != "Secret" && kind != "ConfigMap" {
		r.fail(fmt.Sprintf("kind must be Secret or ConfigMap, not %q", kind), list, i, "kind")
	}
	switch {
	case name == "" || len(name) > 253:
		r.fail("name is required (at most 253 characters)", list, i, "name")
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		// NOTE: the CRD's pattern, so that the API server does not refuse
		// the Addon the syncer writes from this file.
		r.fail("must be a Secret's or ConfigMap's name: lower case letters, digits, '-' and '.', starting and ending with a letter or digit", list, i, "name")
	}
}

// healthChecks compiles each check's expressions as the controller does.
func (r *rules) healthChecks(def *Definition) {
	if len(def.HealthChecks) > maxHealthChecks {
		r.fail(fmt.Sprintf("has %d checks, more than %d", len(def.HealthChecks), maxHealthChecks), "healthChecks")
	}
	seen := map[string]int{}
	for i, hc := range def.HealthChecks {
		switch {
		case hc.APIVersion == "" || len(hc.APIVersion) > 253:
			r.fail("is required (at most 253 characters): the group/version of the kind it judges", "healthChecks", i, "apiVersion")
			continue
		case hc.Kind == "" || len(hc.Kind) > 63:
			r.fail("is required (at most 63 characters)", "healthChecks", i, "kind")
			continue
		}
		if j, ok := seen[hc.APIVersion+" "+hc.Kind]; ok {
			r.fail(fmt.Sprintf("%s %s has a check already, healthChecks[%d]: give each kind one", hc.APIVersion, hc.Kind, j), "healthChecks", i)
			continue
		}
		seen[hc.APIVersion+" "+hc.Kind] = i
		for _, x := range []struct{ name, src string }{{"current", hc.Current}, {"inProgress", hc.InProgress}, {"failed", hc.Failed}} {
			if utf8.RuneCountInString(x.src) > maxExpression {
				r.fail(fmt.Sprintf("is longer than %d characters", maxExpression), "healthChecks", i, x.name)
			}
		}
		_, err := health.Compile([]capstanv1.HealthCheck{capstanv1.HealthCheck(hc)})
		var ce *health.CheckError
		if errors.As(err, &ce) {
			if ce.Expr == "" {
				r.fail(ce.Message, "healthChecks", i)
			} else {
				r.fail(ce.Message, "healthChecks", i, ce.Expr)
			}
		}
	}
}

func (r *rules) helm(h *HelmSource) {
	set := 0
	for _, s := range []string{h.Repo, h.OCI, h.URL} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		r.fail("set exactly one of repo (with chart), oci or url", "helm")
		return
	}
	switch {
	case h.Repo != "":
		r.chartURL(h.Repo, strings.HasPrefix(h.Repo, "https://"), "must be an https:// chart repository URL", "repo")
		if h.Chart == "" {
			r.fail("required with helm.repo: the chart's name in the repository", "helm", "chart")
		}
	case h.OCI != "":
		r.chartURL(h.OCI, ociReference.MatchString(h.OCI), "must look like oci://registry/path/chart", "oci")
		if h.Version == "" && h.Digest == "" {
			r.fail("an oci chart needs a version (a tag) or a digest", "helm", "oci")
		}
	case h.URL != "":
		r.chartURL(h.URL, strings.HasPrefix(h.URL, "https://"), "must be an https:// chart archive URL", "url")
		if h.Version != "" {
			r.fail("cannot be set with helm.url: the archive is the version; remove it", "helm", "version")
		}
	}
	if h.Chart != "" {
		if h.Repo == "" {
			r.fail("only goes with helm.repo: an oci reference or archive URL names the chart already", "helm", "chart")
		} else if !chartName.MatchString(h.Chart) || len(h.Chart) > 253 {
			r.fail(fmt.Sprintf("%q is not a valid chart name", h.Chart), "helm", "chart")
		}
	}
	if len(h.Version) > maxVersion {
		r.fail(fmt.Sprintf("is longer than %d characters", maxVersion), "helm", "version")
	} else if h.Version != "" && h.URL == "" && (h.OCI == "" || !source.IsOCITag(h.Version)) {
		// The controller resolves a repository's version, and a registry's
		// that is not a plain tag, as a semver constraint; what it cannot
		// parse fails there, so it fails here first.
		if _, err := semver.NewConstraint(h.Version); err != nil {
			r.fail(fmt.Sprintf("%q is neither a version nor a semver range, such as 1.2.3 or \">=1.2.0 <2.0.0\" (%v)", h.Version, err), "helm", "version")
		}
	}
	if h.Digest != "" && !sha256Digest.MatchString(h.Digest) {
		r.fail("must be sha256: followed by 64 lowercase hex digits", "helm", "digest")
	}
	if h.SecretRef != nil && (h.SecretRef.Name == "" || len(h.SecretRef.Name) > 253) {
		r.fail("name is required", "helm", "secretRef")
	}
	r.verify(h)
}

// verify checks a chart's signature check: one kind, the one its source
// is signed with, and the Secret of keys named.
func (r *rules) verify(h *HelmSource) {
	v := h.Verify
	switch {
	case v == nil:
		return
	case (v.Provenance == nil) == (v.Cosign == nil):
		r.fail("takes one of provenance (a chart repository or https archive) or cosign (an OCI registry)", "helm", "verify")
		return
	case v.Provenance != nil && h.OCI != "":
		r.fail("an oci chart is signed with cosign, not a provenance file: use verify.cosign", "helm", "verify", "provenance")
	case v.Cosign != nil && h.OCI == "":
		r.fail("cosign checks charts from an OCI registry; a chart repository or https archive is signed with a provenance file: use verify.provenance", "helm", "verify", "cosign")
	}
	kind, keys := "provenance", v.Provenance
	if keys == nil {
		kind, keys = "cosign", v.Cosign
	}
	if keys.SecretRef.Name == "" || len(keys.SecretRef.Name) > 253 {
		r.fail("name is required (at most 253 characters): the Secret of public keys", "helm", "verify", kind, "secretRef", "name")
	}
}

// chartURL checks raw, the chart's location in helm.<field>: well formed
// (ok) and of at most maxURL characters, as want says, and without
// credentials.
//
// NOTE: every Addon made from the definition copies it into its
// spec.chart, which everyone who may read Addons sees, and the problems
// go to status.invalidFiles, which every reader of the AddonRepository
// sees: a URL that may hold a password (one Go cannot parse, or one with
// an @) is never quoted.
func (r *rules) chartURL(raw string, ok bool, want, field string) {
	ok = ok && utf8.RuneCountInString(raw) <= maxURL
	u, err := url.Parse(raw)
	switch {
	case err == nil && u.User != nil:
		r.fail("must not hold credentials (a password, or a token as the user): put them in a Secret and name it in helm.secretRef", "helm", field)
	case err != nil:
		r.fail("is not a URL: check it for spaces and for a % that does not start an escape such as %40 (it is not quoted here, as it may hold a password)", "helm", field)
	case !ok && strings.Contains(raw, "@"):
		r.fail(fmt.Sprintf("%s, of at most %d characters (it is not quoted here, as what comes before its @ may be a password)", want, maxURL), "helm", field)
	case !ok:
		r.fail(fmt.Sprintf("%q %s", raw, want), "helm", field)
	}
}

func (r *rules) git(g *GitSource) {
	if g.URL != "" {
		u := g.URL
		ok := strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "ssh://") ||
			strings.HasPrefix(u, "file://") || scpLikeGitURL.MatchString(u)
		// NOTE: the problems go to status.invalidFiles, which every reader
		// of the AddonRepository sees, so a URL that may hold a password is
		// never quoted: one git cannot parse (Go fails on a password with a
		// bare %, before the password could be found), or one with an @.
		ep, err := transport.NewEndpoint(u)
		switch {
		case err != nil:
			r.fail("is not a URL git can read: check it for spaces and for a % that does not start an escape such as %40 (it is not quoted here, as it may hold a password)", "git", "url")
		case source.HoldsCredentials(ep) || strings.Contains(ep.User, ":"):
			// A user:password before the host of a user@host:path
			// address is a password too, whatever the protocol.
			// Every Addon made from the definition would copy it
			// into spec.git.url.
			r.fail("must not hold credentials (a password, or a token as the user): put them in a Secret and name it in git.secretRef", "git", "url")
		case (!ok || utf8.RuneCountInString(u) > maxURL) && strings.Contains(u, "@"):
			r.fail(fmt.Sprintf("must be https://, ssh://, file:// or user@host:path, of at most %d characters (it is not quoted here, as what comes before its @ may be a password)", maxURL), "git", "url")
		case !ok || utf8.RuneCountInString(u) > maxURL:
			r.fail(fmt.Sprintf("%q must be https://, ssh://, file:// or user@host:path, of at most %d characters", u, maxURL), "git", "url")
		}
	} else {
		if g.Revision != "" {
			r.fail("only goes with git.url: a folder of the gitops repository is pinned to the commit of its definition", "git", "revision")
		}
		if g.Path == "" {
			r.fail("required without git.url: the folder of the gitops repository to install", "git")
		}
		if g.SecretRef != nil {
			r.fail("only goes with git.url: the gitops repository's own credentials are used", "git", "secretRef")
		}
	}
	if utf8.RuneCountInString(g.Revision) > maxRevision {
		r.fail(fmt.Sprintf("is longer than %d characters", maxRevision), "git", "revision")
	}
	if g.Path != "" {
		if msg := checkRelativePath(g.Path); msg != "" {
			r.fail(msg, "git", "path")
		}
	}
	if g.SecretRef != nil && (g.SecretRef.Name == "" || len(g.SecretRef.Name) > 253) {
		r.fail("name is required", "git", "secretRef")
	}
}

// checkRelativePath refuses a folder that could leave the repository.
func checkRelativePath(p string) string {
	switch {
	case utf8.RuneCountInString(p) > maxGitPath:
		return fmt.Sprintf("is longer than %d characters", maxGitPath)
	case strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q must be relative to the repository's root, without a leading /", p)
	case strings.Contains(p, "\\"):
		return fmt.Sprintf("%q must use / between folders", p)
	case strings.ContainsRune(p, 0):
		return "must not contain a NUL character"
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Sprintf("%q leaves the repository with '..': name a folder inside it", p)
		}
	}
	if c := path.Clean(p); c == "." || c == ".git" || strings.HasPrefix(c, ".git/") {
		return fmt.Sprintf("%q must name a folder inside the repository, other than its root or .git", p)
	}
	return ""
}
