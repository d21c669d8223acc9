package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testcluster"
)

func newDevCommand() *cobra.Command {
	var binDir string
	var keep bool
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run Capstan on a local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)",
		Long: `dev starts a local control plane from the binaries in bin/ (make bin builds
them), installs Capstan's CRDs and RBAC, and runs the controller as its own
service account. Ctrl-C stops everything and leaves nothing running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), binDir, keep, o)
		},
	}
	cmd.Flags().StringVar(&binDir, "bin-dir", "", "Folder of the control plane's binaries (default: bin/ of this checkout, or $CAPSTAN_BIN_DIR).")
	cmd.Flags().BoolVar(&keep, "keep", false, "Keep the control plane's folder (logs, etcd data) after it stops.")
	// NOTE: the controller's flags but --namespace and --kubeconfig: capstan
	// dev runs the controller in install.Namespace of the control plane it
	// starts, so those two would be shown in --help and ignored.
	controllerFlags := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	o.addFlags(controllerFlags)
	controllerFlags.VisitAll(func(f *pflag.Flag) {
		if f.Name != "namespace" && f.Name != "kubeconfig" {
			cmd.Flags().AddFlag(f)
		}
	})
	// capstan dev's own defaults: loopback only, and file:// git for the
	// samples. Each is the default --help shows, too.
	for flag, value := range map[string]string{
		"metrics-bind-address":      "127.0.0.1:8443",
		"health-probe-bind-address": "127.0.0.1:8081",
		"http-bind-address":         "127.0.0.1:8080",
		"allow-file-git":            "true",
		"fetch-allow":               "127.0.0.0/8",
		"notify-allow":              "127.0.0.0/8",
	} {
		_ = cmd.Flags().Set(flag, value)
		f := cmd.Flags().Lookup(flag)
		f.DefValue, f.Changed = f.Value.String(), false
	}
	return cmd
}

func runDev(ctx context.Context, binDir string, keep bool, o *controllerOptions) error {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	silenceHelmLog()
	if err := o.prepare(); err != nil {
		return err
	}
	if err := checkDevAddresses(o); err != nil {
		return err
	}
	opts := []testcluster.Option{
		testcluster.WithProgress(os.Stderr),
		testcluster.WithKeepDir(keep),
		testcluster.WithEgressReport(egressReporter(os.Stderr)),
	}
	if binDir != "" {
		opts = append(opts, testcluster.WithBinDir(binDir))
	}
	fmt.Fprintln(os.Stderr, "Starting the local control plane...")
	cluster, err := testcluster.Start(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "Stopping the local control plane...")
		cluster.Stop()
	}()
	admin, err := client.New(cluster.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "Installing Capstan's CRDs and RBAC...")
	if err := install.Apply(ctx, admin, false); err != nil {
		return err
	}
	names, err := installSamples(ctx, admin, cluster.Dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Created the sample Addons %s, from a local git repository in %s.\n", strings.Join(names, " and "), filepath.Join(cluster.Dir, "gitops"))
	kubeconfig := filepath.Join(cluster.Dir, "kubeconfig")
	if err := copyFile(cluster.Kubeconfig, kubeconfig); err != nil {
		kubeconfig = cluster.Kubeconfig
	}
	kubectl := "kubectl"
	if _, err := os.Stat(filepath.Join(cluster.BinDir, "kubectl")); err == nil {
		kubectl = filepath.Join(cluster.BinDir, "kubectl")
	}
	tokenFile, err := devAdminToken(ctx, cluster)
	if err != nil {
		return err
	}
	web := devWebURL(o.httpAddr)
	fmt.Print(`
Capstan is running on a local control plane. Ctrl-C stops everything.
`)
	if web != "" {
		fmt.Printf(`
  The web page: %s/ (a self-signed certificate)
  Sign in with the cluster-admin token in %s
