package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestEncodeDecodeKeepsMembersAndPayloadBytesInOrder(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.UTC)
	in := []Member{
		{ID: "evt_1", Type: "invoice.paid", Timestamp: at, Payload: []byte(`{"amount": 12.50, "z":1, "a":[1,2]}`)},
		{ID: "evt_2", Type: "file.uploaded", Timestamp: at.Add(time.Second), Payload: []byte{0, 1, 2, 0xff}},
		{ID: "evt_\"3\"", Type: "x", Timestamp: at, Payload: []byte(" 42 ")},
		{ID: "evt_4", Type: "empty", Timestamp: at, Payload: nil},
	}
	body := Encode(in)
	if !json.Valid(body) {
		t.Fatalf("body is not JSON: %s", body)
	}
	out, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("got %d members, want %d", len(out), len(in))
	}
	for i := range in {
		want := bytes.TrimSpace(in[i].Payload)
		if out[i].ID != in[i].ID || out[i].Type != in[i].Type || !out[i].Timestamp.Equal(in[i].Timestamp) || !bytes.Equal(out[i].Payload, want) {
			t.Errorf("member %d: got %+v, want %+v (payload %q)", i, out[i], in[i], want)
		}
	}
	// JSON payloads are embedded as published, not re-encoded.
	if !bytes.Contains(body, []byte(`"payload":{"amount": 12.50, "z":1, "a":[1,2]}`)) {
		t.Errorf("JSON payload re-encoded: %s", body)
	}
	if !bytes.Contains(body, []byte(`"payload_base64":"AAEC/w=="`)) {
		t.Errorf("binary payload not base64: %s", body)
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	m := []Member{{ID: "evt_1", Type: "a", Timestamp: time.Unix(1, 0), Payload: []byte(`{}`)}}
	if !bytes.Equal(Encode(m), Encode(m)) {
		t.Fatal("two encodings of the same members differ")
	}
}

func TestIDDependsOnTheMembersAndTheirOrderOnly(t *testing.T) {
	a := ID([]string{"dlv_1", "dlv_2"})
	if a != ID([]string{"dlv_1", "dlv_2"}) {
		t.Fatal("same members, different ids")
	}
	for _, other := range [][]string{{"dlv_2", "dlv_1"}, {"dlv_1"}, {"dlv_1", "dlv_2", "dlv_3"}, {"dlv_1dlv_2"}} {
		if ID(other) == a {
			t.Errorf("%v has the id of [dlv_1 dlv_2]", other)
		}
	}
	if len(a) != len(IDPrefix)+24 || a[:4] != IDPrefix {
		t.Errorf("id %q: want %s and 24 characters", a, IDPrefix)
	}
}

func TestDecodeRefusesWhatIsNotABatch(t *testing.T) {
	for _, body := range []string{`{"type":"invoice.paid","data":{}}`, `{"type":"batch"}`, `[1]`, `{"type":"batch","data":[{"type":"x"}]}`, `{"type":"batch","data":[{"id":"e","payload_base64":"!!"}]}`, `nope`} {
		if _, err := Decode([]byte(body)); err == nil {
			t.Errorf("%s decoded", body)
		}
	}
	if _, err := Decode([]byte(`{"type":"other","data":[]}`)); !errors.Is(err, ErrNotABatch) {
		t.Errorf("err = %v, want ErrNotABatch", err)
	}
}
