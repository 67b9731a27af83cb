// Package transform compiles and runs endpoint transformations:
// JavaScript (github.com/dop251/goja) that reshapes a webhook before it is
// delivered, or cancels it. A script defines
//
//	function handler(webhook) { ...; return webhook }
//
// where webhook is {eventType, payload, url, method, headers}: payload is
// the parsed JSON when the event's payload is JSON, else a string. The
// handler returns the object with any of those changed, or an object with
// `cancel: true`.
//
// A script runs in a bare goja runtime: no require, no timers, no host
// objects beyond the webhook. Each run is bounded by a time limit
// (DefaultTimeLimit) enforced with vm.Interrupt, and its output is
// checked (see Limits) before it is used.
package transform

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/dop251/goja"
)

// MaxScriptBytes is the longest transformation accepted (64 KiB).
const MaxScriptBytes = 64 << 10

// handlerName is the function a script must define.
const handlerName = "handler"

// ErrNoHandler is returned by Compile for a script that defines no
// function named handler.
var ErrNoHandler = errors.New("transformation defines no function handler(webhook)")

// Hash is the SHA-256 of a script's source: the key of its compiled form.
type Hash [sha256.Size]byte

// HashOf returns src's Hash.
func HashOf(src string) Hash { return sha256.Sum256([]byte(src)) }

// Program is a compiled transformation with a pool of runtimes that ran
// it. It is safe for concurrent use.
type Program struct {
	hash    Hash
	program *goja.Program
	vms     *pool
}

// Hash returns the hash of the program's source.
func (p *Program) Hash() Hash { return p.hash }

// Compile compiles src, runs its top level once (bounded by
// DefaultTimeLimit) and checks that it defines handler. The error of a
// script that does not compile is goja's message; it is meant for the
// author (INVALID_ARGUMENT at create/update).
func Compile(src string) (*Program, error) {
	if len(src) > MaxScriptBytes {
		return nil, fmt.Errorf("transformation is %d bytes, over the limit of %d", len(src), MaxScriptBytes)
	}
	prog, err := goja.Compile("transformation.js", src, true)
	if err != nil {
		return nil, fmt.Errorf("transformation does not compile: %w", err)
	}
	p := &Program{hash: HashOf(src), program: prog}
	p.vms = newPool(defaultPoolSize, p.newVM)
	v, err := p.newVM()
	if err != nil {
		return nil, err
	}
	p.vms.put(v)
	return p, nil
}
