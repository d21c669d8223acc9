package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/hooks"
	"capstan.dev/capstan/internal/render"
	"capstan.dev/capstan/internal/source"
)

// reasonDeleteHooksFromApplied is the reason of the event that says an
// uninstall renders its delete hooks from the chart version applied last,
// not the one the spec names now.
const reasonDeleteHooksFromApplied = "DeleteHooksFromApplied"

// reasonDeleteHooksNotFromApplied is the reason of the warning that says
// an uninstall's delete hooks come from another version than the one
// applied last, since that one could not be rendered.
const reasonDeleteHooksNotFromApplied = "DeleteHooksNotFromApplied"

// renderForDelete runs the render steps for the uninstall's delete hooks,
// from the source and version applied last (status.history[0]) when the
// spec may name another. A spec that manual sync, a gate or a stopped
// upgrade never let apply must not run the hooks of software that was
// never installed, nor skip those of the software that runs.
//
// A chart from a repository or an OCI registry is rendered at the applied
// version (appliedChart), with the current values: the applied values are
// not stored. How that render fails decides what runs:
//   - the applied version is gone for good (deleted from the repository's
//     index, a 404 or 410, a broken archive; goneForGood): the uninstall
//     renders what the spec names, as it did before, and a
//     DeleteHooksNotFromApplied warning names the version its hooks come
//     from. Another client error of the fetch (a 401 or 403 of expired
//     credentials, say) runs no delete hook, as below: the spec's version
//     may well come from the cache;
//   - it was fetched but does not render (the current values do not fit
//     it, a template fails, it is past the sandbox's memory or output
//     bound or the objects limit): no delete hook runs, as for any delete
//     render that fails for good, and the DeleteHooksRefused event names
//     the applied version and why. The spec's version's hooks would be
//     those of software that was never installed;
//   - it fails for a moment: the uninstall waits and tries again, as for
//     any delete render;
//   - the sandbox stopped it at its time bound: as for a render of what
//     the spec names, the uninstall waits for one pause and tries again,
//     and goes on without the delete hooks if it stops there again, or
//     at once when the namespace they would run in is going
//     (timeBoundStop).
//
// Nor is the applied version rendered for an https archive or a git
// folder, or a chart whose source or digest pin changed: the same warning
// says so when the render's version is not the applied one.
func (r *AddonReconciler) renderForDelete(ctx context.Context, s *scope) (bool, error) {
	applied, pin, why := appliedChart(s.addon)
	if pin == nil {
		done, err := r.runRenderSteps(ctx, s)
		if err == nil && !done && why != "" && applied != nil && renderedOther(s.addon, applied) {
			r.notFromApplied(ctx, s, applied, why)
		}
		return done, err
	}
	saved, src, ver := *s, s.addon.Status.Source, s.addon.Status.Version
	current := s.addon.Spec.Chart
	s.addon.Spec.Chart = pin
	done, stage, err := r.runRenderStepsAt(ctx, s)
	s.addon.Spec.Chart = current
	var stop *boundStop
	switch {
	case err == nil && !done && len(s.valuesErrors) > 0:
		r.appliedUnrendered(ctx, s, applied, current, "does not render: the current values have errors for it: "+s.mask().String(describeValuesErrors(s.valuesErrors)))
		return true, nil
	case err == nil:
		if !done {
			r.fromApplied(ctx, s, applied, current)
		}
		return done, nil
	case errors.As(err, &stop) && stop.Bound == "time":
		// NOTE: the time bound is not the inputs' verdict at its first
		// stop: deleteHooks judges it (timeBoundStop), as for a render of
		// what the spec names. The other bounds (memory, output, objects)
		// are the same at every try.
		return false, fmt.Errorf("the sandbox stopped the render of %s %s, the version applied last, at its time bound: %w", applied.Source, applied.Version, stop)
	case classify(err) != classTerminal && !source.NotInIndex(err):
		return false, err
	case stage != stageFetch:
		r.appliedUnrendered(ctx, s, applied, current, "does not render: "+s.mask().Error(err).Error())
		return true, nil
	case !goneForGood(err):
		// NOTE: a refusal (401, 403) or another client error says
		// nothing of the version being gone: the spec's version may come
		// from the cache, and its hooks are not those of the software
		// that runs.
		r.appliedUnrendered(ctx, s, applied, current, "could not be fetched, and not because it is gone from its repository: "+s.mask().Error(err).Error()+
			". Only a version gone for good (not in the repository's index, 404 or 410, a broken archive) falls back to the hooks of the version the spec names")
		return true, nil
	}
	// NOTE: the applied version cannot be fetched for good: the hooks the
	// spec names now are the closest left, as before Capstan kept to the
	// applied one.
	failed := s.mask().Error(err).Error()
	*s = saved
	s.addon.Status.Source, s.addon.Status.Version = src, ver
	done, err = r.runRenderSteps(ctx, s)
	if err == nil && !done {
		r.notFromApplied(ctx, s, applied, "it could not be fetched: "+failed)
	}
	return done, err
}

