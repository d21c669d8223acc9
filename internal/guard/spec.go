package guard

import (
	"fmt"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// CheckSpec refuses what a restricted Addon's own spec asks for beyond its
// profile: another target namespace, a namespace to create, a dependency
// on an add-on of another namespace. The violations name the Addon and the
// field to remove.
func CheckSpec(addon *capstanv1.Addon) []capstanv1.Violation {
	ref := capstanv1.ObjectRef{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Namespace: addon.Namespace, Name: addon.Name}
	var out []capstanv1.Violation
	if t := addon.Spec.TargetNamespace; t != "" && t != addon.Namespace {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.targetNamespace", Rule: "target-namespace",
			Message: "a restricted add-on installs into its own namespace; remove spec.targetNamespace"})
	}
	if addon.Spec.CreateNamespace {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.createNamespace", Rule: "create-namespace",
			Message: "a restricted add-on cannot create namespaces; remove spec.createNamespace"})
	}
	if addon.Spec.ReleaseName != "" {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.releaseName", Rule: "release-name",
			Message: "a restricted add-on's release name is its own name; remove spec.releaseName"})
	}
	if addon.Spec.KubeConfig != nil {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.kubeConfig", Rule: "remote-cluster",
			Message: "a restricted add-on installs into this cluster only; remove spec.kubeConfig"})
	}
	if addon.Spec.Registration != nil {
		out = append(out, capstanv1.Violation{Object: ref, Path: "spec.registration", Rule: "registration-source",
			Message: "a restricted add-on registers from its primary Service only; remove spec.registration"})
	}
	for i, d := range addon.Spec.DependsOn {
		// NOTE: the message never says whether that add-on exists: the
		// controller does not read it for a restricted add-on.
		if d.Namespace != "" && d.Namespace != addon.Namespace {
			out = append(out, capstanv1.Violation{Object: ref, Path: fmt.Sprintf("spec.dependsOn[%d].namespace", i), Rule: "dependency-namespace",
				Message: "a restricted add-on depends only on add-ons in its own namespace, " + addon.Namespace + ": remove this entry from spec.dependsOn, or its namespace to depend on an add-on of " + addon.Namespace})
		}
	}
	return out
}

// ChartMetadata is what CheckChart reads of a chart's Chart.yaml.
type ChartMetadata struct {
	APIVersion, Type string
	Annotations      map[string]string
}

// CheckChart returns the violations of a restricted add-on's chart: a
// tenant installs only charts written for Capstan (Chart.yaml's
// capstan.dev/addon: "true"), of apiVersion v2 and type application.
func CheckChart(addon *capstanv1.Addon, meta ChartMetadata) []capstanv1.Violation {
	ref := capstanv1.ObjectRef{APIVersion: capstanv1.GroupVersion.String(), Kind: "Addon", Namespace: addon.Namespace, Name: addon.Name}
	var out []capstanv1.Violation
	if meta.Annotations[capstanv1.ChartAddonAnnotation] != "true" {
		out = append(out, capstanv1.Violation{Object: ref, Path: "Chart.yaml annotations", Rule: "chart-for-capstan",
			Message: "a restricted add-on installs only a chart written for Capstan: its Chart.yaml needs the annotation " + capstanv1.ChartAddonAnnotation + `: "true"`})
	}
	if meta.APIVersion != "v2" {
		out = append(out, capstanv1.Violation{Object: ref, Path: "Chart.yaml apiVersion", Rule: "chart-api-version",
			Message: "a restricted add-on's chart must be apiVersion v2; this one is " + quoteOr(meta.APIVersion, "missing")})
	}
	if meta.Type != "" && meta.Type != "application" {
		out = append(out, capstanv1.Violation{Object: ref, Path: "Chart.yaml type", Rule: "chart-type",
			Message: "a " + meta.Type + " chart cannot be installed: install the application chart that depends on it"})
	}
	return out
}

func quoteOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return `"` + s + `"`
}
