// Package phase is the cluster's phase clock: which host-hash phase each
// member works on when, and the cluster time that rotation runs on.
//
// The Schedule is the rotation seen by one member (KSpider §3.3): time is
// cut into epochs of PhaseDuration; in epoch e the member of rank i in the
// member list works on phase (i + e) mod Nphase (Of, Count), with a guard
// before each swap in which it starts no request. A new member list takes
// effect at an epoch boundary, or at the instant a joining member announced
// (SetMembersAt), so that members that heard of it apart switch together.
// The Clock is cluster time: the local clock corrected by the offset
// measured against NTP servers, and a bound of its error (Uncertainty),
// which widens the guards.
//
// The core is pure: the Schedule computes from the local time it is given
// (At, Active, Handover, AnnounceAt ...) and the cluster time and
// uncertainty of its TimeSource; where it needs the time itself (a member
// list heard now, the timer that cuts requests short at a switch) it reads
// an injected internal/clock.Clock, clock.Real by default, as the NTP Clock
// does for its drift and rounds. The scenarios in testdata/*.txt are
// scripts that drive Schedules on a clock.Fake (TestScripts, script_test.go).
package phase
