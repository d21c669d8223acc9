// Package testcluster runs a real local Kubernetes control plane: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok, which
// plays the nodes and the pods. Tests and `capstan dev` use it for everything
// that the API server decides. docs/testcluster.md describes it.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The components of the control plane, as errors and log files name them.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// Components lists every component in the order Start starts them.
var Components = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok}

// Settings of the cluster that tests may rely on.
const (
	// ServiceCIDR is the Service IP range. It is a /16 because a /24 runs
	// out after 254 Services.
	ServiceCIDR = "10.96.0.0/16"
	// PodCIDR is the range kwok gives pod IPs from. Nothing listens there.
	PodCIDR = "10.244.0.0/16"
	// AdminUser is the user that Config authenticates as; it is in the
	// system:masters group.
	AdminUser = "capstan-testcluster-admin"
	// NodeAnnotation marks the nodes that kwok plays (value "fake").
	NodeAnnotation = "kwok.x-k8s.io/node"
	// FailLabel, set to "true" on a pod (or a Job's pod template), makes
	// kwok move the running pod to phase Failed instead of Succeeded.
	FailLabel = "capstan.dev/test-fail"
	// ExitCodeAnnotation sets the exit code of a pod failed by FailLabel;
	// the default is 1.
	ExitCodeAnnotation = "capstan.dev/test-exit-code"
)

// nodeLeaseSeconds is kwok's node lease duration. With kwok renewing the
// lease, the node lifecycle controller keeps the node Ready; without it the
// node turns NotReady after about 50 s and every pod with it.
const nodeLeaseSeconds = 40

// pollInterval is how often Start checks whether a step is done.
const pollInterval = 100 * time.Millisecond

// Cluster is a running control plane. Stop ends it.
type Cluster struct {
	// Config authenticates as AdminUser, who may do anything.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for AdminUser.
	Kubeconfig string
	// Dir is the cluster's folder: certificates, kubeconfigs, etcd's data
	// and the logs (logs/<component>.log).
	Dir string
	// BinDir is the folder the binaries ran from.
	BinDir string
	// EtcdURL is etcd's client address, plain HTTP on loopback: a test
	// writes there what the API server would refuse, such as an object
	// stored under an older schema.
	EtcdURL string
	// Nodes names the fake nodes that kwok plays.
	Nodes []string
	// Egress is the guard that every connection kube-apiserver makes
	// toward the cluster passes through; see egress.go.
	Egress *Egress

	opts     options
	ca       *authority
	host     string
	procsMu  sync.Mutex
	procs    []*process
	stopOnce sync.Once
	// egressDir is a folder of the egress socket's own, when the cluster's
	// folder is too deep for a socket path.
	egressDir string
}

// Start runs a control plane on free loopback ports in a new temporary
// folder, and returns once it is ready: the API server answers /readyz, the
// default namespace has its default service account, the scheduler is
// healthy and every fake node is Ready. If anything fails, Start returns a
// *ComponentError naming the component, with the end of its log, and leaves
// no process behind. A context without a deadline is bounded to 90 s.
func Start(ctx context.Context, opts ...Option) (*Cluster, error) {
	o, err := resolveOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(o.binDir); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, o)
		// NOTE: a free port is found by binding and closing it, so another
		// process may take it before the component binds it. That is rare
		// and not the caller's fault, so Start tries again with new ports.
		if err != nil && attempt < 3 && o.apiServerPort == 0 && ctx.Err() == nil && isPortClash(err) {
			o.report("a port was taken before its component bound it; starting again on new ports")
			continue
		}
		return c, err
	}
}

