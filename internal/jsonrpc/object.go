package jsonrpc

import (
	"bytes"
	"encoding/json"
)

// The functions in this file edit one member of a JSON object held as raw
// bytes and keep every other byte. They are how acphub changes the few
// things it owns in a frame (a capability, a sessionId) without dropping
// what it does not know. Input that is not a valid JSON object is reported
// with ok == false and never modified.

// findField returns the first member of obj named key.
func findField(obj []byte, key string) (f field, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return f, false
	}
	var end int
	err := eachField(obj, i, 0, func(g field) bool {
		if g.keyIs(obj, key) {
			f, ok = g, true
			return false
		}
		return true
	}, &end)
	return f, ok && err == nil
}

// Field returns the raw value of the member key of the object obj.
func Field(obj []byte, key string) ([]byte, bool) {
	f, ok := findField(obj, key)
	if !ok {
		return nil, false
	}
	return obj[f.valStart:f.valEnd], true
}

// Fields2 returns the raw values of the members k1 and k2 of the object
// obj (the first of each; nil for one it lacks), in one pass that stops
// once it has both, and whether obj is an object, valid as far as read
// (when not, both are nil).
func Fields2(obj []byte, k1, k2 string) (v1, v2 []byte, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, nil, false
	}
	var end int
	err := eachField(obj, i, 0, func(f field) bool {
		switch {
		case v1 == nil && f.keyIs(obj, k1):
			v1 = obj[f.valStart:f.valEnd]
		case v2 == nil && f.keyIs(obj, k2):
			v2 = obj[f.valStart:f.valEnd]
		}
		return v1 == nil || v2 == nil
	}, &end)
	if err != nil {
		return nil, nil, false
	}
	return v1, v2, true
}

// SetField returns obj with the member key set to the raw JSON val: replaced
// in place when present, appended otherwise. ok is false when obj is not an
// object.
func SetField(obj []byte, key string, val []byte) (out []byte, ok bool) {
	if f, found := findField(obj, key); found {
		return splice(obj, f.valStart, f.valEnd, val), true
	}
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return obj, false
	}
	var end int
	empty := true
	if err := eachField(obj, i, 0, func(field) bool { empty = false; return true }, &end); err != nil {
		return obj, false
	}
	k := quote(key)
	ins := make([]byte, 0, len(k)+len(val)+2)
	if !empty {
		ins = append(ins, ',')
	}
	ins = append(ins, k...)
	ins = append(ins, ':')
	ins = append(ins, val...)
	return splice(obj, end-1, end-1, ins), true
}

// DeleteField returns obj without the member key. ok is false when obj is
// not an object; a missing member leaves obj as it is.
func DeleteField(obj []byte, key string) (out []byte, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return obj, false
	}
	var (
		fields []field
		end    int
	)
	if err := eachField(obj, i, 0, func(f field) bool { fields = append(fields, f); return true }, &end); err != nil {
		return obj, false
	}
	for n, f := range fields {
		if !f.keyIs(obj, key) {
			continue
		}
		switch {
		case len(fields) == 1:
			return splice(obj, i+1, end-1, nil), true
		case n == 0:
			return splice(obj, f.keyStart, fields[1].keyStart, nil), true
		default:
			return splice(obj, fields[n-1].valEnd, f.valEnd, nil), true
		}
	}
	return obj, true
}

// splice returns a new slice holding b with b[from:to] replaced by repl.
func splice(b []byte, from, to int, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(to-from)+len(repl))
	out = append(out, b[:from]...)
	out = append(out, repl...)
	return append(out, b[to:]...)
}

// Members calls fn for each member of the object obj, in order, with the
// member's key as raw JSON (quotes and any escapes included) and its raw
// value, until fn returns false. It reports whether obj is a valid object.
func Members(obj []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	var end int
	err := eachField(obj, i, 0, func(f field) bool {
		return fn(obj[f.keyStart:f.keyEnd], obj[f.valStart:f.valEnd])
	}, &end)
	return err == nil
}

// SetMeta returns the object obj with _meta[key] set to the raw JSON val,
// and false (with obj) when obj is not an object.
func SetMeta(obj []byte, key string, val []byte) ([]byte, bool) {
	meta, ok := Field(obj, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		meta = []byte("{}")
	}
	meta, ok = SetField(meta, key, val)
	if !ok {
		return obj, false
	}
	return SetField(obj, "_meta", meta)
}

// SwapSessionID returns frame with params.sessionId to instead of from
// (both raw JSON strings), and true; or frame as it is, and false, when
// its params name no from.
func SwapSessionID(frame, from, to []byte) ([]byte, bool) {
	if from == nil || to == nil || !bytes.Contains(frame, from) {
		return frame, false
	}
	params, ok := Field(frame, "params")
	if !ok {
		return frame, false
	}
	if sid, ok := Field(params, "sessionId"); !ok || !bytes.Equal(sid, from) {
		return frame, false
	}
	params, _ = SetField(params, "sessionId", to)
	return SetField(frame, "params", params)
}

// WithMeta is SetMeta for an obj that is known to be an object.
func WithMeta(obj []byte, key string, val []byte) []byte {
	out, _ := SetMeta(obj, key, val)
	return out
}

// MetaString returns the string member key of obj's _meta, or "" when it
// has none.
func MetaString(obj []byte, key string) string {
	meta, _ := Field(obj, "_meta")
	raw, _ := Field(meta, key)
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
