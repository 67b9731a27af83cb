package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"buf.build/go/protovalidate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Field rules. The static rules of a request's fields — lengths, ranges,
// required ids, defined enum values, the shape of a retry policy — are
// declared once, in the proto (buf.validate options, proto/hookline/v1),
// and checked here, in one interceptor, before any handler runs: a field
// that breaks one is INVALID_ARGUMENT saying "field: what to fix", as
// every other refusal of the API does, with the violations as a
// structured detail (buf.validate.Violations) for clients that read it.
// (go-grpc-middleware's protovalidate interceptor does the same check
// but words the status "validation error:\n - …"; this one keeps the
// API's one style.)
//
// The rules that depend on the deployment or on more than a field stay
// in the handlers, once each: URL schemes and the SSRF guard (flags),
// the event-type pattern language, filters and transformations
// (compiled), secrets (parsed), the payload ceiling (a flag) and its
// JSON, idempotency. A handler called in-process (the console) is not
// checked here: it builds its requests itself.

// fieldRules checks requests against their proto's field rules.
type fieldRules struct{ v protovalidate.Validator }

func newFieldRules() (*fieldRules, error) {
	v, err := protovalidate.New()
	if err != nil {
		return nil, fmt.Errorf("field rules: %w", err)
	}
	return &fieldRules{v: v}, nil
}

// check returns the status of req when it breaks a rule, else nil.
func (r *fieldRules) check(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	if err := r.v.Validate(m); err != nil {
		return ruleError(err)
	}
	return nil
}

// unary is the unary calls' interceptor.
func (r *fieldRules) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := r.check(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream is the streaming calls' interceptor (RecoverEndpoint): each
// message received is checked.
func (r *fieldRules) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &checkedStream{ServerStream: ss, rules: r})
}

// checkedStream checks each message its call receives.
type checkedStream struct {
	grpc.ServerStream
	rules *fieldRules
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.rules.check(m)
}

// ruleError is the status of a request that broke its field rules.
func ruleError(err error) error {
	var ve *protovalidate.ValidationError
	if !errors.As(err, &ve) {
		// A rule that does not compile: the proto's fault, not the caller's.
		return status.Errorf(codes.Internal, "field rules: %v", err)
	}
	msgs := make([]string, 0, len(ve.Violations))
	for _, v := range ve.Violations {
		msgs = append(msgs, v.String())
	}
	st := status.New(codes.InvalidArgument, strings.Join(msgs, "; "))
	if withDetail, derr := st.WithDetails(ve.ToProto()); derr == nil {
		st = withDetail
	}
	return st.Err()
}
