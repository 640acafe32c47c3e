package exchange

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"
)

// accept runs the server side of a connection's handshakes: TLS first
// when configured (the client's certificate must be valid for the member
// name it then proves with the cluster key), then the cluster key's.
func (x *Stream) accept(c net.Conn) (*xconn, error) {
	if x.cfg.TLS == nil {
		return serverHandshake(c, x.cfg.Key, x.cfg.Name, x.cfg.MaxFrame, x.cfg.HandshakeTimeout)
	}
	tc := tls.Server(c, x.cfg.TLS)
	if err := tlsHandshake(tc, x.cfg.HandshakeTimeout); err != nil {
		return nil, err
	}
	return serverHandshakeAdmit(tc, x.cfg.Key, x.cfg.Name, x.cfg.MaxFrame, x.cfg.HandshakeTimeout,
		func(peer string) error { return peerCertFor(tc, peer) })
}

// connect runs the client side: TLS first when configured, checking that
// the server's certificate is valid for peer, then the cluster key's.
func (x *Stream) connect(c net.Conn, peer string) (*xconn, error) {
	if x.cfg.TLS == nil {
		return clientHandshake(c, x.cfg.Key, x.cfg.Name, x.cfg.MaxFrame, x.cfg.HandshakeTimeout)
	}
	tc := tls.Client(c, clientTLS(x.cfg.TLS, peer))
	if err := tlsHandshake(tc, x.cfg.HandshakeTimeout); err != nil {
		return nil, err
	}
	return clientHandshake(tc, x.cfg.Key, x.cfg.Name, x.cfg.MaxFrame, x.cfg.HandshakeTimeout)
}

// clientTLS is base for dialing peer: the server's certificate must chain
// to base.RootCAs and name peer. The check is done here, not by crypto/tls
// through ServerName, so that the client hello carries no server name
// (SNI is sent in clear): member names stay off the wire.
func clientTLS(base *tls.Config, peer string) *tls.Config {
	conf := base.Clone()
	conf.ServerName = ""
	conf.InsecureSkipVerify = true // replaced by VerifyConnection below
	roots := base.RootCAs
	conf.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("peer %q sent no certificate", peer)
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			DNSName: peer, Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return fmt.Errorf("certificate of peer %q: %w", peer, err)
		}
		return nil
	}
	return conf
}

func tlsHandshake(tc *tls.Conn, timeout time.Duration) error {
	_ = tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		return hsErr("TLS (cluster.tls_cert, cluster.tls_key, cluster.tls_ca): %v", err)
	}
	return nil
}

// peerCertFor checks that the client's verified certificate names the
// member it proved to be.
func peerCertFor(tc *tls.Conn, name string) error {
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return hsErr("TLS: peer %q sent no certificate", name)
	}
	if err := st.PeerCertificates[0].VerifyHostname(name); err != nil {
		return hsErr("TLS: the certificate of peer %q is not for its member name: %v", name, err)
	}
	return nil
}
