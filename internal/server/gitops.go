package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/addons"
	"capstan.dev/capstan/internal/gitops"
)

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// An Addon that git manages is never changed in the cluster: the syncer
// would undo it, and git is its truth. The API changes it by a commit to its
// AddonRepository, made with the repository's own credentials and naming
// the person as the author. Because the commit is Capstan's, not the
// person's, the server first asks the API server with a SubjectAccessReview
// whether the person may make that change to the Addon.

// gitManaged is the AddonRepository that a's label names, or "".
func gitManaged(a *capstanv1.Addon) string { return a.Labels[gitops.ManagedByGitLabel] }

// managedBy reads the AddonRepository that manages a; nil when none does:
// a carries no label, or its label names a repository that is gone. A
// deleted AddonRepository leaves its Addons labelled, and no syncer
// manages them any more, so the API and the page change them in the
// cluster, as the CLI does; a commit to a repository nobody syncs would
// change nothing. A suspended repository still manages its Addons: the
// commit is applied when it is resumed.
func (s *Server) managedBy(ctx context.Context, a *capstanv1.Addon) (*capstanv1.AddonRepository, error) {
	name := gitManaged(a)
	if name == "" {
		return nil, nil
	}
	if s.Controller == nil {
		return nil, apiError{Code: http.StatusNotImplemented, Reason: "NotImplemented",
			Message: fmt.Sprintf("Addon %s is managed by git (AddonRepository %s), and this server does not commit to gitops repositories", a.Name, name)}
	}
	repo := &capstanv1.AddonRepository{}
	err := s.Controller.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, repo)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the AddonRepository %s that manages Addon %s: %w", name, a.Name, err)
	}
	return repo, nil
}

// commitAnswer is the answer to a change made by a commit.
type commitAnswer struct {
	// Commit is the commit that makes the change; the syncer applies it.
	Commit string `json:"commit"`
	// Repository is the AddonRepository committed to.
	Repository string `json:"repository"`
	// Addon is the Addon once the syncer has applied the commit, when it
	// did so within syncWait; absent otherwise (and for a removal).
	Addon *capstanv1.Addon `json:"addon,omitempty"`
	// NotQueued says that this controller's syncer was not asked to apply
	// the commit at once as the repository is of another controller shard,
	// whose syncer applies it at its interval or push webhook.
	NotQueued string `json:"notQueued,omitempty"`
}

// syncWait is how long a commit's answer waits for the syncer to apply it.
const syncWait = 10 * time.Second

// mayChange asks whether the user may verb the Addon, as a
// SubjectAccessReview of the user as the token's review names them: name,
// UID, groups and extra.
func (s *Server) mayChange(ctx context.Context, u User, verb string, key client.ObjectKey) error {
	return s.authorize(ctx, u, verb, key, "no commit was made")
}

// authorize asks the API server whether the user may verb the Addon key
// (any Addon of its namespace when key has no name), and returns the
// answer to send when not: 403 when they may not, 503 when the review
// failed. outcome says what was therefore not done.
func (s *Server) authorize(ctx context.Context, u User, verb string, key client.ObjectKey, outcome string) error {
	what := "Addon " + key.String()
	if key.Name == "" {
		what = "Addons in namespace " + key.Namespace
	}
	if ok, wait := s.accessReviews.Allow(u.Name, s.now()); !ok {
		return reviewRefusal(&throttledError{retryAfter: wait,
			why: fmt.Sprintf("%s asked for more access reviews just now than this server makes for one user, so %s", u.Name, outcome)})
	}
	allowed, err := s.allowed(ctx, u, verb, key)
	if err != nil {
		return apiError{Code: http.StatusServiceUnavailable, Reason: "ServiceUnavailable",
			Message: fmt.Sprintf("the Kubernetes API server could not review whether %s may %s %s (%v), so %s; try again", u.Name, verb, what, err, outcome)}
	}
	if !allowed {
		return apiError{Code: http.StatusForbidden, Reason: "Forbidden",
			Message: fmt.Sprintf("%s may not %s %s, so %s", u.Name, verb, what, outcome)}
	}
	return nil
}

// allowed asks the API server, by a SubjectAccessReview of the user as the
// token's review names them (name, UID, groups and extra), whether the
// user may verb the Addon key; a key without a name asks about any Addon
// of its namespace.
func (s *Server) allowed(ctx context.Context, u User, verb string, key client.ObjectKey) (bool, error) {
	var extra map[string]authorizationv1.ExtraValue
	if len(u.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = v
		}
	}
	reviewer := s.AccessReviewer
	if reviewer == nil {
		reviewer = s.Reviewer
	}
	review, err := reviewer.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: key.Namespace, Name: key.Name, Verb: verb, Group: capstanv1.GroupVersion.Group, Resource: "addons",
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// gitopsRepository is the AddonRepository that new add-ons of a trusted
// namespace are committed to: the first by name, when the namespace has
// any; nil otherwise, and for a namespace that is not trusted, whose
// add-ons are created in the cluster.
func (s *Server) gitopsRepository(ctx context.Context, namespace string) (*capstanv1.AddonRepository, error) {
	if s.Controller == nil || !slices.Contains(s.trusted(), namespace) {
		return nil, nil
	}
	list := &capstanv1.AddonRepositoryList{}
	if err := s.Controller.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the AddonRepositories of %s: %w", namespace, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	slices.SortFunc(list.Items, func(a, b capstanv1.AddonRepository) int { return strings.Compare(a.Name, b.Name) })
	return &list.Items[0], nil
}

