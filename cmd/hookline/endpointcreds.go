package main

// The flags of what an endpoint sends its receiver besides the
// signature: custom headers (--header, --header-secret; repeatable),
// receiver auth (--auth and its --auth-*/--oauth2-* settings) and the
// client certificate (--client-cert-file …).

import (
	"fmt"
	"os"
	"strings"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// CredentialFlags are endpointFlags' receiver credential settings
// (exported: config.Load walks exported embedded structs only).
type CredentialFlags struct {
	Auth         string   `flag:"auth" usage:"receiver auth: none, basic, bearer or oauth2 (create default: none; update with none to remove)"`
	Username     string   `flag:"auth-username" usage:"basic auth user name"`
	Password     string   `flag:"auth-password" usage:"basic auth password, or @file to read it from a file (update: empty keeps the current one)"`
	Token        string   `flag:"auth-token" usage:"bearer token, or @file (update: empty keeps the current one)"`
	TokenURL     string   `flag:"oauth2-token-url" usage:"OAuth2 client credentials: the token endpoint URL"`
	ClientID     string   `flag:"oauth2-client-id" usage:"OAuth2 client id"`
	ClientSecret string   `flag:"oauth2-client-secret" usage:"OAuth2 client secret, or @file (update: empty keeps the current one)"`
	Scopes       []string `flag:"oauth2-scopes" usage:"OAuth2 scopes, comma-separated"`
	Audience     string   `flag:"oauth2-audience" usage:"OAuth2 audience parameter (optional)"`
	CertFile     string   `flag:"client-cert-file" usage:"PEM client certificate for mutual TLS (update with none to remove)"`
	KeyFile      string   `flag:"client-key-file" usage:"PEM private key of --client-cert-file (update: omit to keep the current one)"`
	CAFile       string   `flag:"ca-bundle-file" usage:"PEM CA certificates the receiver's certificate must chain to (default: the system's roots)"`
}

// headerFlags are the repeatable --header K=V and --header-secret K=V.
const (
	headerFlag       = "header"
	headerSecretFlag = "header-secret"
)

// takeHeaders removes every --header and --header-secret (as "--x K=V"
// or "--x=K=V", one or two dashes) from args, whose other flags the
// flag set parses, and returns them in order as endpoint headers, and
// whether any was given. A value may hold commas and '='.
func takeHeaders(args []string) (rest []string, hs []*hooklinev1.EndpointHeader, given bool, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != headerFlag && name != headerSecretFlag) {
			rest = append(rest, a)
			continue
		}
		given = true
		if !hasVal {
			if i+1 == len(args) {
				return nil, nil, false, fmt.Errorf("--%s needs NAME=VALUE", name)
			}
			i++
			val = args[i]
		}
		if val == "" {
			continue // --header "": no headers (update: remove them all)
		}
		k, v, ok := strings.Cut(val, "=")
		if !ok || k == "" {
			return nil, nil, false, fmt.Errorf("--%s %q: give NAME=VALUE", name, val)
		}
		secret := name == headerSecretFlag
		if secret {
			if v, err = secretArg(v); err != nil {
				return nil, nil, false, fmt.Errorf("--%s %s: %w", name, k, err)
			}
		}
		hs = append(hs, &hooklinev1.EndpointHeader{Name: k, Value: v, Secret: secret})
	}
	return rest, hs, given, nil
}

// secretArg returns v, or the content of file f when v is "@f" (a
// secret kept off the command line, without its final newline).
func secretArg(v string) (string, error) {
	f, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// auth returns the receiver auth f describes (nil for none or unset).
func (f CredentialFlags) auth() (*hooklinev1.ReceiverAuth, error) {
	switch f.Auth {
	case "", "none":
		return nil, nil
	case "basic":
		pw, err := secretArg(f.Password)
		if err != nil {
			return nil, fmt.Errorf("--auth-password: %w", err)
		}
		return &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Basic_{Basic: &hooklinev1.ReceiverAuth_Basic{Username: f.Username, Password: pw}}}, nil
	case "bearer":
		tok, err := secretArg(f.Token)
		if err != nil {
			return nil, fmt.Errorf("--auth-token: %w", err)
		}
		return &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Bearer_{Bearer: &hooklinev1.ReceiverAuth_Bearer{Token: tok}}}, nil
	case "oauth2", "oauth2_client_credentials":
		cs, err := secretArg(f.ClientSecret)
		if err != nil {
			return nil, fmt.Errorf("--oauth2-client-secret: %w", err)
		}
		return &hooklinev1.ReceiverAuth{Method: &hooklinev1.ReceiverAuth_Oauth2ClientCredentials{Oauth2ClientCredentials: &hooklinev1.ReceiverAuth_OAuth2ClientCredentials{
			TokenUrl: f.TokenURL, ClientId: f.ClientID, ClientSecret: cs, Scopes: f.Scopes, Audience: f.Audience}}}, nil
	}
	return nil, fmt.Errorf("--auth %q: use none, basic, bearer or oauth2", f.Auth)
}

// clientTLS returns the client certificate f names (nil for none or
// unset).
func (f CredentialFlags) clientTLS() (*hooklinev1.ClientTLS, error) {
	if f.CertFile == "" || f.CertFile == "none" {
		return nil, nil
	}
	read := func(flag, path string) (string, error) {
		if path == "" {
			return "", nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("--%s: %w", flag, err)
		}
		return string(b), nil
	}
	ct := &hooklinev1.ClientTLS{}
	var err error
	if ct.Certificate, err = read("client-cert-file", f.CertFile); err != nil {
		return nil, err
	}
	if ct.PrivateKey, err = read("client-key-file", f.KeyFile); err != nil {
		return nil, err
	}
	if ct.CaBundle, err = read("ca-bundle-file", f.CAFile); err != nil {
		return nil, err
	}
	return ct, nil
}
