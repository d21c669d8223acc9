package source

import (
	"container/list"
	"sync"
)

// lru is a least-recently-used cache bounded by entry count and by bytes. An
// entry larger than the byte bound is not kept.
type lru[V any] struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	bytes      int64
	order      *list.List // front is the most recently used
	items      map[string]*list.Element
}

type lruEntry[V any] struct {
	key   string
	value V
	size  int64
}

func newLRU[V any](maxEntries int, maxBytes int64) *lru[V] {
	return &lru[V]{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[V]).value, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) add(key string, value V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxEntries <= 0 || size > c.maxBytes {
		return
	}
	if e, ok := c.items[key]; ok {
		c.removeElement(e)
	}
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, value: value, size: size})
	c.bytes += size
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.removeElement(c.order.Back())
	}
}

// remove drops key, if it is cached.
func (c *lru[V]) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.removeElement(e)
	}
}

func (c *lru[V]) removeElement(e *list.Element) {
	ent := e.Value.(*lruEntry[V])
	c.order.Remove(e)
	delete(c.items, ent.key)
	c.bytes -= ent.size
}

// stats returns the number of entries and their bytes.
func (c *lru[V]) stats() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}
