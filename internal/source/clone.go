package source

import (
	"maps"
	"slices"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// CloneChart copies a loaded chart, so that a cached chart is parsed once
// and every caller still gets one of its own, and a render can resolve a
// chart's dependencies without changing the chart it was given: Helm's dependency processing
// disables subcharts, renames aliased ones and imports values by changing
// the chart in place, and Helm's rendering may write to its values. The
// tree of charts, each chart's metadata, lock, values and file lists are
// copied; the bytes of the files are shared, and nothing writes to them.
func CloneChart(c *chartv2.Chart) *chartv2.Chart {
	out := *c
	out.Raw = cloneFiles(c.Raw)
	out.Templates = cloneFiles(c.Templates)
	out.Files = cloneFiles(c.Files)
	out.Metadata = cloneMetadata(c.Metadata)
	if c.Lock != nil {
		lock := *c.Lock
		lock.Dependencies = cloneDependencies(c.Lock.Dependencies)
		out.Lock = &lock
	}
	out.Values = cloneMap(c.Values)
	out.Schema = slices.Clone(c.Schema)
	deps := make([]*chartv2.Chart, 0, len(c.Dependencies()))
	for _, d := range c.Dependencies() {
		deps = append(deps, CloneChart(d))
	}
	// NOTE: SetDependencies sets each copy's parent to out, not to c.
	out.SetDependencies(deps...)
	return &out
}

func cloneFiles(fs []*common.File) []*common.File {
	if fs == nil {
		return nil
	}
	out := make([]*common.File, len(fs))
	for i, f := range fs {
		if f != nil {
			cp := *f
			out[i] = &cp
		}
	}
	return out
}

func cloneMetadata(md *chartv2.Metadata) *chartv2.Metadata {
	if md == nil {
		return nil
	}
	out := *md
	out.Sources = slices.Clone(md.Sources)
	out.Keywords = slices.Clone(md.Keywords)
	out.Annotations = maps.Clone(md.Annotations)
	if md.Maintainers != nil {
		out.Maintainers = make([]*chartv2.Maintainer, len(md.Maintainers))
		for i, m := range md.Maintainers {
			if m != nil {
				cp := *m
				out.Maintainers[i] = &cp
			}
		}
	}
	out.Dependencies = cloneDependencies(md.Dependencies)
	return &out
}

func cloneDependencies(ds []*chartv2.Dependency) []*chartv2.Dependency {
	if ds == nil {
		return nil
	}
	out := make([]*chartv2.Dependency, len(ds))
	for i, d := range ds {
		if d != nil {
			cp := *d
			cp.Tags = slices.Clone(d.Tags)
			cp.ImportValues = cloneSlice(d.ImportValues)
			out[i] = &cp
		}
	}
	return out
}

// cloneMap copies a tree of values as YAML and JSON decode them: maps,
// slices and scalars.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneSlice(s []any) []any {
	if s == nil {
		return nil
	}
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return cloneMap(t)
	case common.Values:
		return common.Values(cloneMap(t))
	case []any:
		return cloneSlice(t)
	}
	return v
}
