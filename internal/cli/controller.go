package cli

import (
	"context"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/controller"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/notify"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/server"
	"capstan.dev/capstan/internal/source"
)

// controllerOptions are the flags of `capstan controller`.
type controllerOptions struct {
	config         controller.Config
	guard          netguard.Config
	caFile         string
	metricsAddr    string
	probeAddr      string
	pprofAddr      string
	leaderElect    bool
	leaderElectID  string
	allowFileGit   bool
	sourceLimits   source.Limits
	gitBudget      string
	kubeconfig     string
	maxConcurrency int
	httpAddr       string
	tlsCertFile    string
	tlsKeyFile     string
	watchSelector  string
	renderTimeout  time.Duration
	pageFetch      time.Duration
	renderMemory   string
	renderWorkers  int
	renderInline   bool
	notifySecrets  []string
	notifyAllow    []string
	skipCRDCheck   bool
	// crdCheckInterval is how often a controller held by CRDs of another
	// version reads them again (0: every 10 s).
	crdCheckInterval time.Duration
}

func (o *controllerOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.config.Namespace, "namespace", envOr("POD_NAMESPACE", "capstan-system"), "The controller's own namespace.")
	addPlanConfigFlags(fs, &o.config)
	fs.DurationVar(&o.config.ResyncInterval, "resync-interval", 5*time.Minute, "How often an add-on is reconciled without a change.")
	fs.DurationVar(&o.config.DriftDelay, "drift-delay", 5*time.Second, "How soon after an applied object is changed or deleted behind Capstan's back its add-on is reconciled (0 means 5s; a negative duration, such as -1s, leaves drift to the resync).")
	fs.DurationVar(&o.config.HookTimeout, "hook-timeout", 10*time.Minute, "Default bound of one Helm hook.")
	fs.DurationVar(&o.config.HookWait, "hook-wait", 2*time.Second, "How long one reconcile waits for a Job or Pod hook that still runs before it frees its worker; the add-on is looked at again when the hook changes. Negative waits within the reconcile until the hook ends.")
	fs.IntVar(&o.config.MaxObjects, "max-objects-per-addon", controller.DefaultMaxObjects, "The most objects, hooks included, one add-on may render; past it the add-on fails before anything is applied.")
	fs.Float64Var(&o.config.PruneApprovalThreshold, "prune-approval-threshold", 0.5, "The share of an add-on's inventory one sync may prune without an approval; 1 turns the gate off.")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM certificates to trust for chart repositories, registries and git, besides the system's.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of Go's /debug/pprof profiles, for finding where time and memory go; 0 (the default) disables it.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, for more than one replica.")
	fs.StringVar(&o.leaderElectID, "leader-election-id", defaultLeaderElectionID, "The name of the Lease, in --namespace, that --leader-elect holds: give each controller sharing a namespace one of its own.")
	fs.IntVar(&o.sourceLimits.MaxFiles, "max-source-files", source.DefaultLimits.MaxFiles, "The most files of one chart (its subcharts' included) or one git repository's commit: the whole repository counts, not only spec.git.path.")
	fs.Int64Var(&o.sourceLimits.MaxUncompressedBytes, "max-source-bytes", source.DefaultLimits.MaxUncompressedBytes, "The most bytes of one chart's files (its subcharts' included) or one git repository's commit, which the controller holds in memory and caches.")
	fs.StringVar(&o.gitBudget, "git-memory-budget", resource.NewQuantity(source.DefaultGitMemoryBudget, resource.BinarySI).String(),
		"The most memory the git data of all fetches (Addons' git folders, the AddonRepository syncer's and the commits' clones) may hold at once, as a Kubernetes quantity; "+
			"a fetch past it while others hold it fails and is retried, and one that needs more than the whole budget alone is refused as too large. At least 32Mi.")
	fs.BoolVar(&o.allowFileGit, "allow-file-git", false, "Allow file:// git URLs, which read the controller's filesystem (development only).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "A kubeconfig file; default: $KUBECONFIG, else ~/.kube/config, else in-cluster, as kubectl.")
	fs.IntVar(&o.maxConcurrency, "max-concurrent-reconciles", 8, "Addons reconciled at once.")
	fs.IntVar(&o.config.MaxConcurrentPerTenant, "max-concurrent-per-tenant", -1, "The most Addons of one restricted-profile (tenant) namespace reconciled at once; another waits, requeued, while the others' run. "+
		"Cluster-profile Addons are never held back. -1 means a quarter of --max-concurrent-reconciles, at least 1; 0 turns the share off.")
	fs.StringVar(&o.httpAddr, "http-bind-address", ":8080", "Address of the HTTPS endpoint: the API (/api/v1/) and git push webhooks (/hooks/git/NAMESPACE/NAME); 0 disables it.")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "The HTTPS endpoint's certificate (PEM); with neither file, a self-signed certificate is made at start.")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "The private key of --tls-cert-file (PEM).")
	fs.StringSliceVar(&o.notifySecrets, "notify-secret", nil, "A Secret in the controller's namespace that names a webhook to post each add-on's transitions to (keys url, and format, severity, token, hmacKey; see docs/notifications.md). Repeat it for more receivers.")
	fs.StringVar(&o.watchSelector, "watch-label-selector", "", "Reconcile only the Addons and AddonRepositories whose labels match, to run shards, such as capstan.dev/shard=a (and !capstan.dev/shard for the main controller).")
	fs.DurationVar(&o.renderTimeout, "render-timeout", render.DefaultRenderTimeout, "The longest one chart's templates may run; past it the render is stopped and the add-on fails.")
	fs.DurationVar(&o.pageFetch, "page-fetch-timeout", server.DefaultFetchTimeout, "The longest the page's chart forms and the API's plans on demand wait for a chart or git tree; past it the fetch is stopped and the request fails (the reconciles' fetches keep --fetch-timeout).")
	fs.StringVar(&o.renderMemory, "render-memory-limit", "512Mi", "The most memory one render worker may use, as a Kubernetes quantity; past it the render is stopped and the add-on fails.")
	fs.IntVar(&o.renderWorkers, "render-workers", 0, "Renders that run at once, each in a worker process; 0 means the number of CPUs (at least 2).")
	fs.BoolVar(&o.renderInline, "render-in-process", false, "Render in the controller's own process, with no time or memory bound (debugging only: a chart that loops for ever then stalls a worker for good).")
	fs.BoolVar(&o.skipCRDCheck, "skip-crd-check", false, "Start even when Capstan's CRDs on the API server are not the ones this controller was built with (unsafe: "+
		"the API server then drops status fields the controller depends on, and hooks may run again; apply the CRDs instead).")
	o.guard.AddFlags(fs)
	// NOTE: for tests alone, and hidden from --help: the tests that start
	// this binary (internal/testcontroller) must not resolve a chart's
	// public name, such as the catalog's charts.longhorn.io, nor dial it.
	fs.BoolVar(&o.guard.LoopbackOnly, "fetch-loopback-only", false,
		"For tests only: the fetch guard refuses every host but an IP literal in 127.0.0.0/8 or ::1, or localhost, before any name is resolved (loopback still needs --fetch-allow).")
	_ = fs.MarkHidden("fetch-loopback-only")
	addRemoteClusterAllowFlag(fs, &o.config.RemoteGuard.Allow)
	fs.StringSliceVar(&o.notifyAllow, "notify-allow", nil,
		"Notification receivers (--notify-secret) the egress guard lets through although it would refuse them, in the forms of --fetch-allow, such as a webhook in the cluster on a private address with --fetch-deny-private; --fetch-allow does not open them, nor does this flag open a fetch.")
}

