package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
)

type lanesFlags struct {
	Conn
	Endpoint string `flag:"endpoint" usage:"the ordered endpoint's id (required)"`
	Key      string `flag:"ordering-key" usage:"the lane's ordering key (skip, resend; empty for an endpoint ordered per_endpoint). Not --key: that is --cert's private key"`
	Delivery string `flag:"delivery" usage:"the blocked head's delivery id, as lanes blocked prints it (skip, resend; required)"`
}

// runLanes is "hookline lanes blocked --endpoint ID" (every page),
// "hookline lanes skip|resend --endpoint ID --ordering-key K --delivery D".
func runLanes(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	const use = "usage: hookline lanes blocked --endpoint ID | skip|resend --endpoint ID --ordering-key K --delivery D"
	if len(args) == 0 {
		return errors.New(use)
	}
	sub := args[0]
	var f lanesFlags
	if _, err := parse("lanes "+sub, &f, args[1:], out, getenv); err != nil {
		return err
	}
	switch {
	case sub != "blocked" && sub != "skip" && sub != "resend":
		return fmt.Errorf("unknown lanes command %q; use blocked, skip or resend", sub)
	case f.Endpoint == "":
		return errors.New("--endpoint is required; " + use)
	case sub != "blocked" && f.Delivery == "":
		return errors.New("--delivery is required: the blocked head's delivery id (hookline lanes blocked --endpoint ID lists them)")
	}
	c, err := dial(f.Conn)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	api := hooklinev1.NewLaneServiceClient(c.conn)
	cctx, cancel := c.call(ctx)
	defer cancel()
	var resp proto.Message
	switch sub {
	case "blocked":
		all := &hooklinev1.ListBlockedLanesResponse{}
		req := &hooklinev1.ListBlockedLanesRequest{EndpointId: f.Endpoint}
		for {
			page, perr := api.ListBlockedLanes(cctx, req)
			if perr != nil {
				return callErr(perr)
			}
			all.Lanes = append(all.Lanes, page.GetLanes()...)
			if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
		resp = all
	case "skip":
		resp, err = api.SkipLaneHead(cctx, &hooklinev1.SkipLaneHeadRequest{EndpointId: f.Endpoint, OrderingKey: f.Key, DeliveryId: f.Delivery})
	case "resend":
		resp, err = api.ResendLaneHead(cctx, &hooklinev1.ResendLaneHeadRequest{EndpointId: f.Endpoint, OrderingKey: f.Key, DeliveryId: f.Delivery})
	}
	if err != nil {
		return callErr(err)
	}
	return printJSON(out, resp)
}
