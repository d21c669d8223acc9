package guard

import (
	"context"
	"strings"
	"testing"
)

func TestGeneratedNamesOfOtherAddons(t *testing.T) {
	secret := func(name string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: " + name + "}\nstringData: {a: b}"
	}
	runClause(t, []clauseCase{
		{"another Addon's generated values", secret("wiki-generated"), []string{"name-reserved@metadata.name"}},
		{"an Addon that may come later", secret("x-generated"), []string{"name-reserved@metadata.name"}},
		{"its own, reported once", secret("blog-generated"), []string{"name-reserved@metadata.name"}},
		{"near-miss: a ConfigMap of that name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wiki-generated}", nil},
		{"near-miss: generated elsewhere in the name", secret("wiki-generated-certs") + "\n---\n" + secret("generated"), nil},
	})
}

func TestGeneratedNameMessage(t *testing.T) {
	vs := Check(context.Background(), parse(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: wiki-generated}"), testContext())
	if len(vs) != 1 || !strings.Contains(vs[0].Message, `the Addon "wiki"`) || !strings.Contains(vs[0].Message, "rename the Secret") {
		t.Fatalf("the message should name the Addon whose name it is and say what to do: %+v", vs)
	}
}