`, web, tokenFile)
	}
	fmt.Printf(`

  export KUBECONFIG=%s
  %s get addons,nodes -A
  %s wait --for=condition=Ready addon/hello -n capstan-system
  bin/capstan addon get hello-kustomize -n capstan-system --diff   # waits for approval; prints the next command
  bin/capstan addon sync hello-kustomize -n capstan-system --plan sha256:…   # approves exactly that plan

`, kubeconfig, kubectl, kubectl)
	if web != "" {
		fmt.Printf(`  The API (docs/api.md), as a namespace viewer:
  %s create sa alice -n capstan-system
  %s create rolebinding alice -n capstan-system --clusterrole=view --serviceaccount=capstan-system:alice
  curl -sk -H "Authorization: Bearer $(%s create token alice -n capstan-system)" %s/api/v1/namespaces/capstan-system/addons

`, kubectl, kubectl, kubectl, web)
	}
	o.config.Namespace = install.Namespace
	err = runController(ctx, cluster.ConfigFor(install.ControllerUser), o)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// devWebURL is the address of the page and the API for a person: the
// host of --http-bind-address, or 127.0.0.1 when it names none; "" when
// the endpoint is off.
func devWebURL(addr string) string {
	if addr == "" || addr == "0" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "https://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, port)
}

// checkDevAddresses listens on each address the controller will serve on,
// and lets go again, before anything starts. A port another program holds
// (8080 often is) would otherwise end the run only after the control plane
// has started and the walkthrough has been printed, with a bare "address
// already in use". The check cannot hold the port for the controller, so a
// program that takes it in the seconds between still ends the run then.
func checkDevAddresses(o *controllerOptions) error {
	for _, a := range []struct{ flag, addr string }{
		{"--http-bind-address", o.httpAddr},
		{"--metrics-bind-address", o.metricsAddr},
		{"--health-probe-bind-address", o.probeAddr},
		{"--pprof-bind-address", o.pprofAddr},
	} {
		if a.addr == "" || a.addr == "0" {
			continue
		}
		l, err := net.Listen("tcp", a.addr)
		if err != nil {
			return fmt.Errorf("capstan dev serves on %s (%s), and cannot listen there: %w; "+
				"stop the program that holds it, or choose another address: make dev DEV_ARGS=%s=%s",
				a.addr, a.flag, err, a.flag, otherPort(a.addr))
		}
		_ = l.Close()
	}
	return nil
}

// otherPort suggests an address beside addr: the same host, the port
// 10000 higher when that is a port, else a free one the system picks.
func otherPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "127.0.0.1:0"
	}
	if n, err := strconv.Atoi(port); err == nil && n+10000 <= 65535 {
		return net.JoinHostPort(host, strconv.Itoa(n+10000))
	}
	return net.JoinHostPort(host, "0")
}

// egressReporter prints the egress guard's first refusal of each
// destination in a short form. Without it, a chart's webhook or APIService
// would only fail with the API server's "failed calling webhook", and a
// person would not see that the local control plane has no pod to answer.
func egressReporter(w io.Writer) func(testcluster.Refusal) {
	return func(r testcluster.Refusal) {
		fmt.Fprintf(w, "egress guard: %s (later refusals of it go to logs/egress.log only)\n", r)
	}
}

// devAdminToken makes a ServiceAccount bound to cluster-admin and writes a
// token of it, valid for a day, to a file only the owner reads: the sign-in
// of the page of capstan dev. The token never goes into a URL or the terminal.
func devAdminToken(ctx context.Context, cluster *testcluster.Cluster) (string, error) {
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return "", err
	}
	const name = "capstan-dev-admin"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: install.Namespace}}
	if _, err := cs.CoreV1().ServiceAccounts(install.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating the dev admin account: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: install.Namespace}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("binding the dev admin account: %w", err)
	}
	day := int64(24 * 60 * 60)
	tr, err := cs.CoreV1().ServiceAccounts(install.Namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("issuing the dev admin token: %w", err)
	}
	path := filepath.Join(cluster.Dir, "admin-token")
	if err := os.WriteFile(path, []byte(tr.Status.Token+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

func copyFile(from, to string) error {
	if from == to {
		return nil
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
