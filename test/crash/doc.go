// Package crash runs the real phasecrawl binary and hurts it: SIGKILL at random moments of a
// crawl of a synthetic web (restarted each time on the same data directory), a second
// process on a data directory in use, a corrupt or foreign frontier file, and a node whose
// logs and status must not show its secrets. The synthetic web is served in-process, so the
// tests read its report and compare it with its oracle.
package crash