func start(ctx context.Context, o options) (_ *Cluster, err error) {
	began := time.Now()
	dir, err := os.MkdirTemp(o.baseDir, "capstan-testcluster-")
	if err != nil {
		return nil, fmt.Errorf("testcluster: creating the cluster folder: %w", err)
	}
	c := &Cluster{Dir: dir, BinDir: o.binDir, opts: o}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, sub := range []string{"pki", "logs", "home", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("testcluster: creating %s: %w", sub, err)
		}
	}
	ports, err := FreePorts(5)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeerPort, apiPort, cmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	if o.apiServerPort != 0 {
		apiPort = o.apiServerPort
	}
	c.host = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))

	files, err := c.writeFiles()
	if err != nil {
		return nil, err
	}

	etcdURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort))
	c.EtcdURL = etcdURL
	etcdPeerURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPeerPort))
	etcd, err := c.run(Etcd,
		"--name=capstan",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+etcdPeerURL,
		"--initial-advertise-peer-urls="+etcdPeerURL,
		"--initial-cluster=capstan="+etcdPeerURL,
		// A test cluster's data is thrown away, so waiting for the disk
		// only slows every write down.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := c.waitUntil(ctx, etcd, "etcd to report healthy", func(ctx context.Context) error {
		return getOK(ctx, plain, etcdURL+"/health")
	}); err != nil {
		return nil, err
	}
	o.report("etcd is healthy (%s)", since(began))

	auditFlags, err := c.auditFiles()
	if err != nil {
		return nil, err
	}
	egressFlag, err := c.startEgress()
	if err != nil {
		return nil, err
	}
	apiserver, err := c.run(KubeAPIServer, append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--tls-cert-file=" + files.apiserverCert,
		"--tls-private-key-file=" + files.apiserverKey,
		"--client-ca-file=" + files.caCert,
		// The aggregation layer, for charts that register an APIService,
		// with a CA of its own as a real cluster has.
		"--requestheader-client-ca-file=" + files.frontProxyCACert,
		"--requestheader-allowed-names=" + frontProxyUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + files.frontProxyCert,
		"--proxy-client-key-file=" + files.frontProxyKey,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + files.saPublic,
		"--service-account-signing-key-file=" + files.saPrivate,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// NOTE: the API server refuses to publish a loopback address as the
		// endpoint of the kubernetes Service, and no pod runs to call it.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=" + strconv.FormatBool(o.profiling),
		egressFlag,
		// kwok gives a node its name as its Hostname address, which the
		// egress guard would not resolve; its InternalIP is loopback.
		"--kubelet-preferred-address-types=InternalIP",
	}, auditFlags...)...)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return nil, fmt.Errorf("testcluster: building the admin HTTP client: %w", err)
	}
	httpClient.Timeout = 5 * time.Second
	if err := c.waitUntil(ctx, apiserver, "kube-apiserver to answer /readyz", func(ctx context.Context) error {
		return getOK(ctx, httpClient, c.host+"/readyz")
	}); err != nil {
		return nil, err
	}
	o.report("kube-apiserver is ready at %s (%s)", c.host, since(began))

	cm, err := c.run(KubeControllerManager,
		"--kubeconfig="+files.controllerManagerKubeconfig,
		"--authentication-kubeconfig="+files.controllerManagerKubeconfig,
		"--authorization-kubeconfig="+files.controllerManagerKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(cmPort),
		"--tls-cert-file="+files.controllerManagerCert,
		"--tls-private-key-file="+files.controllerManagerKey,
		"--leader-elect=false",
		// Every controller acts as its own service account, as in a real
		// cluster, so RBAC decides what each may do.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+files.saPrivate,
		"--root-ca-file="+files.caCert,
		"--cluster-signing-cert-file="+files.caCert,
		"--cluster-signing-key-file="+files.caKey,
		"--service-cluster-ip-range="+ServiceCIDR,
		// Its default is a system folder, which it would create.
		"--flex-volume-plugin-dir="+filepath.Join(dir, "flexvolume"),
		// Without these the simulated cluster, not Capstan, is what a
		// benchmark with hundreds of Deployments measures.
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--concurrent-deployment-syncs=50",
		"--concurrent-replicaset-syncs=50",
		"--concurrent-job-syncs=50",
		"--concurrent-gc-syncs=50",
		"--concurrent-namespace-syncs=20",
		"--concurrent-serviceaccount-token-syncs=20",
	)
	if err != nil {
		return nil, err
	}
	scheduler, err := c.run(KubeScheduler,
		"--config="+files.schedulerConfig,
		"--authentication-kubeconfig="+files.schedulerKubeconfig,
		"--authorization-kubeconfig="+files.schedulerKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(schedPort),
		"--tls-cert-file="+files.schedulerCert,
		"--tls-private-key-file="+files.schedulerKey,
	)
	if err != nil {
		return nil, err
	}
	kwok, err := c.run(Kwok,
		"--kubeconfig="+files.kwokKubeconfig,
		"--config="+files.kwokStages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+NodeAnnotation+"=fake",
		"--node-lease-duration-seconds="+strconv.Itoa(nodeLeaseSeconds),
		"--cidr="+PodCIDR,
		"--node-ip=127.0.0.1",
	)
	if err != nil {
		return nil, err
	}

	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("testcluster: building the admin client: %w", err)
	}
	for i := range o.nodes {
		c.Nodes = append(c.Nodes, fmt.Sprintf("kwok-node-%d", i))
	}
	if err := c.waitUntil(ctx, apiserver, "the fake nodes to be created", func(ctx context.Context) error {
		return createNodes(ctx, client, c.Nodes)
	}); err != nil {
		return nil, err
	}
	if err := c.waitUntil(ctx, kwok, "kwok to make every fake node Ready", func(ctx context.Context) error {
		return nodesReady(ctx, client, c.Nodes)
	}); err != nil {
		return nil, err
	}
	o.report("%d fake node(s) Ready (%s)", len(c.Nodes), since(began))
	if err := c.waitUntil(ctx, cm, "the default service account in namespace default", func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if err := c.waitUntil(ctx, cm, "kube-controller-manager to answer /healthz", func(ctx context.Context) error {
		return getOK(ctx, httpClient, "https://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(cmPort))+"/healthz")
	}); err != nil {
		return nil, err
	}
	if err := c.waitUntil(ctx, scheduler, "kube-scheduler to answer /healthz", func(ctx context.Context) error {
		return getOK(ctx, httpClient, "https://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(schedPort))+"/healthz")
	}); err != nil {
		return nil, err
	}
	o.report("ready in %s; kubeconfig: %s", since(began), c.Kubeconfig)
	return c, nil
}

// Stop ends every process the cluster started (SIGTERM to each process
// group, SIGKILL after 5 s) and removes the cluster's folder, unless it is
// kept. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		defer c.stopEgress()
		// The clients of the API server go first, together; then the API
		// server, so that it does not spend its shutdown retrying etcd.
		var wg sync.WaitGroup
		for _, p := range c.procs {
			if p.name != KubeAPIServer && p.name != Etcd {
				wg.Go(p.stop)
			}
		}
		wg.Wait()
		for _, name := range []string{KubeAPIServer, Etcd} {
			for _, p := range c.procs {
				if p.name == name {
					p.stop()
				}
			}
		}
		if c.opts.keepDir {
			c.opts.report("stopped; kept %s (logs in %s)", c.Dir, filepath.Join(c.Dir, "logs"))
			return
		}
		_ = os.RemoveAll(c.Dir)
	})
}

