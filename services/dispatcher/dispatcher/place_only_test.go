package dispatcher

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestADeliveryCommittedAboveItsWatermarkHoldsOnlyItsPlace: a slow
// receiver's attempt in flight holds its partition's watermark for up to
// its timeout, and the deliveries read after it complete meanwhile. Once
// a commit has written their outputs above the watermark, nothing of
// them is left to write: the window keeps only their place (the offset
// the watermark will pass), not their record, decoded copy or outputs,
// and counts them against neither budget's records, so a partition
// behind a slow attempt is not over its share for what it already
// committed (issue 26: healthy endpoints at 25–28% of their rate beside
// slow ones, the window full of committed deliveries). The accounting
// stays exact through the watermark's pass and an aborted commit that
// puts the popped entries back.
func TestADeliveryCommittedAboveItsWatermarkHoldsOnlyItsPlace(t *testing.T) {
	s := newTestService(t)
	e := testEngine(t, s)
	now := s.now()
	topic := s.topics.Deliveries
	const n = 200
	value := bytes.Repeat([]byte("x"), 1000)
	var ens []*entry
	for off := range int64(n + 1) {
		en := e.w.add(&kgo.Record{Topic: topic, Partition: 0, Offset: off, Value: value}, now, e.work)
		if en == nil {
			t.Fatalf("offset %d not added", off)
		}
		ens = append(ens, en)
	}
	head, pw := ens[0], ens[0].part
	head.state = entryInFlight // a slow receiver's attempt
	for _, en := range ens[1:] {
		e.w.finish(en, []*kgo.Record{{Topic: "results", Value: value}})
	}
	full := e.w.bytes
	e.w.maxRecords, e.w.maxBytes = 2*n, 2*full // this partition is over its share with all of it
	if !e.w.overShare(pw) {
		t.Fatalf("a partition holding the whole window (%d bytes of %d) is not over its share", full, e.w.maxBytes)
	}

	marks := map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: pw.watermark()}}}
	outs, parts, metas := e.c.commitAbove(nil, nil, marks)
	if len(outs) != n || len(parts) != 1 || metas[pw.k] == "" {
		t.Fatalf("commit above the watermark carries %d outputs of %d partitions (metadata %q); want %d of 1", len(outs), len(parts), metas[pw.k], n)
	}
	e.c.aboveEnded(true)

	if e.w.records != 1 || pw.records != 1 {
		t.Fatalf("window counts %d records (partition %d); want 1: only the attempt in flight is not committed", e.w.records, pw.records)
	}
	if want := head.size + n*placeSize; e.w.bytes != want || pw.bytes != want {
		t.Fatalf("window holds %d bytes (partition %d); want %d: the head's record and %d places of %d bytes", e.w.bytes, pw.bytes, want, n, placeSize)
	}
	if e.w.overShare(pw) {
		t.Fatal("the partition is over its share for deliveries it committed above its watermark")
	}
	for _, en := range ens[1:] {
		if en.d != nil || en.outs != nil || len(en.rec.Value) != 0 || !pw.settledAbove(en.rec.Offset) {
			t.Fatalf("offset %d committed above the watermark still holds its delivery, outputs or value, or is not skipped when read again", en.rec.Offset)
		}
	}

	// The head's attempt ends: the watermark passes every place, and
	// only the head's outputs are written.
	e.w.finish(head, []*kgo.Record{{Topic: "results", Value: value}})
	before := struct {
		records, pRecords int
		bytes, pBytes     int64
	}{e.w.records, pw.records, e.w.bytes, pw.bytes}
	popped, mark, _ := e.w.popDone(pw, now, nil)
	if len(popped) != 1 || mark != n+1 {
		t.Fatalf("the watermark's pass wrote %d outputs and stopped at %d; want 1 and %d", len(popped), mark, n+1)
	}
	if e.w.records != 0 || e.w.bytes != 0 || pw.records != 0 || pw.bytes != 0 {
		t.Fatalf("after the watermark passed everything: window %d records %d bytes, partition %d records %d bytes; want nothing", e.w.records, e.w.bytes, pw.records, pw.bytes)
	}
	// An aborted commit puts what it popped back, charged as before.
	e.c.keepTxn()
	if e.w.records != before.records || e.w.bytes != before.bytes || pw.records != before.pRecords || pw.bytes != before.pBytes {
		t.Fatalf("after an aborted commit: window %d records %d bytes, partition %d records %d bytes; want %d, %d, %d, %d as before it",
			e.w.records, e.w.bytes, pw.records, pw.bytes, before.records, before.bytes, before.pRecords, before.pBytes)
	}

	// Read again after the window was dropped (a rewind), a delivery
	// committed above the watermark takes only its place from the start.
	e.w.forgetAll()
	e.sweep(now)
	if e.w.records != 0 || e.w.bytes != 0 {
		t.Fatalf("a dropped window still holds %d records, %d bytes", e.w.records, e.w.bytes)
	}
	for off := range int64(n + 1) {
		if en := e.w.add(&kgo.Record{Topic: topic, Partition: 0, Offset: off, Value: value}, now, e.work); (en == nil) != (off > 0) {
			t.Fatalf("offset %d read again: placed %v", off, en != nil)
		}
	}
	pw = e.w.parts[pw.k]
	if want := recordSize(ens[0].rec) + n*placeSize; e.w.records != 1 || e.w.bytes != want || pw.records != 1 || pw.bytes != want {
		t.Fatalf("read again: window %d records %d bytes, partition %d records %d bytes; want 1 and the head's record plus %d places", e.w.records, e.w.bytes, pw.records, pw.bytes, n)
	}
}

// TestAPolledRecordSharesNoMemoryWithItsFetch: kgo decodes a fetched
// batch's records into one slice whose keys, values and header values
// point into the batch's buffer, so one record the window keeps (an
// attempt in flight to a slow receiver) would keep its whole batch in
// memory, places and all, whatever the window charges. The window keeps
// its own copy of each record.
func TestAPolledRecordSharesNoMemoryWithItsFetch(t *testing.T) {
	buf := []byte("keyvaluehdr")
	batch := []kgo.Record{{Topic: "d", Partition: 0, Offset: 7, LeaderEpoch: 3, Key: buf[0:3], Value: buf[3:8],
		Headers: []kgo.RecordHeader{{Key: "h", Value: buf[8:11]}}}}
	w := newWindow(10, 1<<20)
	en := w.add(&batch[0], time.Now(), context.Background())
	if en.rec == &batch[0] {
		t.Fatal("the window keeps the batch's record itself")
	}
	clear(buf)
	r := en.rec
	if string(r.Key) != "key" || string(r.Value) != "value" || len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != "hdr" {
		t.Fatalf("the window's record changed with the fetch's buffer: %q %q %v", r.Key, r.Value, r.Headers)
	}
	if r.Topic != "d" || r.Offset != 7 || r.LeaderEpoch != 3 {
		t.Fatalf("the window's record lost where it is: %+v", r)
	}
	if en.size != recordSize(&batch[0]) {
		t.Fatalf("charged %d, want %d", en.size, recordSize(&batch[0]))
	}
}
