package controller

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capstanv1 "capstan.dev/capstan/api/v1alpha1"
	"capstan.dev/capstan/internal/mask"
)

// A chart may put a value that must never be shown (one that came from a
// Secret, a writeOnly or a generated value) into an object that is not a
// Secret: a ConfigMap's data, an argument, even a name. The plan hides a
// Secret's data by key, but the diffs of other kinds show what they hold,
// and the API server's messages quote what they were given. So whatever
// the controller says about an add-on (the status's messages, the plan's
// diffs, errors and notices, its events and the errors it logs) has each
// such value replaced by "(hidden)" before it leaves the reconcile. The
// chart's own required and fail messages are masked the same way.
//
// Values shorter than mask.MinLen, and true and false, are left as they
// are (see internal/mask).
//
// Names stay as they are in the inventory and in each planned object's
// reference: the controller finds objects by them, and the API server shows
// a name to anyone who may list its kind. A value that must stay secret has
// no place in a name.

// masker hides the secret values of one reconcile: a mask.Mask with the
// controller's own uses. A nil masker hides nothing.
type masker mask.Mask

// newMasker is the masker of secrets, or nil when none is worth hiding.
func newMasker(secrets []string) *masker { return (*masker)(mask.New(secrets)) }

// String returns text with every secret value hidden.
func (m *masker) String(text string) string { return (*mask.Mask)(m).String(text) }

// Holds reports whether text holds a secret value.
func (m *masker) Holds(text string) bool { return (*mask.Mask)(m).Holds(text) }

// holder is Holds, or nil for a nil masker, so that a diff with nothing to
// hide is not copied to be searched.
func (m *masker) holder() func(string) bool {
	if m == nil {
		return nil
	}
	return m.Holds
}

// Error returns err with its message masked, still wrapping err for
// errors.Is and errors.As. It returns err itself when nothing was hidden.
func (m *masker) Error(err error) error {
	if m == nil || err == nil {
		return err
	}
	msg := m.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &maskedError{msg: msg, err: err}
}

// maskedError is an error whose message had secret values hidden.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// Plan hides secret values in the free text of p, in its workloads'
// images (a chart may build an image's name of a value from a Secret, as
// the object's diff, masked here too, shows) and in its source's address.
func (m *masker) Plan(p *capstanv1.Plan) {
	if m == nil || p == nil {
		return
	}
	p.Source.URL = m.String(p.Source.URL)
	for i := range p.Workloads {
		for j := range p.Workloads[i].Images {
			p.Workloads[i].Images[j] = m.String(p.Workloads[i].Images[j])
		}
	}
	for i := range p.Objects {
		p.Objects[i].Diff = m.String(p.Objects[i].Diff)
		p.Objects[i].Error = m.String(p.Objects[i].Error)
	}
	for i := range p.Violations {
		p.Violations[i].Message = m.String(p.Violations[i].Message)
	}
	for i := range p.ValuesErrors {
		p.ValuesErrors[i].Message = m.String(p.ValuesErrors[i].Message)
	}
	for i := range p.Notices {
		p.Notices[i].Message = m.String(p.Notices[i].Message)
	}
}

// mask is the masker of the values this reconcile composed, or of a git
// folder's variables from Secrets and the values its SOPS files held; nil
// before the values step, when no value is known and none can be quoted.
func (s *scope) mask() *masker {
	if s.variables != nil || s.decrypter != nil {
		var secrets []string
		if s.variables != nil {
			secrets = s.variables.Secret
		}
		if s.decrypter != nil {
			secrets = append(slices.Clip(secrets), s.decrypter.Secrets...)
		}
		// NOTE: the render adds decrypted values as it reads the files.
		if s.masker == nil || s.maskedSecrets != len(secrets) {
			s.masker, s.maskedSecrets = s.masks.masker(client.ObjectKeyFromObject(s.addon), s.addon.UID, secrets), len(secrets)
		}
		return s.masker
	}
	if s.values == nil {
		return nil
	}
	if s.maskedValues != s.values {
		s.masker, s.maskedValues = s.masks.masker(client.ObjectKeyFromObject(s.addon), s.addon.UID, s.values.SecretValues()), s.values
	}
	return s.masker
}

