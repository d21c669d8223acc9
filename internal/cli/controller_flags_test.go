package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestControllerFlagsRefused: the controller's flags that would be read
// as something else are refused before it starts, with what to give.
func TestControllerFlagsRefused(t *testing.T) {
	for _, share := range []float64{0, -0.5, 1.5} {
		if err := checkPruneThreshold(share); err == nil || !strings.Contains(err.Error(), "more than 0 and at most 1") {
			t.Errorf("--prune-approval-threshold %g: %v", share, err)
		}
	}
	for _, share := range []float64{0.001, 0.5, 1} {
		if err := checkPruneThreshold(share); err != nil {
			t.Errorf("--prune-approval-threshold %g: %v", share, err)
		}
	}
	for _, share := range []int{-2, -100} {
		if err := checkTenantShare(share); err == nil || !strings.Contains(err.Error(), "-1 for the default") {
			t.Errorf("--max-concurrent-per-tenant %d: %v", share, err)
		}
	}
	for _, share := range []int{-1, 0, 1, 16} {
		if err := checkTenantShare(share); err != nil {
			t.Errorf("--max-concurrent-per-tenant %d: %v", share, err)
		}
	}
	if o := parseControllerFlags(t); o.config.MaxConcurrentPerTenant != -1 {
		t.Errorf("--max-concurrent-per-tenant defaults to %d, want -1 (a quarter of the workers)", o.config.MaxConcurrentPerTenant)
	}
	for _, name := range []string{"", "Capstan_Controller", strings.Repeat("a", 254)} {
		if err := checkLeaseName(name); err == nil || !strings.Contains(err.Error(), "is not a Lease's name") {
			t.Errorf("--leader-election-id %q: %v", name, err)
		}
	}
	if err := checkLeaseName(defaultLeaderElectionID); err != nil {
		t.Errorf("the default Lease name is refused: %v", err)
	}
	if o := parseControllerFlags(t); checkSourceLimits(o.sourceLimits) != nil || o.sourceLimits.MaxFiles != 10000 {
		t.Errorf("the default source limits: %+v", o.sourceLimits)
	}
	if o := parseControllerFlags(t, "--max-source-files=50000", "--max-source-bytes=0"); o.sourceLimits.MaxFiles != 50000 ||
		checkSourceLimits(o.sourceLimits) == nil {
		t.Errorf("--max-source-files=50000 --max-source-bytes=0: %+v, %v", o.sourceLimits, checkSourceLimits(o.sourceLimits))
	}
	if o := parseControllerFlags(t); o.gitBudget != "768Mi" {
		t.Errorf("--git-memory-budget defaults to %q, want 768Mi", o.gitBudget)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--git-memory-budget=256Mi"}, ""},
		{[]string{"--git-memory-budget=lots"}, "is not a quantity"},
		{[]string{"--git-memory-budget=16Mi"}, "below 32Mi, too little to fetch a repository"},
		// A budget below a fetch's own limits bounds that fetch instead.
		{[]string{"--max-source-bytes=209715200", "--git-memory-budget=256Mi"}, ""},
	} {
		o := parseControllerFlags(t, c.args...)
		_, err := gitMemoryBudget(o.gitBudget)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--max-objects-per-addon=0"}, "give a positive number of objects"},
		{[]string{"--max-objects-per-addon=-1"}, "give a positive number of objects"},
		{[]string{"--render-timeout=0s"}, "give a positive duration"},
		{[]string{"--render-memory-limit=lots"}, "is not a quantity"},
		{[]string{"--render-memory-limit=0"}, "at least 64Mi"},
		{[]string{"--render-workers=-1"}, "give a number of workers"},
		{[]string{"--max-objects-per-addon=20000", "--render-timeout=2m", "--render-memory-limit=1Gi", "--render-workers=4"}, ""},
	} {
		o := parseControllerFlags(t, c.args...)
		err := checkRenderBounds(o.config.MaxObjects, o.renderTimeout, o.renderMemory, o.renderWorkers)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--resync-interval=0s"}, "--resync-interval 0s: give a positive duration"},
		{[]string{"--resync-interval=-1m"}, "--resync-interval -1m0s: give a positive duration"},
		{[]string{"--hook-timeout=0s"}, "--hook-timeout 0s: give a positive duration"},
		{[]string{"--hook-timeout=-5s"}, "--hook-timeout -5s: give a positive duration"},
		{[]string{"--page-fetch-timeout=0s"}, "--page-fetch-timeout 0s: give a positive duration"},
		{[]string{"--max-concurrent-reconciles=0"}, "--max-concurrent-reconciles 0: give a number of workers, at least 1"},
		{[]string{"--max-concurrent-reconciles=-3"}, "--max-concurrent-reconciles -3: give a number of workers, at least 1"},
		// The flags that name things, checked before the wait for the CRDs.
		{[]string{"--watch-label-selector=!!"}, "--watch-label-selector \"!!\" is not a label selector"},
		{[]string{"--namespace=Bad NS"}, `--namespace "Bad NS" is not a namespace's name`},
		{[]string{"--trusted-namespaces=capstan-system,Bad NS"}, `--trusted-namespaces "Bad NS" is not a namespace's name`},
		{[]string{"--addons-service-account=Bad SA"}, `--addons-service-account "Bad SA" is not a service account's name`},
		{[]string{"--platform-configmap=Bad_CM"}, `--platform-configmap "Bad_CM" is not a ConfigMap's name`},
		{[]string{"--http-bind-address=nonsense"}, `--http-bind-address "nonsense" is not host:port`},
		{[]string{"--tls-cert-file=/nonexistent"}, "give --tls-cert-file and --tls-private-key-file together"},
		{[]string{"--tls-cert-file=/nonexistent", "--tls-private-key-file=/nonexistent"}, "--tls-cert-file and --tls-private-key-file:"},
		{[]string{"--ca-file=/nonexistent"}, "reading --ca-file"},
		{[]string{"--fetch-allow=bogus//"}, "the fetch guard's settings"},
		{[]string{"--notify-allow=bogus//"}, "--notify-allow"},
		{[]string{"--remote-cluster-allow=bogus//"}, "--remote-cluster-allow"},
		{[]string{"--trusted-namespaces= , "}, `--trusted-namespaces " , " names no namespace`},
	} {
		err := parseControllerFlags(t, c.args...).prepare()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
	}
	// A space after a comma is trimmed: "a, b" trusts b, not " b".
	o := parseControllerFlags(t, "--trusted-namespaces=capstan-system, platform")
	if err := o.prepare(); err != nil || strings.Join(o.config.TrustedNamespaces, ",") != "capstan-system,platform" {
		t.Errorf("--trusted-namespaces=capstan-system, platform: %q, %v; want capstan-system and platform", o.config.TrustedNamespaces, err)
	}
	// Values that started the controller before still do, with the
	// meaning they had: an empty namespace or service account is the
	// default, an empty entry of --trusted-namespaces matches nothing, an
	// empty --http-bind-address serves on a port the system picks, and
	// the TLS files are not read while the API is off.
	o = parseControllerFlags(t, "--namespace=", "--addons-service-account=", "--trusted-namespaces=capstan-system,,platform,", "--http-bind-address=")
	if err := o.prepare(); err != nil || o.config.Namespace != "capstan-system" || o.config.AddonsServiceAccount != "capstan-addons" ||
		strings.Join(o.config.TrustedNamespaces, ",") != "capstan-system,platform" {
		t.Errorf("empty --namespace, --addons-service-account, --http-bind-address and entries of --trusted-namespaces: %v, %+v; want the defaults and capstan-system,platform",
			err, o.config)
	}
	if err := parseControllerFlags(t, "--http-bind-address=0", "--tls-cert-file=/nonexistent").prepare(); err != nil {
		t.Errorf("--tls-cert-file with the API off: %v; want it started, the file unread", err)
	}
	if err := checkWorkBounds(time.Hour, time.Second, 1); err != nil {
		t.Errorf("positive bounds refused: %v", err)
	}
	for names, want := range map[string]string{"Bad_Name": "is not a Secret's name", "a,a": "is given twice"} {
		if err := checkNotifySecrets(strings.Split(names, ",")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--notify-secret %s: %v", names, err)
		}
	}
}

