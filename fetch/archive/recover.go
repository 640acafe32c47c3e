package archive

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// RecoveredFile describes one WARC file repaired by Recover.
type RecoveredFile struct {
	Path    string // the ".open" file found
	Final   string // the name it was renamed to ("" when removed)
	Records int    // complete records kept
	Size    int64  // size before repair
	Cut     int64  // bytes cut from the end
	Reason  string // why bytes were cut ("" when the file was complete)
	Removed bool   // nothing complete was left: the file was deleted
}

// RecoverReport lists what Recover did.
type RecoverReport struct {
	Files []RecoveredFile
}

// Recover repairs WARC files a crash left open in dir (*.warc.gz.open): each is cut after its last
// complete gzip member (also dropping a final request record whose response was lost) and renamed
// to .warc.gz, and its CDXJ index is written (IndexWARC); a file with no complete record is
// removed. Call it before NewWARCWriter on start.
func Recover(dir string) (RecoverReport, error) {
	var rep RecoverReport
	if tmps, err := filepath.Glob(filepath.Join(dir, "*"+CDXJSuffix+".tmp")); err == nil {
		for _, t := range tmps { // an index write cut by the crash
			os.Remove(t)
		}
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"+OpenSuffix))
	if err != nil {
		return rep, fmt.Errorf("archive: recover %s: %w", dir, err)
	}
	for _, p := range paths {
		rf, err := recoverFile(p)
		if err != nil {
			return rep, err
		}
		rep.Files = append(rep.Files, rf)
		slog.Warn("archive: recovered WARC file left open by a crash", "file", p, "renamed_to", rf.Final,
			"records_kept", rf.Records, "bytes_cut", rf.Cut, "reason", rf.Reason, "removed", rf.Removed)
	}
	return rep, nil
}

func recoverFile(path string) (RecoveredFile, error) {
	rf := RecoveredFile{Path: path}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return rf, fmt.Errorf("archive: recover %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rf, fmt.Errorf("archive: recover %s: %w", path, err)
	}
	rf.Size = fi.Size()
	st, serr := scanWARC(f, nil)
	if serr != nil {
		if !errors.Is(serr, ErrTornRecord) && !errors.Is(serr, ErrMalformed) {
			return rf, fmt.Errorf("archive: recover %s: %w", path, serr)
		}
		rf.Reason = serr.Error()
	} else if st.safeEnd < st.end {
		rf.Reason = "last request record has no response"
	}
	rf.Records = st.safeRecs
	rf.Cut = rf.Size - st.safeEnd
	if st.safeEnd == 0 {
		f.Close()
		if err := os.Remove(path); err != nil {
			return rf, fmt.Errorf("archive: recover: remove %s: %w", path, err)
		}
		rf.Removed = true
		return rf, nil
	}
	if rf.Cut > 0 {
		// Said before it is done: a kill during the fsyncs below would
		// otherwise leave the file cut with no word of it (the next start
		// finds nothing to cut).
		slog.Warn("archive: cutting the torn end of a WARC file left open by a crash", "file", path,
			"records_kept", rf.Records, "bytes_cut", rf.Cut, "reason", rf.Reason)
		if err := f.Truncate(st.safeEnd); err != nil {
			return rf, fmt.Errorf("archive: recover: truncate %s to %d: %w", path, st.safeEnd, err)
		}
	}
	if err := f.Sync(); err != nil {
		return rf, fmt.Errorf("archive: recover: sync %s: %w", path, err)
	}
	final := strings.TrimSuffix(path, OpenSuffix)
	if _, err := os.Lstat(final); err == nil {
		return rf, fmt.Errorf("archive: recover %s: %s already exists", path, final)
	}
	// The writer's index of the file died with it: rebuilt from the file,
	// before the rename (a kill in between leaves the open file, repaired
	// and indexed again by the next start).
	if err := indexWARC(path, final); err != nil {
		slog.Warn("archive: could not index a recovered WARC file (phasecrawl cdxj rebuilds it)", "file", final, "error", err)
	}
	if err := os.Rename(path, final); err != nil {
		return rf, fmt.Errorf("archive: recover: rename %s: %w", path, err)
	}
	syncDir(filepath.Dir(path))
	rf.Final = final
	return rf, nil
}
