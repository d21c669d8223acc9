package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/netguard"
	"capstan.dev/capstan/internal/registration"
	"capstan.dev/capstan/internal/source"
)

// registrationRetry is how soon a manifest that could not be read is read
// again the first time; each failure after doubles it, up to the resync
// interval.
const registrationRetry = 30 * time.Second

// manifestReadTimeout bounds one read of a manifest, headers and body: at
// most 64 KiB, from a Service of the cluster or an address the cluster
// admin named, it needs well under a second; a server that answers
// slowly must not hold a reconcile worker for the fetch guard's minutes.
const manifestReadTimeout = 10 * time.Second

// register reads the manifest of a Ready add-on whose chart asks for it,
// once per applied render (and on a sync request), and records it in
// status.registration with the Registered condition.
func (r *AddonReconciler) register(ctx context.Context, s *scope) (bool, error) {
	st := &s.addon.Status
	src, what, redirects, err := r.registrationSource(ctx, s)
	if src == "" && err == nil {
		st.Registration = nil
		apimeta.RemoveStatusCondition(&st.Conditions, capstanv1.ConditionRegistered)
		return true, nil
	}
	if err != nil {
		reason := "PrimaryNotFound"
		var na notAnAddon
		switch {
		case errors.As(err, &na):
			reason = "NotAnAddon"
			st.Registration = nil
		case errors.As(err, new(primaryRefused)):
			// A refusal, as ManifestInvalid and NameTaken are: the
			// registration read before (from a primary this add-on had in
			// this cluster, say, before spec.kubeConfig moved it) no
			// longer stands, so the page drops its tiles and links and the
			// name is free for another add-on.
			reason = "PrimaryRefused"
			st.Registration = nil
		}
		r.registered(s, false, reason, err.Error())
		return true, nil
	}
	shown := netguard.Redact(src)
	// NOTE: a registration of this render and address is not read again,
	// unless the last read failed (ManifestUnreadable): its message
	// promises a read after the wait, as after a sync request's read got
	// a 404 over which the registration was kept. The condition, not only
	// the wait remembered in r.unreadable, says so, so the promise also
	// holds after a restart.
	if reg := st.Registration; reg != nil && reg.Source == shown && reg.AppliedHash == st.AppliedHash && !s.verdict.HandledSyncRequest &&
		!readOwed(st.Conditions) {
		return true, nil
	}
	key := types.NamespacedName{Namespace: s.addon.Namespace, Name: s.addon.Name}
	check := registrationCheck{source: src, appliedHash: st.AppliedHash}
	if prev, ok := r.refusals.Load(key); ok && refusalStands(prev.(registrationCheck), check, s.addon, s.verdict.HandledSyncRequest) {
		return true, nil
	}
	r.refusals.Delete(key)
	if r.Fetcher == nil {
		return true, nil
	}
	now := time.Now()
	// u is the last failed read of this add-on, if any; same says it was a
	// read of this render and address, not before a sync request.
	prev, _ := r.unreadable.Load(key)
	u, _ := prev.(unreadableRead)
	same := u.check == check && !s.verdict.HandledSyncRequest
	if same && now.Before(u.next) {
		s.requeueSoon(u.next.Sub(now))
		return true, nil
	}
	readCtx, cancel := context.WithTimeout(ctx, manifestReadTimeout)
	// NOTE: a redirect from the primary is not followed: the pod behind it,
	// which a tenant may run, would otherwise send the controller's request
	// to any address the fetch guard allows, and every check of the
	// primary would protect nothing. spec.registration.url is the cluster
	// admin's own address, often outside the cluster (a release asset
	// redirects to a signed address that changes): it is followed, each
	// hop checked by the fetch guard, as a chart download is
	// (registrationSource says which).
	data, err := r.Fetcher.Document(readCtx, src, redirects, registration.MaxManifestBytes, what)
	timedOut := readCtx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		if definiteAnswer(err) {
			// NOTE: an app may answer 404, 401 or 403 for a moment after it
			// turns Ready (its routes or its auth not yet up), at every
			// upgrade: a registration that stands is kept over one such
			// answer, and cleared only when the read after the wait gets
			// one again.
			if st.Registration != nil && !(u.definite && same) {
				r.unreadable.Store(key, unreadableRead{check: check, failures: 1, next: now.Add(registrationRetry), definite: true})
				r.registered(s, false, "ManifestUnreadable", fmt.Sprintf("the add-on's manifest could not be read: %v; "+
					"the last registration stays until the next read, in %s, gets such an answer again", err, registrationRetry))
				s.requeueSoon(registrationRetry)
				return true, nil
			}
			st.Registration = nil
			r.unreadable.Delete(key)
			r.registered(s, false, "ManifestMissing", "the add-on's manifest could not be read: "+err.Error()+
				"; it is read again after a new apply, a change of its address or a sync request (spec.syncRequest)")
			r.refusals.Store(key, check)
			return true, nil
		}
		failures := 0
		if same {
			failures = u.failures
		}
		wait := unreadableRetry(failures, r.Config.ResyncInterval)
		r.unreadable.Store(key, unreadableRead{check: check, failures: failures + 1, next: now.Add(wait)})
		msg := "the add-on's manifest could not be read: " + err.Error()
		if timedOut {
			msg = fmt.Sprintf("%s was not served within %s, the limit of a manifest's read: %v", what, manifestReadTimeout, err)
		}
		r.registered(s, false, "ManifestUnreadable", fmt.Sprintf("%s; read again in %s", msg, wait))
		s.requeueSoon(wait)
		return true, nil
	}
	r.unreadable.Delete(key)
	reg, err := registration.Parse(data, s.addon.Name)
	if err != nil {
		st.Registration = nil
		r.registered(s, false, "ManifestInvalid", err.Error()+"; fix "+what)
		r.refusals.Store(key, check)
		return true, nil
	}
	// The add-on that registered a name first keeps it.
	if held := st.Registration; held == nil || held.Name != reg.Name {
		if other, err := r.registeredBy(ctx, s.addon, reg.Name); err != nil {
			return false, err
		} else if other != "" {
			st.Registration = nil
			r.registered(s, false, "NameTaken", fmt.Sprintf("Addon %s registered the name %q first; two add-ons cannot register one name", other, reg.Name))
			r.refusals.Store(key, check)
			return true, nil
		}
	}
	reg.Source, reg.AppliedHash, reg.ReadAt = shown, st.AppliedHash, metav1.Now()
	st.Registration = reg
	r.registered(s, true, "Registered", fmt.Sprintf("read from %s", shown))
	return true, nil
}

