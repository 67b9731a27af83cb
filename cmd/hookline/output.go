package main

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoNames is the protobuf JSON mapping with the proto field names
// (event_id, created_at): what ingest's HTTP API answers.
var protoNames = protojson.MarshalOptions{UseProtoNames: true}

// readableJSON is m as the HTTP API writes it (snake_case), except that
// a bytes field (payload, response_excerpt) holding a JSON document is
// written as that document, and one holding other UTF-8 text as a
// string of it; only other bytes stay base64. Keys come out sorted.
// indent "" writes one line.
func readableJSON(m proto.Message, indent string) ([]byte, error) {
	b, err := protoNames.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v = readableBytes(m.ProtoReflect(), v)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

// readableBytes walks m and its JSON form v together, replacing the
// base64 of each bytes field by its text. Well-known types written as
// strings (Timestamp, Duration) are left as they are.
func readableBytes(m protoreflect.Message, v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		key := string(fd.Name())
		jv, ok := obj[key]
		if !ok {
			return true
		}
		switch {
		case fd.IsList():
			items, ok := jv.([]any)
			if !ok {
				return true
			}
			l := val.List()
			for i := 0; i < l.Len() && i < len(items); i++ {
				items[i] = readableValue(fd, l.Get(i), items[i])
			}
		case fd.IsMap():
			entries, ok := jv.(map[string]any)
			if !ok || fd.MapValue().Kind() != protoreflect.MessageKind {
				return true
			}
			val.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if e, ok := entries[k.String()]; ok {
					entries[k.String()] = readableBytes(mv.Message(), e)
				}
				return true
			})
		default:
			obj[key] = readableValue(fd, val, jv)
		}
		return true
	})
	return obj
}

// readableValue is one singular value of field fd.
func readableValue(fd protoreflect.FieldDescriptor, val protoreflect.Value, jv any) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return readableBytes(val.Message(), jv)
	case protoreflect.BytesKind:
		b := val.Bytes()
		switch {
		case json.Valid(b):
			return json.RawMessage(b)
		case utf8.Valid(b):
			return string(b)
		}
	}
	return jv
}