// LogPath returns the path of a component's log file.
func (c *Cluster) LogPath(component string) string {
	return filepath.Join(c.Dir, "logs", component+".log")
}

// ConfigFor returns a client configuration that authenticates as user in
// groups, with a client certificate that the cluster's CA signs. The API
// server adds system:authenticated. For a service account, pass its user
// name, system:serviceaccount:<namespace>:<name>; the groups
// system:serviceaccounts and system:serviceaccounts:<namespace> are added.
func (c *Cluster) ConfigFor(user string, groups ...string) *rest.Config {
	groups = withServiceAccountGroups(user, groups)
	pair, err := c.ca.client(user, groups)
	if err != nil {
		// NOTE: issuing a certificate only fails if the system's random
		// source does, which Go treats as fatal anyway.
		panic(fmt.Sprintf("testcluster: issuing a client certificate for %q: %v", user, err))
	}
	return c.restConfig(pair)
}

// withServiceAccountGroups adds the groups that the API server gives a
// service account to groups, if user is one and they are missing.
func withServiceAccountGroups(user string, groups []string) []string {
	const prefix = "system:serviceaccount:"
	remainder, ok := strings.CutPrefix(user, prefix)
	if !ok {
		return groups
	}
	namespace, name, ok := strings.Cut(remainder, ":")
	if !ok || namespace == "" || name == "" || strings.Contains(name, ":") {
		return groups
	}
	out := append([]string(nil), groups...)
	for _, g := range []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace} {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

func (c *Cluster) restConfig(pair keyPair) *rest.Config {
	return &rest.Config{
		Host: c.host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.ca.certPEM,
			CertData: pair.certPEM,
			KeyData:  pair.keyPEM,
		},
		// Tests create objects in bursts; client-go's default of 5 requests
		// a second would make them measure the client's rate limiter.
		QPS:   200,
		Burst: 400,
	}
}

