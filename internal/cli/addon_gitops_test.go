package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/gitops/gitserver"
)

func runAddon(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runAddonTo(&out, &out, stdin, args...)
	return out.String(), err
}

// runAddonTo runs `capstan addon` with its standard output and error apart.
func runAddonTo(stdout, stderr *bytes.Buffer, stdin string, args ...string) error {
	parent := &cobra.Command{Use: "addon", SilenceUsage: true, SilenceErrors: true}
	parent.AddCommand(newAddonGitopsCommands()...)
	parent.AddCommand(newAddonGetCommand())
	parent.SetOut(stdout)
	parent.SetErr(stderr)
	parent.SetIn(strings.NewReader(stdin))
	parent.SetArgs(args)
	return parent.Execute()
}

func TestAddonGitopsCommands(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	gitserver.Clone(t, url).Write("README.md", "x\n").CommitAndPush("start")

	def := "name: grafana\nhelm:\n  repo: https://grafana.github.io/helm-charts/\n  chart: grafana\n  version: 8.0.0\n"
	file := filepath.Join(t.TempDir(), "grafana.yaml")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"install", "--gitops", url, "-f", file, "--author", "Ada <ada@example.com>"}, "installed"},
		{"", []string{"suspend", "grafana", "--gitops", url}, "suspend grafana"},
		{"", []string{"suspend", "grafana", "--gitops", url}, "Nothing to commit"},
		{"", []string{"resume", "grafana", "--gitops", url}, "resume grafana"},
		{strings.Replace(def, "8.0.0", "8.1.0", 1), []string{"edit", "grafana", "--gitops", url, "-f", "-"}, "edited grafana"},
	}
	for _, s := range steps {
		out, err := runAddon(t, s.stdin, s.args...)
		if err != nil || !strings.Contains(out, s.want) {
			t.Fatalf("%v: err=%v out=%q", s.args, err, out)
		}
	}
	// A definition that is not one YAML mapping gets the error capstan
	// validate gives it, not "has no name: field", and no commit.
	head := strings.TrimSpace(gitserver.Clone(t, url).Git("rev-parse", "HEAD"))
	for _, content := range []string{
		"name: cache\nhelm: [\n",
		"name: [cache\n",
		"- name: cache\n",
		"\xff\xfe\x00binary",
		"",
		strings.Repeat("x", 200<<10),
		"just a string\n",
	} {
		bad := filepath.Join(t.TempDir(), "cache.yaml")
		if err := os.WriteFile(bad, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, want := gitops.Parse("the definition", []byte(content))
		_, err := runAddon(t, "", "install", "--gitops", url, "-f", bad)
		if want == nil || err == nil || err.Error() != want.Error() || strings.Contains(err.Error(), "has no name") {
			t.Errorf("install --gitops of %.40q: %v; want %v", content, err, want)
		}
	}
	if now := strings.TrimSpace(gitserver.Clone(t, url).Git("rev-parse", "HEAD")); now != head {
		t.Fatalf("a refused install moved the branch from %s to %s", head, now)
	}
	// grafana is the folder's last definition, and the syncer refuses a
	// commit that empties the folder unless the AddonRepository allows it:
	// the removal is refused before any commit, and says how to make it.
	head = strings.TrimSpace(gitserver.Clone(t, url).Git("rev-parse", "HEAD"))
	if _, err := runAddon(t, "", "remove", "grafana", "--gitops", url); err == nil ||
		!strings.Contains(err.Error(), "spec.allowEmpty: true") || !strings.Contains(err.Error(), "give --allow-empty") {
		t.Fatalf("removing the last definition: %v; want it refused, saying to set allowEmpty and give --allow-empty", err)
	}
	if now := strings.TrimSpace(gitserver.Clone(t, url).Git("rev-parse", "HEAD")); now != head {
		t.Fatalf("the refused removal moved the branch from %s to %s", head, now)
	}
	if out, err := runAddon(t, "", "remove", "grafana", "--gitops", url, "--allow-empty"); err != nil || !strings.Contains(out, "removed grafana") {
		t.Fatalf("remove --allow-empty: err=%v out=%q", err, out)
	}
	w := gitserver.Clone(t, url)
	log := w.Git("log", "--format=%an|%s")
	for _, want := range []string{"Ada|Install add-on grafana", "Suspend add-on grafana", "Resume add-on grafana", "Edit add-on grafana", "Remove add-on grafana"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// Without --gitops the command changes the Addon in the cluster, and
	// says so when there is no cluster to talk to.
	if _, err := runAddon(t, "", "suspend", "grafana", "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("suspend without --gitops and without a cluster: %v", err)
	}
	if _, err := runAddon(t, "", "suspend", "missing", "--gitops", url); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("suspending a missing add-on: %v", err)
	}
}

