package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/gitops"
	"capstan.dev/capstan/internal/netguard"
)

// Environment variables with the gitops repository's https credentials, so
// that a token never appears in a command line or a shell history.
const (
	envGitToken    = "CAPSTAN_GIT_TOKEN"
	envGitUsername = "CAPSTAN_GIT_USERNAME"
)

// gitopsOptions are the flags every `capstan addon ... --gitops` command shares.
type gitopsOptions struct {
	url, branch, folder, author string
}

func (o *gitopsOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.url, "gitops", "", "the gitops repository to commit to, for an add-on that git manages")
	cmd.Flags().StringVar(&o.branch, "branch", "", "the branch to commit to (default: the repository's default branch)")
	cmd.Flags().StringVar(&o.folder, "folder", gitops.DefaultFolder, "the repository's folder of definitions")
	cmd.Flags().StringVar(&o.author, "author", "Capstan <capstan@localhost>", `the commits' author, as "Name <email>"`)
}

// registerRead registers the flags of a command that reads a definition
// from the gitops repository and commits nothing.
func (o *gitopsOptions) registerRead(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.url, "gitops", "", "the gitops repository to read the add-on's definition from")
	cmd.Flags().StringVar(&o.branch, "branch", "", "the branch to read (default: the repository's default branch)")
	cmd.Flags().StringVar(&o.folder, "folder", gitops.DefaultFolder, "the repository's folder of definitions")
}

// gitopsOnlyFlags say where a commit goes and who signs it: without
// --gitops nothing is committed.
var gitopsOnlyFlags = []string{"branch", "folder", "author"}

// refuseFlagsOfTheOtherMode refuses the flags that the mode the command
// runs in would silently leave out: without --gitops, the flags of a
// commit; with it, clusterOnly, the flags that change or wait for the
// Addon in the cluster (a commit changes the definition file instead).
func (o *gitopsOptions) refuseFlagsOfTheOtherMode(cmd *cobra.Command, clusterOnly ...string) error {
	if err := o.refuseEmptyURL(cmd); err != nil {
		return err
	}
	if o.url == "" {
		return refuseFlags(cmd, "--%[1]s says where a commit goes or who signs it, and only --gitops commits: give --gitops URL, or leave --%[1]s out", gitopsOnlyFlags...)
	}
	return refuseFlags(cmd, "--%[1]s does not go with --gitops: it acts on the Addon in the cluster, and --gitops changes the add-on by a commit instead; leave --%[1]s out (with --gitops, a change belongs in the definition file)", clusterOnly...)
}

// refuseEmptyURL refuses --gitops given with no URL, as from an empty
// shell variable: the command would otherwise run in the other mode and
// change or delete the Addon in the cluster, with no commit and no review.
func (o *gitopsOptions) refuseEmptyURL(cmd *cobra.Command) error {
	if cmd.Flags().Changed("gitops") && strings.TrimSpace(o.url) == "" {
		return errors.New("--gitops needs the repository's URL (was the variable empty?); leave --gitops out to act on the Addon in the cluster")
	}
	return nil
}

func (o *gitopsOptions) writer() (*gitops.Writer, error) {
	author, err := mail.ParseAddress(o.author)
	if err != nil {
		return nil, fmt.Errorf(`--author %q must look like "Name <email>"`, o.author)
	}
	w, err := o.reader()
	if err != nil {
		return nil, err
	}
	w.AuthorName, w.AuthorEmail = author.Name, author.Address
	return w, nil
}

