package apikey

import (
	"context"
	"slices"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// rpcs returns the full method name of every RPC of every hookline.v1
// service.
func rpcs(t *testing.T) []string {
	t.Helper()
	var out []string
	protoregistry.GlobalFiles.RangeFilesByPackage("hookline.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				out = append(out, "/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatal("no hookline.v1 RPCs registered")
	}
	slices.Sort(out)
	return out
}

// The scope table decides every RPC: a new RPC fails this test until it
// is listed in scopes or adminOnly (and in docs/security.md).
func TestEveryRPCHasAScopeDecision(t *testing.T) {
	_ = hooklinev1.File_hookline_v1_event_proto // registers the files
	all := rpcs(t)
	for _, m := range all {
		_, scoped := scopes[m]
		if scoped == slices.Contains(adminOnly, m) {
			t.Errorf("%s: listed in both scopes and adminOnly, or in neither", m)
		}
	}
	for m := range scopes {
		if !slices.Contains(all, m) {
			t.Errorf("scopes lists %s, which is no RPC", m)
		}
	}
}

// transportStream gives a context the method name a gRPC server would.
type transportStream struct{ method string }

func (s transportStream) Method() string             { return s.method }
func (transportStream) SetHeader(metadata.MD) error  { return nil }
func (transportStream) SendHeader(metadata.MD) error { return nil }
func (transportStream) SetTrailer(metadata.MD) error { return nil }

// Every RPC × every scope: admin calls everything, publish only
// PublishEvent, read only the reads; a denial is PERMISSION_DENIED naming
// the scope needed.
func TestAuthFuncAdmitsEachRPCForItsScopesOnly(t *testing.T) {
	var entries []string
	key := map[Scope]string{}
	for _, sc := range Scopes {
		k, e, err := New("acme", sc)
		if err != nil {
			t.Fatal(err)
		}
		key[sc] = k
		entries = append(entries, e)
	}
	keys, err := Load(entries, "", MinBits)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]Scope{}
	for _, m := range rpcs(t) {
		want[m] = []Scope{ScopeAdmin}
	}
	want[hooklinev1.EventService_PublishEvent_FullMethodName] = []Scope{ScopeAdmin, ScopePublish}
	for _, m := range []string{
		hooklinev1.EndpointService_GetEndpoint_FullMethodName, hooklinev1.EndpointService_ListEndpoints_FullMethodName,
		hooklinev1.DeliveryService_GetEvent_FullMethodName, hooklinev1.DeliveryService_GetDelivery_FullMethodName,
		hooklinev1.DeliveryService_ListDeliveries_FullMethodName, hooklinev1.DeliveryService_ListEvents_FullMethodName,
		hooklinev1.LaneService_ListBlockedLanes_FullMethodName,
		hooklinev1.EndpointService_TestFilterAndTransformation_FullMethodName,
	} {
		want[m] = []Scope{ScopeAdmin, ScopeRead}
	}
	for m, admitted := range want {
		for _, sc := range Scopes {
			t.Run(strings.TrimPrefix(m, "/hookline.v1.")+"/"+string(sc), func(t *testing.T) {
				ctx := grpc.NewContextWithServerTransportStream(context.Background(), transportStream{m})
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+key[sc]))
				got, err := keys.AuthFunc(ctx)
				if slices.Contains(admitted, sc) {
					if err != nil || PrincipalFrom(got) != (Principal{"acme", sc}) {
						t.Fatalf("want admitted as acme/%s, got %v", sc, err)
					}
					return
				}
				if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), `scope "`+string(admitted[len(admitted)-1])+`"`) {
					t.Fatalf("want PERMISSION_DENIED naming scope %q, got %v", admitted[len(admitted)-1], err)
				}
			})
		}
	}
}