// readOwed says whether the Registered condition is ManifestUnreadable,
// whose message promises that the manifest is read again.
func readOwed(conds []metav1.Condition) bool {
	c := apimeta.FindStatusCondition(conds, capstanv1.ConditionRegistered)
	return c != nil && c.Reason == "ManifestUnreadable"
}

// unreadableRead is a manifest read that failed for a reason that may
// pass (no connection, a server error, a timeout, a redirect), or a
// definite answer that a standing registration is kept over once: the
// address and applied render, how many reads in a row failed, when the
// next may be made, and whether the last was a definite answer.
type unreadableRead struct {
	check    registrationCheck
	failures int
	next     time.Time
	definite bool
}

// unreadableRetry is how long to wait before reading again a manifest
// whose last failures reads failed: registrationRetry, doubled at each
// failure after the first, at most resync (five minutes if unset).
func unreadableRetry(failures int, resync time.Duration) time.Duration {
	if resync <= 0 {
		resync = 5 * time.Minute
	}
	return doubling(registrationRetry, failures, resync)
}

// definiteAnswer says whether a failed read is an answer that the same
// address gives again until someone changes what it serves: a 4xx status
// but 408 and 429, which ask to come back, or a manifest over its size
// limit. Anything else (no connection, a 5xx, a timeout, a redirect) may
// pass, and is read again after a while.
func definiteAnswer(err error) bool {
	var fe *source.FetchError
	if !errors.As(err, &fe) || netguard.IsRefused(err) {
		return false
	}
	// The manifest's own limit is far under the fetch guard's cap, but a
	// guard set lower refuses the same body every time too.
	if errors.As(err, new(*source.TooLargeError)) || errors.As(err, new(*netguard.TooLargeError)) {
		return true
	}
	return fe.Status >= 400 && fe.Status < 500 && fe.Status != http.StatusRequestTimeout && fe.Status != http.StatusTooManyRequests
}