// TestGitopsUninstallMarksOnlyWhatTheCommitRemoves: the uninstall mark
// makes any later deletion of the Addon remove its software, which the
// cluster profile's default policy keeps. So `remove --gitops --uninstall`
// refuses an Addon that git does not manage, or whose file is not in the
// repository, before it marks anything; and a commit that fails takes the
// mark off again.
func TestGitopsUninstallMarksOnlyWhatTheCommitRemoves(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	srv := gitserver.Start(t)
	url := srv.Create(t, "ops")
	// tempo stays, so that the removals below do not empty the folder.
	gitserver.Clone(t, url).Write("addons/grafana.yaml", "name: grafana\nhelm:\n  repo: https://charts.invalid/\n  chart: grafana\n  version: 8.0.0\n").
		Write("addons/tempo.yaml", "name: tempo\nhelm:\n  repo: https://charts.invalid/\n  chart: tempo\n  version: 1.0.0\n").CommitAndPush("grafana and tempo")
	byGit := func(a *capstanv1.Addon) {
		a.Labels = map[string]string{gitops.ManagedByGitLabel: "ops"}
		a.Annotations = map[string]string{gitops.GitFileAnnotation: "addons/" + a.Name + ".yaml"}
	}
	newAddon(t, c, ns, "handmade", nil)
	newAddon(t, c, ns, "ghost", byGit)
	newAddon(t, c, ns, "grafana", byGit)
	newAddon(t, c, ns, "orphan", func(a *capstanv1.Addon) {
		byGit(a)
		a.Labels[gitops.ManagedByGitLabel] = "gone"
	})
	// The Addons are synced from url, written as its AddonRepository may
	// spell it: with .git dropped and a slash added.
	if err := c.Create(t.Context(), &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: strings.TrimSuffix(url, ".git") + "/"}}); err != nil {
		t.Fatal(err)
	}
	marked := func(name string) bool {
		return getAddon(t, c, ns, name).Annotations[capstanv1.UninstallAnnotation] == "true"
	}

	// Another repository holds a grafana.yaml too, as staging does beside
	// prod: a commit there would not remove this grafana, so it is not
	// marked and nothing is committed.
	staging := srv.Create(t, "staging")
	gitserver.Clone(t, staging).Write("addons/grafana.yaml", "name: grafana\nhelm:\n  repo: https://charts.invalid/\n  chart: grafana\n  version: 8.0.0\n").CommitAndPush("grafana")
	out, err := capstan(t, cluster, "addon", "remove", "grafana", "--gitops", staging, "--uninstall", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), "synced by AddonRepository ops from another place") || !strings.Contains(err.Error(), "not --gitops") {
		t.Errorf("remove with another repository's URL: %v; want it refused, naming the URL\n%s", err, out)
	}
	if _, err := capstan(t, cluster, "addon", "remove", "grafana", "--gitops", url, "--branch", "other", "--uninstall", "-n", ns); err == nil || !strings.Contains(err.Error(), `follows branch "main", not "other"`) {
		t.Errorf("remove with another branch: %v; want it refused, naming the branch", err)
	}
	if marked("grafana") {
		t.Fatal("a remove with another repository marked the Addon for uninstall")
	}
	if _, err := os.Stat(filepath.Join(gitserver.Clone(t, staging).Dir, "addons/grafana.yaml")); err != nil {
		t.Errorf("the refused remove changed the other repository: %v", err)
	}

	for _, tc := range []struct{ name, want string }{
		{"handmade", "is not managed by git"},
		{"ghost", "addons/ghost.yaml or addons/ghost.yml is not in branch \"main\""},
		{"missing", "does not exist"},
		{"orphan", "AddonRepository gone, which is gone"},
	} {
		out, err := capstan(t, cluster, "addon", "remove", tc.name, "--gitops", url, "--uninstall", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("remove %s: %v; want an error with %q\n%s", tc.name, err, tc.want, out)
		}
		if tc.name != "missing" && marked(tc.name) {
			t.Errorf("remove %s was refused, and left the Addon marked for uninstall", tc.name)
		}
	}
	if _, err := capstan(t, cluster, "addon", "remove", "grafana", "--gitops", url, "--uninstall", "-n", ns, "--folder", "platform"); err == nil || !strings.Contains(err.Error(), "--folder addons") {
		t.Errorf("remove with another folder than the Addon's file: %v; want it refused, naming the folder", err)
	}

	// The push is refused: the mark comes off again.
	bare := filepath.Join(srv.Root, "ops.git")
	setReceivePack := func(v string) {
		if out, err := exec.Command("git", "-C", bare, "config", "http.receivepack", v).CombinedOutput(); err != nil {
			t.Fatalf("git config: %v\n%s", err, out)
		}
	}
	setReceivePack("false")
	out, err = capstan(t, cluster, "addon", "remove", "grafana", "--gitops", url, "--uninstall", "-n", ns)
	if err == nil || !strings.Contains(out, "Took the uninstall mark off") || marked("grafana") {
		t.Fatalf("a failed commit: %v, marked %v; want the error, and the mark taken off\n%s", err, marked("grafana"), out)
	}

	setReceivePack("true")
	out, err = capstan(t, cluster, "addon", "remove", "grafana", "--gitops", url, "--uninstall", "-n", ns)
	if err != nil || !strings.Contains(out, "removed grafana") || !marked("grafana") {
		t.Fatalf("remove: %v, marked %v\n%s", err, marked("grafana"), out)
	}
	if _, err := os.Stat(filepath.Join(gitserver.Clone(t, url).Dir, "addons/grafana.yaml")); !os.IsNotExist(err) {
		t.Errorf("the file is still in git: %v", err)
	}

	// A definition written as name.yml, which the syncer reads too.
	gitserver.Clone(t, url).Write("addons/loki.yml", "name: loki\nhelm:\n  repo: https://charts.invalid/\n  chart: loki\n  version: 6.0.0\n").CommitAndPush("loki")
	newAddon(t, c, ns, "loki", func(a *capstanv1.Addon) {
		a.Labels = map[string]string{gitops.ManagedByGitLabel: "ops"}
		a.Annotations = map[string]string{gitops.GitFileAnnotation: "addons/loki.yml"}
	})
	out, err = capstan(t, cluster, "addon", "remove", "loki", "--gitops", url, "--uninstall", "-n", ns)
	if err != nil || !strings.Contains(out, "removed loki") || !marked("loki") {
		t.Fatalf("remove of addons/loki.yml: %v, marked %v\n%s", err, marked("loki"), out)
	}
	if _, err := os.Stat(filepath.Join(gitserver.Clone(t, url).Dir, "addons/loki.yml")); !os.IsNotExist(err) {
		t.Errorf("addons/loki.yml is still in git: %v", err)
	}

	// tempo is the last definition now. The AddonRepository is read, and
	// it does not allow an empty folder: its spec decides, not
	// --allow-empty, as its syncer would refuse the commit and leave the
	// Addon marked.
	newAddon(t, c, ns, "tempo", byGit)
	out, err = capstan(t, cluster, "addon", "remove", "tempo", "--gitops", url, "--uninstall", "-n", ns, "--allow-empty")
	if err == nil || !strings.Contains(err.Error(), "set spec.allowEmpty: true on it") || marked("tempo") {
		t.Fatalf("remove --allow-empty of the last definition of a repository that refuses an empty folder: %v, marked %v\n%s", err, marked("tempo"), out)
	}
	ar := &capstanv1.AddonRepository{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ops"}, ar); err != nil {
		t.Fatal(err)
	}
	ar.Spec.AllowEmpty = true
	if err := c.Update(t.Context(), ar); err != nil {
		t.Fatal(err)
	}
	// Once it allows an empty folder, the removal needs no flag.
	out, err = capstan(t, cluster, "addon", "remove", "tempo", "--gitops", url, "--uninstall", "-n", ns)
	if err != nil || !strings.Contains(out, "removed tempo") || !marked("tempo") {
		t.Fatalf("remove of the last definition of a repository that allows an empty folder: %v, marked %v\n%s", err, marked("tempo"), out)
	}
	if _, err := os.Stat(filepath.Join(gitserver.Clone(t, url).Dir, "addons/tempo.yaml")); !os.IsNotExist(err) {
		t.Errorf("addons/tempo.yaml is still in git: %v", err)
	}
}

