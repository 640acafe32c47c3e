package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// minTokenLen is the shortest API token accepted.
const minTokenLen = 16

// loadTokenHash reads the token, the file's first line trimmed, and returns
// its SHA-256. Errors name the key and the file, never the content.
func loadTokenHash(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("api_token_file=%q: %w", path, err)
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) && len(line) == 0 {
		return nil, fmt.Errorf("api_token_file=%q: empty file", path)
	}
	tok := bytes.TrimSpace(line)
	if len(tok) < minTokenLen || errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("api_token_file=%q: the token (first line) must be %d to 4095 characters", path, minTokenLen)
	}
	sum := sha256.Sum256(tok)
	return sum[:], nil
}

// requireToken lets reads (GET, HEAD) through and asks every other request for the bearer
// token when one is configured. Tokens are compared in constant time (of their SHA-256).
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tokenHash == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		if !s.authorized(r.Header.Get("Authorization")) {
			s.unauthorized.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="phasecrawl"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token (see api_token_file)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(header string) bool {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		tok = "" // still compared, so a missing header costs the same as a wrong one
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.tokenHash) == 1 && ok
}
