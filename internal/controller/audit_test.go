package controller_test

import (
	"testing"
	"time"

	"capstan.dev/capstan/internal/install"
)

// checkAuditAttribution finds, in the API server's audit log, the write of
// the ClusterRole, made by the controller's account while impersonating
// capstan-addons.
func checkAuditAttribution(t *testing.T, roleName string) {
	t.Helper()
	// The API server attributes the write to capstan-addons: its audit log
	// names the user of every request.
	user := "system:serviceaccount:" + controllerNS + ":capstan-addons"
	eventually(t, 20*time.Second, "the audit log to attribute the write", func() bool {
		entries, err := cluster.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.ObjectRef != nil && e.ObjectRef.Resource == "clusterroles" && e.ObjectRef.Name == roleName &&
				e.Verb == "patch" && e.ImpersonatedUser != nil && e.ImpersonatedUser.Username == user &&
				e.User.Username == install.ControllerUser && e.ResponseStatus != nil && e.ResponseStatus.Code < 300 {
				return true
			}
		}
		return false
	})
}
