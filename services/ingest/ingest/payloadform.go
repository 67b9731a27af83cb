package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// payloadForm says how the HTTP gateway reads a payload, for an error
// about one: the JSON document itself is taken as is; a JSON string is
// the protobuf JSON form of bytes, base64.
const payloadForm = `send the payload as the JSON document itself ("payload": {"invoice": "in_1"}: a JSON object or array is taken as is), or as a string holding its base64 (bytes fields are base64 in protobuf JSON)`

// explainPayload turns the gateway's error decoding body, when its
// payload is a JSON string that is not base64, into one that says how
// payloads are read; any other error is returned unchanged.
func explainPayload(err error, body []byte) error {
	if err == nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return err
	}
	if p := bytes.TrimSpace(fields["payload"]); len(p) == 0 || p[0] != '"' {
		return err
	}
	return fmt.Errorf("payload: a JSON string is read as base64 and this one is not base64; %s", payloadForm)
}
