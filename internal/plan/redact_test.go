package plan

import (
	"encoding/base64"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"capstan.dev/capstan/internal/mask"
)

// TestRedactAPIErrorSaysHowToCreateTheNamespace checks that an object
// refused because its namespace is missing says what to do, for a Secret
// as for any other kind.
func TestRedactAPIErrorSaysHowToCreateTheNamespace(t *testing.T) {
	err := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "apps")
	for _, kind := range []string{"ConfigMap", "Secret"} {
		obj := &unstructured.Unstructured{}
		obj.SetKind(kind)
		got := RedactAPIError(obj, err)
		if !strings.Contains(got, "namespace apps does not exist") || !strings.Contains(got, "spec.createNamespace") {
			t.Errorf("%s: %q does not say which namespace is missing and how to create it", kind, got)
		}
	}
	other := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")
	if got := RedactAPIError(&unstructured.Unstructured{}, other); strings.Contains(got, "createNamespace") {
		t.Errorf("a missing ConfigMap is not a missing namespace: %q", got)
	}
}

func TestHideValuesPairHidesAnyKindByPath(t *testing.T) {
	hides := func(s string) bool { return strings.Contains(s, "hunter") }
	live := &unstructured.Unstructured{Object: map[string]any{
		"kind": "ConfigMap",
		"data": map[string]any{"same": "hunter2", "changed": "hunter1-old", "plain": "a", "gone": "hunter9", "cleared": "hunter3"},
		"args": []any{"--password=hunter1-old", "--v=1"},
	}}
	desired := &unstructured.Unstructured{Object: map[string]any{
		"kind": "ConfigMap",
		"data": map[string]any{"same": "hunter2", "changed": "hunter2-new", "plain": "b", "added": "hunter4", "cleared": "open"},
		"args": []any{"--password=hunter2-new", "--v=1", "--extra=hunter5"},
	}}
	l, d := HideValuesPair(live, desired, hides)
	want := map[string][2]any{
		"same":    {hiddenUnchanged, hiddenUnchanged},
		"changed": {hiddenOld, hiddenNew},
		"plain":   {"a", "b"},
		"gone":    {hiddenUnchanged, nil},
		"added":   {nil, hiddenUnchanged},
		// The old value is not known to be one, but it is hidden where it
		// shows beside a value that is not.
		"cleared": {hiddenUnchanged, "open"},
	}
	ld, dd := l.Object["data"].(map[string]any), d.Object["data"].(map[string]any)
	for k, w := range want {
		if ld[k] != w[0] || dd[k] != w[1] {
			t.Errorf("data.%s: live %v, desired %v; want %v, %v", k, ld[k], dd[k], w[0], w[1])
		}
	}
	la, da := l.Object["args"].([]any), d.Object["args"].([]any)
	if la[0] != hiddenOld || da[0] != hiddenNew || la[1] != "--v=1" || da[2] != hiddenUnchanged {
		t.Errorf("args: live %v, desired %v", la, da)
	}
	if live.Object["data"].(map[string]any)["same"] != "hunter2" || desired.Object["args"].([]any)[0] != "--password=hunter2-new" {
		t.Error("HideValuesPair changed its arguments")
	}
	if gl, gd := HideValuesPair(live, desired, nil); gl != live || gd != desired {
		t.Error("with nil hides, the objects should come back as they are")
	}
}