// TestLeaseNameIgnoresTheSelector: the Lease of --leader-elect has one
// name whatever --watch-label-selector says, so the rollout that changes
// the selector (the main release's move to !capstan.dev/shard) keeps one
// leader: the new pod waits for the Lease the old one holds.
func TestLeaseNameIgnoresTheSelector(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "capstan-controller"},
		{[]string{"--watch-label-selector=!capstan.dev/shard"}, "capstan-controller"},
		{[]string{"--watch-label-selector=capstan.dev/shard=a"}, "capstan-controller"},
		{[]string{"--watch-label-selector=capstan.dev/shard=a", "--leader-election-id=capstan-shard-a"}, "capstan-shard-a"},
	} {
		o := parseControllerFlags(t, c.args...)
		s, err := shardOptions(o.watchSelector)
		if err != nil {
			t.Fatal(err)
		}
		if got := managerOptions(o, s).LeaderElectionID; got != c.want {
			t.Errorf("%v: the Lease is %q, want %q", c.args, got, c.want)
		}
	}
}

// TestManagerReleasesItsLeaseOnStop: a leader that stops gives its Lease
// up, so that a standby leads, and the capstan Service has a Pod to send
// the API and git webhooks to, without waiting for the Lease to expire
// (TestLeaderLabelsItsPod in test/shards measures the hand-over).
func TestManagerReleasesItsLeaseOnStop(t *testing.T) {
	o := parseControllerFlags(t, "--leader-elect")
	s, err := shardOptions(o.watchSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !managerOptions(o, s).LeaderElectionReleaseOnCancel {
		t.Error("the manager keeps its Lease when it stops; a standby waits for it to expire")
	}
}

// TestReadyWhenHealthy: /readyz says whether the replica is healthy, so a
// standby is ready as the leader is (it can take over), and `helm install
// --wait` and `kubectl rollout status` end with two replicas; the Service
// finds the leader by its label instead. A replica is not ready only while
// it still removes a leader label its Pod may keep from an earlier run.
func TestReadyWhenHealthy(t *testing.T) {
	for _, c := range []struct {
		cleared bool
		ready   bool
	}{
		{false, false},
		{true, true},
	} {
		cleared := make(chan struct{})
		if c.cleared {
			close(cleared)
		}
		if err := readyCheck(cleared)(nil); (err == nil) != c.ready {
			t.Errorf("label cleared %v: readyz says %v; want ready %v", c.cleared, err, c.ready)
		}
	}
}

// TestLeaderLabelPatch: the leader's patch of its own Pod sets the leader
// label and names nothing else, so the Deployment's labels stay; a
// replica's patch at start removes it.
func TestLeaderLabelPatch(t *testing.T) {
	for leading, want := range map[bool]string{
		true:  `{"metadata":{"labels":{"capstan.dev/leader":"true"}}}`,
		false: `{"metadata":{"labels":{"capstan.dev/leader":null}}}`,
	} {
		if got := string(leaderLabelPatch(leading)); got != want {
			t.Errorf("leading %v: the patch is %s, want %s", leading, got, want)
		}
	}
}

func parseControllerFlags(t *testing.T, args ...string) *controllerOptions {
	t.Helper()
	o := &controllerOptions{}
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestNoClusterIsNotANamespaceProblem: without a kubeconfig, or with a
// --context it does not hold, a command that reads its namespace from
// the context says the cluster is missing, not "give --namespace", which
// would only fail next.
func TestNoClusterIsNotANamespaceProblem(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: a, context: {cluster: c, user: u, namespace: team}}]
current-context: a
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, c := range []struct {
		name, env, context, want string
	}{
		{"no kubeconfig", "", "", "no cluster to talk to"},
		{"an unknown context", path, "nope", `context "nope" does not exist`},
		{"the current context", path, "", ""},
	} {
		t.Setenv("KUBECONFIG", c.env)
		ns, err := contextNamespace(kubeConfig("", c.context), "")
		switch {
		case c.want == "" && (err != nil || ns != "team"):
			t.Errorf("%s: %q, %v; want team", c.name, ns, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "give --namespace")):
			t.Errorf("%s: %v; want an error saying %q, not asking for --namespace", c.name, err, c.want)
		}
	}
}

// TestFetchLoopbackOnlyIsAHiddenTestFlag: --fetch-loopback-only makes the
// controller's fetch guard loopback-only, for the tests that start the
// binary, and --help does not show it; without it the guard is as before.
func TestFetchLoopbackOnlyIsAHiddenTestFlag(t *testing.T) {
	if o := parseControllerFlags(t); o.guard.LoopbackOnly {
		t.Errorf("without --fetch-loopback-only the controller's guard is loopback-only")
	}
	o := parseControllerFlags(t, "--fetch-loopback-only")
	if !o.guard.LoopbackOnly {
		t.Errorf("--fetch-loopback-only did not make the controller's guard loopback-only")
	}
	// The remote clusters' guard, built from the fetch guard, is too.
	if remote, err := remoteGuard([]string{"127.0.0.1/32"}, o.guard); err != nil || !remote.LoopbackOnly {
		t.Errorf("with --fetch-loopback-only the remote clusters' guard: %+v, %v; want it loopback-only", remote, err)
	}
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	(&controllerOptions{}).addFlags(fs)
	if usage := fs.FlagUsages(); strings.Contains(usage, "loopback-only") {
		t.Errorf("--help shows the tests' flag:\n%s", usage)
	}
}
