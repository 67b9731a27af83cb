package endpoints

import (
	"context"
	"errors"
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

// RekeyStats says what Rekey did.
type RekeyStats struct {
	// Rewritten endpoints are now under the current key; Current ones
	// already were.
	Rewritten, Current int
	// Failed says, per endpoint not rekeyed, why (a secret that does not
	// open, or too many concurrent changes).
	Failed []error
}

// rekeyAttempts bounds the writes of one endpoint that lose to
// concurrent changes.
const rekeyAttempts = 10

// Rekey rewrites every endpoint of store whose secrets are not all sealed
// under keys' current key: each is resealed under it (secrets whose
// grace is over are dropped) and written as the endpoint's next version
// through store.Write, so a concurrent change is never overwritten: a
// write that loses is made again from the state that won.
func Rekey(ctx context.Context, store *Store, keys *keyring.Keyring, topic string, produce func(context.Context, *kgo.Record) error, now func() time.Time) (RekeyStats, error) {
	var st RekeyStats
	for _, id := range store.IDs() {
		done := false
		for attempt := 1; !done; attempt++ {
			cur := store.Get(id)
			if cur == nil {
				break // deleted meanwhile
			}
			rec, changed, err := resealed(cur, keys, now())
			if err != nil {
				st.Failed = append(st.Failed, err)
				break
			}
			if !changed {
				st.Current++
				break
			}
			r, err := hkafka.Record(topic, id, rec)
			if err != nil {
				return st, err
			}
			err = store.Write(ctx, r, produce)
			switch {
			case err == nil:
				st.Rewritten++
				done = true
			case !errors.Is(err, ErrLost):
				return st, fmt.Errorf("endpoint %s: %w", id, err)
			case attempt == rekeyAttempts:
				st.Failed = append(st.Failed, fmt.Errorf("endpoint %s: %d concurrent changes came first", id, attempt))
				done = true
			}
		}
	}
	return st, nil
}

// resealed returns cur's next version with every secret still signing at
// now, and every credential (credential.go in keyring), sealed under
// keys' current key, and whether anything changed.
func resealed(cur *hooklinev1.EndpointRecord, keys *keyring.Keyring, now time.Time) (*hooklinev1.EndpointRecord, bool, error) {
	rec := proto.Clone(cur).(*hooklinev1.EndpointRecord)
	ep := rec.GetEndpoint()
	kept := rec.Secrets[:0]
	changed := false
	for _, es := range rec.GetSecrets() {
		if exp := es.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			changed = true // its grace is over: it never signs again
			continue
		}
		re, ch, err := keys.Reseal(ep.GetTenantId(), ep.GetId(), es)
		if err != nil {
			return nil, false, err
		}
		kept = append(kept, re)
		changed = changed || ch
	}
	rec.Secrets = kept
	for i, c := range rec.GetCredentials() {
		re, ch, err := keys.ResealCredential(ep.GetTenantId(), ep.GetId(), c)
		if err != nil {
			return nil, false, err
		}
		rec.Credentials[i] = re
		changed = changed || ch
	}
	rec.Version = cur.GetVersion() + 1
	return rec, changed, nil
}
