package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/testcluster"
)

// waitTimeout bounds every wait for the cluster to act.
const waitTimeout = 60 * time.Second

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	testcluster.Main(m, func(c *testcluster.Cluster) { cluster = c })
}

// client returns an admin clientset for the shared cluster.
func client(t *testing.T) kubernetes.Interface {
	t.Helper()
	return clientFor(t, cluster.Config)
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("building a client: %v", err)
	}
	return cs
}

var namespaceCounter atomic.Int32

// namespace creates a namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", namespaceCounter.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 63 {
		name = name[:63]
	}
	name = strings.TrimRight(name, "-")
	_, err := client(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// eventually polls cond until it returns true, failing the test with what
// and the last error after waitTimeout.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var lastErr error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", waitTimeout, what, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestDeploymentBecomesAvailable(t *testing.T) {
	ns := namespace(t)
	cs := client(t)
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.0"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Deployment: %v", err)
	}
	eventually(t, "the Deployment to become Available with 3 ready replicas", func(ctx context.Context) (bool, error) {
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && got.Status.ReadyReplicas == 3 {
				return true, nil
			}
		}
		return false, fmt.Errorf("status %+v", got.Status)
	})
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != cluster.Nodes[0] || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			t.Errorf("pod %s: node %q, phase %s, IP %q; want scheduled to %s, Running, with an IP", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, cluster.Nodes[0])
		}
	}
}

// job builds a one-pod Job that never retries.
func job(ns, name string, podLabels, podAnnotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "hook", Image: "registry.example/hook:1.0"}},
				},
			},
		},
	}
}

// jobCondition waits for the Job to have condition type True.
func jobCondition(t *testing.T, cs kubernetes.Interface, ns, name string, want batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	var got *batchv1.Job
	eventually(t, fmt.Sprintf("Job %s to be %s", name, want), func(ctx context.Context) (bool, error) {
		var err error
		got, err = cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == want && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("status %+v", got.Status)
	})
	return got
}

func TestJobCompletes(t *testing.T) {
	ns := namespace(t)
	cs := client(t)
	if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), job(ns, "migrate", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Job: %v", err)
	}
	got := jobCondition(t, cs, ns, "migrate", batchv1.JobComplete)
	if got.Status.Succeeded != 1 || got.Status.Failed != 0 {
		t.Errorf("Job status: %d succeeded, %d failed; want 1 and 0", got.Status.Succeeded, got.Status.Failed)
	}
}

func TestJobWithFailLabelFails(t *testing.T) {
	ns := namespace(t)
	cs := client(t)
	j := job(ns, "broken-hook", map[string]string{testcluster.FailLabel: "true"}, map[string]string{testcluster.ExitCodeAnnotation: "3"})
	if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Job: %v", err)
	}
	got := jobCondition(t, cs, ns, "broken-hook", batchv1.JobFailed)
	if got.Status.Succeeded != 0 || got.Status.Failed != 1 {
		t.Errorf("Job status: %d succeeded, %d failed; want 0 and 1", got.Status.Succeeded, got.Status.Failed)
	}
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=broken-hook"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("listing the Job's pods: %d pods, %v; want 1", len(pods.Items), err)
	}
	pod := pods.Items[0]
	if pod.Status.Phase != corev1.PodFailed {
		t.Errorf("pod phase %s, want Failed", pod.Status.Phase)
	}
	if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Terminated == nil ||
		pod.Status.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Errorf("container statuses %+v, want one terminated with exit code 3", pod.Status.ContainerStatuses)
	}
}

func TestGarbageCollectorDeletesDependents(t *testing.T) {
	ns := namespace(t)
	cs := client(t)
	owner, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the owner: %v", err)
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
	for _, name := range []string{"dependent-a", "dependent-b"} {
		_, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: name, OwnerReferences: []metav1.OwnerReference{ref},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "owner", metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}); err != nil {
		t.Fatalf("deleting the owner: %v", err)
	}
	eventually(t, "the garbage collector to delete both dependents", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range list.Items {
			if strings.HasPrefix(s.Name, "dependent-") {
				return false, fmt.Errorf("%s still exists", s.Name)
			}
		}
		return true, nil
	})
}

func TestNamespaceDeletionFinishes(t *testing.T) {
	ns := namespace(t)
	cs := client(t)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating content: %v", err)
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), job(ns, "content", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Job: %v", err)
	}
	if err := cs.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the namespace: %v", err)
	}
	eventually(t, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
	})
}

