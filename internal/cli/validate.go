package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"

	"capstan.dev/capstan/internal/gitops"
)

func newValidateCommand() *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Check a folder of add-on definitions offline, exactly as the git syncer reads them",
		Long: `Check every definition file (*.yaml, *.yml) of DIR, by default ./addons,
exactly as the git syncer parses them, and print one file:line error per
problem. A git.path folder is checked against the repository's root: by
default the git checkout that holds DIR, or DIR's parent.

It exits with status 1 when any file is invalid, so a gitops repository's CI
can run it on every change.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := gitops.DefaultFolder
			if len(args) == 1 {
				dir = args[0]
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if resolved, err := filepath.EvalSymlinks(abs); err == nil {
				abs = resolved
			}
			if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s is not a folder of definitions: name the folder, such as addons", dir)
			}
			if root == "" {
				root = repositoryRoot(abs)
			}
			rootAbs, err := filepath.Abs(root)
			if err != nil {
				return err
			}
			if resolved, err := filepath.EvalSymlinks(rootAbs); err == nil {
				rootAbs = resolved
			}
			folder, err := filepath.Rel(rootAbs, abs)
			if err != nil || folder == ".." || strings.HasPrefix(folder, ".."+string(filepath.Separator)) {
				return fmt.Errorf("%s is not inside the repository root %s: set --root", dir, root)
			}
			snap, err := gitops.ReadDir(rootAbs, folder)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, f := range snap.Invalid {
				fmt.Fprintln(out, f.Message)
			}
			total := len(snap.Definitions) + len(snap.Invalid)
			if len(snap.Invalid) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d definitions are invalid\n", len(snap.Invalid), total)
				return exitError{code: 1}
			}
			if total == 1 {
				fmt.Fprintln(cmd.ErrOrStderr(), "1 definition is valid")
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d definitions are valid\n", total)
			return nil
		},
	}
	cmd.Flags().StringVar(&root, "root", "", "the repository's root, which git.path folders are checked against (default: the git checkout that holds DIR, or DIR's parent)")
	return cmd
}

// repositoryRoot finds the git checkout that holds dir, or else dir's parent.
func repositoryRoot(dir string) string {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err == nil {
		if wt, err := repo.Worktree(); err == nil {
			top := wt.Filesystem.Root()
			if resolved, err := filepath.EvalSymlinks(top); err == nil {
				return resolved
			}
			return top
		}
	}
	return filepath.Dir(dir)
}
