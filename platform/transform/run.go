package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/dop251/goja"
)

// DefaultTimeLimit bounds one run: the handler and the conversion of its
// result.
const DefaultTimeLimit = 50 * time.Millisecond

// Result is a run's outcome.
type Result struct {
	// Webhook is the transformed webhook; zero when Cancelled.
	Webhook Webhook
	// Cancelled is set when the handler returned cancel: true.
	Cancelled bool
	// Took is how long the run took.
	Took time.Duration
}

// Run runs the handler on in and checks its result against lim. A failed
// run returns an *Error. Run is safe for concurrent use: each run takes a
// runtime of its own from the program's pool.
func (p *Program) Run(ctx context.Context, in Webhook, lim Limits) (Result, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	v, err := p.vms.get()
	if err != nil {
		return Result{}, err
	}
	var res Result
	var runErr error
	timedOut := false
	bounded(v.rt, DefaultTimeLimit, func() {
		res, runErr = v.call(in)
	})
	if runErr != nil {
		runErr = asError(runErr)
		if e := (*Error)(nil); errors.As(runErr, &e) && e.Kind == KindTimeout {
			timedOut = true
		}
	}
	if !timedOut { // an interrupted runtime may be mid-way: drop it
		p.vms.put(v)
	}
	res.Took = time.Since(start)
	if runErr != nil {
		return Result{Took: res.Took}, runErr
	}
	if res.Cancelled {
		return res, nil
	}
	if err := lim.check(ctx, &in, &res.Webhook); err != nil {
		return Result{Took: res.Took}, err
	}
	return res, nil
}

func asError(err error) error {
	if e := (*Error)(nil); errors.As(err, &e) {
		return err
	}
	return describe(err)
}

// call runs the handler on in, on v's goroutine-free runtime.
func (v *vm) call(in Webhook) (Result, error) {
	rt := v.rt
	w := rt.NewObject()
	_ = w.Set("eventType", in.EventType)
	if json.Valid(in.Payload) {
		pv, err := v.parse(goja.Undefined(), rt.ToValue(string(in.Payload)))
		if err != nil {
			return Result{}, err
		}
		_ = w.Set("payload", pv)
	} else {
		_ = w.Set("payload", string(in.Payload))
	}
	_ = w.Set("url", in.URL)
	_ = w.Set("method", in.Method)
	h := rt.NewObject()
	for k, val := range in.Headers {
		_ = h.Set(k, val)
	}
	_ = w.Set("headers", h)

	ret, err := v.handler(goja.Undefined(), w)
	if err != nil {
		return Result{}, err
	}
	return v.output(ret)
}

// output converts the handler's return value.
func (v *vm) output(ret goja.Value) (Result, error) {
	if ret == nil || goja.IsUndefined(ret) || goja.IsNull(ret) {
		return Result{}, invalid("handler returned nothing: return the webhook, or {cancel: true}")
	}
	o, ok := ret.(*goja.Object)
	if !ok {
		return Result{}, invalid("handler returned a %s, not an object", ret.ExportType())
	}
	if c := o.Get("cancel"); c != nil && c.ToBoolean() {
		return Result{Cancelled: true}, nil
	}
	var out Webhook
	var err error
	if out.EventType, err = str(o, "eventType"); err != nil {
		return Result{}, err
	}
	if out.URL, err = str(o, "url"); err != nil {
		return Result{}, err
	}
	if out.Method, err = str(o, "method"); err != nil {
		return Result{}, err
	}
	pv := o.Get("payload")
	switch {
	case pv == nil || goja.IsUndefined(pv):
		return Result{}, invalid("payload is missing")
	case isString(pv):
		out.Payload = []byte(pv.String())
	default:
		s, err := v.stringify(goja.Undefined(), pv)
		if err != nil {
			return Result{}, err
		}
		if !isString(s) {
			return Result{}, invalid("payload cannot be written as JSON")
		}
		out.Payload = []byte(s.String())
	}
	if hv := o.Get("headers"); hv != nil && !goja.IsUndefined(hv) && !goja.IsNull(hv) {
		ho, ok := hv.(*goja.Object)
		if !ok {
			return Result{}, invalid("headers is not an object")
		}
		out.Headers = make(map[string]string, len(ho.Keys()))
		for _, k := range ho.Keys() {
			val := ho.Get(k)
			if !isString(val) {
				return Result{}, invalid("header %q is not a string", k)
			}
			out.Headers[k] = val.String()
		}
	}
	return Result{Webhook: out}, nil
}

func str(o *goja.Object, name string) (string, error) {
	v := o.Get(name)
	if v == nil || !isString(v) {
		return "", invalid("%s is not a string", name)
	}
	return v.String(), nil
}

// isString reports whether v is a JavaScript string, without copying it.
func isString(v goja.Value) bool {
	t := v.ExportType()
	return t != nil && t.Kind() == reflect.String
}

func invalid(format string, args ...any) error {
	return &Error{Kind: KindInvalidOutput, Msg: fmt.Sprintf(format, args...)}
}
