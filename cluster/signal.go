package cluster

// signal wakes the goroutine that waits on c (a channel of capacity 1)
// without blocking: a wake-up already pending covers this one.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
