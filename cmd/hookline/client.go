package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/platform/tlsconf"
	sdk "github.com/hookline/hookline/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// Conn is what every client command needs to reach ingest.
type Conn struct {
	Addr    string        `flag:"addr" env:"HOOKLINE_ADDR" default:"127.0.0.1:7070" usage:"ingest gRPC address"`
	APIKey  string        `flag:"api-key" env:"HOOKLINE_API_KEY" usage:"API key (hookline dev prints one)"`
	TLS     bool          `flag:"tls" env:"HOOKLINE_TLS" usage:"connect with TLS, trusting the system roots (implied by --ca)"`
	CA      string        `flag:"ca" env:"HOOKLINE_TLS_CA" usage:"PEM file of the CA certificates that signed ingest's certificate: connect with TLS trusting them"`
	Cert    string        `flag:"cert" env:"HOOKLINE_TLS_CERT" usage:"PEM client certificate to present (ingest with --grpc-client-ca requires one; implies TLS)"`
	Key     string        `flag:"key" env:"HOOKLINE_TLS_KEY" usage:"PEM private key of --cert"`
	Timeout time.Duration `flag:"timeout" env:"HOOKLINE_TIMEOUT" default:"30s" usage:"deadline of each call"`
}

type client struct {
	cfg  Conn
	conn *grpc.ClientConn
}

// call bounds one command's call, its retries included, by --timeout.
func (c *client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

// dial connects through the Go SDK: the API key on every call, and its
// retry discipline (transient codes only, full jitter, the server's
// delay, one idempotency key per publish) within --timeout.
func dial(cfg Conn) (*client, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("no API key: pass --api-key or set HOOKLINE_API_KEY (hookline dev prints one)")
	}
	opts := []sdk.Option{sdk.WithAPIKey(cfg.APIKey), sdk.WithInsecure(), sdk.WithRetryPolicy(sdk.RetryPolicy{MaxElapsed: cfg.Timeout})}
	if cfg.TLS || cfg.CA != "" || cfg.Cert != "" || cfg.Key != "" {
		tc, err := tlsconf.Client(cfg.CA, cfg.Cert, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("--ca, --cert, --key: %w", err)
		}
		opts = append(opts, sdk.WithTLS(tc))
	}
	c, err := sdk.Dial(cfg.Addr, opts...)
	if err != nil {
		return nil, err
	}
	return &client{cfg: cfg, conn: c.Conn()}, nil
}

