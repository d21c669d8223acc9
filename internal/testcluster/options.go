package testcluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment variables that change how Start behaves without changing code.
const (
	// EnvBinDir names the folder that holds the control plane binaries. It
	// wins over the bin/ folder found above the working directory.
	EnvBinDir = "CAPSTAN_BIN_DIR"
	// EnvKeep, when "1" or "true", keeps the cluster's folder (its logs, its
	// certificates and etcd's data) after Stop, and prints where it is.
	EnvKeep = "CAPSTAN_TESTCLUSTER_KEEP"
	// EnvVerbose, when "1" or "true", prints progress lines to stderr.
	EnvVerbose = "CAPSTAN_TESTCLUSTER_VERBOSE"
	// EnvProfiling, when "1" or "true", serves kube-apiserver's
	// /debug/pprof, to see where the API server spends its time under a
	// benchmark's load. It is off by default, as in a hardened cluster.
	EnvProfiling = "CAPSTAN_TESTCLUSTER_PROFILING"
)

// moduleLine is the go.mod line that marks the root of the Capstan module.
const moduleLine = "module capstan.dev/capstan"

// defaultStartTimeout bounds Start when its context has no deadline.
const defaultStartTimeout = 90 * time.Second

// Option changes how Start runs the control plane.
type Option func(*options)

type options struct {
	binDir        string
	baseDir       string
	apiServerPort int
	nodes         int
	keepDir       bool
	profiling     bool
	progress      io.Writer
	egressReport  func(Refusal)
}

// WithBinDir runs the binaries in dir instead of the repository's bin/.
func WithBinDir(dir string) Option { return func(o *options) { o.binDir = dir } }

// WithBaseDir creates the cluster's folder under dir instead of the system's
// temporary folder.
func WithBaseDir(dir string) Option { return func(o *options) { o.baseDir = dir } }

// WithAPIServerPort serves the API on this loopback port instead of a free
// one, for a kubeconfig that stays the same from one run to the next.
func WithAPIServerPort(port int) Option { return func(o *options) { o.apiServerPort = port } }

// WithNodes sets how many fake nodes kwok plays; the default is one.
func WithNodes(n int) Option { return func(o *options) { o.nodes = n } }

// WithKeepDir keeps the cluster's folder after Stop, for reading the logs.
func WithKeepDir(keep bool) Option { return func(o *options) { o.keepDir = keep } }

// WithProgress writes one line per start step, and where the kubeconfig is,
// to w.
func WithProgress(w io.Writer) Option { return func(o *options) { o.progress = w } }

// WithEgressReport calls report for the first refusal of each destination
// by the egress guard, so that a person sees why a webhook or an aggregated
// API cannot be reached. Every refusal is also in logs/egress.log.
func WithEgressReport(report func(Refusal)) Option {
	return func(o *options) { o.egressReport = report }
}

// resolveOptions applies the defaults, then the environment, then opts: an
// explicit option wins over the environment, so a test that points at a
// broken bin folder gets it even when `make test` sets CAPSTAN_BIN_DIR.
func resolveOptions(opts []Option) (options, error) {
	o := options{nodes: 1}
	o.binDir = os.Getenv(EnvBinDir)
	for _, opt := range opts {
		opt(&o)
	}
	if isTrue(os.Getenv(EnvKeep)) {
		o.keepDir = true
	}
	if isTrue(os.Getenv(EnvProfiling)) {
		o.profiling = true
	}
	if isTrue(os.Getenv(EnvVerbose)) && o.progress == nil {
		o.progress = os.Stderr
	}
	if o.nodes < 1 {
		return o, fmt.Errorf("testcluster: WithNodes(%d): a cluster needs at least one node", o.nodes)
	}
	if o.apiServerPort < 0 || o.apiServerPort > 65535 {
		return o, fmt.Errorf("testcluster: WithAPIServerPort(%d): a port is between 1 and 65535, or 0 for a free one", o.apiServerPort)
	}
	if o.binDir == "" {
		dir, err := repositoryBinDir()
		if err != nil {
			return o, err
		}
		o.binDir = dir
	}
	abs, err := filepath.Abs(o.binDir)
	if err != nil {
		return o, fmt.Errorf("testcluster: resolving the bin folder %q: %w", o.binDir, err)
	}
	o.binDir = abs
	return o, nil
}

func isTrue(s string) bool {
	b, err := strconv.ParseBool(s)
	return err == nil && b
}

// repositoryBinDir finds bin/ in the root of the Capstan module, looking up
// from the working directory. Tests run in their package's folder, and
// `capstan dev` runs from the checkout, so both find it.
func repositoryBinDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testcluster: finding the working directory: %w", err)
	}
	for dir := wd; ; {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && declaresCapstanModule(data) {
			return filepath.Join(dir, "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("testcluster: no Capstan checkout (a go.mod with %q) above %s to find bin/ in; run from the checkout or set %s to the folder that `make bin` filled", moduleLine, wd, EnvBinDir)
}

func declaresCapstanModule(goMod []byte) bool {
	for line := range bytes.Lines(goMod) {
		if strings.TrimSpace(string(line)) == moduleLine {
			return true
		}
	}
	return false
}