// stageFetch is the name of the render step that fetches the source
// (renderSteps, which spells it out so that the docs' test of the reasons
// reads FetchFailed there; TestStageFetchNamesTheFetchStep holds the two
// together).
const stageFetch = "Fetch"

// goneForGood reports whether a fetch of the applied version failed
// since that version is gone from its repository for good: not in the
// index, a 404 or 410, or an archive that is broken or not the pinned one.
func goneForGood(err error) bool {
	var fe *source.FetchError
	var ae *source.ArchiveError
	var de *source.DigestMismatchError
	return source.NotInIndex(err) || errors.As(err, &fe) && (fe.Status == http.StatusNotFound || fe.Status == http.StatusGone) ||
		errors.As(err, &ae) || errors.As(err, &de)
}

// appliedUnrendered runs none of the delete hooks, since the applied
// version does not render (or could not be fetched, but is not gone for
// good), and says why (refuseDeleteHooks): the uninstall goes on without
// them. why starts with the verb: "does not render: ...".
func (r *AddonReconciler) appliedUnrendered(ctx context.Context, s *scope, applied *capstanv1.Revision, current *capstanv1.ChartSource, why string) {
	s.hooks = nil
	r.refuseDeleteHooks(ctx, s, fmt.Sprintf("%s %s, the version applied last (revision %d), %s. "+
		"The hooks of what spec.chart.version asks for (%s) are not run in its place: they are not those of the software that runs",
		applied.Source, applied.Version, applied.Number, why, askedVersion(current)), renderFailedAhead(s.addon))
}

// runRenderSteps runs the render steps in order, up to one that is done
// or fails.
func (r *AddonReconciler) runRenderSteps(ctx context.Context, s *scope) (bool, error) {
	done, _, err := r.runRenderStepsAt(ctx, s)
	return done, err
}

// runRenderStepsAt runs the render steps as runRenderSteps does, and
// names the step that was done or failed.
func (r *AddonReconciler) runRenderStepsAt(ctx context.Context, s *scope) (bool, string, error) {
	for _, st := range r.renderSteps() {
		done, err := st.run(ctx, s)
		if err != nil || done {
			return done, st.name, err
		}
	}
	return false, "", nil
}

