package ingest

// An endpoint's client certificate for mutual TLS (Endpoint.client_tls):
// checked (the key matches the certificate, the CA bundle parses), its
// private key sealed into the record's credentials, and stored and
// answered without it, with the certificate's expiry.

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// credPrivateKey is the credential name of the client certificate's key.
const credPrivateKey = "tls:private_key"

// setClientTLS makes in rec's client certificate (nil: none): its key
// sealed into rec's credentials (an empty key keeps the one the
// endpoint had) and left out of the endpoint. A certificate expired at
// now is refused.
func (x *endpointSecrets) setClientTLS(rec *hooklinev1.EndpointRecord, in *hooklinev1.ClientTLS, now time.Time) error {
	ep := rec.GetEndpoint()
	var old *hooklinev1.EndpointCredential
	var kept []*hooklinev1.EndpointCredential
	for _, c := range rec.GetCredentials() {
		if c.GetName() == credPrivateKey {
			old = c
			continue
		}
		kept = append(kept, c)
	}
	if in == nil {
		ep.ClientTls, rec.Credentials = nil, kept
		return nil
	}
	if strings.TrimSpace(in.GetCertificate()) == "" {
		return invalid("client_tls.certificate", "is required: the PEM client certificate (leaf first), or leave client_tls unset for none")
	}
	key := in.GetPrivateKey()
	keyCred := old
	switch {
	case key != "":
		keyCred = nil
	case old == nil:
		return invalid("client_tls.private_key", "is required: the PEM private key of the certificate")
	default:
		v, err := x.openCredential(rec, old)
		if err != nil {
			return err
		}
		key = v
	}
	pair, err := tls.X509KeyPair([]byte(in.GetCertificate()), []byte(key))
	if err != nil {
		// The error names what failed, never the key's bytes.
		return invalid("client_tls", "the certificate and private key are not a PEM certificate and its matching key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return invalid("client_tls.certificate", "does not parse: %v", err)
	}
	if !leaf.NotAfter.After(now) {
		return invalid("client_tls.certificate", "expired at %s; give a current certificate", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if ca := in.GetCaBundle(); ca != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(ca)) {
		return invalid("client_tls.ca_bundle", "holds no PEM certificate; give the receiver's CA certificates in PEM, or leave it empty for the system's roots")
	}
	if keyCred == nil {
		keyCred = x.keyring.SealCredential(ep.GetTenantId(), ep.GetId(), credPrivateKey, key)
	}
	ep.ClientTls = &hooklinev1.ClientTLS{
		Certificate:   in.GetCertificate(),
		PrivateKeySet: true,
		CaBundle:      in.GetCaBundle(),
		NotAfter:      timestamppb.New(leaf.NotAfter),
	}
	rec.Credentials = append(kept, keyCred)
	return nil
}
