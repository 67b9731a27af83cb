package ingest

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// payloadLimit is --max-payload-bytes, and the one place that decides
// what a payload over it gets, whichever door it came through: the
// handlers' own check (PublishEvent, SendTestEvent), the gRPC server's
// largest message, the HTTP gateway's largest body. Every over-limit
// payload is INVALID_ARGUMENT (HTTP 400) naming the flag and its value,
// never RESOURCE_EXHAUSTED (429), which clients rightly retry, nor a 413
// naming a derived number.
//
// The doors read more than the limit so that the handler, which knows the
// payload's exact size, is the one that answers: a gRPC message or an
// HTTP body up to doorBytes is read whole (a payload's base64 in JSON is
// 4/3 of it; a proto message is never larger than the JSON it came
// from). Beyond doorBytes the HTTP gateway answers the same
// INVALID_ARGUMENT without reading on; gRPC's transport refuses such a
// message itself with RESOURCE_EXHAUSTED "received message larger than
// max", which the Go SDK and the CLI do not retry (sdk/client.Retryable).
type payloadLimit int

// doorBytes is the largest gRPC message and HTTP body read: four times
// the limit plus 1 MiB for the other fields, at most a Kafka record
// plus 1 MiB (the limit is at most half a record).
func (l payloadLimit) doorBytes() int {
	return min(4*int(l), hkafka.MaxRecordBytes) + 1<<20
}

// check refuses a payload of n bytes over the limit.
func (l payloadLimit) check(n int) error {
	if n <= int(l) {
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "payload: is %d bytes, over the limit of %d bytes (ingest's --max-payload-bytes)", n, int(l))
}

// tooLargeRequest is check's answer to a request of n bytes (or more)
// that a door refuses before reading its payload.
func (l payloadLimit) tooLargeRequest(n int64) error {
	return status.Errorf(codes.InvalidArgument, "payload: the request is %d bytes or more, far over the limit of %d bytes for a payload (ingest's --max-payload-bytes)", n, int(l))
}

// limitBody gives h bodies of at most doorBytes: a longer one is
// answered 400 with tooLargeRequest's message, at once when
// Content-Length says so, else when reading passes it (the gateway
// reports the reader's error as INVALID_ARGUMENT with its text).
func (l payloadLimit) limitBody(h http.Handler) http.Handler {
	limit := int64(l.doorBytes())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"code":3,"message":%q,"details":[]}`+"\n", status.Convert(l.tooLargeRequest(r.ContentLength)).Message())
			return
		}
		r.Body = &bodyLimit{ReadCloser: http.MaxBytesReader(w, r.Body, limit), l: l, limit: limit}
		h.ServeHTTP(w, r)
	})
}

// bodyLimit turns http.MaxBytesReader's error into tooLargeRequest's.
type bodyLimit struct {
	io.ReadCloser
	l     payloadLimit
	limit int64
}

func (b *bodyLimit) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
		err = fmt.Errorf("%s", status.Convert(b.l.tooLargeRequest(b.limit+1)).Message())
	}
	return n, err
}
