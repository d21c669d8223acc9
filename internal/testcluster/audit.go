package testcluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditPolicy records every write at the Metadata level: who made it (the
// user and any impersonated user) and on which object. Reads are not
// recorded, to keep the log small.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`

// auditFiles writes the audit policy and returns the API server's flags.
func (c *Cluster) auditFiles() ([]string, error) {
	policy := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("testcluster: writing the audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.auditLogPath(),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
	}, nil
}

func (c *Cluster) auditLogPath() string { return filepath.Join(c.Dir, "logs", "audit.log") }

// AuditEvents reads the API server's audit log: every write so far, with
// the user who made it and the user it impersonated. Tests use it to check
// which identity the API server attributed a change to.
func (c *Cluster) AuditEvents() ([]auditv1.Event, error) {
	f, err := os.Open(c.auditLogPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
