package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"

	"capstan.dev/capstan/internal/gitops"
)

func newValidateCommand() *cobra.Command {
	var root string
	var allowEmpty bool
	cmd := &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Check a folder of add-on definitions offline, exactly as the git syncer reads them",
		Long: `Check every definition file (*.yaml, *.yml) of DIR, by default ./addons,
exactly as the git syncer parses them, and print one file:line error per
problem. A git.path folder is checked against the repository's root: by
default the git checkout that holds DIR, or DIR's parent.

It exits with status 1 when any file is invalid, so a gitops repository's CI
can run it on every change. It exits with status 1 too when DIR holds no
definition, naming its subfolders that do: the syncer reads DIR alone, not
its subfolders, and refuses a commit that leaves the folder of an
AddonRepository empty unless spec.allowEmpty is set; give --allow-empty
when the folder is empty on purpose.`,
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
			if total == 0 {
				return emptyFolder(cmd, dir, abs, allowEmpty)
			}
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
	cmd.Flags().BoolVar(&allowEmpty, "allow-empty", false, "accept a folder with no definition, as an AddonRepository with spec.allowEmpty does")
	cmd.Flags().StringVar(&root, "root", "", "the repository's root, which git.path folders are checked against (default: the git checkout that holds DIR, or DIR's parent)")
	return cmd
}

// emptyFolder says what the syncer does with the folder dir (abs on disk)
// that holds no definition, naming its subfolders that hold some, which
// it does not read: it makes no Addon of it, and refuses a commit that
// would delete the Addons it made unless the AddonRepository sets
// spec.allowEmpty. So the folder fails validation unless allowEmpty says
// it is empty on purpose.
func emptyFolder(cmd *cobra.Command, dir, abs string, allowEmpty bool) error {
	note := ""
	if subs := subfoldersWithDefinitions(abs); len(subs) > 0 {
		for i, s := range subs {
			subs[i] = filepath.ToSlash(filepath.Join(dir, s)) + "/"
		}
		note = fmt.Sprintf("; its subfolders %s hold definitions, which the syncer does not read: move the files up into %s, or point spec.folder at one of them",
			strings.Join(subs, ", "), dir)
	}
	if allowEmpty {
		fmt.Fprintf(cmd.ErrOrStderr(), "0 definitions: %s holds none, and an AddonRepository that reads it needs spec.allowEmpty%s\n", dir, note)
		return nil
	}
	return fmt.Errorf("%s holds no definition file (*.yaml, *.yml)%s. The syncer would make no Addon of it, and refuse the commit "+
		"if its AddonRepository manages Addons, unless it sets spec.allowEmpty; give --allow-empty if the folder is empty on purpose", dir, note)
}

// subfoldersWithDefinitions names, sorted, at most five subfolders of dir
// that hold a definition file at any depth; .git is passed over, as it is
// no folder of the commit.
func subfoldersWithDefinitions(dir string) []string {
	list, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range list {
		if !e.IsDir() || e.Name() == ".git" || len(names) == 5 {
			continue
		}
		found := errors.New("found")
		err := filepath.WalkDir(filepath.Join(dir, e.Name()), func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				// NOTE: the names are a hint, not a rule: a subtree
				// that cannot be read is passed over.
				return nil
			case d.IsDir() && d.Name() == ".git":
				return filepath.SkipDir
			case d.Type().IsRegular() && gitops.IsDefinitionFile(d.Name()):
				return found
			}
			return nil
		})
		if errors.Is(err, found) {
			names = append(names, e.Name())
		}
	}
	return names
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
