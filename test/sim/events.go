package sim

// Event kinds.
const (
	evTurn     uint8 = iota // a node's scheduler turn
	evStep                  // a host trip goes on (pace over, or a request ended)
	evReqEnd                // a request ends
	evArrive                // an exchange batch reaches its receiver
	evAck                   // its acknowledgement reaches the sender
	evTimer                 // a sender's max-delay timer
	evScenario              // a scripted cluster event (loss, partition, ...)
)

// event is one entry of the event queue. Ties on at go by seq, so the order
// is the order of scheduling: deterministic.
type event struct {
	at    int64 // virtual nanoseconds since the start
	seq   uint64
	kind  uint8
	node  int32
	trip  *trip
	snd   *sender
	batch []int64
	fn    func()
}

// queue is a binary min-heap of events by (at, seq).
type queue struct{ ev []event }

func (q *queue) less(a, b int) bool {
	if q.ev[a].at != q.ev[b].at {
		return q.ev[a].at < q.ev[b].at
	}
	return q.ev[a].seq < q.ev[b].seq
}

func (q *queue) push(e event) {
	q.ev = append(q.ev, e)
	j := len(q.ev) - 1
	for j > 0 {
		p := (j - 1) / 2
		if !q.less(j, p) {
			break
		}
		q.ev[j], q.ev[p] = q.ev[p], q.ev[j]
		j = p
	}
}

func (q *queue) pop() event {
	top := q.ev[0]
	last := len(q.ev) - 1
	q.ev[0] = q.ev[last]
	q.ev[last] = event{}
	q.ev = q.ev[:last]
	j, n := 0, last
	for {
		c := 2*j + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && q.less(r, c) {
			c = r
		}
		if !q.less(c, j) {
			break
		}
		q.ev[j], q.ev[c] = q.ev[c], q.ev[j]
		j = c
	}
	return top
}

func (q *queue) len() int { return len(q.ev) }
