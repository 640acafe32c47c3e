package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// imageUID is the numeric user the image runs as (USER in the Dockerfiles,
// runAsUser on Kubernetes).
const imageUID = 65532

// dockerInstr is one instruction of a Dockerfile, continuation lines joined.
type dockerInstr struct {
	cmd  string // upper-case
	args string
}

func parseDockerfile(t *testing.T, path string) []dockerInstr {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstr
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		trim := strings.TrimSpace(line)
		if cur.Len() == 0 && (trim == "" || strings.HasPrefix(trim, "#")) {
			continue
		}
		if strings.HasSuffix(trim, "\\") {
			cur.WriteString(strings.TrimSuffix(trim, "\\") + " ")
			continue
		}
		cur.WriteString(trim)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// finalStage returns the instructions after the last FROM, without COPY's
// --from= sources (they differ between the two Dockerfiles by design).
func finalStage(ins []dockerInstr) []dockerInstr {
	last := 0
	for i, in := range ins {
		if in.cmd == "FROM" {
			last = i
		}
	}
	return ins[last:]
}

// execForm decodes a JSON-array instruction argument.
func execForm(t *testing.T, in dockerInstr) []string {
	t.Helper()
	args := in.args
	if i := strings.Index(args, "CMD "); in.cmd == "HEALTHCHECK" && i >= 0 {
		args = args[i+4:]
	}
	var v []string
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatalf("%s %s: want the exec (JSON array) form: %v", in.cmd, in.args, err)
	}
	return v
}

// TestDockerfiles checks the image recipe: scratch, the CA bundle, a numeric
// non-root user named in /etc/passwd, the data volume, the ports of the
// default command, a HEALTHCHECK that the binary can run; and that the
// multi-stage variant ends in the same final stage.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	plain := parseDockerfile(t, filepath.Join(root, "deploy", "Dockerfile"))
	multi := parseDockerfile(t, filepath.Join(root, "deploy", "Dockerfile.multistage"))
	find := func(ins []dockerInstr, cmd string) []dockerInstr {
		var out []dockerInstr
		for _, in := range ins {
			if in.cmd == cmd {
				out = append(out, in)
			}
		}
		return out
	}
	final := finalStage(plain)

	t.Run("scratch base, one stage", func(t *testing.T) {
		froms := find(plain, "FROM")
		if len(froms) != 1 || froms[0].args != "scratch" {
			t.Errorf("deploy/Dockerfile: FROM %v, want only FROM scratch (the binary is built before)", froms)
		}
		mf := find(multi, "FROM")
		if len(mf) != 2 || mf[1].args != "scratch" || !strings.HasPrefix(mf[0].args, "golang:") {
			t.Errorf("deploy/Dockerfile.multistage: FROM %v, want a golang build stage then scratch", mf)
		}
	})
	t.Run("multi-stage final stage matches", func(t *testing.T) {
		norm := func(ins []dockerInstr) []string {
			var out []string
			for _, in := range finalStage(ins) {
				a := regexp.MustCompile(`--from=\S+ `).ReplaceAllString(in.args, "")
				if in.cmd == "COPY" { // sources differ (build context vs build stage); destinations and owners must not
					f := strings.Fields(a)
					owner := ""
					if strings.HasPrefix(f[0], "--chown=") {
						owner = f[0] + " "
					}
					a = owner + f[len(f)-1]
				}
				out = append(out, in.cmd+" "+a)
			}
			return out
		}
		if a, b := norm(plain), norm(multi); !slices.Equal(a, b) {
			t.Errorf("final stages differ:\nDockerfile:            %q\nDockerfile.multistage: %q", a, b)
		}
	})
	t.Run("static binary, CA bundle, numeric non-root user", func(t *testing.T) {
		var dests []string
		for _, in := range find(final, "COPY") {
			f := strings.Fields(in.args)
			dests = append(dests, f[len(f)-1])
		}
		for _, want := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/", "/data", "/phasecrawl"} {
			if !slices.Contains(dests, want) {
				t.Errorf("no COPY to %s (copies go to %v)", want, dests)
			}
		}
		users := find(final, "USER")
		if len(users) != 1 || users[0].args != strconv.Itoa(imageUID)+":"+strconv.Itoa(imageUID) {
			t.Errorf("USER %v, want the numeric %d:%d (runAsNonRoot can only check numbers)", users, imageUID, imageUID)
		}
		for _, in := range find(final, "COPY") {
			if strings.HasSuffix(in.args, " /data") && !strings.Contains(in.args, "--chown="+strconv.Itoa(imageUID)) {
				t.Errorf("COPY %s: /data must belong to %d so that a new volume is writable", in.args, imageUID)
			}
		}
		for _, f := range []string{"passwd", "group"} {
			data, err := os.ReadFile(filepath.Join(root, "deploy", "image", f))
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`(?m)^phasecrawl:x:` + strconv.Itoa(imageUID) + `:`).Match(data) {
				t.Errorf("deploy/image/%s has no phasecrawl entry with id %d", f, imageUID)
			}
		}
		script, err := os.ReadFile(filepath.Join(root, "deploy", "build-image.sh"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"CGO_ENABLED=0", "ca-certificates.crt", "image/passwd", `mkdir "$ctx/data"`} {
			if !strings.Contains(string(script), want) {
				t.Errorf("deploy/build-image.sh does not stage %q", want)
			}
		}
	})
	t.Run("volume, ports, healthcheck, entrypoint", func(t *testing.T) {
		vols := find(final, "VOLUME")
		if len(vols) != 1 || !slices.Equal(execForm(t, vols[0]), []string{"/data"}) {
			t.Errorf("VOLUME %v, want [\"/data\"]", vols)
		}
		var exposed []string
		for _, in := range find(final, "EXPOSE") {
			exposed = append(exposed, strings.Fields(in.args)...)
		}
		slices.Sort(exposed)
		if want := []string{"7070/tcp", "7946/tcp", "7946/udp", "7947/tcp"}; !slices.Equal(exposed, want) {
			t.Errorf("EXPOSE %v, want %v (API, gossip TCP+UDP, exchange)", exposed, want)
		}
		ep := find(final, "ENTRYPOINT")
		if len(ep) != 1 || !slices.Equal(execForm(t, ep[0]), []string{"/phasecrawl"}) {
			t.Errorf("ENTRYPOINT %v, want [\"/phasecrawl\"]", ep)
		}
		cmds := find(final, "CMD")
		if len(cmds) != 1 {
			t.Fatalf("CMD %v", cmds)
		}
		cmd := execForm(t, cmds[0])
		cfg := loadNodeConfig(t, cmd, nil)
		if cfg.Data != "/data" || portOf(t, "http", cfg.HTTP) != 7070 || hostOf(cfg.HTTP) != "0.0.0.0" {
			t.Errorf("CMD %v: data %s, http %s; want /data and 0.0.0.0:7070", cmd, cfg.Data, cfg.HTTP)
		}
		hc := find(final, "HEALTHCHECK")
		if len(hc) != 1 {
			t.Fatalf("HEALTHCHECK %v", hc)
		}
		probe := execForm(t, hc[0])
		if len(probe) < 2 || probe[0] != "/phasecrawl" || probe[1] != "health" {
			t.Errorf("HEALTHCHECK %v: want /phasecrawl health (scratch has no curl)", probe)
		}
		if stop := find(final, "STOPSIGNAL"); len(stop) != 1 || stop[0].args != "SIGTERM" {
			t.Errorf("STOPSIGNAL %v, want SIGTERM (graceful stop)", stop)
		}
	})
}
