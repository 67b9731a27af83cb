package apikey

import (
	"fmt"
	"slices"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
)

// Scope is what an API key may do. Admin may call every RPC; publish and
// read keys only the RPCs in scopes.
type Scope string

// The scopes an API key can carry.
const (
	// ScopeAdmin may call every RPC. It is the scope of a key whose
	// entry names none.
	ScopeAdmin Scope = "admin"
	// ScopePublish may publish events and nothing else.
	ScopePublish Scope = "publish"
	// ScopeRead may read endpoints (without their signing secrets),
	// events and deliveries, and change nothing.
	ScopeRead Scope = "read"
)

// Scopes lists every scope, least powerful first.
var Scopes = []Scope{ScopePublish, ScopeRead, ScopeAdmin}

// ParseScope returns the scope named s.
func ParseScope(s string) (Scope, error) {
	if sc := Scope(s); slices.Contains(Scopes, sc) {
		return sc, nil
	}
	return "", fmt.Errorf("unknown scope %q: want publish, read or admin", s)
}

// scopes names, for every RPC of hookline.v1 that a non-admin key may
// call, the scope that admits it besides admin. An RPC missing here is
// admin-only, so a new RPC is closed until it is listed;
// TestEveryRPCHasAScopeDecision keeps this table and the services in
// step. docs/security.md carries the same table.
var scopes = map[string]Scope{
	hooklinev1.EventService_PublishEvent_FullMethodName: ScopePublish,

	hooklinev1.EndpointService_GetEndpoint_FullMethodName:   ScopeRead,
	hooklinev1.EndpointService_ListEndpoints_FullMethodName: ScopeRead,
	// It runs a filter and writes nothing.
	hooklinev1.EndpointService_TestFilterAndTransformation_FullMethodName: ScopeRead,
	hooklinev1.DeliveryService_GetEvent_FullMethodName:                    ScopeRead,
	hooklinev1.DeliveryService_ListDeliveries_FullMethodName:              ScopeRead,
	hooklinev1.DeliveryService_GetDelivery_FullMethodName:                 ScopeRead,
	hooklinev1.DeliveryService_ListEvents_FullMethodName:                  ScopeRead,
	hooklinev1.LaneService_ListBlockedLanes_FullMethodName:                ScopeRead,
}

// adminOnly lists the RPCs only an admin key may call; with scopes it
// covers every RPC of hookline.v1 (checked by a test).
var adminOnly = []string{
	hooklinev1.EndpointService_CreateEndpoint_FullMethodName,
	hooklinev1.EndpointService_UpdateEndpoint_FullMethodName,
	hooklinev1.EndpointService_DeleteEndpoint_FullMethodName,
	hooklinev1.EndpointService_PauseEndpoint_FullMethodName,
	hooklinev1.EndpointService_ResumeEndpoint_FullMethodName,
	hooklinev1.EndpointService_RotateEndpointSecret_FullMethodName,
	hooklinev1.DeliveryService_ResendDelivery_FullMethodName,
	hooklinev1.DeliveryService_RecoverEndpoint_FullMethodName,
	hooklinev1.DeliveryService_SendTestEvent_FullMethodName,
	hooklinev1.LaneService_SkipLaneHead_FullMethodName,
	hooklinev1.LaneService_ResendLaneHead_FullMethodName,
}

// Needed returns the scope, besides admin, that admits fullMethod
// ("/hookline.v1.EventService/PublishEvent"): ScopeAdmin when only admin
// keys may call it.
func Needed(fullMethod string) Scope {
	if sc, ok := scopes[fullMethod]; ok {
		return sc
	}
	return ScopeAdmin
}

// Allows reports whether a key of scope s may call fullMethod.
func (s Scope) Allows(fullMethod string) bool {
	return s == ScopeAdmin || s == Needed(fullMethod)
}

// deniedMessage says which scope fullMethod needs.
func deniedMessage(have Scope, fullMethod string) string {
	need := Needed(fullMethod)
	if need == ScopeAdmin {
		return fmt.Sprintf("%s needs an API key with scope %q; this key has scope %q", fullMethod, ScopeAdmin, have)
	}
	return fmt.Sprintf("%s needs an API key with scope %q or %q; this key has scope %q", fullMethod, need, ScopeAdmin, have)
}