// TestAddonCommandsRefuseTheFlagsOfTheOtherMode: with --gitops a change is
// a commit of the definition file, so the flags that change or wait for the
// Addon in the cluster would be dropped, and the command would still exit
// 0; without --gitops, the flags of a commit would be. Each is refused
// before anything is read or written.
func TestAddonCommandsRefuseTheFlagsOfTheOtherMode(t *testing.T) {
	const url = "http://127.0.0.1:1/ops.git"
	def := filepath.Join(t.TempDir(), "blog.yaml")
	if err := os.WriteFile(def, []byte("name: blog\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withGitops := func(flag string, args ...string) []string { return append(args, "--gitops", url, flag) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{withGitops("--plan=sha256:00", "install", "-f", def), "--plan does not go with --gitops"},
		{withGitops("--wait=false", "install", "-f", def), "--wait does not go with --gitops"},
		{withGitops("--timeout=1m", "install", "-f", def), "--timeout does not go with --gitops"},
		{withGitops("--namespace=tenant", "install", "-f", def), "--namespace does not go with --gitops"},
		{withGitops("--kubeconfig=/k", "install", "-f", def), "--kubeconfig does not go with --gitops"},
		{withGitops("--set=replicas=2", "edit", "blog", "-f", def), "--set does not go with --gitops"},
		{withGitops("--set-string=tag=1", "edit", "blog", "-f", def), "--set-string does not go with --gitops"},
		{withGitops("--secret-input=pw=@pw.txt", "edit", "blog", "-f", def), "--secret-input does not go with --gitops"},
		{withGitops("--version=1.2.0", "edit", "blog", "-f", def), "--version does not go with --gitops"},
		{withGitops("-n=tenant", "edit", "blog", "-f", def), "--namespace does not go with --gitops"},
		{withGitops("-n=tenant", "suspend", "blog"), "--namespace does not go with --gitops"},
		{withGitops("--kubeconfig=/k", "resume", "blog"), "--kubeconfig does not go with --gitops"},
		{withGitops("--wait=false", "remove", "blog"), "--wait does not go with --gitops"},
		{withGitops("--timeout=1m", "remove", "blog", "--uninstall"), "--timeout does not go with --gitops"},
		{withGitops("--keep-values", "remove", "blog"), "--keep-values does not go with --gitops"},
		{withGitops("-n=tenant", "remove", "blog"), "--namespace does not go with --gitops"},
		{[]string{"install", "blog", "--ca-file=ca.pem"}, "--ca-file fetches the chart of a definition that --gitops commits"},
		{[]string{"install", "blog", "--fetch-timeout=5s"}, "--fetch-timeout fetches the chart of a definition that --gitops commits"},
		{withGitops("-f="+def, "edit", "blog", "-f", def), "one -f FILE"},
		{[]string{"install", "blog", "--branch", "main"}, "--branch says where a commit goes"},
		{[]string{"install", "blog", "-f", def}, "--file is the definition file that --gitops commits"},
		{[]string{"edit", "blog", "--folder", "platform", "--set", "a=b"}, "--folder says where a commit goes"},
		{[]string{"suspend", "blog", "--author", "Ada <ada@example.com>"}, "--author says where a commit goes"},
		{[]string{"remove", "blog", "--branch", "main"}, "--branch says where a commit goes"},
		{[]string{"remove", "blog", "--allow-empty"}, "--allow-empty lets a commit take the last definition"},
	} {
		out, err := runAddon(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q\n%s", tc.args, err, tc.want, out)
		}
	}
	// An empty --gitops, as from an unset shell variable, is refused before
	// anything is read: it must not fall back to the Addon in the cluster.
	// The kubeconfig names a loopback port where nothing listens, so a
	// command that went on would fail on the connection instead.
	kubeconfig := closedKubeconfig(t)
	for _, url := range []string{"", " "} {
		for _, args := range [][]string{
			{"install", "-f", def},
			{"install", "blog", "--yes"},
			{"edit", "blog", "-f", def},
			{"suspend", "blog"},
			{"resume", "blog"},
			{"remove", "blog"},
			{"remove", "blog", "--uninstall"},
			{"get", "blog"},
		} {
			args := append(args, "--gitops="+url, "--kubeconfig", kubeconfig)
			out, err := runAddon(t, "", args...)
			if err == nil || !strings.Contains(err.Error(), "--gitops needs the repository's URL") {
				t.Errorf("%q: %v; want --gitops refused as empty\n%s", args, err, out)
			}
		}
	}
	// A git folder has no chart to fetch: add --git refuses the flags of
	// the fetch that checks the values.
	for _, flag := range []string{"--fetch-timeout=5s", "--fetch-allow=127.0.0.1/32", "--ca-file=ca.pem"} {
		var out bytes.Buffer
		root := NewRootCommand()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"addon", "add", "blog", "-n", "tenant", "--git", url, "--path", "blog", "--kubeconfig", filepath.Join(t.TempDir(), "none"), flag})
		err := root.Execute()
		want := strings.SplitN(flag, "=", 2)[0] + " sets how the chart is fetched"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("add --git %s: %v; want an error with %q\n%s", flag, err, want, out.String())
		}
	}
}

