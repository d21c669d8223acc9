package render

import (
	"maps"
	"slices"
	"text/template"
)

// templateFuncs replaces template functions of Helm's engine whose result
// Go's map order decides. Sprig's keys and values range over a map, so
// `range $k := keys .Values.env` writes its lines in a new order on each
// render: Helm renders once per upgrade and never notices, but Capstan
// renders on every sync, and each order would be drift, applied again (a
// rollout each sync when it is in a pod template). Here they go in the
// order of the keys. Helm's own order is random, so this order is one that
// Helm could give too; a chart that sorts (sortAlpha) renders the same.
func templateFuncs() template.FuncMap {
	return template.FuncMap{
		"keys":   sortedKeys,
		"values": sortedValues,
	}
}

// sortedKeys is Sprig's keys with each dict's keys sorted: the dicts stay
// in the order given, as Sprig appends one dict's keys after another's.
func sortedKeys(dicts ...map[string]any) []string {
	k := []string{}
	for _, dict := range dicts {
		k = append(k, slices.Sorted(maps.Keys(dict))...)
	}
	return k
}

// sortedValues is Sprig's values in the order of their sorted keys.
func sortedValues(dict map[string]any) []any {
	v := []any{}
	for _, k := range slices.Sorted(maps.Keys(dict)) {
		v = append(v, dict[k])
	}
	return v
}
