package benchmark_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/install"
)

// runLabel marks the benchmark's Addons.
const runLabel = "bench.capstan.dev/run"

// resyncAnnotation is set on every Addon to ask for one reconcile without a
// change of spec (see touchAddons).
const resyncAnnotation = "bench.capstan.dev/resync"

// objectsPerAddon is how many objects each add-on's folder renders; the
// target namespace, which createNamespace adds, is one more.
const objectsPerAddon = 20

// addonName names the i-th add-on; it is also its target namespace.
func addonName(i int) string { return fmt.Sprintf("bench-%03d", i) }

// addonManifest is one add-on's folder: 20 plain-YAML objects, without a
// namespace (the controller puts them into the target namespace).
// 7 ConfigMaps, 4 Secrets, 3 ServiceAccounts, 3 Services, 1 Deployment
// (kwok runs its pod, so it becomes Available), 1 Role and 1 RoleBinding.
func addonManifest(name string) string {
	return manifestWith(name, func(i int) string {
		return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-secret-%d", name, i))
	})
}

// chartTemplate is addonManifest as a chart template: the same objects,
// with the release name (the add-on's name) where addonManifest has name.
func chartTemplate() string {
	return manifestWith("{{ .Release.Name }}", func(i int) string {
		return fmt.Sprintf(`{{ printf "%%s-secret-%d" .Release.Name | b64enc }}`, i)
	})
}

// manifestWith writes the objects with name and each Secret's data.
func manifestWith(name string, secret func(i int) string) string {
	var b strings.Builder
	doc := func(format string, args ...any) {
		if b.Len() > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, format, args...)
	}
	for i := range 7 {
		doc(`apiVersion: v1
kind: ConfigMap
metadata:
  name: config-%d
data:
  addon: %s
  settings.yaml: |
    level: info
    retries: %d
    endpoints: [a.example, b.example]
`, i, name, i)
	}
	for i := range 4 {
		doc(`apiVersion: v1
kind: Secret
metadata:
  name: secret-%d
type: Opaque
data:
  password: %s
`, i, secret(i))
	}
	for i := range 3 {
		doc(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: account-%d
`, i)
	}
	for i := range 3 {
		doc(`apiVersion: v1
kind: Service
metadata:
  name: service-%d
spec:
  selector: {app: web}
  ports:
    - name: http
      port: %d
      targetPort: http
`, i, 80+i)
	}
	doc(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      serviceAccountName: account-0
      containers:
        - name: web
          image: registry.example/web:1.0
          ports:
            - name: http
              containerPort: 8080
          resources:
            requests: {cpu: 10m, memory: 16Mi}
`)
	doc(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: config-reader
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, watch]
`)
	doc(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: config-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: config-reader
subjects:
  - kind: ServiceAccount
    name: account-0
    namespace: %s
`, name)
	return b.String()
}

// writeRepository makes a local git repository with one folder per add-on,
// addons/<name>/objects.yaml, in one commit, and returns its file:// URL
// and the commit.
func writeRepository(dir string, n int) (url, commit string, err error) {
	repoDir := filepath.Join(dir, "addons-repo")
	for i := range n {
		name := addonName(i)
		folder := filepath.Join(repoDir, "addons", name)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(folder, "objects.yaml"), []byte(addonManifest(name)), 0o644); err != nil {
			return "", "", err
		}
	}
	repo, err := git.PlainInit(repoDir, false)
	if err != nil {
		return "", "", err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return "", "", err
	}
	if err := wt.AddGlob("addons"); err != nil {
		return "", "", err
	}
	sig := &object.Signature{Name: "capstan benchmark", Email: "bench@capstan.invalid", When: time.Now()}
	hash, err := wt.Commit(fmt.Sprintf("%d add-ons of %d objects", n, objectsPerAddon), &git.CommitOptions{Author: sig})
	if err != nil {
		return "", "", err
	}
	return "file://" + repoDir, hash.String(), nil
}

// newAddon is the i-th Addon: in the controller's namespace (the cluster
// profile), its own target namespace created by the controller, the git
// folder pinned to the commit as definitions from a gitops repository are.
func newAddon(i int, url, commit string) *capstanv1.Addon {
	name := addonName(i)
	return &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: install.Namespace, Labels: map[string]string{runLabel: "converge"}},
		Spec: capstanv1.AddonSpec{
			Git:             &capstanv1.GitSource{URL: url, Revision: commit, Path: "addons/" + name},
			TargetNamespace: name,
			CreateNamespace: true,
			Prune:           true,
		},
	}
}