// TestAddonEditMergesEveryValuesFile: edit -f, as add -f, takes several
// files and merges them in order over spec.values; it kept only the last.
func TestAddonEditMergesEveryValuesFile(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) {
		// NOTE: a chart the fetch guard refuses at once, with no DNS
		// lookup, when edit reads it to check the values for secret
		// inputs: the edit goes on, with a warning.
		a.Spec.Chart = &capstanv1.ChartSource{URL: "https://127.0.0.1:1/blog-1.0.0.tgz"}
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1,"keep":"me"}`)}
	})
	dir := t.TempDir()
	common, prod := filepath.Join(dir, "common.yaml"), filepath.Join(dir, "prod.yaml")
	for file, content := range map[string]string{common: "replicas: 2\nimage: {tag: v1}\n", prod: "image: {tag: v2}\n"} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := capstan(t, cluster, "addon", "edit", "blog", "-n", ns, "-f", common, "-f", prod); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(getAddon(t, c, ns, "blog").Spec.Values.Raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"replicas": 2.0, "keep": "me", "image": map[string]any{"tag": "v2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec.values = %v, want %v", got, want)
	}
}

// TestGitManagedAddonsOfASuspendedOrMissingRepository: an Addon carries
// the managed-by-git label after its AddonRepository is deleted, and no
// syncer undoes a change while the repository is suspended, so both are
// changed in the cluster, with a note of what becomes of the change; an
// Addon of a repository that syncs is still refused.
func TestGitManagedAddonsOfASuspendedOrMissingRepository(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	ctx := context.Background()
	for _, r := range []struct {
		name    string
		suspend bool
	}{{"syncing", false}, {"paused", true}} {
		repo := &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name},
			Spec: capstanv1.AddonRepositorySpec{URL: "https://git.invalid/ops.git", Suspend: r.suspend}}
		if err := c.Create(ctx, repo); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ addon, repo, want string }{
		{"orphan", "gone", "its AddonRepository gone is gone"},
		{"held", "paused", "the next resume applies git's version again"},
		{"synced", "syncing", "is managed by git (AddonRepository syncing)"},
	} {
		newAddon(t, c, ns, tc.addon, func(a *capstanv1.Addon) {
			a.Labels = map[string]string{gitops.ManagedByGitLabel: tc.repo}
		})
		out, err := capstan(t, cluster, "addon", "suspend", tc.addon, "-n", ns)
		if !strings.Contains(out+fmt.Sprint(err), tc.want) {
			t.Errorf("suspend %s: %v; want %q\n%s", tc.addon, err, tc.want, out)
		}
		if changed := getAddon(t, c, ns, tc.addon).Spec.Suspend; changed != (tc.repo != "syncing") || (err != nil) != (tc.repo == "syncing") {
			t.Errorf("suspend %s: suspended %v, error %v", tc.addon, changed, err)
		}
	}
}

// TestSameRepository: `remove --gitops --uninstall` marks an Addon only
// when the commit goes where its AddonRepository reads: the same
// repository (however its URL is spelt), branch and folder.
func TestSameRepository(t *testing.T) {
	repo := func(url, folder string) *capstanv1.AddonRepository {
		return &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Name: "prod"},
			Spec: capstanv1.AddonRepositorySpec{URL: url, Folder: folder}}
	}
	for _, tc := range []struct {
		name            string
		ar              *capstanv1.AddonRepository
		w               gitops.Writer
		branch, follows string
		want            string // in the error; empty for none
	}{
		{"same", repo("https://git.example/prod.git", ""), gitops.Writer{URL: "https://git.example/prod.git", Folder: "addons"}, "main", "main", ""},
		{"no .git, a slash", repo("https://git.example/prod/", "addons/"), gitops.Writer{URL: "https://git.example/prod.git"}, "main", "main", ""},
		{"host case, credentials", repo("https://Git.Example/prod", ""), gitops.Writer{URL: "https://user:token@git.example/prod.git"}, "", "", ""},
		{"scp style", repo("git@git.example:ops/prod.git", ""), gitops.Writer{URL: "git@git.example:ops/prod"}, "", "", ""},
		{"another repository", repo("https://git.example/prod.git", ""), gitops.Writer{URL: "https://git.example/staging.git"}, "", "",
			"its URL is https://git.example/prod.git, not --gitops https://git.example/staging.git"},
		{"another branch", repo("https://git.example/prod.git", ""), gitops.Writer{URL: "https://git.example/prod.git"}, "next", "main",
			`it follows branch "main", not "next"; give --branch main`},
		{"another folder", repo("https://git.example/prod.git", "platform"), gitops.Writer{URL: "https://git.example/prod.git"}, "", "",
			`its folder is "platform", not --folder "addons"`},
		{"credentials are not shown", repo("https://git.example/prod.git", ""), gitops.Writer{URL: "https://user:s3cret@git.example/staging.git"}, "", "",
			"AddonRepository prod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sameRepository(tc.ar, &tc.w, tc.branch, tc.follows)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestAddonEditKeepsNulls: `--set key=null` deletes a chart's default in
// Helm, and Capstan's values too when spec.values holds the null. A merge
// patch would only delete the key from spec.values, so the null is written
// into spec.values whole, by a JSON Patch that tests the resourceVersion
// read: a change made meanwhile is a conflict, not lost. The patch names
// the changed fields alone, so that the fields of newer CRDs stay.
func TestAddonEditKeepsNulls(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	newAddon(t, c, ns, "blog", func(a *capstanv1.Addon) {
		a.Spec.Chart = &capstanv1.ChartSource{Repo: "https://127.0.0.1:1/", Name: "blog", Version: "1.0.0"}
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1,"image":{"tag":"v1","pullPolicy":"Always"}}`)}
	})
	if out, err := capstan(t, cluster, "addon", "edit", "blog", "-n", ns, "--set", "image.pullPolicy=null", "--set", "resources=null", "--version", "1.1.0"); err != nil {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	a := getAddon(t, c, ns, "blog")
	var got map[string]any
	if err := json.Unmarshal(a.Spec.Values.Raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"replicas": 1.0, "resources": nil, "image": map[string]any{"tag": "v1", "pullPolicy": nil}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec.values = %s, want the nulls kept: %v", a.Spec.Values.Raw, want)
	}
	if a.Spec.Chart.Version != "1.1.0" {
		t.Errorf("spec.chart.version = %q, want 1.1.0", a.Spec.Chart.Version)
	}
	// A patch of the fields edit changes, not an update of the whole
	// Addon, which would drop the fields of a newer Capstan's CRDs.
	events, err := cluster.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, e := range events {
		if r := e.ObjectRef; r != nil && r.Resource == "addons" && r.Namespace == ns && r.Name == "blog" && r.Subresource == "" && e.Verb != "create" {
			verbs = append(verbs, e.Verb)
		}
	}
	if !slices.Equal(verbs, []string{"patch"}) {
		t.Errorf("edit wrote the Addon with %v; want one patch", verbs)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := capstan(t, cluster, "addon", "edit", "blog", "-n", ns, "--secret-input", "auth.password=@"+pw); err != nil {
		t.Fatalf("edit --secret-input: %v\n%s", err, out)
	}
	if a := getAddon(t, c, ns, "blog"); len(a.Spec.ValuesFrom) != 1 || a.Spec.ValuesFrom[0].TargetPath != "auth.password" || !strings.Contains(string(a.Spec.Values.Raw), `"pullPolicy":null`) {
		t.Errorf("edit --secret-input: valuesFrom %+v, values %s; want the Secret's entry and the values kept", a.Spec.ValuesFrom, a.Spec.Values.Raw)
	}

	// A change between the read and the write is a conflict.
	key := client.ObjectKey{Namespace: ns, Name: "blog"}
	_, err = addons.Update(t.Context(), c, key, func(a *capstanv1.Addon) error {
		now := getAddon(t, c, ns, "blog")
		now.Spec.ManualSync = true
		if err := c.Update(t.Context(), now); err != nil {
			t.Fatal(err)
		}
		a.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":9}`)}
		return nil
	}, nil)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "run the command again") {
		t.Errorf("an update over a change made meanwhile: %v; want a conflict", err)
	}
	if a := getAddon(t, c, ns, "blog"); !a.Spec.ManualSync || strings.Contains(string(a.Spec.Values.Raw), "9") {
		t.Errorf("the change made meanwhile was lost, or the conflicting update written: manualSync %v, values %s", a.Spec.ManualSync, a.Spec.Values.Raw)
	}
}

