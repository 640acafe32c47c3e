package config

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/test/testpki"
)

func TestClusterTLSKeysValidated(t *testing.T) {
	cluster := []string{"--gossip", "127.0.0.1:7946", "--cluster-key-file", "k"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string // every one in the error; none: valid
	}{
		{"none", cluster, nil, nil},
		{"all three", cluster, map[string]string{"PHASECRAWL_CLUSTER_TLS_CERT": "c", "PHASECRAWL_CLUSTER_TLS_KEY": "k", "PHASECRAWL_CLUSTER_TLS_CA": "a"}, nil},
		{"cert only", cluster, map[string]string{"PHASECRAWL_CLUSTER_TLS_CERT": "c"}, []string{"cluster.tls_key: required", "cluster.tls_ca: required"}},
		{"no ca", cluster, map[string]string{"PHASECRAWL_CLUSTER_TLS_CERT": "c", "PHASECRAWL_CLUSTER_TLS_KEY": "k"}, []string{"cluster.tls_ca: required"}},
		{"without gossip", nil, map[string]string{"PHASECRAWL_CLUSTER_TLS_CERT": "c", "PHASECRAWL_CLUSTER_TLS_KEY": "k", "PHASECRAWL_CLUSTER_TLS_CA": "a"},
			[]string{"cluster.tls_cert: needs cluster.gossip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, env(tc.env), io.Discard)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.Cluster.TLSEnabled() != (tc.env != nil) {
					t.Errorf("TLSEnabled = %v", c.Cluster.TLSEnabled())
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestClusterTLSLoad(t *testing.T) {
	ca, err := testpki.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	issue := func(ca *testpki.CA, names []string, usages ...x509.ExtKeyUsage) testpki.Leaf {
		l, err := ca.Issue(names, usages...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	good := issue(ca, []string{"node1"})
	goodCert, goodKey := write("good.crt", good.CertPEM), write("good.key", good.KeyPEM)
	caFile := write("ca.crt", ca.PEM)
	otherKey := write("other.key", issue(ca, []string{"node1"}).KeyPEM)
	fl := issue(other, []string{"node1"})
	foreignCert, foreignCertKey := write("foreign.crt", fl.CertPEM), write("foreign.key", fl.KeyPEM)
	sl := issue(ca, []string{"node1"}, x509.ExtKeyUsageServerAuth)
	serverOnly, serverOnlyKey := write("server.crt", sl.CertPEM), write("server.key", sl.KeyPEM)
	notPEM := write("garbage.pem", []byte("not a certificate\n"))
	missing := filepath.Join(dir, "missing.pem")

	for _, tc := range []struct {
		name           string
		cert, key, cas string
		member         string
		want           string // in the error; "": valid
	}{
		{"valid", goodCert, goodKey, caFile, "node1", ""},
		{"valid, name not checked", goodCert, goodKey, caFile, "", ""},
		{"ca missing", goodCert, goodKey, missing, "node1", "cluster.tls_ca=\"" + missing + "\""},
		{"ca not PEM", goodCert, goodKey, notPEM, "node1", "cluster.tls_ca=\"" + notPEM + "\": no PEM certificate"},
		{"cert missing", missing, goodKey, caFile, "node1", "cluster.tls_cert=\"" + missing + "\""},
		{"key missing", goodCert, missing, caFile, "node1", "cluster.tls_key=\"" + missing + "\""},
		{"cert not PEM", notPEM, goodKey, caFile, "node1", "cluster.tls_cert=\"" + notPEM + "\", cluster.tls_key="},
		{"key of another certificate", goodCert, otherKey, caFile, "node1", "cluster.tls_key=\"" + otherKey + "\""},
		{"certificate of another CA", foreignCert, foreignCertKey, caFile, "node1", "not valid under cluster.tls_ca"},
		{"certificate for servers only", serverOnly, serverOnlyKey, caFile, "node1", "for client use"},
		{"certificate for another name", goodCert, goodKey, caFile, "node2", "not valid for the member name \"node2\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Cluster{TLSCert: tc.cert, TLSKey: tc.key, TLSCA: tc.cas}.ClusterTLS(tc.member)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.MinVersion != tls.VersionTLS13 || c.ClientAuth != tls.RequireAndVerifyClientCert || len(c.Certificates) != 1 || c.RootCAs == nil || c.ClientCAs == nil {
				t.Errorf("config %+v: want mutual TLS 1.3 with the certificate and the CA", c)
			}
		})
	}
	if c, err := (Cluster{}).ClusterTLS("node1"); c != nil || err != nil {
		t.Errorf("without cluster.tls_*: %v, %v; want nil, nil", c, err)
	}
}
