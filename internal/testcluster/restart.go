package testcluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// StopComponent stops one running component (KubeAPIServer or Etcd, say)
// as an outage would, and returns the function that starts it again with
// the same arguments and waits until it is healthy. It is for tests of
// what clients do while a part of the control plane is away.
func (c *Cluster) StopComponent(name string) (start func(context.Context) error, err error) {
	c.procsMu.Lock()
	idx := -1
	var old *process
	for i, p := range c.procs {
		if p.name == name {
			idx, old = i, p
		}
	}
	c.procsMu.Unlock()
	if old == nil {
		return nil, fmt.Errorf("testcluster: no component %q runs", name)
	}
	old.stop()
	return func(ctx context.Context) error {
		p, err := startProcess(name, old.cmd.Path, old.logPath, old.cmd.Args[1:], old.cmd.Env)
		if err != nil {
			return err
		}
		c.procsMu.Lock()
		c.procs[idx] = p
		c.procsMu.Unlock()
		return c.waitHealthy(ctx, p)
	}, nil
}

// waitHealthy waits until a restarted component answers its health check.
func (c *Cluster) waitHealthy(ctx context.Context, p *process) error {
	var url string
	client := &http.Client{Timeout: 2 * time.Second}
	switch p.name {
	case KubeAPIServer:
		hc, err := rest.HTTPClientFor(c.Config)
		if err != nil {
			return err
		}
		hc.Timeout = 2 * time.Second
		client, url = hc, c.host+"/readyz"
	case Etcd:
		for _, a := range p.cmd.Args {
			if v, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
				url = strings.Split(v, ",")[0] + "/health"
			}
		}
	}
	if url == "" {
		return nil
	}
	for {
		if p.exited() {
			return p.failure(p.exitError())
		}
		if getOK(ctx, client, url) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Errorf("not healthy after a restart: %w", ctx.Err()))
		case <-time.After(pollInterval):
		}
	}
}