// TestAddonGitopsEditBase: `edit --gitops --base` refuses to replace a
// file that is no longer the version the new definition was made from,
// and commits over the one it was, whose hash `get --gitops` gives.
func TestAddonGitopsEditBase(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	def := "name: grafana\nhelm:\n  repo: https://grafana.github.io/helm-charts/\n  chart: grafana\n  version: 8.0.0\n"
	w := gitserver.Clone(t, url)
	w.Write("addons/grafana.yaml", def).CommitAndPush("start")
	read := strings.TrimSpace(w.Git("rev-parse", "HEAD:addons/grafana.yaml"))
	w.Write("addons/grafana.yaml", strings.Replace(def, "8.0.0", "8.0.1", 1)).CommitAndPush("a colleague's change")

	mine := strings.Replace(def, "8.0.0", "8.1.0", 1)
	if _, err := runAddon(t, mine, "edit", "grafana", "--gitops", url, "-f", "-", "--base", read); err == nil || !strings.Contains(err.Error(), "no longer the version") {
		t.Fatalf("an edit from the version before a colleague's commit: %v; want a conflict", err)
	}
	// get --gitops prints the branch's file alone on standard output, to
	// be edited, and its blob hash on standard error, for --base.
	w.Pull()
	now := strings.TrimSpace(w.Git("rev-parse", "HEAD:addons/grafana.yaml"))
	var got, note bytes.Buffer
	if err := runAddonTo(&got, &note, "", "get", "grafana", "--gitops", url); err != nil {
		t.Fatalf("get --gitops: %v\n%s", err, note.String())
	}
	if got.String() != w.Git("show", "HEAD:addons/grafana.yaml") || !strings.Contains(note.String(), "--base "+now) {
		t.Fatalf("get --gitops printed %q, and %q; want the branch's file, and --base %s", got.String(), note.String(), now)
	}
	// NOTE: the edit command names the branch it was read from: the
	// default branch may hold the same blob.
	branch := strings.TrimSpace(w.Git("rev-parse", "--abbrev-ref", "HEAD"))
	if !strings.Contains(note.String(), "--gitops URL --branch "+branch+" -f FILE") {
		t.Errorf("get --gitops printed %q; want the edit command with --branch %s", note.String(), branch)
	}
	if out, err := runAddon(t, mine, "edit", "grafana", "--gitops", url, "-f", "-", "--base", now); err != nil || !strings.Contains(out, "edited grafana") {
		t.Fatalf("an edit from the branch's version: %v %q", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "grafana", "--gitops", url, "-o", "yaml"}, "--output does not go with --gitops"},
		{[]string{"get", "grafana", "--gitops", url, "-n", "tenant"}, "--namespace does not go with --gitops"},
		{[]string{"get", "grafana", "--folder", "platform"}, "--folder says where in git to read"},
		{[]string{"get", "tempo", "--gitops", url}, "addons/tempo.yaml or addons/tempo.yml does not exist"},
	} {
		if _, err := runAddon(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, err := runAddon(t, mine, "edit", "grafana", "-f", "-", "--base", now); err == nil || !strings.Contains(err.Error(), "--base") {
		t.Fatalf("--base without --gitops: %v", err)
	}
}

// TestAddonGetGitopsPrintsTheFileByteForByte: `get --gitops` prints the
// definition to be saved, edited and committed again with `edit --gitops
// -f FILE`, so the terminal escapes of every other command's output must
// not touch it: CRLF line ends and a comment's Latin-1 byte come out as
// git holds them.
func TestAddonGetGitopsPrintsTheFileByteForByte(t *testing.T) {
	def := "# caf\xe9\r\nname: web\r\nhelm:\r\n  repo: https://charts.invalid/\r\n  chart: web\r\n  version: 1.0.0\r\n"
	url := gitRepoWith(t, map[string]string{"addons/web.yaml": def})
	show := exec.Command("git", "show", "HEAD:addons/web.yaml")
	show.Dir = strings.TrimPrefix(url, "file://")
	committed, err := show.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != def {
		t.Fatalf("git holds %q, not the file written, %q", committed, def)
	}
	root := NewRootCommand()
	var out, note bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&note)
	root.SetArgs([]string{"addon", "get", "web", "--gitops", url})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("get --gitops: %v\n%s", err, note.String())
	}
	if !bytes.Equal(out.Bytes(), committed) {
		t.Fatalf("get --gitops printed %q; want the committed bytes %q", out.String(), committed)
	}
	if !strings.Contains(note.String(), "--base ") {
		t.Fatalf("get --gitops wrote %q on standard error; want the blob hash for --base", note.String())
	}
}

