// Package signtest checks Hookline's signatures with implementations
// other than its own, for tests.
package signtest

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

//go:embed verify-v1a.mjs
var verifyScript []byte

// Message is one received webhook: its headers, body and the public key
// ("whpk_…") the receiver trusts.
type Message struct {
	PublicKey string
	ID        string
	Timestamp string
	Body      []byte
	Signature string // the webhook-signature header
}

// VerifyWithNode reports whether Node's built-in crypto.verify accepts
// one v1a (ed25519) signature of m. It skips t when node is not
// installed, and fails t when node cannot run the check.
func VerifyWithNode(t testing.TB, m Message) bool {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the independent ed25519 check needs Node 20+")
	}
	script := filepath.Join(t.TempDir(), "verify-v1a.mjs")
	if err := os.WriteFile(script, verifyScript, 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(map[string]string{
		"publicKey": m.PublicKey, "id": m.ID, "timestamp": m.Timestamp,
		"body": base64.StdEncoding.EncodeToString(m.Body), "signature": m.Signature,
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		t.Logf("node: %s", stderr.String())
		return false
	}
	t.Fatalf("node %s: %v: %s", script, err, stderr.String())
	return false
}
