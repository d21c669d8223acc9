package benchmark_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcontroller"
)

// The chart of issue 19's comparison with Flux: 21 objects, seven
// components of a Deployment (one replica, so kwok runs its pod and it
// becomes Available), its Service and its ConfigMap.
const (
	sevenChart        = "seven"
	sevenVersion      = "1.0.0"
	sevenObjects      = 21
	sevenDeployments  = 7
	fluxNamespace     = "flux-system"
	fluxRepoName      = "bench"
	fluxRepoCASecret  = "bench-repo-ca"
	fluxRunLabelValue = "flux"
	fluxManager       = "capstan-bench-flux"
	// helmReleaseAPI is the HelmRelease's group and version.
	helmReleaseAPI = "helm.toolkit.fluxcd.io/v2"
)

// The names of each tool's add-ons, which are also their target
// namespaces, so that no two tools share a namespace.
func capstanSevenName(i int) string { return fmt.Sprintf("capstan-%03d", i) }
func fluxReleaseName(i int) string  { return fmt.Sprintf("flux-%03d", i) }

// sevenManifest is one add-on's 21 objects with name where the chart has
// the release's name: the floor applies it as it is.
func sevenManifest(name string) string {
	var b strings.Builder
	for i := range sevenDeployments {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-%[1]d-config
data:
  addon: %[2]s
  settings.yaml: |
    level: info
    component: %[1]d
---
apiVersion: v1
kind: Service
metadata:
  name: web-%[1]d
spec:
  selector: {app: web-%[1]d}
  ports:
    - name: http
      port: 80
      targetPort: http
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%[1]d
spec:
  replicas: 1
  selector:
    matchLabels: {app: web-%[1]d}
  template:
    metadata:
      labels: {app: web-%[1]d}
    spec:
      containers:
        - name: web
          image: registry.example/web:1.0
          envFrom:
            - configMapRef: {name: web-%[1]d-config}
          ports:
            - name: http
              containerPort: 8080
          resources:
            requests: {cpu: 10m, memory: 16Mi}
`, i, name)
	}
	return b.String()
}

// sevenChartArchive packages the chart: sevenManifest with the release's
// name as the template's.
func sevenChartArchive() ([]byte, error) {
	return testcontroller.ChartArchive(sevenChart, map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: " + sevenChart + "\nversion: " + sevenVersion + "\n",
		"values.yaml":            "{}\n",
		"templates/objects.yaml": sevenManifest("{{ .Release.Name }}"),
	})
}

// newSevenAddon is Capstan's i-th add-on: a cluster-profile Addon of the
// chart into a namespace of its own that it creates, labelled as census
// counts the benchmark's Addons.
func newSevenAddon(i int, repoURL string) *capstanv1.Addon {
	name := capstanSevenName(i)
	return &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: install.Namespace, Labels: map[string]string{runLabel: "converge"}},
		Spec: capstanv1.AddonSpec{
			Chart:           &capstanv1.ChartSource{Repo: repoURL, Name: sevenChart, Version: sevenVersion},
			TargetNamespace: name,
			CreateNamespace: true,
			Prune:           true,
		},
	}
}

// installFluxCRDs applies the CRDs that the Flux build copied into
// fluxDir/crds and waits until each is Established.
func installFluxCRDs(ctx context.Context, c client.Client, fluxDir string) error {
	paths, err := filepath.Glob(filepath.Join(fluxDir, "crds", "*.yaml"))
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("no CRDs in %s/crds (%v): run make flux", fluxDir, err)
	}
	var names []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		objs, err := parseManifest(string(data))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, o := range objs {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fluxManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying CRD %s: %w", o.GetName(), err)
			}
			names = append(names, o.GetName())
		}
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, nil
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// fluxObject decodes one Flux object from YAML.
func fluxObject(doc string) (*unstructured.Unstructured, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// fluxAccounts creates flux-system and the service accounts of Flux's
// controllers, bound to cluster-admin as Flux's own install binds them.
func fluxAccounts(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", fluxNamespace, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flux-reconcilers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}
	for _, user := range []string{helmControllerUser, sourceControllerUser} {
		name := user[strings.LastIndex(user, ":")+1:]
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fluxNamespace}}); err != nil {
			return fmt.Errorf("creating service account %s: %w", name, err)
		}
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: fluxNamespace})
	}
	if err := c.Create(ctx, binding); err != nil {
		return fmt.Errorf("binding Flux's service accounts to cluster-admin: %w", err)
	}
	return nil
}

// createFluxRepository creates the loopback chart repository's CA as the
// Secret that the HelmRepository's certSecretRef names, and the
// HelmRepository, and waits until source-controller has fetched its index.
func createFluxRepository(ctx context.Context, c client.Client, repoURL, caFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fluxRepoCASecret, Namespace: fluxNamespace},
		Data:       map[string][]byte{"ca.crt": ca},
	}
	if err := c.Create(ctx, secret); err != nil {
		return fmt.Errorf("creating the repository's CA Secret: %w", err)
	}
	repo, err := fluxObject(fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: %s
  namespace: %s
spec:
  url: %s
  interval: 1h
  certSecretRef:
    name: %s
`, fluxRepoName, fluxNamespace, repoURL, fluxRepoCASecret))
	if err != nil {
		return err
	}
	if err := c.Create(ctx, repo); err != nil {
		return fmt.Errorf("creating the HelmRepository: %w", err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(repo.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(repo), got); err != nil {
			return false, nil
		}
		ready, reason, msg := fluxReady(got)
		last = reason + ": " + msg
		return ready, nil
	})
	if err != nil {
		return fmt.Errorf("the HelmRepository was not Ready within 2 minutes (last %s): %w", last, err)
	}
	return nil
}

