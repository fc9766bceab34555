package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// UnmarshalParams decodes params into v as json.Unmarshal does. Params that
// do not fit v are -32602 Invalid params with a message in the protocol's
// terms — "Invalid params: params.sessionId: expected a string, got a
// number" — never Go's.
func UnmarshalParams(params []byte, v any) *Error {
	if err := json.Unmarshal(params, v); err != nil {
		return InvalidParams(DescribeDecodeError("params", params, err))
	}
	return nil
}

// InvalidParams is -32602 Invalid params, data.reason bad_params, with what
// is wrong in the message.
func InvalidParams(what string) *Error {
	return NewError(CodeInvalidParams, "bad_params", "Invalid params: "+what, nil)
}

// BadField is -32602 Invalid params, data.reason bad_params, for params
// whose member field is wrong; data.field names it as a path from params
// ("cwd", "_meta.acphub.dev/resultBranch"), the message as a path from the
// message ("params.cwd").
func BadField(field, msg string) *Error {
	return NewError(CodeInvalidParams, "bad_params", "Invalid params: params."+field+": "+msg, map[string]any{"field": field})
}

// DescribeDecodeError says why json.Unmarshal of data, the value at the
// JSON path root, failed with err, in JSON's terms: the path of the member
// that does not fit ("params.prompt[0].text") and the JSON type expected
// there (string, number, integer, boolean, object, array).
func DescribeDecodeError(root string, data []byte, err error) string {
	if len(bytes.TrimSpace(data)) == 0 {
		return root + ": missing"
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return pathAt(root, data, int(te.Offset)) + ": expected " + jsonType(te.Type) + ", got " + jsonValue(te.Value)
	case errors.As(err, &se):
		return root + ": not valid JSON"
	}
	return root + ": does not decode"
}

// ValueType names the JSON type of raw, a valid JSON value, in the words
// of DescribeDecodeError: "an object", "an array", "a string", "a number",
// "a boolean" or "null"; "nothing" when raw is empty.
func ValueType(raw []byte) string {
	i := skipSpace(raw, 0)
	if i == len(raw) {
		return "nothing"
	}
	switch raw[i] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// jsonValue describes what encoding/json found, from the Value of an
// UnmarshalTypeError: "string", "bool", "array", "object", "number" or
// "number 1.5" (a number that does not fit the Go type).
func jsonValue(v string) string {
	switch v {
	case "bool":
		return "a boolean"
	case "array", "object":
		return "an " + v
	case "string", "number":
		return "a " + v
	}
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return n
	}
	return v
}

// pathAt returns the JSON path, from root, of the innermost value of data
// that starts before off and ends at or after it: where encoding/json
// stopped (just after a literal, or just inside an array or object it could
// not use). data is valid JSON.
func pathAt(root string, data []byte, off int) string {
	path := []byte(root)
	for i := skipSpace(data, 0); i < len(data); {
		inner := -1
		switch data[i] {
		case '{':
			var end int
			_ = eachField(data, i, 0, func(f field) bool {
				if f.valStart < off && off <= f.valEnd {
					path, inner = appendKey(path, f.key(data)), f.valStart
				}
				return f.valEnd < off
			}, &end)
		case '[':
			inner, path = element(data, i, off, path)
		}
		if inner < 0 {
			break
		}
		i = inner
	}
	return string(path)
}

// element finds the element of the array at data[i] that holds off, and
// returns its start and path with its index appended; -1 when none does.
func element(data []byte, i, off int, path []byte) (int, []byte) {
	j := skipSpace(data, i+1)
	for n := 0; j < len(data) && data[j] != ']'; n++ {
		end, err := skipValue(data, j, 0)
		if err != nil || j >= off {
			break
		}
		if off <= end {
			return j, append(strconv.AppendInt(append(path, '['), int64(n), 10), ']')
		}
		if j = skipSpace(data, end); j < len(data) && data[j] == ',' {
			j = skipSpace(data, j+1)
		}
	}
	return -1, path
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// appendKey appends a member name to a JSON path: .name, or ["name"] when
// it is not an identifier.
func appendKey(path []byte, key string) []byte {
	if identifier.MatchString(key) {
		return append(append(path, '.'), key...)
	}
	return append(append(append(path, '['), quote(key)...), ']')
}
