package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// ceilingMeasure names the ceiling's figure (a repeated run keeps its median).
const ceilingMeasure = "POSTs/s answered 2xx"

// rateCell formats a rate per second.
func rateCell(v float64) string { return fmt.Sprintf("%.0f/s", v) }

// runCeiling measures what a plain Go net/http client (keep-alive,
// cfg.CeilingC requests in flight) can POST to the same receiver with the
// same payload and the same Standard Webhooks headers, no Hookline: the
// ceiling every throughput is compared with.
func runCeiling(ctx context.Context, b *bench) error {
	rcv, err := newReceiver()
	if err != nil {
		return err
	}
	defer rcv.close()
	url := rcv.handle("/ceiling", route{group: "ceiling"})
	tr := &http.Transport{MaxIdleConnsPerHost: b.cfg.CeilingC, MaxConnsPerHost: b.cfg.CeilingC, DisableCompression: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	sig := "v1," + string(bytes.Repeat([]byte("A"), 43)) + "="
	var failed atomic.Int64
	start := time.Now()
	from := start.Add(b.cfg.Warmup)
	to := from.Add(b.cfg.Window)
	closedLoop(ctx, b.cfg.CeilingC, 1<<40, to, func(ctx context.Context, i int) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b.payload))
		if err != nil {
			failed.Add(1)
			return
		}
		req.Header.Set("content-type", "application/json")
		req.Header.Set("webhook-id", "evt_ceiling_"+strconv.Itoa(i))
		req.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		resp, err := cl.Do(req)
		if err != nil {
			failed.Add(1)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			failed.Add(1)
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	n := rcv.uniqueIn("ceiling", from, to)
	b.ceiling = perSec(n, b.cfg.Window)
	b.rep.addFigure(ceilingMeasure, b.ceiling, rateCell, "", func(float64) string { return "= 100%" })
	b.rep.add("setup", fmt.Sprintf("%d in flight, keep-alive, %d failed", b.cfg.CeilingC, failed.Load()), "")
	return nil
}
