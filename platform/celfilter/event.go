package celfilter

import (
	"encoding/json"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Event is what filters see of one event. Its payload is parsed once,
// by the first Match that needs it, and shared by every filter matched
// against the event after; an event no filter sees is never parsed.
// An Event is not safe for concurrent use.
type Event struct {
	Type        string
	Payload     []byte
	Metadata    map[string]string
	OrderingKey string

	vars *vars // built by the first activation
}

// vars is an Event's activation: its variables as CEL values.
type vars struct {
	typ, orderingKey ref.Val
	payload          ref.Val
	metadata         ref.Val
}

func (e *Event) activation() interpreter.Activation {
	if e.vars == nil {
		e.vars = &vars{
			typ:         types.String(e.Type),
			orderingKey: types.String(e.OrderingKey),
			payload:     payloadValue(e.Payload),
			metadata:    types.NewStringStringMap(types.DefaultTypeAdapter, e.Metadata),
		}
	}
	return e.vars
}

// payloadValue is the payload as a CEL value: the JSON document (numbers
// are doubles, as in CEL's JSON mapping), or null when it is not JSON.
func payloadValue(p []byte) ref.Val {
	var doc any
	if err := json.Unmarshal(p, &doc); err != nil {
		return types.NullValue
	}
	return jsonValue(doc)
}

// jsonValue converts a decoded JSON document to CEL values all at once,
// so that the filters of a fan-out read it without converting a field
// at every access.
func jsonValue(v any) ref.Val {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[ref.Val]ref.Val, len(v))
		for k, e := range v {
			m[types.String(k)] = jsonValue(e)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case []any:
		l := make([]ref.Val, len(v))
		for i, e := range v {
			l[i] = jsonValue(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, l)
	case string:
		return types.String(v)
	case float64:
		return types.Double(v)
	case bool:
		return types.Bool(v)
	}
	return types.NullValue
}

// ResolveName implements interpreter.Activation.
func (v *vars) ResolveName(name string) (any, bool) {
	switch name {
	case VarType:
		return v.typ, true
	case VarPayload:
		return v.payload, true
	case VarMetadata:
		return v.metadata, true
	case VarOrderingKey:
		return v.orderingKey, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (v *vars) Parent() interpreter.Activation { return nil }
