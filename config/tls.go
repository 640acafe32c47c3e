package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"
)

// TLSEnabled reports whether the cluster's exchange runs over mutual TLS
// (cluster.tls_cert, cluster.tls_key and cluster.tls_ca are set).
func (c Cluster) TLSEnabled() bool { return c.TLSCert != "" && c.TLSKey != "" && c.TLSCA != "" }

// ClusterTLS loads the member's certificate, key and CA (cluster.tls_*)
// into a mutual TLS 1.3 configuration for both sides of the exchange:
// peers must present a certificate signed by the CA. Each error names its
// key. With name set, the certificate must be valid for it (peers check
// the certificate against the member name). Nil, nil when TLS is not
// configured.
func (c Cluster) ClusterTLS(name string) (*tls.Config, error) {
	if !c.TLSEnabled() {
		return nil, nil
	}
	caPEM, err := os.ReadFile(c.TLSCA)
	if err != nil {
		return nil, fmt.Errorf("config: cluster.tls_ca=%q: %w", c.TLSCA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("config: cluster.tls_ca=%q: no PEM certificate in it", c.TLSCA)
	}
	if _, err := os.Stat(c.TLSCert); err != nil {
		return nil, fmt.Errorf("config: cluster.tls_cert=%q: %w", c.TLSCert, err)
	}
	if _, err := os.Stat(c.TLSKey); err != nil {
		return nil, fmt.Errorf("config: cluster.tls_key=%q: %w", c.TLSKey, err)
	}
	pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("config: cluster.tls_cert=%q, cluster.tls_key=%q: %w", c.TLSCert, c.TLSKey, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("config: cluster.tls_cert=%q: %w", c.TLSCert, err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: time.Now()}); err != nil {
			return nil, fmt.Errorf("config: cluster.tls_cert=%q: not valid under cluster.tls_ca=%q for %s use: %w", c.TLSCert, c.TLSCA, usageName(usage), err)
		}
	}
	if name != "" {
		if err := leaf.VerifyHostname(name); err != nil {
			return nil, fmt.Errorf("config: cluster.tls_cert=%q: not valid for the member name %q (--name; peers check it): %w", c.TLSCert, name, err)
		}
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server"
	}
	return "client"
}