// addPlanConfigFlags defines the flags of the controller's configuration
// that an add-on's plan depends on besides its namespace: which namespaces
// have the cluster profile, the account that applies them, and the
// platform's facts. `capstan controller` and `capstan plan` share them, so
// that a plan on demand given the controller's values is the controller's
// plan, with its hash.
func addPlanConfigFlags(fs *pflag.FlagSet, c *controller.Config) {
	fs.StringSliceVar(&c.TrustedNamespaces, "trusted-namespaces", nil, "Namespaces whose Addons use the cluster profile. Default: the controller's own namespace.")
	fs.StringVar(&c.AddonsServiceAccount, "addons-service-account", install.AddonsServiceAccount, "The service account, in the controller's namespace, that cluster-profile add-ons are applied as.")
	fs.StringVar(&c.PlatformKey, "platform-key", "capstan", "The reserved values key the controller sets last.")
	fs.StringVar(&c.PlatformConfigMap, "platform-configmap", "", "A ConfigMap in the controller's namespace whose data are the platform's facts.")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func newControllerCommand() *cobra.Command {
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the Addon controller",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseDevMode(false)))
			silenceHelmLog()
			if err := o.prepare(); err != nil {
				return err
			}
			cfg, err := restConfig(kubeConfig(o.kubeconfig, ""), o.kubeconfig)
			if err != nil {
				return err
			}
			return runController(cmd.Context(), cfg, o)
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

// prepare refuses the flags that the controller would read as something
// else, and sets the process's git memory budget from --git-memory-budget.
// `capstan controller` and `capstan dev` both call it before they start
// anything: dev takes the same flags, and without it `make dev
// DEV_ARGS=--prune-approval-threshold=0` would run with the default share
// and --git-memory-budget would go unread.
func (o *controllerOptions) prepare() error {
	if err := checkNotifySecrets(o.notifySecrets); err != nil {
		return err
	}
	if err := o.checkNamedFlags(); err != nil {
		return err
	}
	if err := checkPruneThreshold(o.config.PruneApprovalThreshold); err != nil {
		return err
	}
	if err := checkTenantShare(o.config.MaxConcurrentPerTenant); err != nil {
		return err
	}
	if err := checkWorkBounds(o.config.ResyncInterval, o.config.HookTimeout, o.maxConcurrency); err != nil {
		return err
	}
	if err := checkLeaseName(o.leaderElectID); err != nil {
		return err
	}
	if err := checkSourceLimits(o.sourceLimits); err != nil {
		return err
	}
	if err := checkRenderBounds(o.config.MaxObjects, o.renderTimeout, o.renderMemory, o.renderWorkers); err != nil {
		return err
	}
	if o.pageFetch <= 0 {
		return fmt.Errorf("--page-fetch-timeout %s: give a positive duration such as %s", o.pageFetch, server.DefaultFetchTimeout)
	}
	budget, err := gitMemoryBudget(o.gitBudget)
	if err != nil {
		return err
	}
	source.SetProcessGitBudget(budget)
	return nil
}

// kubeConfig is the kubeconfig every command talks to a cluster with,
// found in kubectl's order: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config, and a pod's own service account only when none of them
// holds a configuration. kubeContext, when set, is the context to use
// instead of the current one, as kubectl's --context.
//
// NOTE: the cluster and the namespace are read from this one
// configuration. controller-runtime's search prefers a pod's own account
// over ~/.kube/config, while kubectl's namespace does not: in a pod with a
// kubeconfig, a command would have read the namespace of one cluster and
// acted in the other.
func kubeConfig(kubeconfig, kubeContext string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
}

// restConfig is the connection of a kubeconfig found by kubeConfig. No
// client-side rate limit is set, as controller-runtime does: the API
// server's priority and fairness decides.
func restConfig(kc clientcmd.ClientConfig, kubeconfig string) (*rest.Config, error) {
	cfg, err := kc.ClientConfig()
	switch {
	case err != nil && kubeconfig != "":
		return nil, fmt.Errorf("cannot use --kubeconfig %s: %w", kubeconfig, err)
	case err != nil:
		return nil, fmt.Errorf("no cluster to talk to: %w (give --kubeconfig, set KUBECONFIG, or write ~/.kube/config)", err)
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

// renderSandbox is the sandbox of --render-timeout and
// --render-memory-limit, with workers renders at once (0: the number of
// CPUs): a chart's templates run in worker processes that are killed past
// either bound.
func renderSandbox(timeout time.Duration, memory string, workers int) (*render.Sandbox, error) {
	mem, err := resource.ParseQuantity(memory)
	if err != nil {
		return nil, fmt.Errorf("--render-memory-limit %q is not a quantity such as 512Mi: %w", memory, err)
	}
	sb, err := render.NewSandbox(render.SandboxConfig{Timeout: timeout, Memory: mem.Value(), Workers: workers})
	if err != nil {
		return nil, fmt.Errorf("--render-memory-limit: %w", err)
	}
	return sb, nil
}

// checkRenderBounds refuses --max-objects-per-addon, --render-timeout,
// --render-memory-limit and --render-workers that would be read as
// something else, before the controller waits for its cluster: the
// configuration reads 0 and below as the defaults, so a 0 meant as "no
// limit" would quietly be 5000 objects or 30 seconds, and a memory bound
// that is no quantity would only be refused once the API server answered.
func checkRenderBounds(maxObjects int, timeout time.Duration, memory string, workers int) error {
	if maxObjects <= 0 {
		return fmt.Errorf("--max-objects-per-addon %d: give a positive number of objects (the default is %d)", maxObjects, controller.DefaultMaxObjects)
	}
	if timeout <= 0 {
		return fmt.Errorf("--render-timeout %s: give a positive duration such as %s", timeout, render.DefaultRenderTimeout)
	}
	if workers < 0 {
		return fmt.Errorf("--render-workers %d: give a number of workers, or 0 for the number of CPUs", workers)
	}
	mem, err := resource.ParseQuantity(memory)
	if err != nil {
		return fmt.Errorf("--render-memory-limit %q is not a quantity such as 512Mi: %w", memory, err)
	}
	if mem.Value() < render.MinRenderMemory {
		return fmt.Errorf("--render-memory-limit %s is too small for the Go runtime and Helm: give at least 64Mi", memory)
	}
	return nil
}

// checkWorkBounds refuses --resync-interval, --hook-timeout and
// --max-concurrent-reconciles that the controller would read as something
// else: the configuration reads 0 and below as the defaults, so a
// --hook-timeout 0 meant as "no bound" would quietly stop a long
// migration hook after 10 minutes, and --max-concurrent-reconciles 0
// would quietly run one worker.
func checkWorkBounds(resync, hookTimeout time.Duration, workers int) error {
	if resync <= 0 {
		return fmt.Errorf("--resync-interval %s: give a positive duration such as 5m", resync)
	}
	if hookTimeout <= 0 {
		return fmt.Errorf("--hook-timeout %s: give a positive duration such as 10m (an Addon's spec.hookTimeout sets its own)", hookTimeout)
	}
	if workers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles %d: give a number of workers, at least 1", workers)
	}
	return nil
}

// checkSourceLimits refuses --max-source-files and --max-source-bytes that
// are not positive: zero would mean the defaults to the fetcher, which the
// person did not ask for.
func checkSourceLimits(l source.Limits) error {
	if l.MaxFiles <= 0 || l.MaxUncompressedBytes <= 0 {
		return fmt.Errorf("--max-source-files %d and --max-source-bytes %d: give positive numbers", l.MaxFiles, l.MaxUncompressedBytes)
	}
	return nil
}

// gitMemoryBudget parses --git-memory-budget, and refuses one too small
// for any repository. A budget below a fetch's own limits is allowed: it
// is then the bound of what one fetch may hold (its pack while it unpacks,
// and a commit's checkout), and a fetch past it is refused as too large,
// naming the flag, not retried.
func gitMemoryBudget(quantity string) (int64, error) {
	q, err := resource.ParseQuantity(quantity)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a quantity such as 256Mi: %w", source.GitBudgetFlag, quantity, err)
	}
	if q.Value() < source.MinGitMemoryBudget {
		return 0, fmt.Errorf("%s %s is below %dMi, too little to fetch a repository: give at least that, and the pod the memory for it",
			source.GitBudgetFlag, quantity, source.MinGitMemoryBudget>>20)
	}
	return q.Value(), nil
}

// contextNamespace is the namespace kubectl would use: the context's in
// the kubeconfig, a pod's own when there is no kubeconfig, and "default"
// when neither names one.
func contextNamespace(kc clientcmd.ClientConfig, kubeconfig string) (string, error) {
	ns, _, err := kc.Namespace()
	switch {
	case err != nil && kubeconfig != "":
		return "", fmt.Errorf("cannot use --kubeconfig %s: %w", kubeconfig, err)
	case err != nil:
		// NOTE: with no kubeconfig at all, or a --context it does not
		// hold, --namespace would not help: the cluster is missing too,
		// and restConfig says what to give for that.
		if _, cerr := restConfig(kc, kubeconfig); cerr != nil {
			return "", cerr
		}
		return "", fmt.Errorf("cannot read the namespace of the kubeconfig's context: %w; give --namespace", err)
	}
	return ns, nil
}

// silenceHelmLog discards the standard library's log, which Helm's values
// merge writes type conflicts to, values included. Capstan itself logs
// through controller-runtime's structured logger only.
func silenceHelmLog() { stdlog.SetOutput(io.Discard) }

// Scheme knows the types the controller reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := capstanv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// newNotifyGuard is the egress guard of notification receivers: the fetch
// guard's, fetch (its deny-lists, --fetch-deny-private, timeouts and
// certificate authorities), with allow, --notify-allow, as its only
// allow-list.
//
// NOTE: an address the cluster admin opens for a webhook in the cluster
// is not opened to every tenant's chart and git fetches, nor one opened
// for a mirror to the notifier; the API server's addresses stay refused,
// as for a remote cluster.
func newNotifyGuard(fetch netguard.Config, allow []string) (*netguard.Guard, error) {
	fetch.Allow = allow
	return netguard.New(fetch)
}

// checkNotifySecrets refuses a --notify-secret that cannot name a Secret,
// or that names one twice (each event would be posted twice), before
// anything starts.
func checkNotifySecrets(names []string) error {
	seen := map[string]bool{}
	for _, name := range names {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("--notify-secret %q is not a Secret's name: %s", name, strings.Join(errs, "; "))
		}
		if seen[name] {
			return fmt.Errorf("--notify-secret %q is given twice; each receiver once", name)
		}
		seen[name] = true
	}
	return nil
}

// checkPruneThreshold refuses a share of the inventory that is no share:
// the controller's configuration reads 0 as "the default", so a 0 asked
// for on the command line, meaning "approve every prune", would quietly be
// 0.5.
func checkPruneThreshold(share float64) error {
	if share <= 0 || share > 1 {
		return fmt.Errorf("--prune-approval-threshold %g is not a share of the inventory: give more than 0 and at most 1 "+
			"(a small share such as 0.001 has nearly every prune approved; 1 turns the gate off)", share)
	}
	return nil
}

// checkTenantShare refuses a --max-concurrent-per-tenant below -1: the
// controller reads every negative share as the default, so a -2 meant as
// something else would quietly be a quarter of the workers.
func checkTenantShare(share int) error {
	if share < -1 {
		return fmt.Errorf("--max-concurrent-per-tenant %d is no share: give a number of reconciles, 0 to turn the share off, "+
			"or -1 for the default (a quarter of --max-concurrent-reconciles, at least 1)", share)
	}
	return nil
}

// checkLeaseName refuses a --leader-election-id the API server would refuse
// as a Lease's name, before the controller starts and fails to elect.
func checkLeaseName(name string) error {
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Errorf("--leader-election-id %q is not a Lease's name: give at most 253 lower-case letters, digits, '-' and '.', "+
			"starting and ending with a letter or digit, such as capstan-controller-shard-a", name)
	}
	return nil
}