// TestGitopsUninstallInterrupted: `remove --gitops --uninstall` is
// interrupted (Ctrl-C, SIGTERM) while the commit's clone or push waits on
// a slow remote. When the removal did not reach the branch, the mark comes
// off again, since a mark left on an Addon that stays would make a later
// removal, meant to keep the software, uninstall it; when the push landed
// and only its answer was lost, the writer finds its commit in the branch,
// the mark stays, and the command reports the commit. Interrupted during
// a push, the output says at once how to take the mark off by hand, in
// case a second Ctrl-C cuts the reads of the branch that follow; only
// when the writer could not tell is the branch read again. Interrupted
// before the push, the mark comes off at once.
func TestGitopsUninstallInterrupted(t *testing.T) {
	cluster, c := apiServer(t)
	for _, tc := range []struct {
		what                        string
		suffix                      string
		nth                         int
		sendFirst, kept, read, hint bool
	}{
		// The first fetch reads the branch to check that the file is there.
		{"during the commit's clone", "/git-upload-pack", 2, false, false, false, false},
		{"during the push", "/git-receive-pack", 1, false, false, true, true},
		{"after the push landed", "/git-receive-pack", 1, true, true, false, true},
	} {
		ns := testNamespace(t, c)
		srv := gitserver.Start(t)
		srv.Create(t, "ops")
		gitserver.Clone(t, srv.URL+"/ops.git").Write("addons/grafana.yaml", "name: grafana\nhelm:\n  repo: https://charts.invalid/\n  chart: grafana\n  version: 8.0.0\n").
			Write("addons/tempo.yaml", "name: tempo\nhelm:\n  repo: https://charts.invalid/\n  chart: tempo\n  version: 1.0.0\n").CommitAndPush("grafana and tempo")
		hold := srv.HoldAt(t, tc.suffix, tc.nth, tc.sendFirst)
		url := hold.URL + "/ops.git"
		if err := c.Create(t.Context(), &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
			Spec: capstanv1.AddonRepositorySpec{URL: url}}); err != nil {
			t.Fatal(err)
		}
		newAddon(t, c, ns, "grafana", func(a *capstanv1.Addon) {
			a.Labels = map[string]string{gitops.ManagedByGitLabel: "ops"}
		})

		ctx, cancel := context.WithCancel(t.Context())
		fetched := make(chan int64, 1)
		go func() {
			<-hold.Reached
			fetched <- srv.Fetches()
			cancel()
			hold.Fail()
		}()
		var out bytes.Buffer
		root := NewRootCommand()
		root.SetArgs([]string{"addon", "remove", "grafana", "--gitops", url, "--uninstall", "-n", ns, "--kubeconfig", cluster.Kubeconfig})
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.ExecuteContext(ctx)
		cancel()
		marked := getAddon(t, c, ns, "grafana").Annotations[capstanv1.UninstallAnnotation] == "true"
		says, fails := "Took the uninstall mark off", true
		if tc.kept {
			says, fails = "Committed ", false
		}
		if (err != nil) != fails || marked != tc.kept || !strings.Contains(out.String(), says) {
			t.Errorf("interrupted %s: %v, marked %v; want an error %v, marked %v, and the output to say %q\n%s", tc.what, err, marked, fails, tc.kept, says, out.String())
		}
		hint := "kubectl annotate addon grafana -n " + ns + " capstan.dev/uninstall-"
		if read := srv.Fetches() > <-fetched; read != tc.read || strings.Contains(out.String(), hint) != tc.hint {
			t.Errorf("interrupted %s: read the branch again %v, with the output\n%s\nwant the branch read again %v, and the output to say %q %v", tc.what, read, out.String(), tc.read, hint, tc.hint)
		}
	}
}