// addOrCommit adds the new Addon a for the user, from the catalog or a
// chart link: in a trusted namespace with a gitops repository git is the
// truth, so its definition (its objects in target, when set) is committed
// there, to install, and the syncer creates the Addon; elsewhere it is
// created in the cluster with the secret inputs, once check, when set,
// lets it (a commit's values are checked by its writer, gitValuesCheck).
// A secret input cannot be committed: git must not hold it. It answers
// the flash, "commit" or "add".
func (s *Server) addOrCommit(ctx context.Context, u User, a *capstanv1.Addon, target string, inputs map[string]string, check func(context.Context) error) (string, error) {
	repo, err := s.gitopsRepository(ctx, a.Namespace)
	if err != nil {
		return "", err
	}
	if repo == nil {
		if err := addons.ForShard(a, s.Config); err != nil {
			return "", err
		}
		c, _, err := s.userClient(u)
		if err != nil {
			return "", err
		}
		if check != nil {
			if err := check(ctx); err != nil {
				return "", err
			}
		}
		_, err = addons.Add(ctx, c, a, inputs)
		return "add", err
	}
	if len(inputs) > 0 {
		return "", apiError{Code: http.StatusUnprocessableEntity, Reason: "Invalid",
			Message: "A secret input cannot be committed to git, and this namespace's add-ons are in its AddonRepository " + repo.Name + ": leave the secret fields empty, and name a Secret in the definition's valuesFrom."}
	}
	_, err = s.commitNew(ctx, u, repo, definitionOf(a, target))
	return "commit", err
}

// trusted lists the namespaces whose add-ons use the cluster profile.
func (s *Server) trusted() []string { return s.config().TrustedNamespaces }

// commitNew commits a new add-on's definition to a gitops repository,
// after the user's access review of creating the Addon.
func (s *Server) commitNew(ctx context.Context, u User, repo *capstanv1.AddonRepository, def *gitops.Definition) (string, error) {
	content, err := gitops.Encode(def)
	if err != nil {
		return "", err
	}
	answer, err := s.commitTo(ctx, u, repo, client.ObjectKey{Namespace: repo.Namespace, Name: def.Name}, "add", "create",
		func(ctx context.Context, wr *gitops.Writer) (string, error) { return wr.Install(ctx, content) })
	return answer.Commit, err
}

// repoWriter is the writer of a repository, with its credentials and the
// user as the author.
func (s *Server) repoWriter(ctx context.Context, u User, repo *capstanv1.AddonRepository) (*gitops.Writer, error) {
	// NOTE: KeepLast, as the syncer would refuse the commit that removes
	// the last definition of a repository that prunes without allowing an
	// empty folder: the person is told now, not by a commit that waits.
	w := &gitops.Writer{URL: repo.Spec.URL, Branch: repo.Spec.Branch, Folder: repo.Spec.Folder,
		AuthorName: u.Name, AuthorEmail: "capstan@localhost", KeepLast: gitops.RefusesEmpty(repo.Spec), CheckValues: s.gitValuesCheck(u)}
	if s.GitAuth != nil {
		var secret *corev1.Secret
		if ref := repo.Spec.SecretRef; ref != nil {
			secret = &corev1.Secret{}
			if err := s.Controller.Get(ctx, client.ObjectKey{Namespace: repo.Namespace, Name: ref.Name}, secret); err != nil {
				return nil, fmt.Errorf("reading the credentials of AddonRepository %s: %w", repo.Name, err)
			}
		}
		auth, err := s.GitAuth(ctx, repo.Spec.URL, secret)
		if err != nil {
			return nil, err
		}
		w.Auth = auth
	}
	return w, nil
}

// commit makes a change to an Addon that repo manages by a commit, after
// the user's access review, and answers the commit.
func (s *Server) commit(w http.ResponseWriter, r *http.Request, repo *capstanv1.AddonRepository, a *capstanv1.Addon, verb, rbacVerb string,
	change func(ctx context.Context, wr *gitops.Writer, name string) (string, error)) {
	answer, err := s.commitChange(r.Context(), userOf(r), repo, a, verb, rbacVerb, change)
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	writeJSON(w, http.StatusAccepted, answer)
}

