package render

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// Capabilities are what a chart sees as .Capabilities: the cluster's
// Kubernetes version and the API versions it serves.
type Capabilities struct {
	// KubeVersion is the Kubernetes version, such as "v1.33.4" or "1.33".
	KubeVersion string
	// KubeMajor and KubeMinor are the server's own major and minor
	// version, as its version endpoint gives them, which
	// .Capabilities.KubeVersion.Major and .Minor show as they are, as in
	// helm install: managed clusters give a minor such as "30+". Empty,
	// they are the numbers of KubeVersion.
	KubeMajor, KubeMinor string
	// APIVersions are group versions ("apps/v1") and group versions with a
	// kind ("apps/v1/Deployment"), as .Capabilities.APIVersions.Has takes them.
	APIVersions []string
	// ExactAPIVersions makes APIVersions the whole list. Otherwise they are
	// added to Helm's default list, as `helm template --api-versions` does.
	// CapabilitiesFromDiscovery sets it: a cluster serves what it lists.
	ExactAPIVersions bool
}

// DefaultCapabilities are the capabilities `helm template` uses when it is
// given none: the Kubernetes version of the client-go that Helm was built
// with, and every API version client-go knows.
func DefaultCapabilities() *Capabilities {
	d := common.DefaultCapabilities
	return &Capabilities{KubeVersion: d.KubeVersion.Version, APIVersions: slices.Clone(d.APIVersions)}
}

// CapabilitiesFromDiscovery reads the capabilities of a cluster from its
// discovery API, as `helm install` does: the server's version, and every
// group version and group version with a kind that it serves. A group that
// fails discovery (an aggregated API that is down) is left out, as in Helm.
func CapabilitiesFromDiscovery(dc discovery.DiscoveryInterface) (*Capabilities, error) {
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("read the cluster's Kubernetes version from discovery: %w", err)
	}
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("read the cluster's API versions from discovery: %w", err)
	}
	// NOTE: this is Helm's action.GetVersionSet, written out so that the
	// render package does not link Helm's release storage and its SQL drivers.
	seen := map[string]bool{}
	for _, g := range groups {
		for _, gv := range g.Versions {
			seen[gv.GroupVersion] = true
		}
	}
	for _, r := range resources {
		for _, res := range r.APIResources {
			seen[path.Join(r.GroupVersion, res.Kind)] = true
		}
	}
	apis := slices.Sorted(maps.Keys(seen))
	return &Capabilities{KubeVersion: v.GitVersion, KubeMajor: v.Major, KubeMinor: v.Minor, APIVersions: apis, ExactAPIVersions: true}, nil
}

// helm turns the capabilities into Helm's. Unless ExactAPIVersions is set,
// the API versions are added to Helm's default list, as `helm template
// --api-versions` does, so a chart that checks for "apps/v1" still finds it
// when only extra APIs are given. The Kubernetes version replaces the default.
func (c *Capabilities) helm() (*common.Capabilities, error) {
	caps := common.DefaultCapabilities.Copy()
	if c == nil {
		return caps, nil
	}
	if c.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(c.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("kubernetes version %q is not a version such as v1.33.4: %w", c.KubeVersion, err)
		}
		caps.KubeVersion = *kv
		// NOTE: helm install copies the server's Major and Minor, not
		// the numbers parsed from its GitVersion, so a chart that reads
		// .Capabilities.KubeVersion.Minor on a managed cluster sees
		// "30+" here too.
		if c.KubeMajor != "" {
			caps.KubeVersion.Major = c.KubeMajor
		}
		if c.KubeMinor != "" {
			caps.KubeVersion.Minor = c.KubeMinor
		}
	}
	if c.ExactAPIVersions {
		caps.APIVersions = slices.Clone(c.APIVersions)
	} else {
		caps.APIVersions = append(slices.Clone(caps.APIVersions), c.APIVersions...)
	}
	return caps, nil
}

// crdAPIVersions lists the group versions, and the group versions with a
// kind, that a chart's CRDs serve, as discovery would list them once the
// CRDs are in: every served version of apiextensions.k8s.io/v1, or the
// version and versions of v1beta1. A file that does not read as CRDs adds
// nothing here; its own error comes when the objects are decoded.
func crdAPIVersions(crds []chartv2.CRD) []string {
	var out []string
	for _, crd := range crds {
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(crd.File.Data)))
		for {
			doc, err := reader.Read()
			if err != nil {
				break
			}
			var def struct {
				Kind string `json:"kind"`
				Spec struct {
					Group   string `json:"group"`
					Version string `json:"version"`
					Names   struct {
						Kind string `json:"kind"`
					} `json:"names"`
					Versions []struct {
						Name   string `json:"name"`
						Served *bool  `json:"served"`
					} `json:"versions"`
				} `json:"spec"`
			}
			if yaml.Unmarshal(doc, &def) != nil || def.Kind != "CustomResourceDefinition" || def.Spec.Group == "" {
				continue
			}
			versions := []string{}
			if def.Spec.Version != "" {
				versions = append(versions, def.Spec.Version)
			}
			for _, v := range def.Spec.Versions {
				if v.Name != "" && (v.Served == nil || *v.Served) {
					versions = append(versions, v.Name)
				}
			}
			for _, v := range versions {
				gv := def.Spec.Group + "/" + v
				out = append(out, gv)
				if def.Spec.Names.Kind != "" {
					out = append(out, gv+"/"+def.Spec.Names.Kind)
				}
			}
		}
	}
	return out
}