// TestGitopsUninstallInterruptedWaitingForATurn: `remove --gitops
// --uninstall` is interrupted while its commit waits for a turn, as two
// other commits hold both: nothing was committed, so the mark comes off.
func TestGitopsUninstallInterruptedWaitingForATurn(t *testing.T) {
	cluster, c := apiServer(t)
	ns := testNamespace(t, c)
	srv := gitserver.Start(t)
	url := srv.Create(t, "ops")
	gitserver.Clone(t, url).Write("addons/grafana.yaml", "name: grafana\nhelm:\n  repo: https://charts.invalid/\n  chart: grafana\n  version: 8.0.0\n").
		Write("addons/tempo.yaml", "name: tempo\nhelm:\n  repo: https://charts.invalid/\n  chart: tempo\n  version: 1.0.0\n").
		Write("addons/loki.yaml", "name: loki\nhelm:\n  repo: https://charts.invalid/\n  chart: loki\n  version: 1.0.0\n").CommitAndPush("three")
	if err := c.Create(t.Context(), &capstanv1.AddonRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: capstanv1.AddonRepositorySpec{URL: url}}); err != nil {
		t.Fatal(err)
	}
	newAddon(t, c, ns, "grafana", func(a *capstanv1.Addon) {
		a.Labels = map[string]string{gitops.ManagedByGitLabel: "ops"}
	})
	// Two commits hold both turns, each at its push.
	var held sync.WaitGroup
	var holds []*gitserver.Hold
	for _, name := range []string{"tempo", "loki"} {
		hold := srv.HoldAt(t, "/git-receive-pack", 1, false)
		held.Go(func() { _, _ = (&gitops.Writer{URL: hold.URL + "/ops.git"}).Remove(context.Background(), name) })
		<-hold.Reached
		holds = append(holds, hold)
	}
	defer func() {
		for _, hold := range holds {
			hold.Fail()
		}
		held.Wait()
	}()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fetched := make(chan int64, 1)
	go func() {
		for ctx.Err() == nil && getAddon(t, c, ns, "grafana").Annotations[capstanv1.UninstallAnnotation] != "true" {
			time.Sleep(20 * time.Millisecond)
		}
		fetched <- srv.Fetches()
		cancel()
	}()
	var out bytes.Buffer
	root := NewRootCommand()
	root.SetArgs([]string{"addon", "remove", "grafana", "--gitops", url, "--uninstall", "-n", ns, "--kubeconfig", cluster.Kubeconfig})
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(ctx)
	if marked := getAddon(t, c, ns, "grafana").Annotations[capstanv1.UninstallAnnotation] == "true"; err == nil || marked || !strings.Contains(out.String(), "Took the uninstall mark off") {
		t.Errorf("interrupted waiting for a turn: %v, marked %v; want an error, and the mark taken off\n%s", err, marked, out.String())
	}
	// No push was sent: the branch is not read again to tell.
	if srv.Fetches() > <-fetched {
		t.Errorf("interrupted waiting for a turn: the branch was read again before the mark came off\n%s", out.String())
	}
}

