package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/render"
)

// renderObjects renders the artifact. A chart is rendered for an upgrade
// once the add-on has been applied, so .Release.IsUpgrade matches the hooks
// that run: an install before the first apply, an upgrade when the render
// changed since, and a resync with nothing new renders as the last apply
// did.
func (r *AddonReconciler) renderObjects(ctx context.Context, s *scope) (bool, error) {
	// The chart's own required and fail messages say which value to set;
	// the values that must stay hidden are masked in them, as everywhere.
	// NOTE: the mask is read at each use: a folder's render adds the values
	// it decrypts as it reads its files.
	opts := render.Options{ReleaseName: s.releaseName(), Namespace: s.namespace, Sandbox: r.Config.Sandbox,
		Mask: func(text string) string { return s.mask().String(text) }, PostRender: render.PostRenderFor(&s.addon.Spec),
		// NOTE: counted before the chart's output is decoded, which would
		// otherwise cost the controller more than the worker's render.
		MaxObjects: r.Config.MaxObjects}
	var vals map[string]any
	if s.noInputs {
		// Without its variables or its decrypted files a folder renders
		// wrong; the plan shows why.
		return false, nil
	}
	if s.variables != nil {
		opts.Variables = s.variables.Values
	}
	if s.decrypter != nil {
		opts.Decrypt = s.decrypter.File
	}
	if s.artifact.IsChart() {
		if s.values == nil {
			// Without values there is nothing to render; the plan shows why.
			return false, nil
		}
		vals = s.values.Values
		caps, err := s.cluster.capabilities(false)
		if err != nil {
			return false, err
		}
		opts.Capabilities = caps
		opts.UpgradeFor = func(hash string) bool {
			switch applied := s.addon.Status.AppliedHash; {
			case applied == "":
				return installBegun(&s.addon.Status, hash)
			case applied != hash:
				return true
			}
			return s.addon.Status.AppliedAsUpgrade
		}
	}
	// A chart's render that the sandbox stopped at a bound is not run
	// again with the same inputs until a pause has passed (boundRenders).
	// A plan on demand renders whatever was remembered: a person asked
	// for it, and the API computes few at once.
	var key *boundKey
	if opts.Sandbox != nil && !s.readOnly {
		opts.Admit = func(hash string, upgrade bool) error {
			k := boundKeyOf(s.addon, hash, upgrade)
			if err := r.bound.admit(client.ObjectKeyFromObject(s.addon), k, s.refresh != "", time.Now()); err != nil {
				return err
			}
			key = &k
			return nil
		}
	}
	res, err := render.Render(ctx, s.artifact, vals, opts)
	if key != nil {
		err = r.bound.record(client.ObjectKeyFromObject(s.addon), *key, err, time.Now())
	}
	if stop := (*boundStop)(nil); errors.As(err, &stop) {
		// The add-on is looked at again once the pause ends, when that
		// comes before the resync.
		s.retryStalled = time.Until(stop.until) + time.Second
	}
	if s.decryptProblems() {
		return false, nil
	}
	if err != nil {
		return false, terminal{err}
	}
	if n := len(res.Objects) + len(res.Hooks); n > r.Config.MaxObjects {
		return false, terminal{fmt.Errorf("the source renders %d objects, more than the limit of %d per add-on (--max-objects-per-addon); nothing was applied: check the values that drive its loops, split it into several add-ons, or raise the limit", n, r.Config.MaxObjects)}
	}
	s.render, s.upgrade = res, res.Upgrade
	return false, nil
}
