package cli

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/spf13/cobra"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/server/body"
	"capstan.dev/capstan/internal/source"
)

var (
	// userInfo and passwords match what the CRD's rules on spec.chart's
	// addresses and spec.git.url refuse: anything before an @ in the host
	// of a chart's address, and a user:password in a git URL, of the
	// scheme form or of the user@host:path one.
	userInfo = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:/*[^/?#]*@`)
	// chartDigest is the CRD's pattern of spec.chart.digest.
	chartDigest = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	passwords   = []*regexp.Regexp{
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

// addName refuses a name the API would refuse for an Addon, before the
// chart is fetched to check the values: the API's own check.
func addName(name string) error {
	if errs := body.NameProblems(name); len(errs) > 0 {
		return fmt.Errorf("addon %q: %s; give another NAME", name, strings.Join(errs, "; "))
	}
	return nil
}

// chartFlags refuses, by the flags' names and before the chart is fetched,
// the chart flags that the CRD's rules on spec.chart would refuse as spec:
// one chart source, --chart with --repo only, no --version with an
// archive, a tag or digest for --oci, and a digest of the form it takes.
func chartFlags(cmd *cobra.Command, src capstanv1.ChartSource) error {
	given := cmd.Flags().Changed
	var sources []string
	for _, name := range []string{"repo", "oci", "chart-url"} {
		if given(name) {
			sources = append(sources, "--"+name)
		}
	}
	switch {
	case len(sources) > 1:
		return fmt.Errorf("%s: give one chart source, --chart-url, --repo with --chart, or --oci", strings.Join(sources, " and "))
	case given("chart") && !given("repo"):
		return errors.New("--chart names a chart in --repo: give --repo too, or leave --chart out (--oci and --chart-url name the chart themselves)")
	case given("repo") && !given("chart"):
		return errors.New("--repo needs --chart, the chart's name in the repository")
	case given("chart-url") && given("version"):
		return errors.New("--version does not go with --chart-url: the archive is the version; leave --version out")
	case given("oci") && src.Version == "" && src.Digest == "":
		return errors.New("--oci needs --version (a tag) or --digest")
	case given("digest") && !chartDigest.MatchString(src.Digest):
		return errors.New("--digest must be sha256: and 64 lower-case hex digits")
	}
	return nil
}