// TestHideValuesPairHidesBase64OfAValue: a string that decodes from
// base64, standard or URL-safe, padded or not, to text that holds a value
// is hidden like the value; base64 of other text, strings too short or
// too long to be decoded, and strings that mix both alphabets are not.
func TestHideValuesPairHidesBase64OfAValue(t *testing.T) {
	hides := func(s string) bool { return strings.Contains(s, "p>ss?w0rd!") }
	long := base64.StdEncoding.EncodeToString([]byte("user:p>ss?w0rd!" + strings.Repeat(" ", maxEncoded)))
	for _, tc := range []struct {
		name, value string
		hidden      bool
	}{
		{"standard", "dXNlcjpwPnNzP3cwcmQh", true},         // user:p>ss?w0rd!
		{"standard padded", "ZGI6cD5zcz93MHJkIQ==", true},  // db:p>ss?w0rd!
		{"standard unpadded", "ZGI6cD5zcz93MHJkIQ", true},  // db:p>ss?w0rd!
		{"standard, + and /", "YXA+c3M/dzByZCE=", true},    // ap>ss?w0rd!
		{"URL-safe padded", "YXA-c3M_dzByZCE=", true},      // ap>ss?w0rd!
		{"URL-safe unpadded", "YXA-c3M_dzByZCE", true},     // ap>ss?w0rd!
		{"JSON", "eyJhdXRoIjoicD5zcz93MHJkISJ9fn4=", true}, // {"auth":"p>ss?w0rd!"}~~
		{"other text", "aGVsbG8gd29ybGQsIG5vdGhpbmcgaGVyZQ==", false},
		{"both alphabets", "YXA-c3M/dzByZCE=", false},
		{"too short", "cD5z", false},
		{"too long", long, false},
		{"not base64", "a plain string", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := &unstructured.Unstructured{Object: map[string]any{
				"kind": "ConfigMap", "binaryData": map[string]any{"k": tc.value},
			}}
			_, d := HideValuesPair(nil, desired, hides)
			got := d.Object["binaryData"].(map[string]any)["k"]
			if hidden := got == hiddenUnchanged; hidden != tc.hidden {
				t.Errorf("binaryData.k = %.40q; want hidden %v", got, tc.hidden)
			}
		})
	}
}

// TestHideValuesPairHidesWrappedBase64: base64 wrapped in lines, as
// `base64` and openssl write it, is decoded like base64 on one line, even
// where a line break cuts the value's encoding in two.
func TestHideValuesPairHidesWrappedBase64(t *testing.T) {
	hides := func(s string) bool { return strings.Contains(s, "p>ss?w0rd!") }
	// encoded has the value's encoding start at the byte at of the text:
	// byte 52 is character 69, byte 42 character 56, so that a line of 76
	// or 64 characters ends within it.
	encoded := func(at int) string {
		return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", at-11) + "password = p>ss?w0rd!\n"))
	}
	wrap := func(s string, width int, eol string) string {
		var b strings.Builder
		for len(s) > width {
			b.WriteString(s[:width] + eol)
			s = s[width:]
		}
		return b.String() + s + eol
	}
	for _, tc := range []struct {
		name, value string
		hidden      bool
	}{
		{"76 columns", wrap(encoded(52), 76, "\n"), true},
		{"64 columns, CRLF", wrap(encoded(42), 64, "\r\n"), true},
		{"indented", "  " + wrap(encoded(52), 76, "\n  "), true},
		{"other text", wrap(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("nothing here ", 8))), 76, "\n"), false},
		{"words", "plain words that are no base64", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := &unstructured.Unstructured{Object: map[string]any{
				"kind": "ConfigMap", "data": map[string]any{"k": tc.value},
			}}
			_, d := HideValuesPair(nil, desired, hides)
			got := d.Object["data"].(map[string]any)["k"]
			if hidden := got == hiddenUnchanged; hidden != tc.hidden {
				t.Errorf("data.k = %.40q; want hidden %v", got, tc.hidden)
			}
		})
	}
}

// TestHideValuesPairHidesAValueThatIsAHash: a value shaped like a plan's
// hash (a password's hash) is hidden in a diff like any other value.
func TestHideValuesPairHidesAValueThatIsAHash(t *testing.T) {
	hex := "3f9a1c07e2b84d65a0c9f1e37b2d8456c1e0a9f47b3d2e618c5a0f9e4d7b2a13"
	desired := &unstructured.Unstructured{Object: map[string]any{
		"kind": "ConfigMap", "data": map[string]any{"password_hash": "sha256:" + hex},
	}}
	_, d := HideValuesPair(nil, desired, mask.New([]string{hex}).Holds)
	if got := d.Object["data"].(map[string]any)["password_hash"]; got != hiddenUnchanged {
		t.Errorf("data.password_hash = %q, want %q", got, hiddenUnchanged)
	}
}

