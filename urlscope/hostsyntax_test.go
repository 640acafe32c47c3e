package urlscope

import (
	"errors"
	"strings"
	"testing"
)

// TestHostSyntax: hosts that are not DNS names and ports outside 1..65535
// are refused (reason bad_host in urls_out_of_scope_total); real names,
// IP literals and IDNs pass.
func TestHostSyntax(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 61) // 3*64 + 61 = 253
	tests := []struct {
		in   string
		want string
		err  error
	}{
		{in: "http://host:0/", err: ErrPort},
		{in: "http://host:00000/", err: ErrPort},
		{in: "http://host:65536/", err: ErrPort},
		{in: "http://host:99999/", err: ErrPort},
		{in: "http://host:1/", want: "http://host:1/"},
		{in: "http://host:65535/", want: "http://host:65535/"},
		{in: "http://host:080/", want: "http://host/"},
		{in: "http://a..b/", err: ErrHost},
		{in: "http://.a.b/", err: ErrHost},
		{in: "http://a.b../", err: ErrHost},
		{in: "http://-dash-/", err: ErrHost},
		{in: "http://-a.example/", err: ErrHost},
		{in: "http://a-.example/", err: ErrHost},
		{in: "http://" + strings.Repeat("x", 300) + ".example/", err: ErrHost},
		{in: "http://" + label63 + "a.example/", err: ErrHost},
		{in: "http://" + label63 + ".example/", want: "http://" + label63 + ".example/"},
		{in: "http://" + name253 + "/", want: "http://" + name253 + "/"},
		{in: "http://" + name253 + "c/", err: ErrHost},
		{in: "http://xn--zz/", err: ErrHost},
		{in: "http://xn--bcher-kva.example/", want: "http://xn--bcher-kva.example/"},
		{in: "http://bücher.example/", want: "http://xn--bcher-kva.example/"},
		{in: "http://Example.COM./", want: "http://example.com/"},
		{in: "http://a-b.c_d.example/", want: "http://a-b.c_d.example/"},
		{in: "http://127.0.0.1:8080/", want: "http://127.0.0.1:8080/"},
		{in: "http://[::1]:0/", err: ErrPort},
		{in: "http://[::1]:443/", want: "http://[::1]:443/"},
		{in: "http://./", err: ErrHost},
		{in: "http://a b/", err: ErrHost},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.in)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Normalize(%.80q) = %q, %v; want error %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Normalize(%.80q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
