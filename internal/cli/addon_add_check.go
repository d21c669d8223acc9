package cli

import (
	"fmt"
	"regexp"

	"github.com/go-git/go-git/v5/plumbing/transport"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/source"
)

var (
	// userInfo and passwords match what the CRD's rules on spec.chart's
	// addresses and spec.git.url refuse: anything before an @ in the host
	// of a chart's address, and a user:password in a git URL, of the
	// scheme form or of the user@host:path one.
	userInfo  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@`)
	passwords = []*regexp.Regexp{
		regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*:[^/?#]*@`),
		regexp.MustCompile(`^[^/?#@:]+:[^/?#@]*@`),
	}
)

// sourceCredentials refuses a source flag that carries credentials, by the
// flag's name and without quoting it, before anything is fetched or
// written: the API server would refuse the Addon, and before that the
// chart check would have sent them.
func sourceCredentials(src capstanv1.ChartSource, git capstanv1.GitSource) error {
	const why = "%s must not carry credentials (a user:password@ or token@ before the host; not shown here): every reader of the Addon would see them. Put them in a Secret and name it in the Addon's %s"
	for _, f := range []struct{ flag, value string }{{"--repo", src.Repo}, {"--chart-url", src.URL}, {"--oci", src.OCI}} {
		if userInfo.MatchString(f.value) {
			return fmt.Errorf(why, f.flag, "spec.chart.secretRef")
		}
	}
	if git.URL == "" {
		return nil
	}
	// NOTE: a token as an https URL's user is refused too, as the
	// controller refuses it when it fetches; a user name alone (git@,
	// https://org@dev.azure.com) is no secret.
	for _, re := range passwords {
		if re.MatchString(git.URL) {
			return fmt.Errorf(why, "--git", "spec.git.secretRef")
		}
	}
	if ep, err := transport.NewEndpoint(git.URL); err == nil && source.HoldsCredentials(ep) {
		return fmt.Errorf(why, "--git", "spec.git.secretRef")
	}
	return nil
}
