package controller

import (
	"fmt"
	"testing"
)

// TestSignatureMemoryIsBounded stores verifications of ever new chart
// versions, as a version range that follows a busy repository does: the
// memory keeps at most maxVerifiedSignatures of them, the least recently
// used dropped first, so one looked up at every resync stays.
func TestSignatureMemoryIsBounded(t *testing.T) {
	var m signatureMemory
	keys := []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----")
	version := func(i int) string { return signatureKey("provenance", fmt.Sprintf("sha256:%064x", i), keys) }
	m.store(version(0), "Platform Team")
	for i := 1; i <= 3*maxVerifiedSignatures; i++ {
		m.store(version(i), "Platform Team")
		if _, ok := m.load(version(0)); !ok {
			t.Fatalf("the verification looked up at every resync was dropped after %d new versions", i)
		}
	}
	if n := m.cache().Len(); n > maxVerifiedSignatures {
		t.Errorf("the memory holds %d verifications, over the bound of %d", n, maxVerifiedSignatures)
	}
	if _, ok := m.load(version(1)); ok {
		t.Error("the least recently used verification is still held")
	}
	if signer, ok := m.load(version(3 * maxVerifiedSignatures)); !ok || signer != "Platform Team" {
		t.Errorf("the newest verification = %q, %v; want Platform Team, true", signer, ok)
	}
}
