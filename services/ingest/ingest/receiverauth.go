package ingest

// An endpoint's receiver auth (Endpoint.auth): checked, its secret
// sealed into the record's credentials, and stored and answered without
// it.

import (
	"context"
	"fmt"
	"strings"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// Credential names of the receiver auth's secrets.
const (
	credPassword     = "auth:password"
	credToken        = "auth:token"
	credClientSecret = "auth:client_secret"
)

// validateAuthURL checks what of in needs the network: an OAuth2 token
// URL passes the same checks as an endpoint URL (scheme, SSRF guard).
// Callers hold no lock.
func (ur *urlRules) validateAuthURL(ctx context.Context, in *hooklinev1.ReceiverAuth) error {
	o := in.GetOauth2ClientCredentials()
	if o == nil {
		return nil
	}
	if o.GetTokenUrl() == "" {
		return invalid("auth.oauth2_client_credentials.token_url", "is required")
	}
	if err := ur.validateURL(ctx, o.GetTokenUrl()); err != nil {
		return fmt.Errorf("auth.oauth2_client_credentials.token_%w", err)
	}
	return nil
}

// setAuth makes in rec's receiver auth (nil: none): its secret sealed
// into rec's credentials (an empty secret keeps the one the same method
// had) and left out of the endpoint. in's token URL must have passed
// validateAuthURL.
func (x *endpointSecrets) setAuth(rec *hooklinev1.EndpointRecord, in *hooklinev1.ReceiverAuth) error {
	ep := rec.GetEndpoint()
	old := map[string]*hooklinev1.EndpointCredential{}
	var kept []*hooklinev1.EndpointCredential
	for _, c := range rec.GetCredentials() {
		if strings.HasPrefix(c.GetName(), "auth:") {
			old[c.GetName()] = c
			continue
		}
		kept = append(kept, c)
	}
	// secret seals value as credential name, or keeps the old one when
	// value is empty and the endpoint had the same method.
	secret := func(field, name, value string, sameMethod bool) (bool, error) {
		if err := checkCredentialValue(value); err != nil {
			return false, invalid(field, "%v", err)
		}
		switch {
		case value != "":
			kept = append(kept, x.keyring.SealCredential(ep.GetTenantId(), ep.GetId(), name, value))
		case sameMethod && old[name] != nil:
			kept = append(kept, old[name])
		default:
			return false, invalid(field, "is required")
		}
		return true, nil
	}
	var out *hooklinev1.ReceiverAuth
	prev := ep.GetAuth()
	switch m := in.GetMethod().(type) {
	case nil:
		if in != nil {
			return invalid("auth", "names no method; set basic, bearer or oauth2_client_credentials, or leave auth unset for none")
		}
	case *hooklinev1.ReceiverAuth_Basic_:
		b := m.Basic
		if b.GetUsername() == "" || strings.ContainsRune(b.GetUsername(), ':') {
			return invalid("auth.basic.username", "is required and must not contain ':'")
		}
		if err := checkCredentialValue(b.GetUsername()); err != nil {
			return invalid("auth.basic.username", "%v", err)
		}
		set, err := secret("auth.basic.password", credPassword, b.GetPassword(), prev.GetBasic() != nil)
		if err != nil {
			return err
		}
		out = &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Basic_{Basic: &hooklinev1.ReceiverAuth_Basic{Username: b.GetUsername(), PasswordSet: set}}}
	case *hooklinev1.ReceiverAuth_Bearer_:
		set, err := secret("auth.bearer.token", credToken, m.Bearer.GetToken(), prev.GetBearer() != nil)
		if err != nil {
			return err
		}
		out = &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Bearer_{Bearer: &hooklinev1.ReceiverAuth_Bearer{TokenSet: set}}}
	case *hooklinev1.ReceiverAuth_Oauth2ClientCredentials:
		o := m.Oauth2ClientCredentials
		if o.GetClientId() == "" {
			return invalid("auth.oauth2_client_credentials.client_id", "is required")
		}
		for i, sc := range o.GetScopes() {
			if sc == "" || strings.ContainsAny(sc, " \"\\") || checkCredentialValue(sc) != nil {
				return invalid(fmt.Sprintf("auth.oauth2_client_credentials.scopes[%d]", i), "%q is not a scope (printable, no spaces, quotes or backslashes)", sc)
			}
		}
		set, err := secret("auth.oauth2_client_credentials.client_secret", credClientSecret, o.GetClientSecret(), prev.GetOauth2ClientCredentials() != nil)
		if err != nil {
			return err
		}
		out = &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Oauth2ClientCredentials{Oauth2ClientCredentials: &hooklinev1.ReceiverAuth_OAuth2ClientCredentials{
			TokenUrl: o.GetTokenUrl(), ClientId: o.GetClientId(), ClientSecretSet: set, Scopes: o.GetScopes(), Audience: o.GetAudience(),
		}}}
	}
	ep.Auth = out
	rec.Credentials = kept
	return nil
}

// checkAuthHeaders refuses a custom authorization header beside receiver
// auth, which sets it.
func checkAuthHeaders(ep *hooklinev1.Endpoint) error {
	if !hasAuth(ep) {
		return nil
	}
	for i, h := range ep.GetHeaders() {
		if strings.EqualFold(h.GetName(), "authorization") {
			return invalid(fmt.Sprintf("headers[%d].name", i), "%q is reserved while the endpoint has auth, which sets it; remove the header or the auth", h.GetName())
		}
	}
	return nil
}

// checkCredentialValue refuses control characters (a header injection).
func checkCredentialValue(v string) error { return checkHeaderValue(v) }

// hasAuth reports whether ep authenticates to its receiver (which sets
// the authorization header).
func hasAuth(ep *hooklinev1.Endpoint) bool { return ep.GetAuth().GetMethod() != nil }
