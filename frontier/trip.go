package frontier

import (
	"context"
	"fmt"
)

// Settle records the outcome of one host trip in ONE transaction: the new
// URLs it discovered (as Add), then its fetch results (as Finish), then the
// URLs it did not get to (as Requeue). One transaction instead of three
// saves two group commits per trip, and a crash can never keep a page's
// result without the links found on it. It returns how many URLs were new.
func (f *Frontier) Settle(ctx context.Context, found []NewURL, rs []Result, requeue []uint64) (added int, err error) {
	for _, r := range rs {
		if r.State != Completed && r.State != Stalled {
			return 0, fmt.Errorf("frontier: settle %016x: state=%s: must be completed or stalled", r.FP, r.State)
		}
	}
	adds := prepareURLs(found)
	if len(adds) == 0 && len(rs) == 0 && len(requeue) == 0 {
		return 0, nil
	}
	return f.submit(ctx, &op{kind: opFunc, adds: adds, results: rs, fps: requeue, fn: func(st *txState) (int, error) {
		n, err := st.add(adds)
		if err != nil {
			return 0, fmt.Errorf("settle: add: %w", err)
		}
		if _, err := st.finish(rs); err != nil {
			return 0, fmt.Errorf("settle: finish: %w", err)
		}
		if _, err := st.requeue(requeue); err != nil {
			return 0, fmt.Errorf("settle: requeue: %w", err)
		}
		return n, nil
	}})
}
