package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
)

type deliveriesFlags struct {
	Conn
	Event    string `flag:"event" usage:"list the deliveries of this event id"`
	Endpoint string `flag:"endpoint" usage:"list the deliveries to this endpoint id"`
	State    string `flag:"state" usage:"list only deliveries in this state: pending, delivered, retry_scheduled, failed, expired, parked, endpoint_deleted"`
}

// runDeliveries is "hookline deliveries get ID" and "hookline deliveries
// list --event ID | --endpoint ID [--state S]" (every page).
func runDeliveries(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return errors.New("usage: hookline deliveries get DELIVERY_ID | list --event ID | --endpoint ID [--state S]")
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
		if f.Event == "" && f.Endpoint == "" {
			return errors.New("--event or --endpoint is required")
		}
		req = &hooklinev1.ListDeliveriesRequest{EventId: f.Event, EndpointId: f.Endpoint}
		if f.State != "" {
			v, ok := hooklinev1.DeliveryState_value["DELIVERY_STATE_"+strings.ToUpper(f.State)]
			if !ok {
				return fmt.Errorf("--state %q: use pending, delivered, retry_scheduled, failed, expired, parked or endpoint_deleted", f.State)
			}
			req.State = hooklinev1.DeliveryState(v)
		}
	default:
		return fmt.Errorf("unknown deliveries command %q; use get or list", sub)
	}
	c, err := dial(f.Conn)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	api := hooklinev1.NewDeliveryServiceClient(c.conn)
	cctx, cancel := c.call(ctx)
	defer cancel()
	var resp proto.Message
	if req == nil {
		resp, err = api.GetDelivery(cctx, &hooklinev1.GetDeliveryRequest{DeliveryId: rest[0]})
	} else {
		all := &hooklinev1.ListDeliveriesResponse{}
		for {
			page, perr := api.ListDeliveries(cctx, req)
			if perr != nil {
				return callErr(perr)
			}
			all.Deliveries = append(all.Deliveries, page.GetDeliveries()...)
			if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
		resp = all
	}
	if err != nil {
		return callErr(err)
	}
	return printJSON(out, resp)
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
