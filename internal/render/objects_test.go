package render

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// configMapDocument is a ConfigMap document of about size bytes, told
// apart from others by i.
func configMapDocument(i, size int) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  k: %q\n", i, strings.Repeat("a", size))
}

// A chart whose one large document changes every render (randAlphaNum
// 4000000) must not grow the heap by the document each render: the cache
// keeps no document that large.
func TestDocumentCacheKeepsNoLargeDocument(t *testing.T) {
	documents.Clear()
	t.Cleanup(documents.Clear)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 48 {
		objs, _, err := decodeCached(configMapDocument(i, 512<<10))
		if err != nil || len(objs) != 1 {
			t.Fatalf("decode %d: %d objects, %v", i, len(objs), err)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// 48 documents of 512 KiB held would be 48 MiB: text and decoded.
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB after 48 distinct documents of 512 KiB", grown>>20)
	}
}

// Documents under the size cap fill the cache by bytes, not only by count:
// its bytes stay under the bound however many distinct documents come.
func TestDocumentCacheBoundedByBytes(t *testing.T) {
	const maxBytes = 1 << 20
	c := newDocumentCache(documentCacheSize, maxBytes)
	for i := range 200 {
		doc := configMapDocument(i, 100<<10)
		c.add(sha256.Sum256(doc), cachedDocument{size: len(doc)})
		if _, b := c.size(); b > maxBytes {
			t.Fatalf("after %d documents the cache holds %d bytes, over %d", i+1, b, maxBytes)
		}
	}
	n, b := c.size()
	if n == 0 || n > maxBytes/(100<<10) {
		t.Fatalf("cache holds %d documents of 100 KiB in %d bytes", n, b)
	}
	// The most recent document is the one kept.
	last := configMapDocument(199, 100<<10)
	if _, ok := c.get(sha256.Sum256(last)); !ok {
		t.Fatal("the last document added was evicted")
	}
	c.Clear()
	if n, b := c.size(); n != 0 || b != 0 {
		t.Fatalf("after Clear: %d documents, %d bytes", n, b)
	}
}

// A large document is kept the second time its text is decoded: a large
// CRD is the same text at every render, and decoding it costs tens of
// milliseconds each time; one that changes at every render is never kept.
func TestDocumentCacheKeepsALargeDocumentSeenTwice(t *testing.T) {
	c := newDocumentCache(documentCacheSize, documentCacheMaxBytes)
	doc := configMapDocument(1, 512<<10)
	key := sha256.Sum256(doc)
	c.add(key, cachedDocument{size: len(doc)})
	if _, ok := c.get(key); ok {
		t.Fatal("a large document was kept the first time it was decoded")
	}
	c.add(key, cachedDocument{size: len(doc)})
	if _, ok := c.get(key); !ok {
		t.Fatal("a large document decoded twice was not kept")
	}
	for i := range 8 {
		other := configMapDocument(100+i, 512<<10)
		c.add(sha256.Sum256(other), cachedDocument{size: len(other)})
	}
	if n, _ := c.size(); n != 1 {
		t.Fatalf("the cache holds %d documents; want only the one seen twice", n)
	}
}
