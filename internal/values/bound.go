package values

import "capstan.dev/capstan/internal/mask"

// SecretTally counts distinct secret values as they come, as
// MaxSecretValues and MaxSecretBytes count them: those a mask hides
// (mask.Worth), each once. The zero SecretTally is empty and ready.
type SecretTally struct {
	seen        map[string]bool
	count, size int
}

// Add counts the values of secrets not counted before, and reports whether
// the tally is still within MaxSecretValues and MaxSecretBytes.
func (t *SecretTally) Add(secrets ...string) bool {
	for _, s := range secrets {
		if !mask.Worth(s) || t.seen[s] {
			continue
		}
		if t.seen == nil {
			t.seen = map[string]bool{}
		}
		t.seen[s] = true
		t.count++
		t.size += len(s)
	}
	return t.Within()
}

// AddWithin counts the values of secrets not counted before when the
// tally stays within MaxSecretValues and MaxSecretBytes with them, and
// reports so. Otherwise it counts none of them, and returns the count and
// KiB they would have made, for a message.
func (t *SecretTally) AddWithin(secrets ...string) (count, kib int, ok bool) {
	var added []string
	for _, s := range secrets {
		if mask.Worth(s) && !t.seen[s] {
			added = append(added, s)
			t.Add(s)
		}
	}
	if t.Within() {
		return t.count, t.KiB(), true
	}
	count, kib = t.count, t.KiB()
	for _, s := range added {
		delete(t.seen, s)
		t.count--
		t.size -= len(s)
	}
	return count, kib, false
}

// Within reports whether the tally is within MaxSecretValues and
// MaxSecretBytes.
func (t *SecretTally) Within() bool { return t.count <= MaxSecretValues && t.size <= MaxSecretBytes }

// Count returns how many values were counted.
func (t *SecretTally) Count() int { return t.count }

// KiB returns the length of the values counted together, in KiB rounded
// up.
func (t *SecretTally) KiB() int { return (t.size + 1023) / 1024 }
