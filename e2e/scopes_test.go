package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/filewatch"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/hookline/hookline/services/ingest/ingest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// scopeTable is docs/security.md's table: the RPCs a publish or read key
// may call. Admin keys call every RPC; every RPC not here is admin-only.
var scopeTable = map[string]apikey.Scope{
	"/hookline.v1.EventService/PublishEvent":                   apikey.ScopePublish,
	"/hookline.v1.EndpointService/GetEndpoint":                 apikey.ScopeRead,
	"/hookline.v1.EndpointService/ListEndpoints":               apikey.ScopeRead,
	"/hookline.v1.DeliveryService/GetEvent":                    apikey.ScopeRead,
	"/hookline.v1.DeliveryService/GetDelivery":                 apikey.ScopeRead,
	"/hookline.v1.DeliveryService/ListDeliveries":              apikey.ScopeRead,
	"/hookline.v1.DeliveryService/ListEvents":                  apikey.ScopeRead,
	"/hookline.v1.LaneService/ListBlockedLanes":                apikey.ScopeRead,
	"/hookline.v1.EndpointService/TestFilterAndTransformation": apikey.ScopeRead,
}

// hooklineRPCs returns every RPC of every hookline.v1 service.
func hooklineRPCs(t *testing.T) []protoreflect.MethodDescriptor {
	t.Helper()
	_ = hooklinev1.File_hookline_v1_event_proto // registers the files
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("hookline.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			for j := range fd.Services().Get(i).Methods().Len() {
				out = append(out, fd.Services().Get(i).Methods().Get(j))
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatal("no hookline.v1 RPCs registered")
	}
	return out
}

// invokeEmpty calls md with an empty request and returns the call's error.
func invokeEmpty(ctx context.Context, conn *grpc.ClientConn, md protoreflect.MethodDescriptor) error {
	method := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	in, out := dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output())
	if !md.IsStreamingServer() {
		return conn.Invoke(ctx, method, in, out)
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err == nil {
		err = s.SendMsg(in)
	}
	if err == nil {
		err = s.CloseSend()
	}
	if err == nil {
		err = s.RecvMsg(out)
	}
	return err
}

// Every RPC × every scope through a running ingest: a key calls the RPCs
// its scope admits (the call then fails only on its empty request, never
// with PERMISSION_DENIED) and is refused every other with
// PERMISSION_DENIED naming the scope needed; a read key gets an endpoint
// without its signing secret.
func TestEveryRPCAdmitsOnlyTheScopesOfTheTable(t *testing.T) {
	keys := map[apikey.Scope]string{}
	st := startStack(t, func(c *stackConfig) {
		for _, sc := range apikey.Scopes {
			key, entry, err := apikey.New(testTenant, sc)
			if err != nil {
				t.Fatal(err)
			}
			keys[sc] = key
			c.ingest.APIKeys = append(c.ingest.APIKeys, entry)
		}
	})
	for _, md := range hooklineRPCs(t) {
		method := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
		for _, sc := range apikey.Scopes {
			t.Run(string(md.Parent().Name())+"."+string(md.Name())+"/"+string(sc), func(t *testing.T) {
				err := invokeEmpty(st.ctxAs(keys[sc]), st.conn, md)
				need, listed := scopeTable[method]
				if !listed {
					need = apikey.ScopeAdmin
				}
				if sc == apikey.ScopeAdmin || sc == need {
					if c := status.Code(err); c == codes.PermissionDenied || c == codes.Unauthenticated {
						t.Fatalf("a %s key was refused: %v", sc, err)
					}
					return
				}
				if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), `scope "`+string(need)+`"`) {
					t.Fatalf("a %s key: %v; want PERMISSION_DENIED naming scope %q", sc, err, need)
				}
			})
		}
	}

	ep := st.createEndpoint(newReceiver(t, http.StatusOK).URL).GetEndpoint()
	for sc, wantSecret := range map[apikey.Scope]bool{apikey.ScopeRead: false, apikey.ScopeAdmin: true} {
		got, err := st.endpoints().GetEndpoint(st.ctxAs(keys[sc]), &hooklinev1.GetEndpointRequest{Id: ep.GetId()})
		if err != nil || got.GetEndpoint().GetId() != ep.GetId() || (got.GetSecret() != "") != wantSecret {
			t.Errorf("GetEndpoint with a %s key: %v, %v; want the endpoint, with its secret: %v", sc, got, err, wantSecret)
		}
	}
}

// A key removed from --api-keys-file is refused without a restart, from
// the first call after ingest read the file again; a change that adds a
// weak key is rejected whole and the keys before it kept.
func TestKeyRemovedFromTheKeysFileIsRefusedWithoutARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api-keys")
	revoked, revokedEntry, _ := apikey.New(testTenant, apikey.ScopePublish)
	kept, keptEntry, _ := apikey.New(testTenant, apikey.ScopeRead)
	write := func(lines ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# keys of acme", revokedEntry, keptEntry)
	clock := &offsetClock{}
	st := startStack(t, func(c *stackConfig) {
		c.ingest.APIKeysFile = path
		c.ingestOpts = append(c.ingestOpts, ingest.WithClock(clock.now))
	})
	list := func(key string) error {
		_, err := st.endpoints().ListEndpoints(st.ctxAs(key), &hooklinev1.ListEndpointsRequest{})
		return err
	}
	publish := func(key string) error {
		_, err := st.events().PublishEvent(st.ctxAs(key), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)})
		return err
	}
	if err := publish(revoked); err != nil {
		t.Fatalf("a key of the file: %v", err)
	}
	if err := list(kept); err != nil {
		t.Fatalf("a key of the file: %v", err)
	}

	// A change that adds a weak key is rejected whole: once ingest has
	// read it (the first call after its 2 s interval), the key it drops
	// still works.
	write(keptEntry, testTenant+":publish:"+strings.Repeat("ab", 32))
	clock.advance(filewatch.DefaultInterval)
	if err := publish(revoked); err != nil {
		t.Fatalf("after a rejected change, a key of the previous file: %v", err)
	}

	write(keptEntry)
	clock.advance(filewatch.DefaultInterval)
	if err := publish(revoked); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the revoked key: %v; want UNAUTHENTICATED", err)
	}
	if err := list(kept); err != nil {
		t.Fatalf("a key still in the file: %v", err)
	}
	if err := list(st.apiKey); err != nil {
		t.Fatalf("an --api-keys key: %v", err)
	}
}