// parse loads cfg (a pointer to a struct embedding Conn or not)
// from args and the environment, and returns the positional arguments.
// Flags may come before, between and after them (`endpoint pause ID
// --reason R`); everything after "--" is positional.
func parse(name string, cfg any, args []string, out io.Writer, getenv func(string) string) ([]string, error) {
	fs := flag.NewFlagSet("hookline "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	if err := config.Load(fs, cfg, args, getenv); err != nil {
		return nil, err
	}
	var pos []string
	given := args
	for rest := fs.Args(); len(rest) > 0; rest = fs.Args() {
		if n := len(given) - len(rest); n > 0 && given[n-1] == "--" {
			return append(pos, rest...), nil
		}
		// flag stopped at a positional argument: keep it, parse on.
		pos = append(pos, rest[0])
		given = rest[1:]
		if err := fs.Parse(given); err != nil {
			return nil, err
		}
	}
	return pos, nil
}

// callErr turns a gRPC error into one line a person can act on.
func callErr(err error) error {
	if s, ok := status.FromError(err); ok {
		return fmt.Errorf("%s: %s%s", s.Code(), s.Message(), tooLargeHint(s))
	}
	return err
}

func printJSON(out io.Writer, m proto.Message) error {
	b, err := readableJSON(m, "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}

type endpointFlags struct {
	Conn
	URL         string   `flag:"url" usage:"endpoint URL (create)"`
	EventTypes  []string `flag:"event-types" usage:"event types to receive, comma-separated, e.g. invoice.paid,user.* (default: all)"`
	Description string   `flag:"description" usage:"description"`
	Secret      string   `flag:"secret" usage:"whsec_… secret, or whsk_… ed25519 private key for v1a (default: generated)"`
	Scheme      string   `flag:"signature-scheme" usage:"v1 (HMAC-SHA256, shared secret) or v1a (ed25519: receivers verify with the public key) (create default: v1; rotate-secret default: the endpoint's)"`
	Reason      string   `flag:"reason" usage:"why the endpoint is paused (pause)"`
	Ordering    string   `flag:"ordering" usage:"delivery order: unordered (default), per_endpoint or per_key"`
	HeadFailure string   `flag:"on-head-failure" usage:"what an ordered lane does when its head fails for good: skip (dead-letter it, go on; default) or block (hold the lane until hookline lanes resend or skip)"`
	Filter      string   `flag:"filter" usage:"content filter in CEL, e.g. 'payload.amount > 1000 && metadata.region == \"eu\"' (default: none; update with \"\" to remove)"`
	Script      string   `flag:"transformation-file" usage:"file holding the endpoint's transformation (JavaScript defining handler(webhook)), - for stdin (default: none; update with an empty file to remove)"`
	CredentialFlags
	BatchFlags
	// headers are the repeatable --header and --header-secret
	// (endpointcreds.go), taken out of the arguments before parsing;
	// headersGiven says whether any was given.
	headers      []*hooklinev1.EndpointHeader
	headersGiven bool
}

// headFailureFlag maps --on-head-failure to the API's enum.
func headFailureFlag(v string) (hooklinev1.HeadFailure, error) {
	switch v {
	case "":
		return hooklinev1.HeadFailure_HEAD_FAILURE_UNSPECIFIED, nil
	case "skip":
		return hooklinev1.HeadFailure_HEAD_FAILURE_SKIP, nil
	case "block":
		return hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK, nil
	}
	return 0, fmt.Errorf("--on-head-failure %q: use skip or block", v)
}

// orderingFlag maps --ordering to the API's enum.
func orderingFlag(v string) (hooklinev1.Ordering, error) {
	switch v {
	case "", "unordered":
		return hooklinev1.Ordering_ORDERING_UNORDERED, nil
	case "per_endpoint":
		return hooklinev1.Ordering_ORDERING_PER_ENDPOINT, nil
	case "per_key":
		return hooklinev1.Ordering_ORDERING_PER_KEY, nil
	}
	return 0, fmt.Errorf("--ordering %q: use unordered, per_endpoint or per_key", v)
}

// signatureScheme reads --signature-scheme.
func signatureScheme(s string) (hooklinev1.SignatureScheme, error) {
	switch strings.ToLower(s) {
	case "":
		return hooklinev1.SignatureScheme_SIGNATURE_SCHEME_UNSPECIFIED, nil
	case "v1":
		return hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1, nil
	case "v1a":
		return hooklinev1.SignatureScheme_SIGNATURE_SCHEME_V1A, nil
	}
	return 0, fmt.Errorf("--signature-scheme %q: use v1 or v1a", s)
}

func runEndpoint(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return errors.New("usage: hookline endpoint create|get|list|update|pause|resume|delete|rotate-secret|test|try")
	}
	sub := args[0]
	if sub == "try" {
		return runEndpointTry(ctx, args[1:], out, getenv)
	}
	var f endpointFlags
	flagArgs, hs, given, err := takeHeaders(args[1:])
	if err != nil {
		return err
	}
	f.headers, f.headersGiven = hs, given
	rest, err := parse("endpoint "+sub, &f, flagArgs, out, getenv)
	if err != nil {
		return err
	}
	auth, err := f.auth()
	if err != nil {
		return err
	}
	clientTLS, err := f.clientTLS()
	if err != nil {
		return err
	}
	c, err := dial(f.Conn)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	api := hooklinev1.NewEndpointServiceClient(c.conn)
	cctx, cancel := c.call(ctx)
	defer cancel()
	id := func() (string, error) {
		if len(rest) != 1 {
			return "", fmt.Errorf("usage: hookline endpoint %s ENDPOINT_ID", sub)
		}
		return rest[0], nil
	}
	scheme, err := signatureScheme(f.Scheme)
	if err != nil {
		return err
	}
	script, err := readScript(f.Script)
	if err != nil {
		return err
	}
	var resp proto.Message
	var hdr metadata.MD // ingest's warnings (hookline-warning) on create and update
	switch sub {
	case "create":
		if f.URL == "" {
			return errors.New("--url is required")
		}
		ord, oerr := orderingFlag(f.Ordering)
		if oerr != nil {
			return oerr
		}
		hf, herr := headFailureFlag(f.HeadFailure)
		if herr != nil {
			return herr
		}
		batch, berr := f.batchCreate(flagArgs)
		if berr != nil {
			return berr
		}
		resp, err = api.CreateEndpoint(cctx, &hooklinev1.CreateEndpointRequest{Url: f.URL, EventTypes: f.EventTypes, Description: f.Description, Secret: f.Secret,
			SignatureScheme: scheme, Ordering: ord, OnHeadFailure: hf, Filter: f.Filter, Transformation: script,
			Headers: f.headers, Auth: auth, ClientTls: clientTLS, Batch: batch}, grpc.Header(&hdr))
	case "get":
		var eid string
		if eid, err = id(); err == nil {
			resp, err = api.GetEndpoint(cctx, &hooklinev1.GetEndpointRequest{Id: eid})
		}
	case "list":
		all := &hooklinev1.ListEndpointsResponse{}
		token := ""
		for {
			page, perr := api.ListEndpoints(cctx, &hooklinev1.ListEndpointsRequest{PageToken: token})
			if perr != nil {
				return callErr(perr)
			}
			all.Endpoints = append(all.Endpoints, page.GetEndpoints()...)
			if token = page.GetNextPageToken(); token == "" {
				break
			}
		}
		resp = all
	case "pause":
		var eid string
		if eid, err = id(); err == nil {
			resp, err = api.PauseEndpoint(cctx, &hooklinev1.PauseEndpointRequest{Id: eid, Reason: f.Reason})
		}
	case "resume":
		var eid string
		if eid, err = id(); err == nil {
			resp, err = api.ResumeEndpoint(cctx, &hooklinev1.ResumeEndpointRequest{Id: eid})
		}
	case "delete":
		var eid string
		if eid, err = id(); err == nil {
			resp, err = api.DeleteEndpoint(cctx, &hooklinev1.DeleteEndpointRequest{Id: eid})
		}
	case "rotate-secret":
		var eid string
		if eid, err = id(); err == nil {
			resp, err = api.RotateEndpointSecret(cctx, &hooklinev1.RotateEndpointSecretRequest{Id: eid, Secret: f.Secret, SignatureScheme: scheme})
		}
	case "test":
		var eid string
		if eid, err = id(); err != nil {
			break
		}
		tr, terr := hooklinev1.NewDeliveryServiceClient(c.conn).SendTestEvent(cctx, &hooklinev1.SendTestEventRequest{EndpointId: eid})
		if terr != nil {
			return callErr(terr)
		}
		if err := printJSON(out, tr); err != nil {
			return err
		}
		return testOutcome(tr.GetResult())
	case "update":
		var eid string
		if eid, err = id(); err == nil {
			ep := &hooklinev1.Endpoint{Id: eid, Headers: f.headers, Auth: auth, ClientTls: clientTLS}
			resp, err = updateEndpoint(cctx, api, ep, f, script, flagArgs, grpc.Header(&hdr))
		}
	default:
		return fmt.Errorf("unknown endpoint command %q; use create, get, list, update, pause, resume, delete, rotate-secret or test", sub)
	}
	if err != nil {
		return callErr(err)
	}
	// Beside the JSON, not in it: the output stays the API's answer.
	for _, w := range hdr.Get("hookline-warning") {
		fmt.Fprintln(os.Stderr, "hookline: warning:", w)
	}
	return printJSON(out, resp)
}

// testOutcome is nil when the test attempt was delivered, else an error
// that says how it went, so a script sees the failure in the exit code.
func testOutcome(r *hooklinev1.AttemptResult) error {
	if r.GetState() == hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
		return nil
	}
	what := r.GetError()
	if r.GetStatusCode() != 0 {
		what = fmt.Sprintf("HTTP %d", r.GetStatusCode())
	}
	if what == "" {
		what = r.GetReason()
	}
	return fmt.Errorf("test event not delivered: %s (%s, %s)", what,
		strings.ToLower(strings.TrimPrefix(r.GetClass().String(), "OUTCOME_CLASS_")), strings.ToLower(strings.TrimPrefix(r.GetState().String(), "DELIVERY_STATE_")))
}

// updateEndpoint sends the fields given as flags, and only those.
// script is the content of --transformation-file.
// ep holds the id and the receiver credentials the flags give.
func updateEndpoint(ctx context.Context, api hooklinev1.EndpointServiceClient, ep *hooklinev1.Endpoint, f endpointFlags, script string, args []string, opts ...grpc.CallOption) (proto.Message, error) {
	ord, err := orderingFlag(f.Ordering)
	if err != nil {
		return nil, err
	}
	hf, err := headFailureFlag(f.HeadFailure)
	if err != nil {
		return nil, err
	}
	ep.Url, ep.EventTypes, ep.Description, ep.Ordering, ep.OnHeadFailure, ep.Filter, ep.Transformation = f.URL, f.EventTypes, f.Description, ord, hf, f.Filter, script
	batch, paths, err := f.batchUpdate(args)
	if err != nil {
		return nil, err
	}
	ep.Batch = batch
	if f.headersGiven {
		paths = append(paths, "headers")
	}
	for _, a := range args {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		switch name {
		case "url", "description", "ordering", "filter":
			paths = append(paths, name)
		case "event-types":
			paths = append(paths, "event_types")
		case "on-head-failure":
			paths = append(paths, "on_head_failure")
		case "transformation-file":
			paths = append(paths, "transformation")
		case "auth":
			paths = append(paths, "auth")
		case "client-cert-file":
			paths = append(paths, "client_tls")
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("nothing to update: give --url, --description, --event-types, --ordering, --on-head-failure, --filter, --transformation-file, --header/--header-secret, --auth, --client-cert-file or --batch-max-events/--batch-max-bytes/--batch-max-wait")
	}
	return api.UpdateEndpoint(ctx, &hooklinev1.UpdateEndpointRequest{Endpoint: ep, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}, opts...)
}

type publishFlags struct {
	Conn
	Type      string   `flag:"type" usage:"event type, e.g. invoice.paid (required)"`
	Data      string   `flag:"data" usage:"JSON payload, or @file to read it from a file, or @- for stdin (required)"`
	Endpoints []string `flag:"endpoints" usage:"deliver only to these endpoint ids, comma-separated"`
	Key       string   `flag:"idempotency-key" usage:"idempotency key: a repeat with the same key and event returns the first result (default: a fresh key, reused on every retry of this publish)"`
	Order     string   `flag:"ordering-key" usage:"ordering key: the lane this event joins at endpoints ordered per_key (ignored by others)"`
	Metadata  []string `flag:"metadata" usage:"labels endpoint filters read as metadata, comma-separated key=value, e.g. region=eu,tier=gold"`
}

// metadataFlag maps --metadata's key=value entries to a map.
func metadataFlag(entries []string) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	md := make(map[string]string, len(entries))
	for _, e := range entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--metadata %q: give key=value", e)
		}
		md[k] = v
	}
	return md, nil
}

func runPublish(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	var f publishFlags
	if _, err := parse("publish", &f, args, out, getenv); err != nil {
		return err
	}
	if f.Type == "" || f.Data == "" {
		return errors.New("--type and --data are required")
	}
	md, err := metadataFlag(f.Metadata)
	if err != nil {
		return err
	}
	payload := []byte(f.Data)
	if name, ok := strings.CutPrefix(f.Data, "@"); ok {
		if name == "-" {
			payload, err = io.ReadAll(os.Stdin)
		} else {
			payload, err = os.ReadFile(name)
		}
		if err != nil {
			return fmt.Errorf("--data: %w", err)
		}
	}
	c, err := dial(f.Conn)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	cctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := hooklinev1.NewEventServiceClient(c.conn).PublishEvent(cctx, &hooklinev1.PublishEventRequest{EventType: f.Type, Payload: payload, EndpointIds: f.Endpoints, IdempotencyKey: f.Key, OrderingKey: f.Order, Metadata: md})
	if err != nil {
		return callErr(err)
	}
	return printJSON(out, resp)
}