// reader is a writer without an author, for reading a definition. The
// token in CAPSTAN_GIT_TOKEN goes only to an https repository.
//
// NOTE: go-git sends BasicAuth with the first request, so over http the
// token would cross the network in clear text to whoever answers; the
// controller refuses credentials there for the same reason. An ssh
// repository authenticates with the ssh agent or keys, and a file://
// one takes none: the token is left out of both.
func (o *gitopsOptions) reader() (*gitops.Writer, error) {
	w := &gitops.Writer{URL: o.url, Branch: o.branch, Folder: o.folder}
	token := os.Getenv(envGitToken)
	if token == "" {
		return w, nil
	}
	ep, err := transport.NewEndpoint(o.url)
	if err != nil {
		return nil, fmt.Errorf("--gitops %s is not a git URL: %w", netguard.Redact(o.url), netguard.RedactError(err, o.url))
	}
	switch ep.Protocol {
	case "https":
		user := os.Getenv(envGitUsername)
		if user == "" {
			user = "git"
		}
		w.Auth = &githttp.BasicAuth{Username: user, Password: token}
	case "http":
		return nil, fmt.Errorf("--gitops %s is a plain http URL, and %s is set: the token would be sent in clear text to whoever answers; use the repository's https:// URL, or unset %s for a repository that needs no credentials",
			netguard.Redact(o.url), envGitToken, envGitToken)
	}
	return w, nil
}

