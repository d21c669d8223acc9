package cli

import (
	"errors"
	"fmt"
	"io"
	"net/mail"
	"os"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/gitops"
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
	cmd.Flags().StringVar(&o.url, "gitops", "", "the gitops repository to commit to (required)")
	cmd.Flags().StringVar(&o.branch, "branch", "", "the branch to commit to (default: the repository's default branch)")
	cmd.Flags().StringVar(&o.folder, "folder", gitops.DefaultFolder, "the repository's folder of definitions")
	cmd.Flags().StringVar(&o.author, "author", "Capstan <capstan@localhost>", `the commits' author, as "Name <email>"`)
	_ = cmd.MarkFlagRequired("gitops")
}

func (o *gitopsOptions) writer() (*gitops.Writer, error) {
	author, err := mail.ParseAddress(o.author)
	if err != nil {
		return nil, fmt.Errorf(`--author %q must look like "Name <email>"`, o.author)
	}
	w := &gitops.Writer{URL: o.url, Branch: o.branch, Folder: o.folder, AuthorName: author.Name, AuthorEmail: author.Address}
	if token := os.Getenv(envGitToken); token != "" {
		user := os.Getenv(envGitUsername)
		if user == "" {
			user = "git"
		}
		w.Auth = &githttp.BasicAuth{Username: user, Password: token}
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
	var installFile string
	install := &cobra.Command{
		Use:   "install --gitops URL -f FILE",
		Short: "Commit a new add-on definition to the gitops repository",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := installOpts.writer()
			if err != nil {
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
	install.Flags().StringVarP(&installFile, "file", "f", "", "the definition file, or - for standard input (required)")
	_ = install.MarkFlagRequired("file")

	var editOpts gitopsOptions
	var editFile string
	edit := &cobra.Command{
		Use:   "edit NAME --gitops URL -f FILE",
		Short: "Commit a new version of an add-on's definition to the gitops repository",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := editOpts.writer()
			if err != nil {
				return err
			}
			content, err := readDefinitionFile(cmd, editFile)
			if err != nil {
				return err
			}
			commit, err := w.Edit(cmd.Context(), args[0], content)
			return report(cmd, commit, err, "edited "+args[0])
		},
	}
	editOpts.register(edit)
	edit.Flags().StringVarP(&editFile, "file", "f", "", "the new definition file, or - for standard input (required)")
	_ = edit.MarkFlagRequired("file")

	toggle := func(use, short string, suspend bool) *cobra.Command {
		var opts gitopsOptions
		cmd := &cobra.Command{
			Use:   use + " NAME --gitops URL",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
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
		return cmd
	}

	var removeOpts gitopsOptions
	var uninstall bool
	var namespace, kubeconfig string
	remove := &cobra.Command{
		Use:   "remove NAME --gitops URL [--uninstall]",
		Short: "Commit the deletion of an add-on's definition; with --uninstall, mark its Addon so its software is removed too",
		Long: `Commit the deletion of addons/NAME.yaml. The syncer then deletes the Addon,
and its deletion policy decides what happens to the software: the cluster
profile's default, Orphan, keeps it running.

With --uninstall, the Addon is first annotated capstan.dev/uninstall=true, so
that deleting it removes the software.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := removeOpts.writer()
			if err != nil {
				return err
			}
			if uninstall {
				c, err := gitopsKubeClient(kubeconfig)
				if err != nil {
					return err
				}
				key := types.NamespacedName{Namespace: namespace, Name: args[0]}
				if err := gitops.MarkUninstall(cmd.Context(), c, key); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Marked Addon %s for uninstall\n", key)
			}
			commit, err := w.Remove(cmd.Context(), args[0])
			return report(cmd, commit, err, "removed "+args[0])
		},
	}
	removeOpts.register(remove)
	remove.Flags().BoolVar(&uninstall, "uninstall", false, "remove the add-on's software too: set the uninstall annotation on its Addon before committing")
	remove.Flags().StringVarP(&namespace, "namespace", "n", "capstan-system", "the Addon's namespace, for --uninstall")
	remove.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig, for --uninstall (default: $KUBECONFIG, in-cluster, or ~/.kube/config)")

	return []*cobra.Command{
		install, edit,
		toggle("suspend", "Commit suspend: true to an add-on's definition: it is planned, never applied", true),
		toggle("resume", "Commit the removal of suspend: true from an add-on's definition", false),
		remove,
	}
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

// gitopsKubeClient connects to the cluster of a kubeconfig with the Addon types.
func gitopsKubeClient(kubeconfig string) (client.Client, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := capstanv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
