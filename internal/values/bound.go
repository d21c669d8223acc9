package values

import "capstan.dev/capstan/internal/mask"

// SecretTally counts distinct secret values as they come, as
// MaxSecretValues and MaxSecretBytes count them: those a mask hides
// (mask.Worth), each once. The zero SecretTally is empty and ready.
type SecretTally struct {
	seen        map[string]bool
	count, size int
}

// Add counts the values of secrets not counted before.
func (t *SecretTally) Add(secrets ...string) {
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
}

// AddWithin counts the values of secrets not counted before when the
// tally stays within MaxSecretValues and MaxSecretBytes with them, and
// reports so. Otherwise it counts none of them, and returns the count and
// KiB they would have made, for a message.
func (t *SecretTally) AddWithin(secrets ...string) (count, kib int, ok bool) {
	var added []string
	fresh := map[string]bool{}
	with := SecretTally{count: t.count, size: t.size}
	for _, s := range secrets {
		if mask.Worth(s) && !t.seen[s] && !fresh[s] {
			fresh[s] = true
			added = append(added, s)
			with.count++
			with.size += len(s)
		}
	}
	if !with.Within() {
		return with.count, with.KiB(), false
	}
	t.Add(added...)
	return t.count, t.KiB(), true
}

// Within reports whether the tally is within MaxSecretValues and
// MaxSecretBytes.
func (t *SecretTally) Within() bool { return t.count <= MaxSecretValues && t.size <= MaxSecretBytes }

// Count returns how many values were counted.
func (t *SecretTally) Count() int { return t.count }

// KiB returns the length of the values counted together, in KiB rounded
// up.
func (t *SecretTally) KiB() int { return (t.size + 1023) / 1024 }