// TestGitopsCommitsRefuseSecretInputs: a definition whose values set a
// value the chart's schema marks writeOnly would put the secret into git's
// history for good: install and edit --gitops refuse it before anything is
// committed, naming the path and valuesFrom. A secret the file in git
// holds already, unchanged, does not block an edit of other values, and
// is said on stderr.
func TestGitopsCommitsRefuseSecretInputs(t *testing.T) {
	srv := gitserver.Start(t)
	url := srv.Create(t, "gitops")
	gitserver.Clone(t, url).Write("README.md", "x\n").CommitAndPush("start")
	chartURL, fetch := servedChart(t, "blog", writeOnlyChart)
	def := func(values string) string { return "name: blog\nhelm:\n  url: " + chartURL + "\nvalues:\n" + values }
	head := func() string { return strings.TrimSpace(gitserver.Clone(t, url).Git("rev-parse", "HEAD")) }

	before := head()
	args := append([]string{"install", "--gitops", url, "-f", "-"}, fetch...)
	if _, err := runAddon(t, def("  replicas: 1\n  auth:\n    password: hunter2\n"), args...); err == nil ||
		!strings.Contains(err.Error(), "auth.password") || !strings.Contains(err.Error(), "valuesFrom") || !strings.Contains(err.Error(), "nothing was committed") {
		t.Fatalf("install --gitops of a definition with a secret in its values: %v; want it refused, naming auth.password and valuesFrom", err)
	}
	if now := head(); now != before {
		t.Fatalf("the refused install moved the branch from %s to %s", before, now)
	}
	if out, err := runAddon(t, def("  replicas: 1\n"), args...); err != nil || !strings.Contains(out, "installed") {
		t.Fatalf("install --gitops without a secret: err=%v out=%q", err, out)
	}
	edit := append([]string{"edit", "blog", "--gitops", url, "-f", "-"}, fetch...)
	before = head()
	if _, err := runAddon(t, def("  replicas: 2\n  users:\n  - password: hunter2\n"), edit...); err == nil || !strings.Contains(err.Error(), "users[0].password") {
		t.Fatalf("edit --gitops that adds a secret: %v; want it refused, naming users[0].password", err)
	}
	if now := head(); now != before {
		t.Fatalf("the refused edit moved the branch from %s to %s", before, now)
	}
	// A file that git holds with a secret already (committed by hand)
	// can still be edited: the secret is said, not refused.
	gitserver.Clone(t, url).Write("addons/blog.yaml", def("  replicas: 1\n  auth:\n    password: hunter2\n")).CommitAndPush("by hand")
	var stdout, stderr bytes.Buffer
	if err := runAddonTo(&stdout, &stderr, def("  replicas: 3\n  auth:\n    password: hunter2\n"), edit...); err != nil || !strings.Contains(stdout.String(), "edited blog") {
		t.Fatalf("edit --gitops of other values beside a secret git holds already: err=%v out=%q", err, stdout.String())
	}
	if !strings.Contains(stderr.String(), "Warning:") || !strings.Contains(stderr.String(), "already holds auth.password") || strings.Contains(stderr.String(), "hunter2") {
		t.Errorf("stderr %q; want a warning naming auth.password, without its value", stderr.String())
	}
}

// closedKubeconfig writes a kubeconfig for a loopback port where nothing
// listens: a command that calls the cluster fails on the connection.
func closedKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: a, context: {cluster: c, user: u, namespace: tenant}}]
current-context: a
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
