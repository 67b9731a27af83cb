package main

import (
	"context"
	"fmt"
	"io"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// readHistory dials ingest, runs one read of the delivery history (a
// get, or every page of a list) within --timeout, and prints its answer.
func readHistory(ctx context.Context, cfg Conn, out io.Writer, read func(context.Context, hooklinev1.DeliveryServiceClient) (proto.Message, error)) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	cctx, cancel := c.call(ctx)
	defer cancel()
	resp, err := read(cctx, hooklinev1.NewDeliveryServiceClient(c.conn))
	if err != nil {
		return callErr(err)
	}
	return printJSON(out, resp)
}

// PageFlags are the flags of every list command that reads the history:
// a time window and how much of it to print.
type PageFlags struct {
	Since     string `flag:"since" usage:"created at or after this time: RFC 3339 (2026-11-30T10:00:00Z) or a duration ago (90m)"`
	Until     string `flag:"until" usage:"created before this time, same forms"`
	Limit     int    `flag:"limit" default:"100" usage:"print at most this many (0: every page); the printed next_page_token goes on from there"`
	PageToken string `flag:"page-token" usage:"go on from a next_page_token printed before (same filters)"`
}

// window reads --since and --until (unset stays nil: unbounded).
func (f PageFlags) window(now time.Time) (since, until *timestamppb.Timestamp, err error) {
	if f.Limit < 0 {
		return nil, nil, fmt.Errorf("--limit %d: want 0 (every page) or more", f.Limit)
	}
	if f.Since != "" {
		t, err := parseWhen("since", f.Since, now)
		if err != nil {
			return nil, nil, err
		}
		since = timestamppb.New(t)
	}
	if f.Until != "" {
		t, err := parseWhen("until", f.Until, now)
		if err != nil {
			return nil, nil, err
		}
		until = timestamppb.New(t)
	}
	if since != nil && until != nil && !until.AsTime().After(since.AsTime()) {
		return nil, nil, fmt.Errorf("--until %s is not after --since %s", f.Until, f.Since)
	}
	return since, until, nil
}

// maxPage is the largest page the list RPCs serve.
const maxPage = 1000

// pages calls page(size, token) from --page-token on until --limit items
// are read or the list ends, and returns the token that goes on after
// the last item read ("" at the end of the list). page returns how many
// items it got and the next token; a page may be short, or even empty,
// with more to come.
func (f PageFlags) pages(page func(size uint32, token string) (int, string, error)) (string, error) {
	token, read := f.PageToken, 0
	for {
		size := maxPage
		if f.Limit > 0 {
			size = min(size, f.Limit-read)
		}
		n, next, err := page(uint32(size), token)
		if err != nil {
			return "", err
		}
		read, token = read+n, next
		if token == "" || (f.Limit > 0 && read >= f.Limit) {
			return token, nil
		}
	}
}
