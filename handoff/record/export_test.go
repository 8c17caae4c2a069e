package record

import "time"

// SetLinger changes how long b holds a batch nobody waits on. Call it before
// the first write.
func SetLinger(b *Book, d time.Duration) { b.linger = d }

// QueueSize is how many records a Book's queue holds before a writer waits.
const QueueSize = queueSize

// Queued is how many records wait for b's flusher.
func Queued(b *Book) int {
	b.queue.mu.Lock()
	defer b.queue.mu.Unlock()
	return b.queue.n
}
