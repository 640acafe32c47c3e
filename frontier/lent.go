package frontier

import (
	"context"
	"fmt"
)

// SettleLent records the results of URLs of this frontier that another
// node fetched on its behalf (the cluster lends a waiting URL to the member
// that works its host's phase now, and keeps the record here): an IN_LIST
// record takes the result as if it had been fetched here (IN_LIST ->
// COMPLETED, or STALLED for a retry, Tries counted, host statistics
// updated); an IN_PROGRESS one (being fetched here as well) takes it too,
// and its own result is then ignored as stale. Records in any other state,
// and unknown fingerprints, are left alone. It returns how many results
// were recorded.
func (f *Frontier) SettleLent(ctx context.Context, rs []Result) (int, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	if err := checkResults("settle lent", rs); err != nil {
		return 0, err
	}
	refs := make([]keyRef, len(rs))
	for i, r := range rs {
		refs[i] = keyRef{HostKey(r.Host), r.FP}
	}
	return f.submit(ctx, &op{kind: opFunc, results: rs, refs: refs, fn: func(st *txState) (int, error) {
		if _, err := st.mark(refs); err != nil {
			return 0, fmt.Errorf("settle lent: %w", err)
		}
		n, err := st.finish(rs)
		if err != nil {
			return 0, fmt.Errorf("settle lent: %w", err)
		}
		return n, nil
	}})
}
