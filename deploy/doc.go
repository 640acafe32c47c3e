// Package deploy holds no code: it is the home of phasecrawl's deployment
// files (container image, compose, Kubernetes, systemd, Prometheus and
// Grafana) and of the tests that prove them. The tests decode every
// manifest into the types its tool uses, check that ports, paths, names and
// timeouts agree with the flags and endpoints of the real binary, run the
// real tools where they exist (promtool, prometheus, systemd-analyze,
// docker-compose) and run the binary under them. See docs/operations/deploy.md
// and docs/alerts.md.
package deploy
