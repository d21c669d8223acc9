// Package integration_test checks the guard's ownership rule against the
// real local control plane: ClientLookup reads live objects as the
// controller's own identity, and the API server decides what exists and
// what that identity may read.
package integration_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/guard"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

var (
	cluster *testcluster.Cluster
	admin   client.Client
)

func TestMain(m *testing.M) {
	testcluster.Main(m, func(c *testcluster.Cluster) {
		log.SetLogger(logr.Discard())
		cluster = c
		var err error
		admin, err = client.New(c.Config, client.Options{Scheme: scheme()})
		if err != nil {
			panic(err)
		}
		// The Addon CRD and the controller's RBAC, as a real install has them.
		if err := install.Apply(context.Background(), admin, false); err != nil {
			panic(err)
		}
	})
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := capstanv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// render is what the chart of Addon "blog" renders: one object of each name
// the live state below knows about, and one that does not exist yet.
const render = `
apiVersion: v1
kind: Secret
metadata: {name: platform-db}
stringData: {password: chart-value}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: blog-conf}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: blog-web}
spec:
  selector: {matchLabels: {app: blog}}
  template:
    metadata: {labels: {app: blog}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: v1
kind: Service
metadata: {name: wiki-web}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: default}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: blog-data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`

func parse(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

func TestClientLookupOnTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "guard-owned"
	mustCreate(t, ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	blog := &capstanv1.Addon{
		ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: ns},
		Spec:       capstanv1.AddonSpec{Chart: &capstanv1.ChartSource{URL: "https://charts.example.com/blog-1.0.0.tgz"}, Suspend: true},
	}
	mustCreate(t, ctx, blog)
	if blog.UID == "" {
		t.Fatal("the API server gave the Addon no UID")
	}

	// The platform's Secret: no owner, no labels.
	mustCreate(t, ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "platform-db", Namespace: ns}, StringData: map[string]string{"password": "platform-value"}})
	// Owned through an owner reference to the Addon.
	mustCreate(t, ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "blog-conf", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Name: blog.Name, UID: blog.UID, Controller: ptr.To(true),
	}}}})
	// Owned through Capstan's labels.
	mustCreate(t, ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "blog-web", Namespace: ns, Labels: map[string]string{
			capstanv1.AddonLabel: "blog", capstanv1.AddonNamespaceLabel: ns, capstanv1.ManagedByLabel: "capstan",
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "blog"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "blog"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	})
	// Another Addon's Service in the same namespace.
	mustCreate(t, ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "wiki-web", Namespace: ns, Labels: map[string]string{
			capstanv1.AddonLabel: "wiki", capstanv1.AddonNamespaceLabel: ns,
		}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	})
	// The namespace's default account, which kube-controller-manager creates.
	waitFor(t, ctx, &corev1.ServiceAccount{}, ns, "default")

	reader, err := client.New(cluster.ConfigFor(install.ControllerUser), client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, render)
	if err := guard.Harden(objs); err != nil {
		t.Fatal(err)
	}
	vs := guard.Check(ctx, objs, guard.Context{Namespace: ns, AddonName: blog.Name, Lookup: guard.ClientLookup(reader, blog)})
	got := keys(vs)
	want := []string{
		"not-owned Secret/platform-db",
		"not-owned Service/wiki-web",
		"not-owned ServiceAccount/default",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations as the controller:\n got: %q\nwant: %q\n%+v", got, want, vs)
	}
	for _, v := range vs {
		if strings.Contains(v.Message, "platform-value") || strings.Contains(v.Message, "chart-value") {
			t.Errorf("a violation carries a Secret value: %+v", v)
		}
	}

	// A new Addon of the same name (another UID) still owns what carries
	// Capstan's labels, but not what only the former Addon's owner
	// reference names.
	later := blog.DeepCopy()
	later.UID = "00000000-0000-4000-8000-00000000beef"
	vs = guard.Check(ctx, objs, guard.Context{Namespace: ns, AddonName: blog.Name, Lookup: guard.ClientLookup(reader, later)})
	if got := keys(vs); !contains(got, "not-owned ConfigMap/blog-conf") || contains(got, "not-owned Deployment/blog-web") {
		t.Errorf("a later Addon of the same name: got %q", got)
	}
}

// TestClientLookupWithoutAccess reads as an identity that may read nothing:
// the API server refuses, and every object is refused as ownership-unknown,
// never passed.
func TestClientLookupWithoutAccess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nobody, err := client.New(cluster.ConfigFor("guard-nobody"), client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: "default", UID: "00000000-0000-4000-8000-000000000001"}}
	objs := parse(t, render)
	vs := guard.Check(ctx, objs, guard.Context{Namespace: "default", AddonName: "blog", Lookup: guard.ClientLookup(nobody, addon)})
	if len(vs) != len(objs) {
		t.Fatalf("want one violation per object, got %d for %d objects: %+v", len(vs), len(objs), vs)
	}
	for _, v := range vs {
		if v.Rule != guard.RuleOwnershipUnknown || !strings.Contains(v.Message, "forbidden") {
			t.Errorf("want ownership-unknown naming the refusal, got %+v", v)
		}
	}
}

func keys(vs []capstanv1.Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Rule+" "+v.Object.Kind+"/"+v.Object.Name)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func mustCreate(t *testing.T, ctx context.Context, obj client.Object) {
	t.Helper()
	if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func waitFor(t *testing.T, ctx context.Context, obj client.Object, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("wait for %s/%s: %v", ns, name, err)
	}
}
