package controller

import "time"

// doubling is first doubled times times, at most most: the capped
// exponential backoff of the controller's retries (an unreadable manifest,
// a repository's failed reads, fought drift, a render stopped at a bound).
// A times of zero or less is first itself, and first is never doubled
// past most, so no doubling overflows.
func doubling(first time.Duration, times int, most time.Duration) time.Duration {
	d := first
	for range max(times, 0) {
		if d <= 0 || d >= most {
			break
		}
		if d > most/2 {
			return most
		}
		d *= 2
	}
	return min(d, most)
}
