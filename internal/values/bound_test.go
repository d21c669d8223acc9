package values

import (
	"fmt"
	"testing"
)

// TestAddWithinCountsEachValueOnce: a value repeated in one file, or
// counted before, is one value; values past the bound are not counted at
// all, so the tally is as it was.
func TestAddWithinCountsEachValueOnce(t *testing.T) {
	var tally SecretTally
	tally.Add("counted-before")
	if count, _, ok := tally.AddWithin("counted-before", "again-and-again", "again-and-again", "no"); !ok || count != 2 || tally.Count() != 2 {
		t.Fatalf("AddWithin = %d, %v, tally %d; want the new value counted once, the short one not at all", count, ok, tally.Count())
	}
	var many []string
	for n := range MaxSecretValues {
		many = append(many, fmt.Sprintf("value-%05d", n), fmt.Sprintf("value-%05d", n))
	}
	count, kib, ok := tally.AddWithin(many...)
	if ok || count != MaxSecretValues+2 || kib != (tally.size+MaxSecretValues*len("value-00000")+1023)/1024 {
		t.Fatalf("AddWithin past the bound = %d, %d KiB, %v; want refused with the count and size it would have made", count, kib, ok)
	}
	if tally.Count() != 2 || !tally.Within() {
		t.Fatalf("tally after a refusal = %d; want it as it was", tally.Count())
	}
}
