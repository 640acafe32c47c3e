package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Limits of POST /v1/seeds. The body is read as a stream (one line, or one JSON array
// element, at a time) and its URLs are added in batches, so memory does not grow with it.
const (
	maxSeedBody  = 1 << 30  // bytes of one request
	maxSeedLine  = 64 << 10 // bytes of one line or array element; longer ones are bad
	maxBadSeeds  = 100      // bad lines listed in the answer (BadTotal counts them all)
	seedBatch    = 1000     // URLs routed to the frontier at once
	maxBadSeedMs = 200      // bytes of a bad line echoed back in the answer
)

// SeedRouter takes seed URLs: it normalizes, scopes and routes them.
type SeedRouter interface {
	// RouteSeeds judges each of seeds (raw URLs as given) and routes those
	// it accepts. refused[i] is why seeds[i] was refused, "" if it was
	// accepted; added counts the URLs new to the crawl. refused is nil
	// when an error came before any seed was judged.
	RouteSeeds(ctx context.Context, seeds []string) (refused []string, added int, err error)
}

// AddSeeds gives raw to r in batches, as POST /v1/seeds does with a body of
// one URL a line, and returns the answer it would give.
func AddSeeds(ctx context.Context, r SeedRouter, raw []string) (SeedResult, error) {
	a := &seedAdder{r: r, ctx: ctx}
	for i, s := range raw {
		if err := a.add(i+1, s); err != nil {
			return a.res, err
		}
	}
	err := a.flush()
	return a.res, err
}

// handleSeeds takes one URL a line, or a JSON array of URLs, as a stream: the URLs are added
// in batches while the body is read. 400 names the bad lines (the first maxBadSeeds).
func (s *Server) handleSeeds(w http.ResponseWriter, r *http.Request) {
	a := &seedAdder{r: s.node, ctx: r.Context()}
	body := http.MaxBytesReader(w, r.Body, maxSeedBody)
	var addErr error
	err := readSeeds(body, func(line int, raw string) error {
		addErr = a.add(line, raw)
		return addErr
	}, a.reject)
	if addErr == nil {
		// The URLs read before a body error are taken too, as the answer says.
		if ferr := a.flush(); ferr != nil {
			err = ferr
		}
	}
	code := http.StatusOK
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		code, a.res.Error = http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes (URLs before that were taken)", maxSeedBody)
	case errors.Is(err, errSeedBody):
		code, a.res.Error = http.StatusBadRequest, err.Error()
	case err != nil:
		code, a.res.Error = http.StatusInternalServerError, err.Error()
	case a.res.BadTotal > 0:
		code = http.StatusBadRequest
	}
	writeJSON(w, code, a.res)
}

// seedAdder hands seeds to a SeedRouter in batches of seedBatch, reporting bad ones in line order.
type seedAdder struct {
	r       SeedRouter
	ctx     context.Context
	res     SeedResult
	pending []pendingSeed
}

// pendingSeed is a seed waiting for its batch; refused is set for one refused while reading.
type pendingSeed struct {
	line    int
	raw     string
	refused string
}

// add takes seed number line (1-based).
func (a *seedAdder) add(line int, raw string) error {
	a.pending = append(a.pending, pendingSeed{line: line, raw: raw})
	if len(a.pending) >= seedBatch {
		return a.flush()
	}
	return nil
}

// reject takes a line refused while reading (too long, not a string).
func (a *seedAdder) reject(line int, raw, msg string) {
	if len(raw) > maxBadSeedMs {
		raw = raw[:maxBadSeedMs]
	}
	a.pending = append(a.pending, pendingSeed{line: line, raw: raw, refused: msg})
}

// bad records a refused seed; only the first maxBadSeeds are listed.
func (a *seedAdder) bad(line int, raw, msg string) {
	a.res.BadTotal++
	if len(a.res.Bad) < maxBadSeeds {
		if len(raw) > maxBadSeedMs {
			raw = strings.ToValidUTF8(raw[:maxBadSeedMs], "") + "..."
		}
		a.res.Bad = append(a.res.Bad, BadSeed{Line: line, URL: raw, Error: msg})
	}
}

