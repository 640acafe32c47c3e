package harness

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// Nginx is a real nginx serving a directory on a loopback address: a
// corpus of static pages (Debian's rust-doc) served the way a site is.
// Its access log records every request with its time, for the tests'
// oracle (each page once) and timings.
type Nginx struct {
	Addr    string // HOST:PORT
	LogPath string // the access log: "msec status uri" a line
	cmd     *exec.Cmd
	done    chan struct{}
}

// NginxBinary returns nginx's path; false when it is not installed.
func NginxBinary() (string, bool) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, true
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", true
	}
	return "", false
}

// StartNginx starts nginx (a child process, in the foreground, one
// process, no system service) serving root on ip, with its minimal
// configuration, temp files and logs in a directory of the test, and
// stops it when the test ends.
func StartNginx(t testing.TB, bin, root, ip string) *Nginx {
	t.Helper()
	dir := t.TempDir()
	port := FreePort(t, ip)
	ng := &Nginx{Addr: net.JoinHostPort(ip, strconv.Itoa(port)), LogPath: filepath.Join(dir, "access.log")}
	conf := fmt.Sprintf(`master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  log_format pages '$msec $status $request_uri';
  access_log %[2]s pages;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  server {
    listen %[3]s;
    root %[4]s;
  }
}
`, dir, ng.LogPath, ng.Addr, root)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ng.cmd = exec.Command(bin, "-c", confPath, "-g", "daemon off;")
	done, err := StartLogged(ng.cmd, filepath.Join(dir, "nginx.out"), "", func(error) {})
	if err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	ng.done = done
	t.Cleanup(ng.stop)
	wait.For(t, 10*time.Second, "nginx listening on "+ng.Addr, func() bool {
		if Closed(done) {
			out, _ := os.ReadFile(filepath.Join(dir, "nginx.out"))
			elog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s %s", out, elog)
		}
		c, err := net.DialTimeout("tcp", ng.Addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return ng
}

// stop ends nginx and waits for it.
func (ng *Nginx) stop() {
	if Closed(ng.done) {
		return
	}
	_ = ng.cmd.Process.Kill()
	<-ng.done
}

// NginxVisit is one request in nginx's access log.
type NginxVisit struct {
	At     time.Time // when the response was logged (the request's end)
	Status int
	URI    string
}

// Visits reads the access log; it may be read while nginx runs (the
// lines are written whole, one a request).
func (ng *Nginx) Visits() ([]NginxVisit, error) {
	f, err := os.Open(ng.LogPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []NginxVisit
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.SplitN(sc.Text(), " ", 3)
		if len(fs) != 3 {
			return nil, fmt.Errorf("access log: bad line %q", sc.Text())
		}
		sec, err1 := strconv.ParseFloat(fs[0], 64)
		status, err2 := strconv.Atoi(fs[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("access log: bad line %q", sc.Text())
		}
		out = append(out, NginxVisit{At: time.UnixMilli(int64(sec * 1000)), Status: status, URI: fs[2]})
	}
	return out, sc.Err()
}

// Truncate empties the access log (between two crawls of one server).
func (ng *Nginx) Truncate() error { return os.Truncate(ng.LogPath, 0) }