// newAddonGitopsCommands builds `install`, `edit`, `suspend`, `resume` and
// `remove` for add-ons kept in a gitops repository: each is one commit to
// the add-on's definition file.
func newAddonGitopsCommands() []*cobra.Command {
	report := func(cmd *cobra.Command, commit string, err error, what string) error {
		if errors.Is(err, gitops.ErrNoChange) {
			fmt.Fprintln(cmd.OutOrStdout(), "Nothing to commit:", what)
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "Committed %s: %s\n", commit[:12], what)
		return nil
	}

	var installOpts gitopsOptions
	var installFile, installHash string
	var installYes bool
	installCF := &clusterFlags{}
	var installWait waitFlags
	var installSecrets secretCheck
	install := &cobra.Command{
		Use:   "install NAME (--plan HASH | --yes) | install --gitops URL -f FILE",
		Short: "Install a suspended add-on with exactly its reviewed plan; with --gitops, commit a new definition",
		Example: `  capstan addon get blog -n tenant --diff              # review the plan; prints the next command
  capstan addon install blog -n tenant --plan sha256:…  # refused unless that is still the plan
  capstan addon install blog -n tenant --yes            # whichever plan is in status, unseen
  capstan addon install --gitops https://git.example/ops.git -f longhorn.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := installOpts.refuseFlagsOfTheOtherMode(cmd, "plan", "yes", "wait", "timeout", "namespace", "kubeconfig", "context"); err != nil {
				return err
			}
			if installOpts.url == "" {
				if err := refuseFlags(cmd, "--%[1]s is the definition file that --gitops commits; to install an Addon of the cluster, name it and leave --%[1]s out", "file"); err != nil {
					return err
				}
				if err := refuseFlags(cmd, "--%[1]s fetches the chart of a definition that --gitops commits, to check its values for secret inputs; to install an Addon of the cluster, leave --%[1]s out", checkFlags()...); err != nil {
					return err
				}
				if len(args) != 1 {
					return errors.New("name the add-on to install, or give --gitops and -f to commit a definition")
				}
				return installCluster(cmd, installCF, args[0], installHash, installYes, installWait)
			}
			if installFile == "" || len(args) > 0 {
				return errors.New("with --gitops, give the definition with -f FILE and no name")
			}
			w, err := installOpts.writer()
			if err != nil {
				return err
			}
			if w.CheckValues, err = installSecrets.gitCheck(cmd); err != nil {
				return err
			}
			content, err := readDefinitionFile(cmd, installFile)
			if err != nil {
				return err
			}
			commit, err := w.Install(cmd.Context(), content)
			return report(cmd, commit, err, "installed")
		},
	}
	installOpts.register(install)
	installCF.add(install)
	installWait.add(install, "the add-on is Synced")
	installSecrets.add(install)
	install.Flags().StringVarP(&installFile, "file", "f", "", "with --gitops: the definition file, or - for standard input")
	install.Flags().StringVar(&installHash, "plan", "", "the plan hash you reviewed (addon get --diff prints it)")
	install.Flags().BoolVar(&installYes, "yes", false, "install whichever plan is in status when the command runs, without naming it")
	install.MarkFlagsMutuallyExclusive("plan", "yes")

	var editOpts gitopsOptions
	var editFiles []string
	var editVersion, editDigest, editBase string
	editCF := &clusterFlags{}
	editValues := &valuesFlags{}
	var editSecrets secretCheck
	edit := &cobra.Command{
		Use:   "edit NAME [-f values.yaml]... [--set k=v] [--secret-input path=@file] [--version V [--digest D]] | edit NAME --gitops URL -f FILE",
		Short: "Change an add-on's values, version or secret inputs; with --gitops, commit a new definition",
		Example: `  capstan addon edit blog -n tenant --set replicas=3 --secret-input auth.password=@new-password.txt
  capstan addon edit blog -n tenant -f common.yaml -f prod.yaml --version 1.3.0
  capstan addon edit blog -n tenant --version 1.3.0 --digest sha256:…  # a chart pinned by digest
  capstan addon get longhorn --gitops https://git.example/ops.git > longhorn.yaml   # prints --base HASH
  capstan addon edit longhorn --gitops https://git.example/ops.git -f longhorn.yaml --base HASH`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := editOpts.refuseFlagsOfTheOtherMode(cmd, "set", "set-string", "secret-input", "version", "digest", "namespace", "kubeconfig", "context"); err != nil {
				return err
			}
			if editOpts.url == "" {
				if err := refuseFlags(cmd, "--%[1]s is the version of the definition file a commit started from, and only --gitops commits: give --gitops URL, or leave --%[1]s out", "base"); err != nil {
					return err
				}
				editValues.values.ValueFiles = editFiles
				return editCluster(cmd, editCF, args[0], editValues, &editSecrets, editVersion, editDigest)
			}
			if len(editFiles) != 1 {
				return errors.New("with --gitops, give the new definition with one -f FILE")
			}
			w, err := editOpts.writer()
			if err != nil {
				return err
			}
			if w.CheckValues, err = editSecrets.gitCheck(cmd); err != nil {
				return err
			}
			content, err := readDefinitionFile(cmd, editFiles[0])
			if err != nil {
				return err
			}
			commit, err := w.Edit(cmd.Context(), args[0], content, editBase)
			return report(cmd, commit, err, "edited "+args[0])
		},
	}
	editOpts.register(edit)
	editCF.add(edit)
	editValues.add(edit, false)
	editSecrets.add(edit)
	edit.Flags().StringArrayVarP(&editFiles, "file", "f", nil, "a values file merged over spec.values (repeatable; later files win); with --gitops, the one new definition file (- for standard input)")
	edit.Flags().StringVar(&editVersion, "version", "", "the chart version to move to")
	edit.Flags().StringVar(&editDigest, "digest", "", "pin the chart by this digest (sha256:…), the archive's or an OCI manifest's; required with --version when the chart is pinned")
	edit.Flags().StringVar(&editBase, "base", "", "with --gitops: the git blob hash of the file your definition started from (capstan addon get NAME --gitops URL prints it; or git rev-parse HEAD:addons/NAME.yaml); the edit is refused when the branch holds another version")

	toggle := func(use, short string, suspend bool) *cobra.Command {
		var opts gitopsOptions
		cf := &clusterFlags{}
		cmd := &cobra.Command{
			Use:     use + " NAME [--gitops URL]",
			Short:   short,
			Example: "  capstan addon " + use + " blog -n tenant\n  capstan addon " + use + " longhorn --gitops https://git.example/ops.git",
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := opts.refuseFlagsOfTheOtherMode(cmd, "namespace", "kubeconfig", "context"); err != nil {
					return err
				}
				if opts.url == "" {
					c, err := cf.client()
					if err != nil {
						return err
					}
					key := client.ObjectKey{Namespace: cf.namespace, Name: args[0]}
					if err := refuseGitManaged(cmd, c, key); err != nil {
						return err
					}
					if err := addons.SetSuspend(cmd.Context(), c, key, suspend); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", use, key)
					return nil
				}
				w, err := opts.writer()
				if err != nil {
					return err
				}
				var commit string
				if suspend {
					commit, err = w.Suspend(cmd.Context(), args[0])
				} else {
					commit, err = w.Resume(cmd.Context(), args[0])
				}
				return report(cmd, commit, err, use+" "+args[0])
			},
		}
		opts.register(cmd)
		cf.add(cmd)
		return cmd
	}

	var removeOpts gitopsOptions
	var uninstall, keepValues, allowEmpty bool
	var removeWait waitFlags
	removeCF := &clusterFlags{}
	remove := &cobra.Command{
		Use:   "remove NAME [--uninstall] [--keep-values] [--gitops URL]",
		Short: "Delete an add-on; with --gitops, commit the deletion of its definition",
		Long: `Without --gitops, delete the Addon, waiting until it is gone. Its deletion
policy decides what happens to the software: the cluster profile's default,
Orphan, keeps it running; the restricted profile's, Delete, removes it.
--uninstall removes the software whatever the policy; --keep-values hands a
restricted add-on's values Secrets back for a later add-on of the name.

With --gitops, commit the deletion of addons/NAME.yaml. The syncer then
deletes the Addon. With --uninstall, the Addon (-n, --kubeconfig) must be
one that git manages, made from that file by an AddonRepository that syncs
the --gitops repository, --branch and --folder: it is annotated
capstan.dev/uninstall=true just before the commit, so that deleting it
removes the software, and the mark is taken off again if the commit fails.

The syncer refuses a commit that leaves its folder with no definition,
unless the AddonRepository sets spec.allowEmpty: true (or spec.prune:
false). So the removal of the folder's last definition is refused before
anything is committed; set allowEmpty first, then give --allow-empty. With
--uninstall, the AddonRepository is read, and its spec decides without the
flag.`,
		Example: `  capstan addon remove blog -n tenant --uninstall
  capstan addon remove longhorn --gitops https://git.example/ops.git --uninstall
  capstan addon remove last-one --gitops https://git.example/ops.git --allow-empty`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			clusterOnly := []string{"keep-values", "wait", "timeout"}
			if !uninstall {
				// NOTE: only --uninstall reads the live Addon in git mode.
				clusterOnly = append(clusterOnly, "namespace", "kubeconfig", "context")
			}
			if err := removeOpts.refuseFlagsOfTheOtherMode(cmd, clusterOnly...); err != nil {
				return err
			}
			if removeOpts.url == "" {
				if err := refuseFlags(cmd, "--%[1]s lets a commit take the last definition of a gitops repository's folder, and only --gitops commits: give --gitops URL, or leave --%[1]s out", "allow-empty"); err != nil {
					return err
				}
				if err := removeWait.check(); err != nil {
					return err
				}
				c, err := removeCF.client()
				if err != nil {
					return err
				}
				return removeCluster(cmd, c, client.ObjectKey{Namespace: removeCF.namespace, Name: args[0]},
					addons.RemoveOptions{Uninstall: uninstall, KeepValues: keepValues}, removeWait)
			}
			w, err := removeOpts.writer()
			if err != nil {
				return err
			}
			// NOTE: without --uninstall the AddonRepository is not read, so
			// whether its syncer takes an empty folder is the person's word.
			w.KeepLast = !allowEmpty
			if !uninstall {
				commit, err := w.Remove(cmd.Context(), args[0])
				return report(cmd, commit, lastDefinition(err, nil), "removed "+args[0])
			}
			c, err := removeCF.client()
			if err != nil {
				return err
			}
			return removeGitopsUninstall(cmd, c, w, client.ObjectKey{Namespace: removeCF.namespace, Name: args[0]}, removeCF.suffix(), report)
		},
	}
	removeOpts.register(remove)
	removeCF.add(remove)
	remove.Flags().BoolVar(&uninstall, "uninstall", false, "remove the add-on's software too; with --gitops, mark its Addon for uninstall just before the commit")
	remove.Flags().BoolVar(&keepValues, "keep-values", false, "hand a restricted add-on's values Secrets back instead of deleting them")
	remove.Flags().BoolVar(&allowEmpty, "allow-empty", false, "with --gitops and without --uninstall: commit the removal of the folder's last definition, once the AddonRepository sets spec.allowEmpty: true")
	removeWait.add(remove, "the Addon is gone")

	return []*cobra.Command{
		install, edit,
		toggle("suspend", "Suspend an add-on: it is planned, never applied (with --gitops, by a commit)", true),
		toggle("resume", "Resume a suspended add-on (with --gitops, by a commit); to apply exactly a reviewed plan, use install", false),
		remove,
	}
}

