package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// membersTimeout bounds how long GET /v1/members waits for a member's status.
const membersTimeout = 2 * time.Second

// maxMemberStatus bounds a member's /v1/status answer.
const maxMemberStatus = 1 << 20

// handleMembers serves GET /v1/members: the members this node knows, each
// alive one with its own status (phase, pages, paused), asked at its API
// address. A node alone lists itself.
func (s *Server) handleMembers(w http.ResponseWriter, r *http.Request) {
	self := s.node.Status()
	members := self.Members
	if len(members) == 0 {
		api := ""
		if a := s.Addr(); a != nil {
			api = a.String()
		}
		members = []MemberStatus{{Name: self.Node, API: api, State: "alive"}}
	}
	views := make([]MemberView, len(members))
	ctx, cancel := context.WithTimeout(r.Context(), membersTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, m := range members {
		views[i].MemberStatus = m
		switch {
		case m.Name == self.Node:
			views[i].Self = true
			st := self
			st.Members = nil // said once, at the top
			views[i].Status = &st
		case m.State != "alive" || m.API == "":
		default:
			wg.Add(1)
			go func(v *MemberView) {
				defer wg.Done()
				st, err := memberStatus(ctx, v.API)
				if err != nil {
					v.Error = err.Error()
					return
				}
				st.Members = nil
				v.Status = st
			}(&views[i])
		}
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, map[string]any{"members": views})
}

// memberStatus asks the member whose API listens at api for its status.
func memberStatus(ctx context.Context, api string) (*Status, error) {
	c := Client{Addr: api, Timeout: membersTimeout, MaxAnswer: maxMemberStatus}
	st, err := c.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("member status from %s: %w", api, err)
	}
	return &st, nil
}
