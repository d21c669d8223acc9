package values

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The keys of the platform ConfigMap that Capstan gives a meaning to. Any
// other key is passed to charts as a string fact of the same name.
const (
	// PlatformHostname is the DNS name the platform serves its apps under.
	PlatformHostname = "hostname"
	// PlatformIssuer is the cert-manager issuer charts use for certificates.
	PlatformIssuer = "issuer"
	// PlatformPullSecrets lists, comma-separated, the image pull Secrets of
	// the platform that charts may reference.
	PlatformPullSecrets = "pullSecrets"
	// PlatformEventBusTLSSecret names the event bus's TLS Secret that charts
	// may mount.
	PlatformEventBusTLSSecret = "eventBusTLSSecret"
	// PlatformNamespace is set from the controller's configuration; the
	// ConfigMap may not set it.
	PlatformNamespace = "namespace"
)

// Platform holds the facts the controller hands every chart under the
// reserved platform key.
type Platform struct {
	// Namespace is the platform's namespace: the controller's own, from its
	// configuration, never the add-on's (a chart has that as
	// .Release.Namespace).
	Namespace string
	// Hostname is the DNS name the platform serves its apps under.
	Hostname string
	// Issuer is the certificate issuer charts should use.
	Issuer string
	// PullSecrets are image pull Secrets that charts may reference.
	PullSecrets []string
	// EventBusTLSSecret is the event bus's TLS Secret that charts may mount.
	EventBusTLSSecret string
	// Extra are the other facts of the ConfigMap, by key.
	Extra map[string]string
}

// factKeyRE is what a fact's key must look like: a values key a template can
// read as .Values.capstan.<key>.
var factKeyRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// PlatformFromConfigMap reads the platform's facts from the ConfigMap the
// operator names. Each data key is one fact, with a string value;
// pullSecrets is a comma-separated list. namespace is the controller's
// configured namespace and cannot be overridden by the ConfigMap.
func PlatformFromConfigMap(cm *corev1.ConfigMap, namespace string) (Platform, error) {
	p := Platform{Namespace: namespace}
	if cm == nil {
		return p, nil
	}
	where := fmt.Sprintf("platform ConfigMap %s/%s", cm.Namespace, cm.Name)
	for k, v := range cm.Data {
		switch k {
		case PlatformNamespace:
			return Platform{}, fmt.Errorf("%s sets %q, which comes from the controller's configuration: remove the key", where, k)
		case PlatformHostname:
			p.Hostname = strings.TrimSpace(v)
		case PlatformIssuer:
			p.Issuer = strings.TrimSpace(v)
		case PlatformEventBusTLSSecret:
			p.EventBusTLSSecret = strings.TrimSpace(v)
		case PlatformPullSecrets:
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					p.PullSecrets = append(p.PullSecrets, s)
				}
			}
		default:
			if !factKeyRE.MatchString(k) {
				return Platform{}, fmt.Errorf("%s has key %q: a fact's key must be a letter followed by letters, digits or _, so templates can read it", where, k)
			}
			if strings.TrimSpace(v) == "" {
				continue // an empty fact: the chart's default shows
			}
			if p.Extra == nil {
				p.Extra = map[string]string{}
			}
			// NOTE: kept as written, unlike the named facts, which are
			// names: an extra fact may be text whose line breaks count,
			// such as a CA bundle.
			p.Extra[k] = v
		}
	}
	if len(cm.BinaryData) > 0 {
		return Platform{}, fmt.Errorf("%s has binaryData; facts are text: move them to data", where)
	}
	return p, nil
}

// LoadPlatform reads the platform ConfigMap named key and returns its facts,
// with namespace, the controller's own, as the namespace fact. An empty key
// means the operator named none: only the namespace is known.
func LoadPlatform(ctx context.Context, r client.Reader, key types.NamespacedName, namespace string) (Platform, error) {
	if key.Name == "" {
		return Platform{Namespace: namespace}, nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, key, cm); err != nil {
		return Platform{}, fmt.Errorf("read platform ConfigMap %s: %w", key, err)
	}
	return PlatformFromConfigMap(cm, namespace)
}

// Values returns the facts as the platform key's content: namespace,
// hostname, issuer, pullSecrets (a list of names), eventBusTLSSecret and the
// extra facts. Empty facts are left out, so a chart's own default shows.
func (p Platform) Values() map[string]any {
	out := map[string]any{}
	for k, v := range p.Extra {
		if strings.TrimSpace(v) != "" {
			out[k] = v
		}
	}
	for k, v := range map[string]string{
		PlatformNamespace:         p.Namespace,
		PlatformHostname:          p.Hostname,
		PlatformIssuer:            p.Issuer,
		PlatformEventBusTLSSecret: p.EventBusTLSSecret,
	} {
		if v != "" {
			out[k] = v
		}
	}
	if len(p.PullSecrets) > 0 {
		list := make([]any, len(p.PullSecrets))
		for i, s := range p.PullSecrets {
			list[i] = s
		}
		out[PlatformPullSecrets] = list
	}
	return out
}

// HandedOverSecrets lists the platform's Secrets that charts may reference:
// the pull secrets and the event bus's TLS Secret. The guardrails allow
// these and no other Secret a chart does not render.
func (p Platform) HandedOverSecrets() []string {
	out := append([]string(nil), p.PullSecrets...)
	if p.EventBusTLSSecret != "" {
		out = append(out, p.EventBusTLSSecret)
	}
	sort.Strings(out)
	return out
}
