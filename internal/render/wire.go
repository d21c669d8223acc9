package render

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// The wire format carries a render to a worker process and its output back.
// It is exact for what templates can tell apart: a value keeps its Go type
// (an int64 prints differently from a float64 in a template, and a
// common.Values is a different table from a map to Helm's merge), so values
// are encoded with a tag per type rather than as JSON, which would turn
// every number into a float64.

// Value tags.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagString
	tagInt
	tagInt64
	tagFloat64
	tagMap
	tagValues
	tagList
	tagNumber
	tagInt32
	tagUint64
	tagFloat32
)

// maxWireDepth bounds the nesting of a value, as the YAML and JSON readers
// that made it bound theirs.
const maxWireDepth = 10000

type wireWriter struct{ buf []byte }

func (w *wireWriter) uvarint(n uint64) { w.buf = binary.AppendUvarint(w.buf, n) }
func (w *wireWriter) bytes(b []byte)   { w.uvarint(uint64(len(b))); w.buf = append(w.buf, b...) }
func (w *wireWriter) string(s string)  { w.uvarint(uint64(len(s))); w.buf = append(w.buf, s...) }

func (w *wireWriter) bool(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// value writes v, or says where a value of a type the format lacks sits.
func (w *wireWriter) value(v any, depth int) error {
	if depth > maxWireDepth {
		return errors.New("values are nested too deeply")
	}
	switch v := v.(type) {
	case nil:
		w.buf = append(w.buf, tagNil)
	case bool:
		if v {
			w.buf = append(w.buf, tagTrue)
		} else {
			w.buf = append(w.buf, tagFalse)
		}
	case string:
		w.buf = append(w.buf, tagString)
		w.string(v)
	case int:
		w.buf = append(w.buf, tagInt)
		w.buf = binary.AppendVarint(w.buf, int64(v))
	case int64:
		w.buf = append(w.buf, tagInt64)
		w.buf = binary.AppendVarint(w.buf, v)
	case int32:
		w.buf = append(w.buf, tagInt32)
		w.buf = binary.AppendVarint(w.buf, int64(v))
	case uint64:
		w.buf = append(w.buf, tagUint64)
		w.uvarint(v)
	case float64:
		w.buf = append(w.buf, tagFloat64)
		w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(v))
	case float32:
		w.buf = append(w.buf, tagFloat32)
		w.buf = binary.LittleEndian.AppendUint32(w.buf, math.Float32bits(v))
	case json.Number:
		w.buf = append(w.buf, tagNumber)
		w.string(string(v))
	case map[string]any:
		w.buf = append(w.buf, tagMap)
		return w.table(v, depth)
	case common.Values:
		w.buf = append(w.buf, tagValues)
		return w.table(v, depth)
	case []any:
		w.buf = append(w.buf, tagList)
		w.uvarint(uint64(len(v)))
		for i, e := range v {
			if err := w.value(e, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	default:
		return fmt.Errorf("a value of type %T cannot be passed to the render worker", v)
	}
	return nil
}

func (w *wireWriter) table(m map[string]any, depth int) error {
	if m == nil {
		w.buf = append(w.buf, 0)
		return nil
	}
	w.buf = append(w.buf, 1)
	w.uvarint(uint64(len(m)))
	// NOTE: sorted, so that one render is one request, byte for byte.
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.string(k)
		if err := w.value(m[k], depth+1); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func (w *wireWriter) json(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.bytes(data)
	return nil
}

func (w *wireWriter) files(files []*common.File) {
	w.uvarint(uint64(len(files)))
	for _, f := range files {
		if f == nil {
			f = &common.File{}
		}
		w.string(f.Name)
		w.bytes(f.Data)
	}
}

// chart writes what rendering reads of a chart and its subcharts: the
// metadata, the lock, templates, default values, schema and files. The raw
// archive is not needed to render.
func (w *wireWriter) chart(c *chartv2.Chart, depth int) error {
	if depth > 100 {
		return errors.New("subcharts are nested too deeply")
	}
	if err := w.json(c.Metadata); err != nil {
		return fmt.Errorf("chart metadata: %w", err)
	}
	if err := w.json(c.Lock); err != nil {
		return fmt.Errorf("chart lock: %w", err)
	}
	w.files(c.Templates)
	if err := w.table(c.Values, 0); err != nil {
		return fmt.Errorf("chart %s default values: %w", c.Name(), err)
	}
	w.bytes(c.Schema)
	w.files(c.Files)
	deps := c.Dependencies()
	w.uvarint(uint64(len(deps)))
	for _, d := range deps {
		if err := w.chart(d, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// errShortWire is a message that ends early or says more than it holds.
var errShortWire = errors.New("render worker: message is cut short")

type wireReader struct{ buf []byte }

func (r *wireReader) uvarint() (uint64, error) {
	n, k := binary.Uvarint(r.buf)
	if k <= 0 {
		return 0, errShortWire
	}
	r.buf = r.buf[k:]
	return n, nil
}

func (r *wireReader) varint() (int64, error) {
	n, k := binary.Varint(r.buf)
	if k <= 0 {
		return 0, errShortWire
	}
	r.buf = r.buf[k:]
	return n, nil
}

func (r *wireReader) byte() (byte, error) {
	if len(r.buf) == 0 {
		return 0, errShortWire
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	return b, nil
}

func (r *wireReader) bool() (bool, error) {
	b, err := r.byte()
	return b == 1, err
}

func (r *wireReader) bytes() ([]byte, error) {
	n, err := r.uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.buf)) {
		return nil, errShortWire
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b, nil
}

func (r *wireReader) string() (string, error) {
	b, err := r.bytes()
	return string(b), err
}

// count reads a length and checks that the message can hold that many
// items of at least one byte, so a bad length cannot make a huge slice.
func (r *wireReader) count() (int, error) {
	n, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(len(r.buf)) {
		return 0, errShortWire
	}
	return int(n), nil
}

// prealloc is how many items to make room for when a message says n: no
// more than a few, since nested lists that each claim the rest of the
// message would otherwise allocate its length squared.
func prealloc(n int) int { return min(n, 64) }

func (r *wireReader) value(depth int) (any, error) {
	if depth > maxWireDepth {
		return nil, errors.New("render worker: values are nested too deeply")
	}
	tag, err := r.byte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case tagNil:
		return nil, nil
	case tagFalse:
		return false, nil
	case tagTrue:
		return true, nil
	case tagString:
		return r.string()
	case tagInt:
		n, err := r.varint()
		return int(n), err
	case tagInt64:
		return r.varint()
	case tagInt32:
		n, err := r.varint()
		return int32(n), err
	case tagUint64:
		return r.uvarint()
	case tagFloat64:
		if len(r.buf) < 8 {
			return nil, errShortWire
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(r.buf))
		r.buf = r.buf[8:]
		return f, nil
	case tagFloat32:
		if len(r.buf) < 4 {
			return nil, errShortWire
		}
		f := math.Float32frombits(binary.LittleEndian.Uint32(r.buf))
		r.buf = r.buf[4:]
		return f, nil
	case tagNumber:
		s, err := r.string()
		return json.Number(s), err
	case tagMap:
		return r.table(depth)
	case tagValues:
		m, err := r.table(depth)
		if m == nil {
			return common.Values(nil), err
		}
		return common.Values(m), err
	case tagList:
		n, err := r.count()
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, prealloc(n))
		for range n {
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("render worker: unknown value tag %d", tag)
}

func (r *wireReader) table(depth int) (map[string]any, error) {
	present, err := r.bool()
	if err != nil || !present {
		return nil, err
	}
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, prealloc(n))
	for range n {
		k, err := r.string()
		if err != nil {
			return nil, err
		}
		if m[k], err = r.value(depth + 1); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (r *wireReader) json(v any) error {
	data, err := r.bytes()
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func (r *wireReader) files() ([]*common.File, error) {
	n, err := r.count()
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]*common.File, 0, prealloc(n))
	for range n {
		name, err := r.string()
		if err != nil {
			return nil, err
		}
		data, err := r.bytes()
		if err != nil {
			return nil, err
		}
		out = append(out, &common.File{Name: name, Data: data})
	}
	return out, nil
}

func (r *wireReader) chart(depth int) (*chartv2.Chart, error) {
	if depth > 100 {
		return nil, errors.New("render worker: subcharts are nested too deeply")
	}
	c := &chartv2.Chart{}
	if err := r.json(&c.Metadata); err != nil {
		return nil, err
	}
	if err := r.json(&c.Lock); err != nil {
		return nil, err
	}
	var err error
	if c.Templates, err = r.files(); err != nil {
		return nil, err
	}
	if c.Values, err = r.table(0); err != nil {
		return nil, err
	}
	if c.Schema, err = r.bytes(); err != nil {
		return nil, err
	}
	if len(c.Schema) == 0 {
		c.Schema = nil
	}
	if c.Files, err = r.files(); err != nil {
		return nil, err
	}
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	for range n {
		d, err := r.chart(depth + 1)
		if err != nil {
			return nil, err
		}
		c.AddDependency(d)
	}
	return c, nil
}
