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
	unknown.Suggest = suggest(reflect.TypeOf(v), unknown.Path)
	return unknown
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// suggest is the JSON name of the one field, of the type that path's
// last key was read into, that the key spells in other letter cases; ""
// when there is none or more than one, or the path leads to no struct.
// Only the fields at that place count: "did you mean kind?" for
// spec.Kind would name a field of spec.valuesFrom[], not of spec.
func suggest(t reflect.Type, path string) string {
	segs := strings.Split(path, ".")
	for _, seg := range segs[:len(segs)-1] {
		seg, _, _ = strings.Cut(seg, "[")
		f, ok := fieldNamed(t, func(name string) bool { return name == seg })
		if !ok {
			return ""
		}
		t = f
	}
	key := segs[len(segs)-1]
	var found []string
	fields(t, func(name string, _ reflect.Type) {
		if name != key && strings.EqualFold(name, key) {
			found = append(found, name)
		}
	})
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// fieldNamed returns the type of the field of t whose JSON name match
// takes.
func fieldNamed(t reflect.Type, match func(string) bool) (out reflect.Type, ok bool) {
	fields(t, func(name string, ft reflect.Type) {
		if !ok && match(name) {
			out, ok = ft, true
		}
	})
	return out, ok
}

// fields calls each with the JSON name and type of each field of t (t's
// element for a pointer, list or map), an embedded struct's fields as
// t's own. A type that decodes itself (a duration, raw spec.values) has
// no fields a body's key would name.
func fields(t reflect.Type, each func(name string, ft reflect.Type)) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			fields(f.Type, each)
			continue
		}
		if name == "" {
			name = f.Name
		}
		each(name, f.Type)
	}
}