// TestRedactSecretPairHidesAnnotationsThatCopyItsData: a Secret another
// tool deployed carries a copy of itself in annotations of its own (kapp's
// kapp.k14s.io/original and original-diff), with its data in base64, or
// decoded and quoted in JSON. A diff of another change shows those
// annotations as context: each one that holds a value of the data, old or
// new, is hidden as a changed key is, while an annotation that holds no
// value still shows.
func TestRedactSecretPairHidesAnnotationsThatCopyItsData(t *testing.T) {
	const password = "supersecret<&>\"pw"
	encoded := base64.StdEncoding.EncodeToString([]byte(password))
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "db", "namespace": "apps",
			"labels": map[string]any{"team": "a"},
			"annotations": map[string]any{
				"kapp.k14s.io/original":      `{"apiVersion":"v1","data":{"password":"` + encoded + `"},"kind":"Secret"}`,
				"kapp.k14s.io/original-diff": `[{"op":"add","path":"/stringData","value":{"password":"supersecret<&>\"pw"}}]`,
				"example.com/go-json":        `{"password":"supersecret\u003c\u0026\u003e\"pw"}`,
				"example.com/owner":          "team-a",
			}},
		"data": map[string]any{"password": encoded},
	}}
	desired := live.DeepCopy()
	desired.SetLabels(map[string]string{"team": "b"})
	c, err := Compare(desired, live, desired)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{encoded, "supersecret"} {
		if strings.Contains(c.Diff, leak) {
			t.Errorf("the diff shows the Secret's data (%s):\n%s", leak, c.Diff)
		}
	}
	if !strings.Contains(c.Diff, "kapp.k14s.io/original: "+hiddenUnchanged) {
		t.Errorf("the diff should show the hidden annotation by its key:\n%s", c.Diff)
	}
	l, d := RedactSecretPair(live, desired)
	for _, obj := range []*unstructured.Unstructured{l, d} {
		if a := obj.GetAnnotations(); a["example.com/owner"] != "team-a" || a["example.com/go-json"] != hiddenUnchanged {
			t.Errorf("annotations %v; want the one with no value shown, the others hidden", a)
		}
	}

	// The data changes: the copy of the old value is hidden as old.
	desired.Object["data"] = map[string]any{"password": base64.StdEncoding.EncodeToString([]byte("other"))}
	desired.SetAnnotations(map[string]string{"kapp.k14s.io/original": `{"data":{"password":"b3RoZXI="}}`})
	l, d = RedactSecretPair(live, desired)
	if got, want := l.GetAnnotations()["kapp.k14s.io/original"]+" "+d.GetAnnotations()["kapp.k14s.io/original"], hiddenOld+" "+hiddenNew; got != want {
		t.Errorf("a changed copy shows as %q; want %q", got, want)
	}

	// The password was rotated outside the tool that keeps a copy: the
	// copies hold a value neither side's data has any more, and are hidden
	// still, as copies of the object.
	stale := base64.StdEncoding.EncodeToString([]byte("rotated-away"))
	for key, copied := range map[string]string{
		"kapp.k14s.io/original":      `{"apiVersion":"v1","data":{"password":"` + stale + `"},"kind":"Secret"}`,
		"kapp.k14s.io/original-diff": `[{"op":"replace","path":"/data/password","value":"` + stale + `"}]`,
		"example.com/yaml-copy":      "kind: Secret\nstringData:\n  password: rotated-away\n",
	} {
		live.SetAnnotations(map[string]string{key: copied, "example.com/config": `{"replicas": 2}`})
		desired := live.DeepCopy()
		desired.SetLabels(map[string]string{"team": "c"})
		c, err := Compare(desired, live, desired)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(c.Diff, stale) || strings.Contains(c.Diff, "rotated-away") || !strings.Contains(c.Diff, `example.com/config: '{"replicas": 2}'`) {
			t.Errorf("%s, a copy of a value rotated away:\n%s", key, c.Diff)
		}
	}
}
