package values

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
)

// Alphabets are the character sets x-capstan-generate draws from, by name.
var Alphabets = map[string]string{
	"alphanumeric": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	"lowercase":    "abcdefghijklmnopqrstuvwxyz0123456789",
	"alpha":        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
	"numeric":      "0123456789",
	"hex":          "0123456789abcdef",
	"base64url":    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
}

func alphabetNames() []string {
	names := make([]string, 0, len(Alphabets))
	for n := range Alphabets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// randomString draws length characters uniformly from alphabet, reading
// random bytes from r (crypto/rand in production). Bytes that would bias
// the draw are rejected.
func randomString(r io.Reader, length int, alphabet string) (string, error) {
	n := len(alphabet)
	if n < 2 || n > 256 {
		return "", fmt.Errorf("an alphabet needs 2 to 256 characters, not %d", n)
	}
	limit := 256 - 256%n // bytes at or above limit are rejected
	out := make([]byte, 0, length)
	buf := make([]byte, length+16)
	for len(out) < length {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("read random bytes: %w", err)
		}
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			out = append(out, alphabet[int(b)%n])
			if len(out) == length {
				break
			}
		}
	}
	return string(out), nil
}

// EnsureGenerated returns the add-on's generated values: one per property
// the schema marks x-capstan-generate. A value is generated once, with
// crypto/rand, and kept in the Secret "<addon>-generated" (key values.yaml,
// a YAML document); after that it is read back, never generated again, even
// when the chart or the values change. A property new to the schema gets a
// value of its own and the others stay. Values of properties the schema no
// longer has stay in the Secret, so a chart that brings them back finds them,
// but they are not returned.
//
// The Secret is labelled for the add-on and, in the restricted profile,
// owned by it. A Secret kept by the removal of an add-on of the same name is
// adopted and reused.
func EnsureGenerated(ctx context.Context, c client.Client, addon *capstanv1.Addon, profile capstanv1.Profile, schema *Schema) (map[string]any, error) {
	return ensureGenerated(ctx, c, c, addon, profile, schema, rand.Reader)
}

// PreviewGenerated returns the generated values that EnsureGenerated would
// return, and writes nothing: the values already kept are read back, and a
// value not generated yet is drawn in memory only. A plan made with it
// therefore shows the change the first sync will make, but a Secret's new
// value is never the one the sync keeps; Secret values never appear in a
// plan, so nothing shows the difference.
func PreviewGenerated(ctx context.Context, r client.Reader, addon *capstanv1.Addon, profile capstanv1.Profile, schema *Schema) (map[string]any, error) {
	return ensureGenerated(ctx, r, nil, addon, profile, schema, rand.Reader)
}

// ensureGenerated reads the kept values with r and, when w is not nil,
// writes what it generated with w.
func ensureGenerated(ctx context.Context, r client.Reader, w client.Writer, addon *capstanv1.Addon, profile capstanv1.Profile, schema *Schema, random io.Reader) (map[string]any, error) {
	specs := schema.Generated()
	if len(specs) == 0 {
		return nil, nil
	}
	name := GeneratedName(addon.Name)
	what := fmt.Sprintf("the generated values Secret %s/%s", addon.Namespace, name)
	secret := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: addon.Namespace, Name: name}, secret)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}

	stored := map[string]any{}
	changed := false
	if exists {
		_, err := claim(secret, addon, what)
		if err != nil && profile == capstanv1.ProfileCluster && secret.Labels[capstanv1.AddonLabel] == "" {
			err = nil // the cluster profile trusts what its namespace holds
		}
		if err != nil {
			return nil, invalid(GeneratedName(addon.Name), "generated.owner", "%v", err)
		}
		changed = adoptMeta(secret, addon, profile)
		if b, ok := secret.Data[GeneratedKey]; ok {
			doc, perr := parseDocument(b, what)
			if perr != nil {
				return nil, fmt.Errorf("%s no longer holds a YAML map under %s; it was changed by hand: restore it, or delete it to generate every value anew: %w",
					what, GeneratedKey, perr)
			}
			stored = doc
		}
	}

	out := map[string]any{}
	for _, g := range specs {
		v, ok := lookup(stored, g.Path)
		if !ok || v == nil {
			s, err := randomString(random, g.Length, Alphabets[g.Alphabet])
			if err != nil {
				return nil, fmt.Errorf("generate %s: %w", dotted(g.Path), err)
			}
			setStrings(stored, g.Path, s)
			v = s
			changed = true
		}
		setStrings(out, g.Path, v)
	}

	if !changed || w == nil {
		return out, nil
	}
	doc, err := yaml.Marshal(stored)
	if err != nil {
		return nil, fmt.Errorf("encode the generated values: %w", err)
	}
	if !exists {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: addon.Namespace,
				Labels:    addon.OwnerLabels(),
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{GeneratedKey: doc},
		}
		if profile == capstanv1.ProfileRestricted && addon.UID != "" {
			secret.OwnerReferences = []metav1.OwnerReference{addon.OwnerReference()}
		}
		// NOTE: two reconciles racing here both generate; the API server lets
		// one create win, and the loser must not keep its own values, so it
		// returns the conflict and the next reconcile reads the winner's.
		if err := w.Create(ctx, secret); err != nil {
			return nil, fmt.Errorf("create %s: %w", what, err)
		}
		return out, nil
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[GeneratedKey] = doc
	// The update carries the resourceVersion that was read, so a concurrent
	// change is a conflict rather than lost values.
	if err := w.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("update %s: %w", what, err)
	}
	return out, nil
}

// setStrings sets v at a path of map keys, creating maps on the way.
func setStrings(m map[string]any, path []string, v any) {
	p := make(targetPath, len(path))
	for i, s := range path {
		p[i] = segment{key: s}
	}
	p.set(m, v)
}
