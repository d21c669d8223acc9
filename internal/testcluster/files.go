package testcluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// files are the paths that the components' flags name.
type files struct {
	caCert, caKey                                    string
	saPrivate, saPublic                              string
	apiserverCert, apiserverKey                      string
	controllerManagerCert, controllerManagerKey      string
	schedulerCert, schedulerKey                      string
	controllerManagerKubeconfig, schedulerKubeconfig string
	kwokKubeconfig, kwokStages                       string
	schedulerConfig                                  string
	frontProxyCACert, frontProxyCert, frontProxyKey  string
}

// frontProxyUser is the client that the API server proxies aggregated APIs as.
const frontProxyUser = "front-proxy-client"

// writeFiles creates the CA, every certificate and key, the kubeconfigs and
// kwok's stages, and sets c.Config and c.Kubeconfig.
func (c *Cluster) writeFiles() (files, error) {
	var f files
	pki := filepath.Join(c.Dir, "pki")
	ca, err := newAuthority()
	if err != nil {
		return f, fmt.Errorf("testcluster: %w", err)
	}
	c.ca = ca
	write := func(path string, data []byte) {
		if err == nil {
			err = os.WriteFile(path, data, 0o600)
		}
	}
	f.caCert, f.caKey = filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key")
	write(f.caCert, ca.certPEM)
	write(f.caKey, ca.keyPEM)
	saPrivate, saPublic, keyErr := newServiceAccountKey()
	if keyErr != nil {
		return f, fmt.Errorf("testcluster: %w", keyErr)
	}
	f.saPrivate, f.saPublic = filepath.Join(pki, "sa.key"), filepath.Join(pki, "sa.pub")
	write(f.saPrivate, saPrivate)
	write(f.saPublic, saPublic)
	if err != nil {
		return f, fmt.Errorf("testcluster: writing keys: %w", err)
	}

	frontProxyCA, err := newAuthority()
	if err != nil {
		return f, fmt.Errorf("testcluster: %w", err)
	}
	f.frontProxyCACert = filepath.Join(pki, "front-proxy-ca.crt")
	if err := os.WriteFile(f.frontProxyCACert, frontProxyCA.certPEM, 0o600); err != nil {
		return f, fmt.Errorf("testcluster: writing the front proxy CA: %w", err)
	}
	frontProxy, err := frontProxyCA.client(frontProxyUser, nil)
	if err != nil {
		return f, fmt.Errorf("testcluster: %w", err)
	}
	if f.frontProxyCert, f.frontProxyKey, err = frontProxy.write(pki, frontProxyUser); err != nil {
		return f, fmt.Errorf("testcluster: writing the front proxy client certificate: %w", err)
	}

	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	serving := []struct {
		name          string
		hosts         []string
		ips           []net.IP
		certFile, key *string
	}{
		{KubeAPIServer, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			append([]net.IP{net.IPv4(10, 96, 0, 1)}, loopback...), &f.apiserverCert, &f.apiserverKey},
		{KubeControllerManager, []string{"localhost"}, loopback, &f.controllerManagerCert, &f.controllerManagerKey},
		{KubeScheduler, []string{"localhost"}, loopback, &f.schedulerCert, &f.schedulerKey},
	}
	for _, s := range serving {
		pair, err := ca.serving(s.name, s.hosts, s.ips)
		if err != nil {
			return f, fmt.Errorf("testcluster: %w", err)
		}
		if *s.certFile, *s.key, err = pair.write(pki, s.name+"-serving"); err != nil {
			return f, fmt.Errorf("testcluster: writing the %s serving certificate: %w", s.name, err)
		}
	}

	clients := []struct {
		user   string
		groups []string
		path   *string
	}{
		{AdminUser, []string{"system:masters"}, &c.Kubeconfig},
		{"system:kube-controller-manager", nil, &f.controllerManagerKubeconfig},
		{"system:kube-scheduler", nil, &f.schedulerKubeconfig},
		// kwok writes the status of nodes and pods and deletes pods, as
		// kubelets would for their own node; for a fake node that plays many
		// kubelets at once, admin is the simple honest identity.
		{"kwok", []string{"system:masters"}, &f.kwokKubeconfig},
	}
	for _, cl := range clients {
		pair, err := ca.client(cl.user, cl.groups)
		if err != nil {
			return f, fmt.Errorf("testcluster: %w", err)
		}
		name := strings.TrimPrefix(cl.user, "system:") + ".kubeconfig"
		if cl.user == AdminUser {
			name = "kubeconfig"
		}
		*cl.path = filepath.Join(c.Dir, name)
		if err := c.writeKubeconfig(*cl.path, cl.user, pair); err != nil {
			return f, err
		}
		if cl.user == AdminUser {
			c.Config = c.restConfig(pair)
		}
	}

	// The scheduler's client limits are only settable without deprecated
	// flags in its configuration file.
	f.schedulerConfig = filepath.Join(c.Dir, "kube-scheduler.yaml")
	schedulerConfig := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, f.schedulerKubeconfig)
	if err := os.WriteFile(f.schedulerConfig, []byte(schedulerConfig), 0o600); err != nil {
		return f, fmt.Errorf("testcluster: writing the scheduler's configuration: %w", err)
	}

	f.kwokStages = filepath.Join(c.Dir, "kwok-stages.yaml")
	stages, err := stagesYAML()
	if err != nil {
		return f, err
	}
	if err := os.WriteFile(f.kwokStages, stages, 0o600); err != nil {
		return f, fmt.Errorf("testcluster: writing kwok's stages: %w", err)
	}
	return f, nil
}

func (c *Cluster) writeKubeconfig(path, user string, pair keyPair) error {
	const name = "capstan-testcluster"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: c.host, CertificateAuthorityData: c.ca.certPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: pair.certPEM, ClientKeyData: pair.keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("testcluster: writing the kubeconfig for %s: %w", user, err)
	}
	return nil
}