// newHelmRelease is Flux's i-th add-on: a HelmRelease of the chart from
// the HelmRepository, into a namespace of its own that it creates, with
// Flux's defaults otherwise (the install waits for every object to be
// ready, as Helm's --wait does).
func newHelmRelease(i int) (*unstructured.Unstructured, error) {
	name := fluxReleaseName(i)
	return fluxObject(fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    %[3]s: %[4]s
spec:
  interval: 1h
  releaseName: %[1]s
  targetNamespace: %[1]s
  install:
    createNamespace: true
  chart:
    spec:
      chart: %[5]s
      version: %[6]s
      interval: 1h
      sourceRef:
        kind: HelmRepository
        name: %[7]s
`, name, fluxNamespace, runLabel, fluxRunLabelValue, sevenChart, sevenVersion, fluxRepoName))
}

// fluxReady reports a Flux object's Ready condition, true only when it
// is for the object's current generation.
func fluxReady(o *unstructured.Unstructured) (ready bool, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		return m["status"] == "True" && gen == o.GetGeneration(), reason, message
	}
	return false, "(no Ready condition)", ""
}

// releaseCensus counts the benchmark's HelmReleases that are Ready, and
// the others by their Ready reason.
type releaseCensus struct {
	total, ready int
	reasons      map[string]int
	example      string
}

func (c releaseCensus) String() string {
	keys := make([]string, 0, len(c.reasons))
	for k := range c.reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.reasons[k]))
	}
	return fmt.Sprintf("%d/%d ready (%s)", c.ready, c.total, strings.Join(parts, " "))
}

func helmReleases(ctx context.Context, c client.Reader) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(helmReleaseAPI)
	list.SetKind("HelmReleaseList")
	err := c.List(ctx, list, client.InNamespace(fluxNamespace), client.MatchingLabels{runLabel: fluxRunLabelValue})
	return list, err
}

func releaseCensusOf(ctx context.Context, c client.Reader) (releaseCensus, error) {
	list, err := helmReleases(ctx, c)
	if err != nil {
		return releaseCensus{}, err
	}
	out := releaseCensus{total: len(list.Items), reasons: map[string]int{}}
	for i := range list.Items {
		ready, reason, msg := fluxReady(&list.Items[i])
		if ready {
			out.ready++
			continue
		}
		out.reasons[reason]++
		if out.example == "" {
			out.example = fmt.Sprintf("%s: %s: %s", list.Items[i].GetName(), reason, msg)
		}
	}
	return out, nil
}

// waitReleasesReady looks every lookEvery until n HelmReleases are Ready,
// a Flux controller exits, or timeout passes, as waitAllReady does for
// Addons.
func waitReleasesReady(ctx context.Context, c client.Reader, n int, timeout time.Duration, alive func() error, logf func(string, ...any)) (time.Time, error) {
	return pollReady(ctx, "HelmRelease", "waiting for Flux", n, timeout, func(ctx context.Context) (int, fmt.Stringer, string, error) {
		got, err := releaseCensusOf(ctx, c)
		return got.ready, got, got.example, err
	}, alive, logf)
}

// latencies are how long each add-on took from its creation until its
// Ready condition last turned true, both as the API server stamped them
// (to the second), sorted.
type latencies []time.Duration

func (l latencies) String() string {
	if len(l) == 0 {
		return "none"
	}
	at := func(q float64) time.Duration { return l[int(q*float64(len(l)-1))].Round(100 * time.Millisecond) }
	return fmt.Sprintf("median %s, p90 %s, max %s", at(0.5), at(0.9), at(1))
}

// readyLatency is the time from created to the Ready condition's last
// transition, when it is true.
func readyLatency(created metav1.Time, conds []any) (time.Duration, bool) {
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" || m["status"] != "True" {
			continue
		}
		s, _ := m["lastTransitionTime"].(string)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return 0, false
		}
		return t.Sub(created.Time), true
	}
	return 0, false
}

// addonLatencies reads every benchmark Addon's time to Ready.
func addonLatencies(ctx context.Context, c client.Client) (latencies, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(capstanv1.GroupVersion.WithKind("AddonList"))
	if err := c.List(ctx, list, client.InNamespace(install.Namespace), client.MatchingLabels{runLabel: "converge"}); err != nil {
		return nil, err
	}
	return latenciesOf(list), nil
}

// releaseLatencies reads every benchmark HelmRelease's time to Ready.
func releaseLatencies(ctx context.Context, c client.Client) (latencies, error) {
	list, err := helmReleases(ctx, c)
	if err != nil {
		return nil, err
	}
	return latenciesOf(list), nil
}

func latenciesOf(list *unstructured.UnstructuredList) latencies {
	var out latencies
	for i := range list.Items {
		o := &list.Items[i]
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		if d, ok := readyLatency(o.GetCreationTimestamp(), conds); ok {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// readyTimes reads when each of the benchmark's Addons (kind "Addon") or
// HelmReleases turned Ready, by name, to the second.
func readyTimes(ctx context.Context, c client.Client, kind string) (map[string]time.Time, error) {
	var list *unstructured.UnstructuredList
	var err error
	if kind == "Addon" {
		list = &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(capstanv1.GroupVersion.WithKind("AddonList"))
		err = c.List(ctx, list, client.InNamespace(install.Namespace), client.MatchingLabels{runLabel: "converge"})
	} else {
		list, err = helmReleases(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for i := range list.Items {
		o := &list.Items[i]
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		if d, ok := readyLatency(o.GetCreationTimestamp(), conds); ok {
			out[o.GetName()] = o.GetCreationTimestamp().Add(d)
		}
	}
	return out, nil
}

// addonPhases split each add-on's time from its creation to Ready in
// three: queued (created → its tool's first write for it), rolled out
// (→ the last status update of a Deployment in its namespace, when the
// last one became Available) and reported (→ Ready).
type addonPhases struct {
	queued, rolledOut, reported latencies
}

// phasesOf reads the phases from the API server's audit log. Each
// add-on's object (resource) and its target namespace have the same
// name; users are its tool's. Created and the writes are to the
// microsecond; ready is to the second, so reported is too.
func phasesOf(events []auditv1.Event, resource string, users []string, ready map[string]time.Time) addonPhases {
	type life struct{ created, first, available time.Time }
	lives := map[string]*life{}
	for name := range ready {
		lives[name] = &life{}
	}
	for _, e := range events {
		if e.Stage != auditv1.StageResponseComplete || e.ObjectRef == nil {
			continue
		}
		ref := e.ObjectRef
		at := e.RequestReceivedTimestamp.Time
		switch {
		case e.Verb == "create" && ref.Resource == resource && ref.Subresource == "":
			if l := lives[ref.Name]; l != nil {
				l.created = at
			}
		case slices.Contains(users, e.User.Username) && (ref.Resource == "namespaces" && lives[ref.Name] != nil || lives[ref.Namespace] != nil):
			name := ref.Namespace
			if ref.Resource == "namespaces" {
				name = ref.Name
			}
			if l := lives[name]; l.first.IsZero() {
				l.first = at
			}
		case ref.Resource == "deployments" && ref.Subresource == "status":
			if l := lives[ref.Namespace]; l != nil {
				l.available = e.StageTimestamp.Time
			}
		}
	}
	var p addonPhases
	for name, l := range lives {
		if l.created.IsZero() || l.first.IsZero() || l.available.IsZero() {
			continue
		}
		p.queued = append(p.queued, l.first.Sub(l.created))
		p.rolledOut = append(p.rolledOut, l.available.Sub(l.first))
		p.reported = append(p.reported, ready[name].Sub(l.available))
	}
	for _, l := range []latencies{p.queued, p.rolledOut, p.reported} {
		slices.Sort(l)
	}
	return p
}
