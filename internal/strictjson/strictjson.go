// Package strictjson decodes JSON into Capstan's Go types as the API
// server reads an object: a key names a field only when it is spelt
// exactly as the field's JSON name, and any other key is an unknown field.
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	sigsjson "sigs.k8s.io/json"
)

// UnknownField is a key of the JSON that names no field of the type it
// was decoded into.
type UnknownField struct {
	// Path is the key's path from the top of the JSON, such as
	// spec.DeletionPolicy or spec.ignore[0].Paths.
	Path string
	// Suggest is the JSON name of a field of the type that the key spells
	// in other letter cases, when there is one.
	Suggest string
}

func (e *UnknownField) Error() string {
	if e.Suggest == "" {
		return fmt.Sprintf("unknown field %q", e.Path)
	}
	return fmt.Sprintf("unknown field %q: did you mean %s? field names are case-sensitive", e.Path, e.Suggest)
}

// Unmarshal decodes data, one JSON value, into v. Unlike encoding/json,
// which matches keys to fields in any letter case, a key in another case
// than a field's JSON name is an unknown field: {"name":"a","Name":"b"}
// would otherwise be taken as the name b, past a check that compares
// keys exactly, as the API server and kubectl take them. The first
// unknown field in data is returned as an *UnknownField; any other
// problem is the decoder's error.
func Unmarshal(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(strict) == 0 {
		return nil
	}
	unknown := &UnknownField{Path: strict[0].Error()}
	var fe sigsjson.FieldError
	if errors.As(strict[0], &fe) {
		unknown.Path = fe.FieldPath()
	}
	key := unknown.Path[strings.LastIndex(unknown.Path, ".")+1:]
	unknown.Suggest = suggest(reflect.TypeOf(v), key)
	return unknown
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// suggest is the one JSON field name, among the fields of t and of the
// types it holds, that is key in other letter cases; "" when there is
// none or more than one.
func suggest(t reflect.Type, key string) string {
	found := map[string]struct{}{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		// NOTE: a type that decodes itself (a duration, raw spec.values)
		// has no fields a body's key would name.
		if t.Kind() != reflect.Struct || seen[t] || reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			if name != key && strings.EqualFold(name, key) {
				found[name] = struct{}{}
			}
			walk(f.Type)
		}
	}
	walk(t)
	if len(found) != 1 {
		return ""
	}
	for name := range found {
		return name
	}
	return ""
}
