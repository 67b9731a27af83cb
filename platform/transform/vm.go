package transform

import (
	"errors"
	"fmt"
	"time"

	"github.com/dop251/goja"
)

// vm is one goja runtime that ran a program's top level: its handler and
// the JSON functions it uses, looked up once.
type vm struct {
	rt        *goja.Runtime
	handler   goja.Callable
	parse     goja.Callable
	stringify goja.Callable
}

// errTimeLimit is what a run's interrupt carries when its time is up.
var errTimeLimit = errors.New("time limit")

// newVM returns a fresh runtime that ran p's top level within
// DefaultTimeLimit.
func (p *Program) newVM() (*vm, error) {
	rt := goja.New()
	rt.SetFieldNameMapper(goja.TagFieldNameMapper("json", true))
	var runErr error
	bounded(rt, DefaultTimeLimit, func() { _, runErr = rt.RunProgram(p.program) })
	if runErr != nil {
		return nil, fmt.Errorf("transformation's top level: %w", describe(runErr))
	}
	h, ok := goja.AssertFunction(rt.Get(handlerName))
	if !ok {
		return nil, ErrNoHandler
	}
	js := rt.Get("JSON").ToObject(rt)
	parse, ok1 := goja.AssertFunction(js.Get("parse"))
	stringify, ok2 := goja.AssertFunction(js.Get("stringify"))
	if !ok1 || !ok2 {
		return nil, errors.New("transformation replaced JSON.parse or JSON.stringify")
	}
	return &vm{rt: rt, handler: h, parse: parse, stringify: stringify}, nil
}

// bounded runs f on rt, interrupting it once limit has passed, and
// returns whether it was interrupted. rt's interrupt is clear on return.
func bounded(rt *goja.Runtime, limit time.Duration, f func()) {
	fired := make(chan struct{})
	t := time.AfterFunc(limit, func() {
		rt.Interrupt(errTimeLimit)
		close(fired)
	})
	f()
	if !t.Stop() {
		<-fired // the interrupt was set: wait for it before clearing it
	}
	rt.ClearInterrupt()
}

// describe turns a goja error into one for the run's Error.
func describe(err error) error {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if v, ok := ie.Value().(error); ok && errors.Is(v, errTimeLimit) {
			return &Error{Kind: KindTimeout, Msg: "transformation ran over its time limit"}
		}
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return &Error{Kind: KindThrow, Msg: ex.Error()}
	}
	return &Error{Kind: KindThrow, Msg: err.Error()}
}
