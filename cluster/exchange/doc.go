// Package exchange carries URLs between the members of a cluster: the
// entries of each kind and their bytes on the wire (codec.go), the
// handshake under the cluster key and the sealed frames (conn.go), mutual
// TLS around them (tls.go), the Stream that receives peers' batches and
// sends each peer its queue, stop-and-wait (stream.go), the durable
// outbox those queues live in (outbox.go, outbox_read.go) and a one-shot
// Client (client.go).
//
// It knows no cluster: what it receives goes to a Receiver (and the new
// URLs to a Lender), and where an entry goes, and a peer's address, come
// from the functions of its Config (OwnerOf, ReplicaOf, OutcomeOf,
// AddrOf). The cluster layer (package cluster) supplies them.
package exchange
