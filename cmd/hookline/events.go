package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
)

type eventsFlags struct {
	Conn
	PageFlags
	Type string `flag:"type" usage:"list only events of this type"`
}

const eventsUsage = "usage: hookline events get EVENT_ID | list [--type T] [--since T] [--until T] [--limit N] [--page-token TOKEN]"

// runEvents is "hookline events get ID" (the event with its payload and
// deliveries) and "hookline events list [filters]", oldest first.
func runEvents(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return errors.New(eventsUsage)
	}
	sub := args[0]
	var f eventsFlags
	rest, err := parse("events "+sub, &f, args[1:], out, getenv)
	if err != nil {
		return err
	}
	var req *hooklinev1.ListEventsRequest
	switch sub {
	case "get":
		if len(rest) != 1 {
			return errors.New("usage: hookline events get EVENT_ID")
		}
	case "list":
		if len(rest) != 0 {
			return errors.New(eventsUsage)
		}
		req = &hooklinev1.ListEventsRequest{EventType: f.Type}
		if req.Since, req.Until, err = f.window(time.Now()); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown events command %q; use get or list", sub)
	}
	return readHistory(ctx, f.Conn, out, func(ctx context.Context, api hooklinev1.DeliveryServiceClient) (proto.Message, error) {
		if req == nil {
			return api.GetEvent(ctx, &hooklinev1.GetEventRequest{EventId: rest[0]})
		}
		all := &hooklinev1.ListEventsResponse{}
		var err error
		all.NextPageToken, err = f.pages(func(size uint32, token string) (int, string, error) {
			req.PageSize, req.PageToken = size, token
			page, err := api.ListEvents(ctx, req)
			all.Events = append(all.Events, page.GetEvents()...)
			return len(page.GetEvents()), page.GetNextPageToken(), err
		})
		return all, err
	})
}
