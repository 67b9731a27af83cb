package transform

import (
	"context"
	"fmt"
	"strings"
)

// Webhook is what a transformation sees and returns.
type Webhook struct {
	EventType string
	// Payload is the body: the event's payload on input.
	Payload []byte
	URL     string
	Method  string
	Headers map[string]string
}

// Limits bound a run's output. The zero value of a field means its default.
type Limits struct {
	// MaxPayloadBytes is the largest output body (ingest's
	// --max-payload-bytes); no bound when 0.
	MaxPayloadBytes int
	// ValidateURL checks a url the handler changed, as endpoint URLs are
	// checked (ingest's netguard check); a changed url is refused when nil.
	ValidateURL func(ctx context.Context, url string) error
}

// Methods a transformation may choose.
var methods = map[string]bool{"POST": true, "PUT": true, "PATCH": true}

// reserved names headers a transformation may not set: the platform
// writes them (signature, content, tracing) or they are hop-by-hop.
var reserved = map[string]bool{
	"content-type": true, "content-length": true, "host": true,
	"traceparent": true, "tracestate": true, "baggage": true,
	"connection": true, "keep-alive": true, "proxy-connection": true,
	"proxy-authenticate": true, "proxy-authorization": true, "te": true,
	"trailer": true, "transfer-encoding": true, "upgrade": true,
}

// ReservedHeader reports whether a transformation may not set header name.
func ReservedHeader(name string) bool {
	n := strings.ToLower(name)
	return reserved[n] || strings.HasPrefix(n, "webhook-")
}

// checkHeader refuses a header name that is reserved or not an HTTP token,
// and a value with control characters.
func checkHeader(name, value string) error {
	if name == "" {
		return fmt.Errorf("empty header name")
	}
	for i := 0; i < len(name); i++ {
		if !tokenChar(name[i]) {
			return fmt.Errorf("header name %q is not an HTTP token", name)
		}
	}
	if ReservedHeader(name) {
		return fmt.Errorf("header %q is reserved", name)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return fmt.Errorf("header %q has a control character in its value", name)
		}
	}
	return nil
}

func tokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// check validates out, the handler's result for in.
func (l Limits) check(ctx context.Context, in, out *Webhook) error {
	if l.MaxPayloadBytes > 0 && len(out.Payload) > l.MaxPayloadBytes {
		return &Error{Kind: KindInvalidOutput, Msg: fmt.Sprintf("payload is %d bytes, over the limit of %d", len(out.Payload), l.MaxPayloadBytes)}
	}
	if !methods[out.Method] {
		return &Error{Kind: KindInvalidOutput, Msg: fmt.Sprintf("method %q is not one of POST, PUT, PATCH", out.Method)}
	}
	for k, v := range out.Headers {
		if err := checkHeader(k, v); err != nil {
			return &Error{Kind: KindInvalidOutput, Msg: err.Error()}
		}
	}
	if out.URL != in.URL {
		if l.ValidateURL == nil {
			return &Error{Kind: KindInvalidOutput, Msg: "url may not be changed here"}
		}
		if err := l.ValidateURL(ctx, out.URL); err != nil {
			return &Error{Kind: KindInvalidOutput, Msg: "url: " + err.Error()}
		}
	}
	return nil
}