// removeGitopsUninstall commits the deletion of an add-on's definition,
// with its Addon marked for uninstall, so that the syncer's deletion
// removes the software too. The mark is set only once the Addon is known
// to be git's, synced from the writer's repository, branch and folder,
// and its file to be in the repository, just before the
// commit, and taken off again when the commit fails: a mark left behind
// would make a later, plain removal delete the running software, which the
// cluster profile's default policy (Orphan) keeps. flags end the commands
// it names (clusterFlags.suffix).
func removeGitopsUninstall(cmd *cobra.Command, c client.Client, w *gitops.Writer, key client.ObjectKey, flags string,
	report func(*cobra.Command, string, error, string) error) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	files := gitops.DefinitionFiles(w.Folder, key.Name)
	a := &capstanv1.Addon{}
	if err := c.Get(ctx, key, a); apierrors.IsNotFound(err) {
		return fmt.Errorf("addon %s does not exist, so nothing can be marked for uninstall: give the Addon's namespace with -n, or leave --uninstall out", key)
	} else if err != nil {
		return fmt.Errorf("cannot read addon %s to mark it for uninstall: %w", key, err)
	}
	repo := a.Labels[gitops.ManagedByGitLabel]
	if repo == "" {
		return fmt.Errorf("addon %s is not managed by git (it has no %s label): no commit removes it; remove it in the cluster with `capstan addon remove %s -n %s --uninstall%s`",
			key, gitops.ManagedByGitLabel, key.Name, key.Namespace, flags)
	}
	if made := a.Annotations[gitops.GitFileAnnotation]; made != "" && !slices.Contains(files, made) {
		return fmt.Errorf("addon %s was made from %s (annotation %s), not from %s: give --folder %s", key, made, gitops.GitFileAnnotation, strings.Join(files, " or "), path.Dir(made))
	}
	ar := &capstanv1.AddonRepository{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: repo}, ar); apierrors.IsNotFound(err) {
		return fmt.Errorf("addon %s names AddonRepository %s, which is gone: no commit removes the Addon any more; remove it in the cluster with `capstan addon remove %s -n %s --uninstall%s`",
			key, repo, key.Name, key.Namespace, flags)
	} else if err != nil {
		return fmt.Errorf("cannot read AddonRepository %s, which manages addon %s, to check that the commit removes the Addon: %w", repo, key, err)
	}
	if err := sameRepository(ar, w, "", ""); err != nil {
		return fmt.Errorf("addon %s: %w", key, err)
	}
	// An empty branch, on either side, is the remote's default.
	branch, follows := w.Branch, ar.Spec.Branch
	if branch == "" || follows == "" {
		def, _, err := gitops.Repo{URL: w.URL, Auth: w.Auth}.Head(ctx, "")
		if err != nil {
			return fmt.Errorf("cannot read the default branch of %s: %w", netguard.Redact(w.URL), err)
		}
		branch, follows = cmp.Or(branch, def), cmp.Or(follows, def)
	}
	if err := sameRepository(ar, w, branch, follows); err != nil {
		return fmt.Errorf("addon %s: %w", key, err)
	}
	if err := definitionExists(ctx, w, branch, files); err != nil {
		return fmt.Errorf("addon %s (AddonRepository %s): %w; give the --gitops URL and --branch of that AddonRepository", key, repo, err)
	}
	// NOTE: the AddonRepository is read here, so its spec decides, not
	// --allow-empty: a commit its syncer would refuse would leave the
	// Addon running, marked for uninstall.
	w.KeepLast = gitops.RefusesEmpty(ar.Spec)
	marked := a.Annotations[capstanv1.UninstallAnnotation] == "true"
	var commit string
	err := addons.WithRemovalMarks(ctx, c, a, addons.RemoveOptions{Uninstall: true}, func(ctx context.Context) error {
		if !marked {
			fmt.Fprintf(out, "Marked Addon %s for uninstall.\n", key)
		}
		// NOTE: the hand-made way out is printed as soon as an
		// interruption meets a push that was sent: what follows it (the
		// writer's and this command's reads of the branch, up to 30 s
		// each) a second Ctrl-C may cut, with the mark still on.
		var hint sync.Once
		printHint := func() {
			hint.Do(func() {
				if !marked {
					fmt.Fprintf(out, "Interrupted during the push: reading branch %q to tell whether the removal reached it. If you quit now, Addon %s may stay marked for uninstall: unless %s is gone from the branch, take the mark off with `kubectl annotate addon %s -n %s %s-`.\n",
						branch, key, strings.Join(files, " or "), key.Name, key.Namespace, capstanv1.UninstallAnnotation)
				}
			})
		}
		var pushing atomic.Bool
		w.OnPush = func() {
			pushing.Store(true)
			if ctx.Err() != nil {
				printHint()
			}
		}
		stop := context.AfterFunc(ctx, func() {
			if pushing.Load() {
				printHint()
			}
		})
		var err error
		commit, err = w.Remove(ctx, key.Name)
		if !stop() && pushing.Load() {
			printHint() // waits for the one the interruption began
		}
		// NOTE: only a push may have landed though its answer was lost:
		// interrupted before it, the mark is taken back at once, not
		// after a read of the branch that a second Ctrl-C would cut with
		// the mark still on.
		if err == nil || ctx.Err() == nil || !pushing.Load() {
			return err
		}
		printHint()
		if removalInBranch(ctx, w, branch, files) {
			fmt.Fprintf(out, "The removal of %s reached branch %q before the interruption; Addon %s stays marked for uninstall.\n", strings.Join(files, " or "), branch, key)
			return addons.Unanswered(err)
		}
		return err
	})
	if err != nil && !marked {
		// NOTE: on a fresh context: an interrupted command's own is done.
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptedCheckTimeout)
		defer cancel()
		if now := (&capstanv1.Addon{}); c.Get(readCtx, key, now) == nil && now.Annotations[capstanv1.UninstallAnnotation] != "true" {
			fmt.Fprintf(out, "Took the uninstall mark off Addon %s again: the removal is not in git.\n", key)
		}
	}
	return report(cmd, commit, lastDefinition(err, ar), "removed "+key.Name)
}