func TestServerSideDryRunApplyReturnsDefaults(t *testing.T) {
	ns := namespace(t)
	cs := client(t)
	dep := appsv1ac.Deployment("defaults", ns).WithSpec(appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "defaults"})).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(map[string]string{"app": "defaults"}).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("app").WithImage("registry.example/app:1.0")))))
	got, err := cs.AppsV1().Deployments(ns).Apply(t.Context(), dep, metav1.ApplyOptions{
		FieldManager: "capstan-test", Force: true, DryRun: []string{metav1.DryRunAll},
	})
	if err != nil {
		t.Fatalf("dry-run apply: %v", err)
	}
	container := got.Spec.Template.Spec.Containers[0]
	checks := []struct {
		field     string
		got, want any
	}{
		{"spec.replicas", ptr.Deref(got.Spec.Replicas, -1), int32(1)},
		{"spec.strategy.type", got.Spec.Strategy.Type, appsv1.RollingUpdateDeploymentStrategyType},
		{"spec.revisionHistoryLimit", ptr.Deref(got.Spec.RevisionHistoryLimit, -1), int32(10)},
		{"spec.progressDeadlineSeconds", ptr.Deref(got.Spec.ProgressDeadlineSeconds, -1), int32(600)},
		{"template restartPolicy", got.Spec.Template.Spec.RestartPolicy, corev1.RestartPolicyAlways},
		{"container imagePullPolicy", container.ImagePullPolicy, corev1.PullIfNotPresent},
		{"container terminationMessagePath", container.TerminationMessagePath, "/dev/termination-log"},
		{"managed by", len(got.ManagedFields) > 0 && got.ManagedFields[0].Manager == "capstan-test", true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want the default %v", c.field, c.got, c.want)
		}
	}
	if got.UID == "" {
		t.Errorf("dry-run apply returned no uid; want the object as the server would create it")
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "defaults", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after a dry-run apply, Get says %v; want NotFound (nothing stored)", err)
	}
}

func TestRBACRefusesAndImpersonationWorks(t *testing.T) {
	ns := namespace(t)
	admin := client(t)
	ctx := t.Context()

	alice := clientFor(t, cluster.ConfigFor("alice", "developers"))
	if _, err := alice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice lists ConfigMaps before any grant: %v; want Forbidden", err)
	}
	grant(t, admin, ns, "read-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "developers"})
	eventually(t, "RBAC to let the group developers list ConfigMaps", func(ctx context.Context) (bool, error) {
		_, err := alice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	if _, err := alice.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists Secrets, which no rule grants: %v; want Forbidden", err)
	}

	// bob may not impersonate until a ClusterRole lets him.
	asAlice := cluster.ConfigFor("bob")
	asAlice.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"developers"}}
	bobAsAlice := clientFor(t, asAlice)
	if _, err := bobAsAlice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bob impersonates alice without the impersonate verb: %v; want Forbidden", err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-impersonate-alice"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"alice"}, Verbs: []string{"impersonate"}},
			{APIGroups: []string{""}, Resources: []string{"groups"}, ResourceNames: []string{"developers"}, Verbs: []string{"impersonate"}},
		},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the impersonation ClusterRole: %v", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the impersonation ClusterRoleBinding: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	eventually(t, "bob to list ConfigMaps as alice", func(ctx context.Context) (bool, error) {
		_, err := bobAsAlice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	review, err := bobAsAlice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("asking who bob-as-alice is: %v", err)
	}
	if u := review.Status.UserInfo; u.Username != "alice" || !slices.Contains(u.Groups, "developers") {
		t.Errorf("impersonated identity %+v, want alice in developers", u)
	}
	if _, err := bobAsAlice.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("bob as alice lists Secrets: %v; want Forbidden, since alice may not", err)
	}
}

func TestConfigForServiceAccount(t *testing.T) {
	ns := namespace(t)
	admin := client(t)
	user := "system:serviceaccount:" + ns + ":deployer"
	sa := clientFor(t, cluster.ConfigFor(user))
	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("asking who the service account is: %v", err)
	}
	for _, g := range []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"} {
		if !slices.Contains(review.Status.UserInfo.Groups, g) {
			t.Errorf("service account groups %v lack %s", review.Status.UserInfo.Groups, g)
		}
	}
	if _, err := sa.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the service account lists pods before any grant: %v; want Forbidden", err)
	}
	grant(t, admin, ns, "deployer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "deployer"})
	eventually(t, "RBAC to let the service account list pods", func(ctx context.Context) (bool, error) {
		_, err := sa.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
}

func TestKubeconfigReachesTheCluster(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("loading %s: %v", cluster.Kubeconfig, err)
	}
	info, err := clientFor(t, cfg).Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("asking the server version through the kubeconfig: %v", err)
	}
	// The build stamps the version; without it the server says v0.0.0 and
	// Helm charts with a kubeVersion constraint refuse to render.
	if info.Major != "1" || info.Minor != "37" || !strings.HasPrefix(info.GitVersion, "v1.37.") {
		t.Errorf("server version %+v, want v1.37.x", info)
	}
}

func TestNodeLeaseIsHeld(t *testing.T) {
	cs := client(t)
	var lease *coordinationv1.Lease
	eventually(t, "kwok to hold the node's lease", func(ctx context.Context) (bool, error) {
		var err error
		lease, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, cluster.Nodes[0], metav1.GetOptions{})
		return err == nil && lease.Spec.RenewTime != nil, err
	})
	if got := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); got != 40 {
		t.Errorf("lease duration %d s, want 40 (kwok's --node-lease-duration-seconds)", got)
	}
	if age := time.Since(lease.Spec.RenewTime.Time); age > 40*time.Second {
		t.Errorf("lease last renewed %s ago, longer than its duration", age)
	}
}

// grant binds a Role with rule to subject in ns.
func grant(t *testing.T, cs kubernetes.Interface, ns, name string, rule rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	if _, err := cs.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Role %s: %v", name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating RoleBinding %s: %v", name, err)
	}
}
