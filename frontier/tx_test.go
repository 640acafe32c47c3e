package frontier

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// claim claims the records of refs in one Update (as cluster.RecordWriter.Claim).
func claim(f *Frontier, refs []Ref) ([]Record, error) {
	var out []Record
	_, err := f.Update(ctx, Write{Name: "claim", Items: len(refs), Apply: func(tx *Tx) (int, error) {
		out = out[:0]
		for _, r := range refs {
			rec, ok, err := tx.Claim(r)
			if err != nil {
				return 0, err
			}
			if ok {
				out = append(out, rec)
			}
		}
		return len(out), nil
	}})
	return out, err
}

// remove removes claimed records in one Update (as cluster.RecordWriter.Remove).
func remove(f *Frontier, claimed []Record) (int, error) {
	return f.Update(ctx, Write{Name: "remove", Items: len(claimed), Apply: func(tx *Tx) (int, error) {
		n := 0
		for _, r := range claimed {
			ok, err := tx.Remove(r)
			if err != nil {
				return 0, err
			}
			if ok {
				n++
			}
		}
		return n, nil
	}})
}

// addCompleted stores urls COMPLETED with reason in one Update (as
// cluster.RecordWriter.AddDone and AddReplicas).
func addCompleted(f *Frontier, urls []NewURL, reason string) (int, error) {
	return f.Update(ctx, Write{Name: "add completed", Items: len(urls), Apply: func(tx *Tx) (int, error) {
		n := 0
		for _, u := range urls {
			ok, err := tx.AddCompleted(u, reason)
			if err != nil {
				return 0, err
			}
			if ok {
				n++
			}
		}
		return n, nil
	}})
}

// TestUpdate: a Write's changes are committed together and Update returns
// what Apply returned; an Apply error, a cancelled context, a missing
// Apply and a closed frontier are errors naming the write, and nothing of
// a failed write is kept.
func TestUpdate(t *testing.T) {
	f := open(t, nil)
	us := gen("u", 2, 4)
	if _, err := f.Add(ctx, us[:2]); err != nil {
		t.Fatal(err)
	}
	refs := refsOf(us)
	n, err := f.Update(ctx, Write{Name: "both", Items: 3, Apply: func(tx *Tx) (int, error) {
		if _, err := tx.MarkInProgress(refs[:1]); err != nil {
			return 0, err
		}
		if _, err := tx.Finish([]Result{{FP: refs[0].FP, Host: refs[0].Host, State: Completed, Status: 200}}); err != nil {
			return 0, err
		}
		ok, err := tx.AddCompleted(us[2], ReasonReplica)
		if err != nil || !ok {
			return 0, errors.Join(err, errors.New("replica not added"))
		}
		rec, ok, err := tx.Get(refs[2]) // this transaction's own write
		if err != nil || !ok || rec.Reason != ReasonReplica {
			return 0, errors.Join(err, errors.New("replica not seen in the transaction"))
		}
		return 7, nil
	}})
	if err != nil || n != 7 {
		t.Fatalf("Update = %d, %v; want 7", n, err)
	}
	wantCounts(t, f, Counts{InList: 1, Completed: 2})
	if ok, err := relabel(f, refs[0], ReasonReplica); err != nil || !ok {
		t.Fatalf("relabel a completed record: %v, %v", ok, err)
	}
	if ok, err := relabel(f, refs[0], ReasonReplica); err != nil || ok {
		t.Fatalf("relabel with the same reason: %v, %v; want unchanged", ok, err)
	}
	if ok, err := relabel(f, refs[1], ReasonReplica); err != nil || ok {
		t.Fatalf("relabel an IN_LIST record: %v, %v; want unchanged", ok, err)
	}
	if r := mustGet(t, f, us[0].URL); r.Reason != ReasonReplica || r.State != Completed {
		t.Fatalf("relabelled record %+v", r)
	}

	_, err = f.Update(ctx, Write{Name: "failing", Apply: func(tx *Tx) (int, error) {
		if _, err := tx.AddCompleted(us[3], ReasonMoved); err != nil {
			return 0, err
		}
		return 0, errors.New("boom")
	}})
	if err == nil || !strings.Contains(err.Error(), "failing: boom") {
		t.Fatalf("failing write: %v", err)
	}
	if _, ok, _ := f.Get(refs[3]); ok {
		t.Fatal("a failed write left a record behind")
	}
	wantCounts(t, f, Counts{InList: 1, Completed: 2})
	if _, err := addCompleted(f, us[3:], "fetched"); err == nil {
		t.Fatal("AddCompleted took a reason other than moved or replica")
	}
	if _, err := f.Update(ctx, Write{Name: "empty"}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("write without Apply: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	_, err = f.Update(cancelled, Write{Name: "late", Apply: func(*Tx) (int, error) { ran = true; return 0, nil }})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "late") || ran {
		t.Fatalf("write with a cancelled context: %v (applied: %v)", err, ran)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Update(ctx, Write{Name: "closed", Apply: func(*Tx) (int, error) { return 0, nil }}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v, want ErrClosed", err)
	}
}

func relabel(f *Frontier, r Ref, reason string) (bool, error) {
	n, err := f.Update(ctx, Write{Name: "relabel", Items: 1, Apply: func(tx *Tx) (int, error) {
		ok, err := tx.Relabel(r, reason)
		if ok {
			return 1, err
		}
		return 0, err
	}})
	return n == 1, err
}
