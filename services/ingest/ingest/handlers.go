package ingest

import hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"

// One handler type per gRPC service of hookline.v1, each holding that
// service's RPCs and nothing else: a reader finds an RPC by its service,
// and a change to one service's handlers cannot reach another's through
// a shared receiver. What they share — the views, auth, admission, the
// write limits and the parts (the producer, the endpoint writer, the URL
// and content rules, the fan-out, the delivery history) — is the Service
// they are served from (s in each handler).

// eventService is hookline.v1.EventService (events.go).
type eventService struct {
	hooklinev1.UnimplementedEventServiceServer
	s *Service
}

// endpointService is hookline.v1.EndpointService (endpointhandlers.go,
// filtertest.go).
type endpointService struct {
	hooklinev1.UnimplementedEndpointServiceServer
	s *Service
}

// deliveryService is hookline.v1.DeliveryService (deliveries.go,
// search.go, recover.go, testevent.go).
type deliveryService struct {
	hooklinev1.UnimplementedDeliveryServiceServer
	s *Service
}

// laneService is hookline.v1.LaneService (lanes.go).
type laneService struct {
	hooklinev1.UnimplementedLaneServiceServer
	s *Service
}

// handlers makes the Service's four handlers.
func (s *Service) handlers() {
	s.eventAPI = &eventService{s: s}
	s.endpointAPI = &endpointService{s: s}
	s.deliveryAPI = &deliveryService{s: s}
	s.laneAPI = &laneService{s: s}
}