// maskCacheBytes bounds the masks a maskCache keeps, together. A mask at
// values.MaxSecretValues takes some 20 MiB for printable values, and up to
// some 65 MiB for values of control characters or bytes that are not
// UTF-8, whose quoted and escaped forms are longer; a mask of a CA bundle
// of 200 KiB takes some 25 MiB. The controller runs several reconciles at
// once, each with a render, under its memory limit.
const maskCacheBytes = 96 << 20

// maskMaxBytes is the largest mask a maskCache keeps: a third of it, so
// that a CA bundle's is kept, while one add-on at the bound with values
// whose forms are long, built again on every reconcile, does not push
// every other add-on's mask out each time.
const maskMaxBytes = maskCacheBytes / 3

// maskCache keeps the masks of recent reconciles, the most recently used,
// up to maskCacheBytes: an add-on's secret values rarely change between
// one resync and the next, and building a mask of many values costs far
// more than searching a text with it. A mask is kept by the Addon's UID
// and a SHA-256 of its values, so a mask is only ever the one of the
// values it was built for. It keeps one mask an Addon, the last built:
// values rotated out are not kept, and forget drops an Addon's mask when
// the Addon goes, so no secret value outlives its Addon in memory. The
// zero maskCache is empty and ready; a nil one keeps nothing.
type maskCache struct {
	mu   sync.Mutex
	size int
	// lru holds *maskEntry, the most recently used first; byAddon finds
	// them.
	lru     list.List
	byAddon map[types.NamespacedName]*list.Element
}

type maskKey struct {
	uid types.UID
	sum [sha256.Size]byte
}

type maskEntry struct {
	addon types.NamespacedName
	key   maskKey
	m     *masker
	size  int
}

// masker returns the masker of secrets for the Addon addon, of UID uid:
// the one kept, or a new one, which it keeps in place of the Addon's
// other.
func (c *maskCache) masker(addon types.NamespacedName, uid types.UID, secrets []string) *masker {
	if c == nil {
		return newMasker(secrets)
	}
	key := maskKey{uid: uid, sum: secretsSum(secrets)}
	c.mu.Lock()
	if e, ok := c.byAddon[addon]; ok && e.Value.(*maskEntry).key == key {
		c.lru.MoveToFront(e)
		m := e.Value.(*maskEntry).m
		c.mu.Unlock()
		return m
	}
	c.mu.Unlock()
	// NOTE: built outside the lock, so one add-on's build does not hold
	// up the others; two reconciles of the same values may both build.
	m := newMasker(secrets)
	size := (*mask.Mask)(m).Size()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m == nil || size > maskMaxBytes {
		// Not kept; the Addon's mask of values it no longer has goes.
		if e, ok := c.byAddon[addon]; ok && e.Value.(*maskEntry).key != key {
			c.remove(e)
		}
		return m
	}
	if c.byAddon == nil {
		c.byAddon = map[types.NamespacedName]*list.Element{}
	}
	if e, ok := c.byAddon[addon]; ok {
		if e.Value.(*maskEntry).key == key {
			c.lru.MoveToFront(e)
			return e.Value.(*maskEntry).m
		}
		c.remove(e)
	}
	for c.size+size > maskCacheBytes {
		c.remove(c.lru.Back())
	}
	c.byAddon[addon] = c.lru.PushFront(&maskEntry{addon: addon, key: key, m: m, size: size})
	c.size += size
	return m
}

// forget drops the mask kept for the Addon addon, if any.
func (c *maskCache) forget(addon types.NamespacedName) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byAddon[addon]; ok {
		c.remove(e)
	}
}

// remove drops the entry e; c.mu is held.
func (c *maskCache) remove(e *list.Element) {
	old := c.lru.Remove(e).(*maskEntry)
	delete(c.byAddon, old.addon)
	c.size -= old.size
}

// secretsSum is a SHA-256 of secrets as a set: sorted, each once, each
// with its length.
func secretsSum(secrets []string) [sha256.Size]byte {
	sorted := slices.Compact(slices.Sorted(slices.Values(secrets)))
	h := sha256.New()
	var n [8]byte
	for _, v := range sorted {
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		_, _ = io.WriteString(h, v)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