// lastDefinition says how to remove a folder's last definition when the
// writer refused to (gitops.ErrLastDefinition): ar is the AddonRepository
// that was read (with --uninstall), whose spec refused it, or nil when
// none was read and --allow-empty was not given. Other errors are
// returned as they are.
func lastDefinition(err error, ar *capstanv1.AddonRepository) error {
	if !errors.Is(err, gitops.ErrLastDefinition) {
		return err
	}
	if ar != nil {
		return fmt.Errorf("%w. AddonRepository %s/%s prunes and does not set spec.allowEmpty: set spec.allowEmpty: true on it, then remove again", err, ar.Namespace, ar.Name)
	}
	return fmt.Errorf("%w. Once the AddonRepository sets spec.allowEmpty: true (or spec.prune: false), give --allow-empty to commit the removal", err)
}

// sameRepository refuses a writer that commits to another repository,
// branch or folder than the AddonRepository ar syncs: its commit would
// delete a definition that ar never reads, and leave the Addon running,
// marked for uninstall, so that a later removal meant to keep the software
// would remove it. branch is the branch the writer commits to (--branch,
// or the remote's default) and follows the branch ar follows (spec.branch,
// or the remote's default); either empty compares no branch.
func sameRepository(ar *capstanv1.AddonRepository, w *gitops.Writer, branch, follows string) error {
	var diffs []string
	if gitops.RepositoryKey(ar.Spec.URL) != gitops.RepositoryKey(w.URL) {
		diffs = append(diffs, fmt.Sprintf("its URL is %s, not --gitops %s", netguard.Redact(ar.Spec.URL), netguard.Redact(w.URL)))
	}
	if branch != "" && follows != "" && branch != follows {
		diffs = append(diffs, fmt.Sprintf("it follows branch %q, not %q; give --branch %s", follows, branch, follows))
	}
	if gitops.CleanFolder(ar.Spec.Folder) != gitops.CleanFolder(w.Folder) {
		diffs = append(diffs, fmt.Sprintf("its folder is %q, not --folder %q; give --folder %s", gitops.CleanFolder(ar.Spec.Folder), gitops.CleanFolder(w.Folder), gitops.CleanFolder(ar.Spec.Folder)))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("it is synced by AddonRepository %s from another place than the commit would go, so the commit would not remove it: %s",
		ar.Name, strings.Join(diffs, "; "))
}

// interruptedCheckTimeout bounds what an interrupted removal still reads:
// the branch, to tell whether its push landed, and the Addon.
const interruptedCheckTimeout = 30 * time.Second

// removalInBranch reports whether the removal of files is in branch: an
// interrupted push (Ctrl-C, SIGTERM) may have landed though its answer was
// lost. It reads the branch on a fresh context, bounded on its own; when
// the branch cannot be read, it reports false, and the uninstall mark is
// taken back: an Addon removed by a commit without its mark keeps the
// software, while a mark left on an Addon that stays would uninstall it at
// a later removal meant to keep it.
func removalInBranch(ctx context.Context, w *gitops.Writer, branch string, files []string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptedCheckTimeout)
	defer cancel()
	err := definitionExists(ctx, w, branch, files)
	return errors.Is(err, errNotInBranch)
}