// appliedChart returns the revision applied last and, when the uninstall
// renders its delete hooks at that revision's version, the chart source
// that names it exactly: spec.chart with its version set to the applied
// one, for a chart repository or an OCI registry whose source is the
// applied one's. It returns no source when the spec's version is already
// the applied one, or when the applied one cannot be named, with why.
func appliedChart(a *capstanv1.Addon) (applied *capstanv1.Revision, pin *capstanv1.ChartSource, why string) {
	if len(a.Status.History) == 0 {
		return nil, nil, ""
	}
	applied = &a.Status.History[0]
	c := a.Spec.Chart
	switch {
	case applied.Version == "":
		return applied, nil, ""
	case a.Spec.Git != nil:
		return applied, nil, "a git folder is fetched again only at a full commit, and the history keeps a short one"
	case c == nil:
		return applied, nil, ""
	case c.URL != "":
		return applied, nil, "spec.chart.url names another archive now"
	case source.ChartDisplay(c) != applied.Source:
		return applied, nil, "the chart's source changed from " + applied.Source + " to " + source.ChartDisplay(c)
	case c.Version == applied.Version:
		return applied, nil, ""
	case c.Digest != "":
		return applied, nil, "spec.chart.digest pins another archive than the applied version's"
	}
	pinned := c.DeepCopy()
	pinned.Version = applied.Version
	return applied, pinned, ""
}

// renderedOther reports whether the render's source or version is not the
// applied revision's.
func renderedOther(a *capstanv1.Addon, applied *capstanv1.Revision) bool {
	return a.Status.Source != applied.Source || a.Status.Version != applied.Version
}

// fromApplied says, at the looks before the pre-delete stage is over,
// that the delete hooks are the applied version's, when that tells
// something (fromAppliedMessage).
func (r *AddonReconciler) fromApplied(ctx context.Context, s *scope, applied *capstanv1.Revision, current *capstanv1.ChartSource) {
	if preDeleteDone(s.addon) {
		return
	}
	msg := fromAppliedMessage(applied, current, s.hooks)
	if msg == "" {
		return
	}
	logf.FromContext(ctx).Info("Rendering the delete hooks from the applied version", "source", applied.Source, "version", applied.Version, "specVersion", current.Version)
	if r.Recorder != nil {
		r.Recorder.Eventf(s.addon, nil, "Normal", reasonDeleteHooksFromApplied, "Uninstall", "%s", msg)
	}
}

// fromAppliedMessage is the text of the DeleteHooksFromApplied event for a
// render of the applied revision with the hooks hs, or "" when there is
// nothing to say: the render has no delete hook, or the spec names exactly
// the applied version. It holds for a range or no version too, which may
// well resolve to the applied version.
func fromAppliedMessage(applied *capstanv1.Revision, current *capstanv1.ChartSource, hs []render.Hook) string {
	if current.Version == applied.Version || len(hooks.Select(hs, "pre-delete"))+len(hooks.Select(hs, "post-delete")) == 0 {
		return ""
	}
	return fmt.Sprintf("spec.chart.version asks for %s; the delete hooks are those of the applied %s %s (revision %d), "+
		"rendered with the current values, since the applied values are not stored.", askedVersion(current), applied.Source, applied.Version, applied.Number)
}

// askedVersion names what spec.chart.version asks for.
func askedVersion(c *capstanv1.ChartSource) string {
	if c.Version == "" {
		return "the newest stable version"
	}
	return c.Version
}

// notFromApplied warns, at the look that runs the pre-delete hooks, that
// the delete hooks come from the version the spec names now, not the
// applied one, and why.
func (r *AddonReconciler) notFromApplied(ctx context.Context, s *scope, applied *capstanv1.Revision, why string) {
	if preDeleteDone(s.addon) {
		return
	}
	msg := fmt.Sprintf("The delete hooks come from %s %s, which the spec names now, not from %s %s, the version applied last (revision %d), since %s.",
		s.addon.Status.Source, s.addon.Status.Version, applied.Source, applied.Version, applied.Number, why)
	logf.FromContext(ctx).Info("Rendering the delete hooks from another version than the applied one", "source", s.addon.Status.Source, "version", s.addon.Status.Version, "applied", applied.Version, "why", why)
	if r.Recorder != nil {
		r.Recorder.Eventf(s.addon, nil, "Warning", reasonDeleteHooksNotFromApplied, "Uninstall", "%s", truncate(msg, 1000))
	}
}
