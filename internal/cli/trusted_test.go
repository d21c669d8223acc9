package cli

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"capstan.dev/capstan/internal/controller"
)

// TestWarnTrustedNamespaces: the controller says at start, for each
// trusted namespace other than its own, that writing Addons there is
// acting as the add-ons' account; its own namespace, trusted by default,
// says nothing.
func TestWarnTrustedNamespaces(t *testing.T) {
	for _, tt := range []struct {
		trusted []string
		want    []string
	}{
		{nil, nil},
		{[]string{"capstan-shard-a"}, nil},
		{[]string{"capstan-shard-a", "team-a-infra"}, []string{`"namespace"="team-a-infra"`}},
		{[]string{"team-a-infra", "platform"}, []string{`"namespace"="team-a-infra"`, `"namespace"="platform"`}},
	} {
		var lines []string
		log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
		warnTrustedNamespaces(controller.Config{Namespace: "capstan-shard-a", TrustedNamespaces: tt.trusted, AddonsServiceAccount: "shard-a-addons"}, log)
		if len(lines) != len(tt.want) {
			t.Errorf("trusting %v: logged %q, want one line for each of %v", tt.trusted, lines, tt.want)
			continue
		}
		for i, want := range tt.want {
			for _, part := range []string{want, "Trusting a namespace other than the controller's own", "edit and admin", "cluster-admin",
				`"addonsUser"="system:serviceaccount:capstan-shard-a:shard-a-addons"`} {
				if !strings.Contains(lines[i], part) {
					t.Errorf("trusting %v: %q does not say %q", tt.trusted, lines[i], part)
				}
			}
		}
	}
}
