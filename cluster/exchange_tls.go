package cluster

import (
	"crypto/tls"
	"net"
	"time"
)

// accept runs the server side of a connection's handshakes: TLS first
// when configured (the client's certificate must be valid for the member
// name it then proves with the cluster key), then the cluster key's.
func (x *Exchange) accept(c net.Conn) (*xconn, error) {
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
func (x *Exchange) connect(c net.Conn, peer string) (*xconn, error) {
	if x.cfg.TLS == nil {
		return clientHandshake(c, x.cfg.Key, x.cfg.Name, x.cfg.MaxFrame, x.cfg.HandshakeTimeout)
	}
	conf := x.cfg.TLS.Clone()
	conf.ServerName = peer
	tc := tls.Client(c, conf)
	if err := tlsHandshake(tc, x.cfg.HandshakeTimeout); err != nil {
		return nil, err
	}
	return clientHandshake(tc, x.cfg.Key, x.cfg.Name, x.cfg.MaxFrame, x.cfg.HandshakeTimeout)
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
