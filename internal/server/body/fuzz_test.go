package body

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"
	"unicode/utf8"
)

// fuzzLimit stands for the server's body limit, small so that the fuzzer
// reaches it.
const fuzzLimit = 4 << 10

// FuzzDecode feeds any body to every endpoint's request type. A body is
// either refused with an *Error (or the limit's *http.MaxBytesError), or it
// is one JSON value within the limit, in UTF-8, that decodes to no U+FFFD
// it did not hold (no bytes replaced), and what it decodes to survives
// serialising and decoding again.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"wiki","spec":{"chart":{"repo":"https://charts.example/","name":"wiki","version":"1.2.3"},"values":{"a":1}},"secretInputs":{"auth.password":"s3cret"}}`,
		`{"spec":{"values":{"replicas":2}},"secretInputs":{"a.b":"x"}}`,
		`{"spec":{"values":{"replicas":2}},"secretInputs":{"a[":"x","b":"y"}}`,
		`{"spec":{"values":{"replicas":2}},"generation":3,"uid":"0b9e6a2c-2f4f-4d51-9b7c-1a2b3c4d5e6f"}`,
		`{"definition":"name: wiki\nchart:\n  oci: oci://r.example/wiki\n  version: 1.0.0\n"}`,
		`{"hash":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`,
		`{"token":"eyJhbGciOi"}`,
		``, `  `, `null`, `{}`, `[]`, `{"name":1}`, `{"nope":true}`, `{"hash":"a"} `,
		"{\"name\":\"x\",\"secretInputs\":{\"a\":\"p\xe4ss\"}}",
		`{"name":"x","secretInputs":{"a":"p\udce4ss"}}`,
		`{"name":"x","secretInputs":{"auth.password":"first","auth.password":"second"}}`,
		`{"name":"x","name":"y","spec":{"values":{"a":[{"b":1,"b":2}]}}}`,
		`{"name":"x","secretInputs":{"a":"\ud83d\ude00","b":"\\udce4","c":"\ud83d"}}`,
		"{\"name\":\"x\",\"secretInputs\":{\"a\":\"p\uFFFDss\",\"b\":\"\\ufffd\"}}",
	} {
		for kind := range uint8(5) {
			f.Add([]byte(s), kind)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		fresh := func() (any, func() error) {
			switch kind % 5 {
			case 0:
				v := &Add{}
				return v, v.Check
			case 1:
				v := &Change{}
				return v, v.Check
			case 2:
				v := &Approval{}
				return v, v.Check
			case 3:
				v := &Edit{}
				return v, v.Check
			default:
				v := &SignIn{}
				return v, v.Check
			}
		}
		v, check := fresh()
		err := Decode(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(data)), fuzzLimit), v)
		if err != nil {
			var bad *Error
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &bad):
				if bad.Message == "" {
					t.Fatal("an *Error without a message")
				}
			case errors.As(err, &tooLarge):
				if len(data) <= fuzzLimit {
					t.Fatalf("a body of %d bytes was refused as over the limit of %d", len(data), fuzzLimit)
				}
			default:
				t.Fatalf("an error of type %T: %v", err, err)
			}
			return
		}
		if len(data) > fuzzLimit {
			t.Fatalf("a body of %d bytes, over the limit of %d, was accepted", len(data), fuzzLimit)
		}
		if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && !json.Valid(trimmed) {
			t.Fatalf("accepted a body that is not one JSON value: %q", data)
		}
		if !utf8.Valid(data) {
			t.Fatalf("accepted a body that is not UTF-8: %q", data)
		}
		if bad := (*Error)(nil); errors.As(check(), &bad) && bad.Field == "" {
			t.Fatalf("a check refused the body without naming the field: %v", bad)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("an accepted body does not serialise: %v", err)
		}
		if !heldReplacement(data) && heldReplacement(out) {
			t.Fatalf("an accepted body without U+FFFD decodes to strings with it, bytes replaced: %q", data)
		}
		again, _ := fresh()
		if err := Decode(bytes.NewReader(out), again); err != nil {
			t.Fatalf("the serialised body %s is refused: %v", out, err)
		}
		out2, _ := json.Marshal(again)
		if !bytes.Equal(out, out2) || reflect.TypeOf(v) != reflect.TypeOf(again) {
			t.Fatalf("serialise and decode changed the body:\n%s\n%s", out, out2)
		}
	})
}

// heldReplacement says whether JSON data holds U+FFFD, as such or escaped.
func heldReplacement(data []byte) bool {
	return bytes.ContainsRune(data, utf8.RuneError) || bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`))
}