// run starts a component from the bin folder with its log in logs/.
func (c *Cluster) run(component string, args ...string) (*process, error) {
	env := []string{
		"HOME=" + filepath.Join(c.Dir, "home"),
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"TMPDIR=" + os.TempDir(),
	}
	p, err := startProcess(component, filepath.Join(c.BinDir, component), c.LogPath(component), args, env)
	if err != nil {
		return nil, err
	}
	c.procsMu.Lock()
	c.procs = append(c.procs, p)
	c.procsMu.Unlock()
	return p, nil
}

// waitUntil polls check until it returns nil. It fails at once, blaming the
// component, when any started process exits; and it blames blame when ctx
// ends first.
func (c *Cluster) waitUntil(ctx context.Context, blame *process, what string, check func(context.Context) error) error {
	began := time.Now()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		for _, p := range c.procs {
			if p.exited() {
				return p.failure(p.exitError())
			}
		}
		lastErr := check(ctx)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.Canceled) {
				return fmt.Errorf("testcluster: start canceled while waiting for %s", what)
			}
			return blame.failure(fmt.Errorf("not ready: waited %s for %s; the last check said: %v", since(began), what, lastErr))
		case <-ticker.C:
		}
	}
}

// checkBinaries fails, naming each missing component, if a binary is not in
// binDir or cannot be executed.
func checkBinaries(binDir string) error {
	var missing []string
	for _, name := range Components {
		info, err := os.Stat(filepath.Join(binDir, name))
		if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &ComponentError{
		Component: strings.Join(missing, ", "),
		Err:       fmt.Errorf("%w: no executable in %s; run `make bin` to build the control plane (about 10 minutes the first time)", ErrBinariesMissing, binDir),
	}
}

// ErrBinariesMissing says that bin/ lacks a control plane binary.
var ErrBinariesMissing = errors.New("control plane binary missing")

// createNodes creates the fake nodes that do not exist yet.
func createNodes(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, name := range names {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{NodeAnnotation: "fake"},
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
		}}
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// nodesReady returns nil once every named node is Ready and has no taint
// that keeps pods off it.
func nodesReady(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, name := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s is not Ready yet", name)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				return fmt.Errorf("node %s still has the taint %s", name, taint.Key)
			}
		}
	}
	return nil
}

// getOK returns nil when a GET of url answers 200.
func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// FreePorts returns n distinct free loopback ports. It holds every listener
// until all are chosen, so the ports differ from each other.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testcluster: finding a free loopback port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// isPortClash reports whether a component failed because its port was taken.
func isPortClash(err error) bool {
	var ce *ComponentError
	return errors.As(err, &ce) && strings.Contains(ce.LogTail, "address already in use")
}

func (o options) report(format string, args ...any) {
	if o.progress != nil {
		fmt.Fprintf(o.progress, "testcluster: "+format+"\n", args...)
	}
}

func since(t time.Time) time.Duration {
	return time.Since(t).Round(10 * time.Millisecond)
}
