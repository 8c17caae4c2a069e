package record

import "time"

// SetLinger changes how long b holds a batch nobody waits on. Call it before
// the first write.
func SetLinger(b *Book, d time.Duration) { b.linger = d }
