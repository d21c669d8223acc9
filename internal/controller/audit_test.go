package controller_test

import "testing"

// checkAuditAttribution is filled in once the test cluster keeps an audit log.
func checkAuditAttribution(t *testing.T, roleName string) {}
