package main

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tooLargeHint is what callErr adds to gRPC's transport refusing a
// message larger than ingest reads (RESOURCE_EXHAUSTED "message larger
// than max", not ingest's push-back; the SDK does not retry it): which
// setting limits payloads. "" for any other status.
func tooLargeHint(s *status.Status) string {
	if s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "message larger than max") {
		return ""
	}
	return ": the request is far larger than ingest accepts; payloads are limited by ingest's --max-payload-bytes"
}
