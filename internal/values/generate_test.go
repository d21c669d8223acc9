package values

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

func TestRandomString(t *testing.T) {
	for name, alphabet := range Alphabets {
		s, err := randomString(rand.Reader, 64, alphabet)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 64 {
			t.Fatalf("%s: length %d, want 64", name, len(s))
		}
		for _, r := range s {
			if !strings.ContainsRune(alphabet, r) {
				t.Fatalf("%s: %q is not in the alphabet", name, r)
			}
		}
	}
	// Bytes at or above the rejection limit are skipped, so the draw stays
	// uniform: with 10 digits, 250..255 are rejected.
	src := bytes.NewReader(append(bytes.Repeat([]byte{255}, 100), bytes.Repeat([]byte{13}, 100)...))
	s, err := randomString(src, 3, Alphabets["numeric"])
	if err != nil || s != "333" {
		t.Fatalf("randomString = %q, %v; want 333 after rejecting 255s", s, err)
	}
	// Every character of a small alphabet shows up: no off-by-one at its ends.
	s, _ = randomString(rand.Reader, 2000, Alphabets["hex"])
	for _, r := range Alphabets["hex"] {
		if !strings.ContainsRune(s, r) {
			t.Fatalf("%q never drawn in 2000 tries", r)
		}
	}
	if _, err := randomString(bytes.NewReader(nil), 8, "ab"); err == nil {
		t.Fatal("want an error when the random source fails")
	}
}

func TestPreviewGeneratedWritesNothing(t *testing.T) {
	schema, err := ParseSchema("demo", []byte(`{"type":"object","properties":{"token":{"type":"string","x-capstan-generate":{"length":12}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	addon := &capstanv1.Addon{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "demo"}}
	c := fake.NewClientBuilder().Build()
	got, err := PreviewGenerated(context.Background(), c, addon, capstanv1.ProfileRestricted, schema)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := got["token"].(string); len(tok) != 12 {
		t.Fatalf("previewed values %v; want a 12-character token drawn in memory", got)
	}
	var secrets corev1.SecretList
	if err := c.List(context.Background(), &secrets); err != nil || len(secrets.Items) != 0 {
		t.Fatalf("the preview left %d Secrets (%v); want none", len(secrets.Items), err)
	}
	kept, err := EnsureGenerated(context.Background(), c, addon, capstanv1.ProfileRestricted, schema)
	if err != nil {
		t.Fatal(err)
	}
	again, err := PreviewGenerated(context.Background(), c, addon, capstanv1.ProfileRestricted, schema)
	if err != nil || again["token"] != kept["token"] {
		t.Fatalf("after a sync kept %v, the preview gave %v (%v); want the kept value", kept, again, err)
	}
}