// errNotInBranch is definitionExists' error when none of the files is in
// the branch.
var errNotInBranch = errors.New("is not in branch")

// definitionExists reports, as an error, a definition that is in none of
// files in branch of the writer's repository: the commit would have
// nothing to delete.
func definitionExists(ctx context.Context, w *gitops.Writer, branch string, files []string) error {
	_, head, release, err := gitops.Repo{URL: w.URL, Auth: w.Auth}.Clone(ctx, branch)
	if err != nil {
		return err
	}
	defer release()
	for _, file := range files {
		if _, err := head.File(file); err == nil {
			return nil
		} else if !errors.Is(err, object.ErrFileNotFound) {
			return fmt.Errorf("cannot read %s in branch %q of %s: %w", file, branch, netguard.Redact(w.URL), err)
		}
	}
	return fmt.Errorf("%s %w %q of %s", strings.Join(files, " or "), errNotInBranch, branch, netguard.Redact(w.URL))
}

// printDefinition prints the definition of add-on name as the branch's
// head holds it, and on standard error where it was read and its blob
// hash, the --base of an edit made from it: standard output stays the
// file alone, to be redirected into one.
//
// NOTE: redirected, the file is written byte for byte, not through
// terminalText: its CRLF line ends or a comment in Latin-1, escaped, would
// come back to `edit --gitops -f FILE` as other bytes, and be committed
// so. On a terminal it is escaped (rawOut): nothing is saved there.
func printDefinition(cmd *cobra.Command, o *gitopsOptions, name string) error {
	r, err := o.reader()
	if err != nil {
		return err
	}
	def, err := r.Read(cmd.Context(), name)
	if err != nil {
		return err
	}
	if _, err := rawOut(cmd).Write(def.Content); err != nil {
		return err
	}
	// NOTE: the branch it was read from, named: the default branch may
	// hold the same blob, and the edit would be committed there.
	where := " --branch " + shellQuote(def.Branch)
	if o.folder != gitops.DefaultFolder {
		where += " --folder " + shellQuote(o.folder)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s at commit %s of branch %q: blob %s; to replace it, edit a copy and commit it with `capstan addon edit %s --gitops URL%s -f FILE --base %s`\n",
		def.File, gitops.ShortCommit(def.Commit), def.Branch, def.Blob, name, where, def.Blob)
	return nil
}

func readDefinitionFile(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, gitops.MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > gitops.MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes: a definition is a short YAML file", name, gitops.MaxFileSize)
	}
	return data, nil
}