// flush routes the pending batch.
func (a *seedAdder) flush() error {
	if len(a.pending) == 0 {
		return nil
	}
	var seeds []string
	for _, p := range a.pending {
		if p.refused == "" {
			seeds = append(seeds, p.raw)
		}
	}
	refused, added, err := a.r.RouteSeeds(a.ctx, seeds)
	if refused == nil && err != nil {
		return err // nothing judged: the batch is not counted
	}
	k := 0
	for _, p := range a.pending {
		a.res.Given++
		if p.refused != "" {
			a.bad(p.line, p.raw, p.refused)
			continue
		}
		if k < len(refused) && refused[k] != "" {
			a.bad(p.line, p.raw, refused[k])
		}
		k++
	}
	a.pending = a.pending[:0]
	a.res.Added += added
	return err
}

// errSeedBody is matched by readSeeds' errors about the body itself (bad JSON, an element
// over maxSeedLine); reading stops there.
var errSeedBody = errors.New("seeds body")

// readSeeds reads a seeds body from r: a JSON array of URL strings (when the first non-space
// byte is '['), else one URL a line (blank lines and # comments skipped). It calls add with
// each URL and its line number (the element number for JSON), and bad for lines it refuses
// (too long, not a string). Nothing but the current line is held. Errors from add stop it.
func readSeeds(r io.Reader, add func(line int, raw string) error, bad func(line int, raw, msg string)) error {
	br := bufio.NewReaderSize(r, maxSeedLine)
	skipped := 0     // lines before the first non-space byte
	nonJSON := false // a space JSON does not allow (\f, \v) came before it
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read seeds: %w", err)
		}
		if b == '\n' {
			skipped++
		}
		if b == ' ' || b == '\t' || b == '\r' || b == '\n' {
			continue
		}
		if b == '\f' || b == '\v' {
			nonJSON = true
			continue
		}
		if err := br.UnreadByte(); err != nil {
			return fmt.Errorf("read seeds: %w", err)
		}
		if b == '[' {
			if nonJSON {
				return fmt.Errorf("%w: JSON body must be an array of URL strings: invalid space (\\f or \\v) before '['", errSeedBody)
			}
			return readSeedsJSON(br, add, bad)
		}
		return readSeedLines(br, skipped, add, bad)
	}
}

func readSeedLines(br *bufio.Reader, line int, add func(int, string) error, bad func(int, string, string)) error {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 || err == nil {
			line++
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			head := string(chunk[:min(len(chunk), maxBadSeedMs)])
			for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of the line
				_, err = br.ReadSlice('\n')
			}
			bad(line, head, fmt.Sprintf("line longer than %d bytes", maxSeedLine))
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read seeds: line %d: %w", line, err)
			}
			continue
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read seeds: line %d: %w", line, err)
		}
		if s := strings.TrimSpace(string(chunk)); s != "" && !strings.HasPrefix(s, "#") {
			if aerr := add(line, s); aerr != nil {
				return aerr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// elementLimiter fails a read once more than limit bytes were read since the last reset:
// json.Decoder buffers a whole value, so one huge element must not be read to its end.
type elementLimiter struct {
	r     io.Reader
	n     int
	limit int
}

func (l *elementLimiter) Read(p []byte) (int, error) {
	if l.n > l.limit {
		return 0, fmt.Errorf("%w: a JSON element longer than %d bytes", errSeedBody, maxSeedLine)
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}

func readSeedsJSON(br *bufio.Reader, add func(int, string) error, bad func(int, string, string)) error {
	lim := &elementLimiter{r: br, limit: 4 * maxSeedLine}
	dec := json.NewDecoder(lim)
	bodyErr := func(err error) error {
		if errors.Is(err, errSeedBody) {
			return err
		}
		return fmt.Errorf("%w: JSON body must be an array of URL strings: %w", errSeedBody, err)
	}
	if _, err := dec.Token(); err != nil { // the '['
		return bodyErr(err)
	}
	for i := 1; dec.More(); i++ {
		lim.n = 0
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return bodyErr(fmt.Errorf("element %d: %w", i, err))
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || string(bytes.TrimSpace(raw)) == "null" {
			bad(i, string(raw[:min(len(raw), maxBadSeedMs)]), "not a string")
			continue
		}
		if len(s) > maxSeedLine {
			bad(i, s, fmt.Sprintf("URL longer than %d bytes", maxSeedLine))
			continue
		}
		if err := add(i, s); err != nil {
			return err
		}
	}
	lim.n = 0
	if _, err := dec.Token(); err != nil { // the ']'
		return bodyErr(err)
	}
	lim.n = 0
	if tok, err := dec.Token(); err != io.EOF {
		return bodyErr(fmt.Errorf("data after the array (%v, %v)", tok, err))
	}
	return nil
}
