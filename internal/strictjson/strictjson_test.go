package strictjson

import (
	"errors"
	"testing"
)

type inner struct {
	URL string `json:"url"`
	Url string `json:"Url"` //nolint:revive,staticcheck // two fields whose names differ only in case
}

type base struct {
	Name string `json:"name"`
}

type item struct {
	Kind string `json:"kind"`
}

type outer struct {
	base
	Inner inner  `json:"inner"`
	Items []item `json:"items"`
}

// TestUnmarshalNamesTheFirstUnknownField: the first key that names no
// field exactly is returned with its path, a field of an embedded struct
// is suggested, and no spelling is suggested where two fields share it.
func TestUnmarshalNamesTheFirstUnknownField(t *testing.T) {
	for data, want := range map[string]UnknownField{
		`{"NAME":"a","Other":1}`: {Path: "NAME", Suggest: "name"},
		`{"inner":{"URL":"a"}}`:  {Path: "inner.URL"},
		`{"Inner":{}}`:           {Path: "Inner", Suggest: "inner"},
		`{"name":"a","x":1}`:     {Path: "x"},
		// kind is a field of items[], not of the top: nothing to suggest
		// there, and kind within an item.
		`{"Kind":"a"}`:             {Path: "Kind"},
		`{"items":[{"Kind":"a"}]}`: {Path: "items[0].Kind", Suggest: "kind"},
	} {
		var unknown *UnknownField
		if err := Unmarshal([]byte(data), &outer{}); !errors.As(err, &unknown) || *unknown != want {
			t.Errorf("Unmarshal(%s) = %v; want %+v", data, err, want)
		}
	}
	var v outer
	if err := Unmarshal([]byte(`{"name":"a","inner":{"url":"u","Url":"U"}}`), &v); err != nil || v.Name != "a" || v.Inner.URL != "u" || v.Inner.Url != "U" {
		t.Errorf("keys in the fields' own case: %v, %+v", err, v)
	}
}