// runController runs the manager until ctx ends, once Capstan's CRDs are
// the ones this controller was built with. The process must end once it
// returns: with --leader-elect the manager has given up its Lease by then
// (managerOptions), and a standby may already lead.
func runController(ctx context.Context, cfg *rest.Config, o *controllerOptions) error {
	if o.skipCRDCheck {
		ctrl.Log.WithName("crd-check").Info("Not checking Capstan's CRDs (--skip-crd-check): status fields their schema lacks are dropped")
	} else {
		if err := waitForOwnCRDs(ctx, cfg, o.probeAddr, o.crdCheckInterval); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	mgr, err := newManager(ctx, cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// defaultLeaderElectionID names the Lease of --leader-elect.
//
// NOTE: the name is the same whatever --watch-label-selector says. A name
// derived from the selector gave two leaders during the rollout that
// changes it (the main release's move to !capstan.dev/shard when the
// first shard is added): the new pod took a Lease nobody held while the
// old pod still led under the other. Shards are told apart by their
// namespaces, as Leases are namespaced, or by --leader-election-id.
const defaultLeaderElectionID = "capstan-controller"

// shard is what --watch-label-selector changes: the cache sees only the
// shard's Addons and AddonRepositories, and the reconciler takes up only
// the Addons the selector matches (a nil selector matches all).
type shard struct {
	cache    cache.Options
	selector labels.Selector
}

func shardOptions(selector string) (shard, error) {
	s := shard{cache: cache.Options{DefaultTransform: controller.CacheTransform}}
	if selector == "" {
		return s, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return s, fmt.Errorf("--watch-label-selector %q is not a label selector: %w", selector, err)
	}
	s.cache.ByObject = map[client.Object]cache.ByObject{
		&capstanv1.Addon{}:           {Label: sel},
		&capstanv1.AddonRepository{}: {Label: sel},
	}
	s.selector = sel
	return s, nil
}

// uncompressed is the controller's connection without gzip. The controller
// runs beside its API server, where gzip only costs CPU at both ends: the
// API server compresses every flush of a watch that an informer opened with
// a streaming list, one or a few events at a time, and the controller
// inflates each again. A remote cluster's connection keeps compression, as
// it may cross a slow link.
func uncompressed(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	return cfg
}

// Leader election (--leader-elect) holds a Lease in the controller's
// namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=system

// managerOptions are the manager's options from the flags and the shard.
func managerOptions(o *controllerOptions, s shard) ctrl.Options {
	return ctrl.Options{
		Scheme:                 Scheme(),
		Client:                 controller.ClientOptions(),
		Cache:                  s.cache,
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		LeaderElection:         o.leaderElect,
		LeaderElectionID:       o.leaderElectID,
		// NOTE: the Lease lives in the controller's namespace; left empty,
		// controller-runtime finds it only when running in a pod.
		LeaderElectionNamespace: o.config.Namespace,
		// NOTE: a leader that stops (SIGTERM: a rollout, a drain, kubectl
		// delete pod) gives its Lease up, and a standby takes it at its
		// next look, within 4.4 s, instead of when it expires, 15 to 24 s
		// later: until then nothing reconciles, and no Pod carries
		// capstanv1.LeaderLabel, so the capstan Service has no endpoint and
		// git push webhooks fail. The manager gives the Lease up only once
		// its reconcilers and other runnables have returned, or its
		// graceful shutdown timeout (30 s) has passed, and that is safe
		// because nothing leader-only runs once mgr.Start returns:
		// runController returns at once, and the process then exits
		// (capstan dev stops its control plane first). A reconcile still
		// running past the timeout ends with the process, which exits
		// right after. A SIGKILL, or a Lease lost to the API server,
		// still leaves the Lease to expire.
		LeaderElectionReleaseOnCancel: true,
	}
}

// newManager builds the manager with every controller registered.
func newManager(ctx context.Context, cfg *rest.Config, o *controllerOptions) (ctrl.Manager, error) {
	shard, err := shardOptions(o.watchSelector)
	if err != nil {
		return nil, err
	}
	o.config.Selector = shard.selector
	cfg = uncompressed(cfg)
	mgr, err := ctrl.NewManager(cfg, managerOptions(o, shard))
	if err != nil {
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	fopts := source.Options{Guard: o.guard, AllowFileGit: o.allowFileGit, Limits: o.sourceLimits}
	fopts.Guard.Deny = append(fopts.Guard.Deny, netguard.APIServerDenyEntries(cfg.Host)...)
	// The API server's own endpoints too, read before the first fetch and
	// kept current while the controller runs.
	fopts.Guard.DenyLive = &netguard.DenyList{}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	endpoints := &apiServerEndpoints{Reader: mgr.GetAPIReader(), Clientset: clientset, Deny: fopts.Guard.DenyLive,
		Log: ctrl.Log.WithName("fetch-guard")}
	if err := endpoints.First(ctx); err != nil {
		return nil, err
	}
	if err := mgr.Add(endpoints); err != nil {
		return nil, err
	}
	if o.caFile != "" {
		fopts.CABundle, err = os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("reading --ca-file: %w", err)
		}
	}
	fetcher, err := source.NewFetcher(fopts)
	if err != nil {
		return nil, fmt.Errorf("the fetch guard's settings: %w", err)
	}
	if o.config.RemoteGuard, err = remoteGuard(o.config.RemoteGuard.Allow, fopts.Guard); err != nil {
		return nil, err
	}
	notifyGuard, err := newNotifyGuard(fetcher.Guard().Config(), o.notifyAllow)
	if err != nil {
		return nil, fmt.Errorf("--notify-allow: %w", err)
	}
	if !o.renderInline {
		var err error
		if o.config.Sandbox, err = renderSandbox(o.renderTimeout, o.renderMemory, o.renderWorkers); err != nil {
			return nil, err
		}
		if err := controller.RegisterSandboxMetrics(o.config.Sandbox); err != nil {
			return nil, err
		}
	}
	reserved := int64(0)
	if o.config.Sandbox != nil {
		reserved = o.config.Sandbox.Reserved()
	}
	setMemoryLimit(reserved, source.ProcessGitBudget().Size(), ctrl.Log.WithName("memory"))
	warnTrustedNamespaces(o.config, ctrl.Log.WithName("profile"))
	r := &controller.AddonReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		RestConfig: cfg,
		Fetcher:    fetcher,
		Hooks:      hookRunner(),
		Recorder:   mgr.GetEventRecorder("capstan"),
		Config:     o.config,
	}
	if len(o.notifySecrets) > 0 {
		r.Notifier = &notify.Notifier{
			Client:    notifyGuard.Client(),
			Receivers: notify.FromSecrets(mgr.GetAPIReader(), o.config.Namespace, o.notifySecrets),
			Log:       ctrl.Log.WithName("notify"),
			// A selector alone reaches the add-ons of every namespace the
			// cluster admin trusts, and no tenant's.
			TrustedNamespaces: o.config.WithDefaults().TrustedNamespaces,
		}
		if err := mgr.Add(r.Notifier); err != nil {
			return nil, err
		}
	}
	if err := r.SetupWithManager(mgr, o.maxConcurrency); err != nil {
		return nil, err
	}
	syncer := &controller.AddonRepositoryReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Auth: fetcher.GitAuth, Notifier: r.Notifier,
		FetchTimeout: o.guard.Timeout, Selector: o.config.Selector}
	if err := syncer.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if o.httpAddr != "0" {
		tlsConfig, certs, err := server.TLSConfig(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return nil, err
		}
		// The watcher runs on every replica, leader or not, so a standby
		// that takes over serves the current certificate.
		if certs != nil {
			if err := mgr.Add(certs); err != nil {
				return nil, err
			}
		}
		reviewer, err := kubernetes.NewForConfig(server.ReviewerConfig(cfg))
		if err != nil {
			return nil, err
		}
		// NOTE: a client, and so a limiter, of its own for the access
		// reviews, so that those callers cause cannot hold up sign-ins.
		accessReviewer, err := kubernetes.NewForConfig(server.ReviewerConfig(cfg))
		if err != nil {
			return nil, err
		}
		srv := &server.Server{
			Base: cfg, Reviewer: reviewer, AccessReviewer: accessReviewer, Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			Fetcher: fetcher, Config: o.config,
			Webhook:    &gitops.Webhook{Client: mgr.GetAPIReader(), Syncer: syncer},
			Controller: mgr.GetAPIReader(), GitAuth: fetcher.GitAuth, Syncer: syncer,
			Log: ctrl.Log.WithName("api"), FetchTimeout: o.pageFetch,
		}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			return srv.Run(ctx, o.httpAddr, tlsConfig)
		})); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	labeller := newPodLabeller(mgr.GetClient(), mgr.Elected(), ctrl.Log.WithName("leader-label"))
	if err := mgr.Add(labeller); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", readyCheck(labeller.cleared)); err != nil {
		return nil, err
	}
	return mgr, nil
}
