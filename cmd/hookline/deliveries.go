package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type deliveriesFlags struct {
	Conn
	PageFlags
	Event    string `flag:"event" usage:"list the deliveries of this event id"`
	Endpoint string `flag:"endpoint" usage:"list the deliveries to this endpoint id"`
	State    string `flag:"state" usage:"list only deliveries in this state: pending, delivered, retry_scheduled, failed, expired, parked, endpoint_deleted, blocked"`
	Type     string `flag:"type" usage:"list only deliveries of events of this type"`
}

const deliveriesUsage = "usage: hookline deliveries get DELIVERY_ID | list [--event ID] [--endpoint ID] [--state S] [--type T] [--since T] [--until T] [--limit N] [--page-token TOKEN]"

// runDeliveries is "hookline deliveries get ID" and "hookline deliveries
// list [filters]" (pages until --limit; the printed next_page_token goes
// on from there).
func runDeliveries(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return errors.New(deliveriesUsage)
	}
	sub := args[0]
	var f deliveriesFlags
	rest, err := parse("deliveries "+sub, &f, args[1:], out, getenv)
	if err != nil {
		return err
	}
	var req *hooklinev1.ListDeliveriesRequest
	switch sub {
	case "get":
		if len(rest) != 1 {
			return errors.New("usage: hookline deliveries get DELIVERY_ID")
		}
	case "list":
		if len(rest) != 0 {
			return errors.New(deliveriesUsage)
		}
		req = &hooklinev1.ListDeliveriesRequest{EventId: f.Event, EndpointId: f.Endpoint, EventType: f.Type, PageToken: f.PageToken}
		if req.Since, req.Until, err = f.window(time.Now()); err != nil {
			return err
		}
		if f.State != "" {
			v, ok := hooklinev1.DeliveryState_value["DELIVERY_STATE_"+strings.ToUpper(f.State)]
			if !ok {
				return fmt.Errorf("--state %q: use pending, delivered, retry_scheduled, failed, expired, parked, endpoint_deleted or blocked", f.State)
			}
			req.State = hooklinev1.DeliveryState(v)
		}
	default:
		return fmt.Errorf("unknown deliveries command %q; use get or list", sub)
	}
	return readHistory(ctx, f.Conn, out, func(ctx context.Context, api hooklinev1.DeliveryServiceClient) (proto.Message, error) {
		if req == nil {
			return api.GetDelivery(ctx, &hooklinev1.GetDeliveryRequest{DeliveryId: rest[0]})
		}
		all := &hooklinev1.ListDeliveriesResponse{}
		var err error
		all.NextPageToken, err = f.pages(func(size uint32, token string) (int, string, error) {
			req.PageSize, req.PageToken = size, token
			page, err := api.ListDeliveries(ctx, req)
			all.Deliveries = append(all.Deliveries, page.GetDeliveries()...)
			return len(page.GetDeliveries()), page.GetNextPageToken(), err
		})
		return all, err
	})
}

// runResend is "hookline resend DELIVERY_ID": one more attempt, now.
func runResend(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	var f Conn
	rest, err := parse("resend", &f, args, out, getenv)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return errors.New("usage: hookline resend DELIVERY_ID")
	}
	c, err := dial(f)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	cctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := hooklinev1.NewDeliveryServiceClient(c.conn).ResendDelivery(cctx, &hooklinev1.ResendDeliveryRequest{DeliveryId: rest[0]})
	if err != nil {
		return callErr(err)
	}
	return printJSON(out, resp)
}

type recoverFlags struct {
	Conn
	Since string `flag:"since" usage:"recover failures at or after this time: RFC 3339 (2026-11-30T10:00:00Z) or a duration ago (90m) (required)"`
	Until string `flag:"until" usage:"and before this time, same forms (default: now)"`
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(flagName, v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time or a duration such as 90m", flagName, v)
	}
	return t, nil
}

// progressBar draws done of total as a 30-column bar.
func progressBar(done, total uint32) string {
	const width = 30
	filled := width
	if total > 0 {
		filled = int(done) * width / int(total)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

// runRecover is "hookline recover ENDPOINT_ID --since T [--until T]": it
// redelivers the endpoint's failed deliveries of the window and prints a
// progress line per report until every one has an outcome.
func runRecover(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	var f recoverFlags
	rest, err := parse("recover", &f, args, out, getenv)
	if err != nil {
		return err
	}
	if len(rest) != 1 || f.Since == "" {
		return errors.New("usage: hookline recover ENDPOINT_ID --since T [--until T]")
	}
	now := time.Now()
	req := &hooklinev1.RecoverEndpointRequest{EndpointId: rest[0]}
	since, err := parseWhen("since", f.Since, now)
	if err != nil {
		return err
	}
	req.Since = timestamppb.New(since)
	if f.Until != "" {
		until, err := parseWhen("until", f.Until, now)
		if err != nil {
			return err
		}
		req.Until = timestamppb.New(until)
	}
	c, err := dial(f.Conn)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	// Recovery lasts as long as the redeliveries take: no call timeout,
	// Ctrl-C stops watching (what was sent stays sent).
	cctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.cfg.APIKey)
	stream, err := hooklinev1.NewDeliveryServiceClient(c.conn).RecoverEndpoint(cctx, req)
	if err != nil {
		return callErr(err)
	}
	for {
		p, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return callErr(err)
		}
		outcome := p.GetDelivered() + p.GetFailed() + p.GetRetrying()
		line := fmt.Sprintf("%s %d/%d  delivered %d, failed %d, retrying %d", progressBar(outcome, p.GetTotal()), outcome, p.GetTotal(), p.GetDelivered(), p.GetFailed(), p.GetRetrying())
		if n := p.GetUnavailable(); n > 0 {
			line += fmt.Sprintf(", %d no longer retained (not resent)", n)
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			return err
		}
	}
}