// isReady is the benchmark's goal for one Addon: phase Synced and Ready=True
// for its current generation.
func isReady(a *capstanv1.Addon) bool {
	c := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady)
	return a.Status.Phase == capstanv1.PhaseSynced && c != nil && c.Status == metav1.ConditionTrue &&
		c.ObservedGeneration == a.Generation
}

// addonCensus lists the benchmark's Addons and counts the ready ones.
type addonCensus struct {
	total, ready int
	phases       map[string]int
	example      string // why one Addon that is not ready is not
}

func (c addonCensus) String() string {
	keys := make([]string, 0, len(c.phases))
	for k := range c.phases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.phases[k]))
	}
	return fmt.Sprintf("%d/%d ready (%s)", c.ready, c.total, strings.Join(parts, " "))
}

func census(ctx context.Context, c client.Reader) (addonCensus, error) {
	var list capstanv1.AddonList
	if err := c.List(ctx, &list, client.InNamespace(install.Namespace), client.MatchingLabels{runLabel: "converge"}); err != nil {
		return addonCensus{}, err
	}
	out := addonCensus{total: len(list.Items), phases: map[string]int{}}
	for i := range list.Items {
		a := &list.Items[i]
		phase := string(a.Status.Phase)
		if phase == "" {
			phase = "(none)"
		}
		out.phases[phase]++
		if isReady(a) {
			out.ready++
			continue
		}
		if out.example == "" {
			if cond := apimeta.FindStatusCondition(a.Status.Conditions, capstanv1.ConditionReady); cond != nil {
				out.example = fmt.Sprintf("%s: %s: %s", a.Name, cond.Reason, cond.Message)
			}
		}
	}
	return out, nil
}

// waitAllReady looks every lookEvery until n Addons are ready, the
// controller exits, or timeout passes; it logs progress every 30 s. c is
// best a watchFor cache.
func waitAllReady(ctx context.Context, c client.Reader, n int, timeout time.Duration, alive func() error, logf func(string, ...any)) (time.Time, error) {
	return pollReady(ctx, "Addon", "waiting", n, timeout, func(ctx context.Context) (int, fmt.Stringer, string, error) {
		got, err := census(ctx, c)
		return got.ready, got, got.example, err
	}, alive, logf)
}

// pollReady calls look every lookEvery until it counts n ready, alive
// fails, or timeout passes, and logs what look says every 30 s. kind names
// the objects counted, and prefix the progress lines.
func pollReady(ctx context.Context, kind, prefix string, n int, timeout time.Duration,
	look func(context.Context) (ready int, summary fmt.Stringer, example string, err error), alive func() error, logf func(string, ...any)) (time.Time, error) {
	const interval = lookEvery
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	var last fmt.Stringer = stringer("nothing read yet")
	lastExample := ""
	for range int(timeout/interval) + 1 {
		ready, summary, example, err := look(ctx)
		if err != nil {
			logf("listing the %ss: %v", kind, err)
		} else {
			last, lastExample = summary, example
			if ready == n {
				return time.Now(), nil
			}
		}
		if err := alive(); err != nil {
			return time.Time{}, err
		}
		if time.Now().After(deadline) {
			break
		}
		if time.Since(lastLog) >= 30*time.Second {
			logf("%s: %s", prefix, last)
			lastLog = time.Now()
		}
		time.Sleep(interval)
	}
	return time.Time{}, fmt.Errorf("not every %s was ready after %s: %s; for example %s", kind, timeout, last, lastExample)
}

// stringer is a fixed fmt.Stringer.
type stringer string

func (s stringer) String() string { return string(s) }

// touchAddons sets an annotation on each Addon, which queues exactly one
// reconcile of it with nothing new, as a periodic resync does: the
// generation stays, so nothing in status changes (observedGeneration
// included). Raising spec.syncRequest would bump the generation, so
// observedGeneration and lastSyncRequest change and status is written: a
// request more than a resync makes.
func touchAddons(ctx context.Context, c client.Client, n int) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, resyncAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	for i := range n {
		a := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: addonName(i)}}
		if err := c.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("annotating Addon %s: %w", a.Name, err)
		}
	}
	return nil
}
