package node

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// SeedHostSet is the set of seed hosts, kept in a file (one host a line)
// so a restarted node keeps the scope that seeds posted to it gave.
type SeedHostSet struct {
	mu    sync.RWMutex
	hosts map[string]bool
	f     *os.File
}

func openHostSet(path string) (*SeedHostSet, error) {
	hs := &SeedHostSet{hosts: map[string]bool{}}
	if data, err := os.ReadFile(path); err == nil {
		for _, h := range strings.Fields(string(data)) {
			hs.hosts[h] = true
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("seed hosts %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("seed hosts %s: %w", path, err)
	}
	hs.f = f
	return hs, nil
}

// Has reports whether host is a seed host.
func (hs *SeedHostSet) Has(host string) bool {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	return hs.hosts[host]
}

// SeedHosts returns every host of the set, sorted.
func (hs *SeedHostSet) SeedHosts() []string {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	return slices.Sorted(maps.Keys(hs.hosts))
}

// AddSeedHosts remembers hosts, durably, with one
// write and one sync for those that are new, and returns those.
func (hs *SeedHostSet) AddSeedHosts(hosts []string) ([]string, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var b strings.Builder
	var fresh []string
	for _, h := range hosts {
		if h == "" || hs.hosts[h] || strings.ContainsAny(h, " \t\r\n") {
			continue
		}
		hs.hosts[h] = true // also de-duplicates within hosts; undone below on failure
		fresh = append(fresh, h)
		b.WriteString(h + "\n")
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	_, err := hs.f.WriteString(b.String())
	if err == nil {
		err = hs.f.Sync()
	}
	if err != nil {
		for _, h := range fresh {
			delete(hs.hosts, h)
		}
		return nil, err
	}
	return fresh, nil
}

// Close closes the file.
func (hs *SeedHostSet) Close() { _ = hs.f.Close() }