// commitChange commits one change to the definition of an Addon that
// repo manages (see managedBy). The API and the page both change such an
// Addon through it.
func (s *Server) commitChange(ctx context.Context, u User, repo *capstanv1.AddonRepository, a *capstanv1.Addon, verb, rbacVerb string,
	change func(ctx context.Context, wr *gitops.Writer, name string) (string, error)) (commitAnswer, error) {
	return s.commitTo(ctx, u, repo, client.ObjectKeyFromObject(a), verb, rbacVerb,
		func(ctx context.Context, wr *gitops.Writer) (string, error) { return change(ctx, wr, a.Name) })
}

// removalCommitTimeout bounds a removal's commit, which runs detached from
// the request once the Addon is marked for uninstall (removeByCommit).
const removalCommitTimeout = 2 * time.Minute

// removeByCommit removes a git-managed Addon by a commit. With uninstall,
// the Addon is first marked, with the user's own token, so that the
// syncer's deletion removes the software: the annotation is not
// configuration, so the syncer keeps it. The access review comes before
// the mark, and a commit that fails takes the mark back: a mark left on an
// Addon that stays would make a later removal, meant to keep the software,
// uninstall it.
//
// NOTE: once marked, the commit runs detached from the request, bounded by
// removalCommitTimeout: a person who closes the tab, or a proxy that stops
// waiting, while the commit waits for its turn, clones or pushes, would
// otherwise end it with nothing committed. It then finishes or fails on
// its own, and a failure takes the mark back.
func (s *Server) removeByCommit(ctx context.Context, u User, c client.Client, repo *capstanv1.AddonRepository, a *capstanv1.Addon, uninstall bool) (commitAnswer, error) {
	remove := func(ctx context.Context, wr *gitops.Writer, name string) (string, error) { return wr.Remove(ctx, name) }
	if !uninstall {
		return s.commitChange(ctx, u, repo, a, "remove", "delete", remove)
	}
	if err := s.mayChange(ctx, u, "delete", client.ObjectKeyFromObject(a)); err != nil {
		return commitAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removalCommitTimeout)
	defer cancel()
	var answer commitAnswer
	err := addons.WithRemovalMarks(ctx, c, a, addons.RemoveOptions{Uninstall: true}, func(ctx context.Context) error {
		var err error
		// The review above stands for this commit: a second one would
		// cost the user two of their reviews for one removal.
		answer, err = s.commitReviewed(ctx, u, repo, client.ObjectKeyFromObject(a), "remove",
			func(ctx context.Context, wr *gitops.Writer) (string, error) { return remove(ctx, wr, a.Name) })
		return err
	})
	return answer, err
}

// commitTo makes one commit to repo for the Addon key, after the user's
// access review of rbacVerb on it, and asks the syncer to apply it at once;
// the answer holds the Addon the syncer wrote, unless it was removed.
func (s *Server) commitTo(ctx context.Context, u User, repo *capstanv1.AddonRepository, key client.ObjectKey, verb, rbacVerb string,
	change func(ctx context.Context, wr *gitops.Writer) (string, error)) (commitAnswer, error) {
	if err := s.mayChange(ctx, u, rbacVerb, key); err != nil {
		return commitAnswer{}, err
	}
	return s.commitReviewed(ctx, u, repo, key, verb, change)
}

// commitReviewed is commitTo once the user's access review has allowed the
// change.
func (s *Server) commitReviewed(ctx context.Context, u User, repo *capstanv1.AddonRepository, key client.ObjectKey, verb string,
	change func(ctx context.Context, wr *gitops.Writer) (string, error)) (commitAnswer, error) {
	wr, err := s.repoWriter(ctx, u, repo)
	if err != nil {
		return commitAnswer{}, err
	}
	commit, err := change(ctx, wr)
	if err != nil {
		return commitAnswer{}, err
	}
	s.Log.Info("Commit", "user", u.Name, "verb", verb, "addon", key.String(), "commit", commit)
	answer := commitAnswer{Commit: commit, Repository: repo.Name}
	if s.Syncer != nil {
		// NOTE: the commit is made whatever the trigger says; waiting for
		// a sync that was not queued here would only hold the answer.
		if err := s.Syncer.Trigger(ctx, client.ObjectKeyFromObject(repo)); err != nil {
			// NOTE: only the shard is for the user to know; another
			// error (the repository deleted a moment ago, a request
			// cancelled) is the log's.
			if other := (*gitops.OtherShardError)(nil); errors.As(err, &other) {
				answer.NotQueued = other.Error()
			}
			s.Log.Info("The syncer was not asked to apply the commit", "addonRepository", client.ObjectKeyFromObject(repo).String(), "reason", err.Error())
		} else if verb != "remove" {
			answer.Addon = s.awaitSync(ctx, u, key, commit)
		}
	}
	return answer, nil
}

// awaitSync waits up to syncWait for the syncer to write the Addon from
// commit, and returns it, read with the user's token; nil when it did not.
func (s *Server) awaitSync(ctx context.Context, u User, key client.ObjectKey, commit string) *capstanv1.Addon {
	c, _, err := s.userClient(u)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	for {
		a := &capstanv1.Addon{}
		if err := c.Get(ctx, key, a); err == nil && a.Annotations[gitops.GitCommitAnnotation] == commit {
			return a
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}