// registrationCheck is a manifest read that ended in a refusal
// (ManifestMissing, ManifestInvalid or NameTaken): the address read and the applied render
// it belonged to.
type registrationCheck struct{ source, appliedHash string }

// refusalStands says whether a refusal recorded by prev still answers for
// the add-on now, so that neither the manifest is read nor the Addons are
// listed again: the same address and the same applied render, no sync
// request, and the Registered condition still the refusal. A name another
// add-on gives up is thus taken at the add-on's next apply or sync request
// (or after a restart), not at every resync.
// NOTE: without it, each resync of a refused add-on read its manifest and,
// for NameTaken, listed every Addon of the cluster from the API server: N
// add-ons of one name cost N lists of N Addons every resync.
func refusalStands(prev, now registrationCheck, addon *capstanv1.Addon, syncRequest bool) bool {
	if prev != now || syncRequest || addon.Status.Registration != nil {
		return false
	}
	c := apimeta.FindStatusCondition(addon.Status.Conditions, capstanv1.ConditionRegistered)
	return c != nil && c.Status == metav1.ConditionFalse && (c.Reason == "ManifestMissing" || c.Reason == "ManifestInvalid" || c.Reason == "NameTaken")
}

// registered sets the Registered condition.
func (r *AddonReconciler) registered(s *scope, ok bool, reason, msg string) {
	c := metav1.Condition{Type: capstanv1.ConditionRegistered, Status: metav1.ConditionFalse, Reason: reason,
		Message: conditions.Truncate(msg, 4096), ObservedGeneration: s.addon.Generation}
	if ok {
		c.Status = metav1.ConditionTrue
	}
	conditions.Put(&s.addon.Status.Conditions, c)
}

// registrationSource is the address of the add-on's manifest, what names
// it in messages, and whether a redirect from it is followed: "" for a
// chart that is not marked an add-on; spec.registration.url in the cluster
// profile, whose redirects are followed; otherwise the manifest path on
// the primary Service, whose redirects are not, but for an add-on
// installed into a remote cluster, which must name its manifest by
// spec.registration.url. An add-on that sets spec.registration but does
// not register is told so.
func (r *AddonReconciler) registrationSource(ctx context.Context, s *scope) (string, string, source.Redirects, error) {
	if s.artifact == nil {
		return "", "", source.NoRedirect, nil
	}
	if !s.artifact.IsChart() || s.artifact.Chart.Chart.Metadata == nil ||
		s.artifact.Chart.Chart.Metadata.Annotations[capstanv1.ChartAddonAnnotation] != "true" {
		if s.addon.Spec.Registration == nil {
			return "", "", source.NoRedirect, nil
		}
		what := fmt.Sprintf("the chart's Chart.yaml does not mark it an add-on (%s: \"true\")", capstanv1.ChartAddonAnnotation)
		if !s.artifact.IsChart() {
			what = "the add-on's source is a git folder, not a chart marked an add-on"
		}
		return "", "", source.NoRedirect, notAnAddon(fmt.Sprintf("spec.registration.url is set, but %s, so no manifest is read; "+
			"remove spec.registration, or use a chart that registers (%s: \"true\" in its Chart.yaml)", what, capstanv1.ChartAddonAnnotation))
	}
	ann := s.artifact.Chart.Chart.Metadata.Annotations
	if url, ok := adminAddress(s); ok {
		return url, "the manifest that spec.registration.url names", source.FollowRedirects, nil
	}
	if s.cluster != nil && s.cluster.server != "" {
		// NOTE: the primary Service is in the remote cluster, and its
		// cluster IP is an address of that cluster's Service range, which
		// the clusters often share: read from here, it reaches a Service of
		// this cluster that holds the same IP (perhaps another tenant's),
		// or nothing, and a retry every 30 s would hold a worker each time.
		return "", "", source.NoRedirect, primaryRefused(fmt.Sprintf("the add-on is installed into the remote cluster %s that spec.kubeConfig names, "+
			"and the cluster IP of its primary Service is an address of that cluster, not one the controller can reach, "+
			"so the controller does not read the manifest from it; set spec.registration.url to an address of the manifest "+
			"that the controller can reach", s.cluster.server))
	}
	primary := strings.TrimSpace(ann[capstanv1.ChartPrimaryAnnotation])
	if primary == "" {
		return "", "", source.NoRedirect, fmt.Errorf("the chart's Chart.yaml marks it an add-on (%s) but names no primary Service: add %s: NAME[:PORT]",
			capstanv1.ChartAddonAnnotation, capstanv1.ChartPrimaryAnnotation)
	}
	name, port, _ := strings.Cut(primary, ":")
	live, err := s.applier.Get(ctx, capstanv1.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: s.namespace, Name: name})
	if err != nil {
		return "", "", source.NoRedirect, fmt.Errorf("reading the primary Service %s/%s: %v", s.namespace, name, err)
	}
	if live == nil {
		return "", "", source.NoRedirect, fmt.Errorf("the primary Service %s/%s that Chart.yaml names does not exist", s.namespace, name)
	}
	svc := &corev1.Service{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, svc); err != nil {
		return "", "", source.NoRedirect, err
	}
	endpoints := &discoveryv1.EndpointSliceList{}
	if err := r.APIReader.List(ctx, endpoints, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		return "", "", source.NoRedirect, fmt.Errorf("listing the EndpointSlices of the primary Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	src, err := primaryAddress(s.addon, svc, endpoints.Items, port)
	return src, fmt.Sprintf("the manifest that the primary Service %s/%s serves at %s (Chart.yaml's %s)",
		svc.Namespace, svc.Name, registration.ManifestPath, capstanv1.ChartPrimaryAnnotation), source.NoRedirect, err
}

// adminAddress is spec.registration.url, when the manifest is read there:
// in the cluster profile only, where the cluster admin sets it.
func adminAddress(s *scope) (string, bool) {
	if reg := s.addon.Spec.Registration; reg != nil && s.profile == capstanv1.ProfileCluster {
		return reg.URL, true
	}
	return "", false
}

// notAnAddon says why an add-on that sets spec.registration reads no
// manifest: the condition's reason is NotAnAddon.
type notAnAddon string

func (e notAnAddon) Error() string { return string(e) }

// endpointSliceController is the endpointslice.kubernetes.io/managed-by
// value of the EndpointSlices that the endpointslice controller writes
// from a Service's selector.
const endpointSliceController = "endpointslice-controller.k8s.io"

// primaryRefused says why the controller does not read from a primary
// Service that exists: the condition's reason is PrimaryRefused.
type primaryRefused string

func (e primaryRefused) Error() string { return string(e) }

// primaryAddress is the address of the manifest on the primary Service svc,
// read live, at its port named port ("" for its first), or why the
// controller does not read from it. endpoints are the EndpointSlices
// labelled with svc's name. The guardrails check only what the
// chart renders, and a tenant may edit the live Service in its namespace,
// so the live Service must still be the one Capstan applied: in this
// add-on's inventory and carrying its owner labels, with a selector, so
// that its endpoints are the add-on's pods and not addresses written by
// hand, and with a cluster IP (an ExternalName Service names any host, and
// a headless one has no address of the cluster's own). kube-proxy routes
// the cluster IP to the addresses of every EndpointSlice labelled with the
// Service's name, whoever wrote it, selector or not: so each must be the
// endpointslice controller's, written from the selector.
// NOTE: the address is the cluster IP checked here, not the Service's DNS
// name: a Service changed to ExternalName between this check and the read
// would make the name resolve elsewhere. An EndpointSlice written just
// after the check, or deleted just before it while kube-proxy still routes
// to it, is not seen: reading from a pod's own IP would close that, and
// is not done here.
func primaryAddress(addon *capstanv1.Addon, svc *corev1.Service, endpoints []discoveryv1.EndpointSlice, port string) (string, error) {
	ref := capstanv1.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: svc.Namespace, Name: svc.Name}
	refuse := func(why, fix string) error {
		return primaryRefused(fmt.Sprintf("the primary Service %s/%s %s, so the controller does not read the manifest from it; %s",
			svc.Namespace, svc.Name, why, fix))
	}
	if !slices.ContainsFunc(addon.Status.Inventory, func(id capstanv1.ObjectID) bool { return id.Key() == ref.Key() }) {
		return "", refuse("is not one this add-on applied (it is not in status.inventory)",
			"the chart must render the Service that "+capstanv1.ChartPrimaryAnnotation+" names")
	}
	if !addon.LabelledFor(svc.Labels) {
		return "", refuse(fmt.Sprintf("does not carry this Addon's labels %s and %s", capstanv1.AddonLabel, capstanv1.AddonNamespaceLabel),
			"it was changed outside Capstan; a sync applies it again")
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ExternalName != "" {
		return "", refuse("is of type ExternalName (or sets externalName), which names a host outside the cluster",
			"the primary must be a ClusterIP Service that selects the add-on's pods")
	}
	if len(svc.Spec.Selector) == 0 {
		return "", refuse("has no selector (its endpoints would be written by hand, not chosen among the add-on's pods)",
			"give the Service in the chart a selector of the add-on's pods")
	}
	for _, es := range endpoints {
		if by := es.Labels[discoveryv1.LabelManagedBy]; by != endpointSliceController {
			return "", refuse(fmt.Sprintf("has the EndpointSlice %s, which the endpointslice controller did not write from its selector (%s is %q): "+
				"the cluster IP routes to the addresses it lists, which are not chosen among the add-on's pods", es.Name, discoveryv1.LabelManagedBy, by),
				"delete that EndpointSlice; the primary's endpoints must be the ones its selector gives")
		}
	}
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if ip == nil {
		return "", refuse("has no cluster IP (it is headless)",
			"the primary must be a ClusterIP Service with a cluster IP, not clusterIP: None")
	}
	number, err := servicePort(svc, port)
	if err != nil {
		return "", err
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(int(number))) + registration.ManifestPath, nil
}

// servicePort finds a Service's port by name or number; none given means
// its first.
func servicePort(svc *corev1.Service, port string) (int32, error) {
	if len(svc.Spec.Ports) == 0 {
		return 0, fmt.Errorf("the primary Service %s has no port", svc.Name)
	}
	if port == "" {
		return svc.Spec.Ports[0].Port, nil
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == port || strconv.Itoa(int(p.Port)) == port {
			return p.Port, nil
		}
	}
	return 0, fmt.Errorf("the primary Service %s has no port %q", svc.Name, port)
}

// registeredBy names another Addon that has registered name, or "".
// NOTE: it lists the Addons from the API server, not from the cache: a
// controller started for a shard caches only the shard's Addons, and would
// find free a name that an Addon of another shard holds; a cache also lags
// the status another reconcile just wrote. Two reconciles that check at
// the same moment, before either has written its status, can still both
// find the name free and both keep it: closing that needs a claim written
// before the check (a Lease per name, say), which Capstan does not make.
func (r *AddonReconciler) registeredBy(ctx context.Context, self *capstanv1.Addon, name string) (string, error) {
	// Pages, so that a cluster of many Addons is not one response held whole.
	list := &capstanv1.AddonList{}
	for {
		if err := r.APIReader.List(ctx, list, client.Limit(registrationListPage), client.Continue(list.Continue)); err != nil {
			return "", fmt.Errorf("listing Addons to check that the name %q is free: %w", name, err)
		}
		if other := holderOf(self, list.Items, name); other != "" || list.Continue == "" {
			return other, nil
		}
	}
}

// registrationListPage is how many Addons one request of registeredBy
// reads.
const registrationListPage = 250

// holderOf names the Addon of addons, other than self, whose status holds
// the registration of name, or "".
func holderOf(self *capstanv1.Addon, addons []capstanv1.Addon, name string) string {
	for _, a := range addons {
		if a.UID != self.UID && a.Status.Registration != nil && a.Status.Registration.Name == name {
			return a.Namespace + "/" + a.Name
		}
	}
	return ""
}
