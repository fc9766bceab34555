package jsonrpc_test

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		kind   jsonrpc.Kind
		method string
		id     string
		code   int64
		reason string
	}{
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`, kind: jsonrpc.KindRequest, method: "session/prompt", id: "1"},
		{name: "string id", in: `{"id":"a-1","jsonrpc":"2.0","method":"x"}`, kind: jsonrpc.KindRequest, method: "x", id: `"a-1"`},
		{name: "null id", in: `{"jsonrpc":"2.0","id":null,"method":"x"}`, kind: jsonrpc.KindRequest, method: "x", id: "null"},
		{name: "notification", in: ` {"jsonrpc":"2.0","method":"session/update","params":{"a":1}} `, kind: jsonrpc.KindNotification, method: "session/update"},
		{name: "escaped method", in: `{"jsonrpc":"2.0","method":"session\/cancel"}`, kind: jsonrpc.KindNotification, method: "session/cancel"},
		{name: "escaped key", in: `{"jsonrpc":"2.0","\u0069d":3,"result":{}}`, kind: jsonrpc.KindResponse, id: "3"},
		{name: "result", in: `{"jsonrpc":"2.0","id":-2.5e3,"result":null}`, kind: jsonrpc.KindResponse, id: "-2.5e3"},
		{name: "error", in: `{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}`, kind: jsonrpc.KindResponse, id: `"x"`},
		{name: "empty", in: ``, code: jsonrpc.CodeParseError, reason: "parse_error"},
		{name: "garbage", in: `{"jsonrpc":`, code: jsonrpc.CodeParseError, reason: "parse_error"},
		{name: "trailing", in: `{"jsonrpc":"2.0","method":"x"} {}`, code: jsonrpc.CodeParseError, reason: "parse_error"},
		{name: "bad utf8", in: "{\"jsonrpc\":\"2.0\",\"method\":\"x\xff\"}", code: jsonrpc.CodeParseError, reason: "parse_error"},
		{name: "batch", in: `[{"jsonrpc":"2.0","method":"x"}]`, code: jsonrpc.CodeInvalidRequest, reason: "batch"},
		{name: "bad batch", in: `[{"jsonrpc":"2.0"`, code: jsonrpc.CodeParseError, reason: "parse_error"},
		{name: "scalar", in: `42`, code: jsonrpc.CodeInvalidRequest, reason: "not_object"},
		{name: "no version", in: `{"id":1,"method":"x"}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_version", id: "1"},
		{name: "version 1", in: `{"jsonrpc":"1.0","id":1,"method":"x"}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_version", id: "1"},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"x"}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_id"},
		{name: "bool id", in: `{"jsonrpc":"2.0","id":true,"method":"x"}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_id"},
		{name: "numeric method", in: `{"jsonrpc":"2.0","id":1,"method":5}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_method", id: "1"},
		{name: "empty method", in: `{"jsonrpc":"2.0","method":""}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_method"},
		{name: "scalar params", in: `{"jsonrpc":"2.0","method":"x","params":3}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_params"},
		{name: "method and result", in: `{"jsonrpc":"2.0","id":1,"method":"x","result":1}`, code: jsonrpc.CodeInvalidRequest, reason: "ambiguous", id: "1"},
		{name: "result and error", in: `{"jsonrpc":"2.0","id":1,"result":1,"error":{}}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_response", id: "1"},
		{name: "response without id", in: `{"jsonrpc":"2.0","result":1}`, code: jsonrpc.CodeInvalidRequest, reason: "no_method"},
		{name: "scalar error", in: `{"jsonrpc":"2.0","id":1,"error":"no"}`, code: jsonrpc.CodeInvalidRequest, reason: "bad_error", id: "1"},
		{name: "duplicate id", in: `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, code: jsonrpc.CodeInvalidRequest, reason: "duplicate_member", id: "2"},
		{name: "duplicate method", in: `{"jsonrpc":"2.0","method":"a","method":"b"}`, code: jsonrpc.CodeInvalidRequest, reason: "duplicate_member"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.reason != "" && !documented(tt.code, tt.reason) {
				t.Errorf("code %d reason %q is not in api.Errors (schema/api.schema.json)", tt.code, tt.reason)
			}
			m, err := jsonrpc.Parse([]byte(tt.in))
			if got, want := string(m.ID), tt.id; got != want {
				t.Errorf("id = %q, want %q", got, want)
			}
			if tt.code != 0 {
				var e *jsonrpc.Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v, want a *jsonrpc.Error", err)
				}
				if e.Code != tt.code || e.Reason() != tt.reason {
					t.Errorf("error = %d %q, want %d %q", e.Code, e.Reason(), tt.code, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if m.Kind != tt.kind || m.Method != tt.method {
				t.Errorf("got %v %q, want %v %q", m.Kind, m.Method, tt.kind, tt.method)
			}
		})
	}
}

// documented reports whether the error catalogue lists code and reason.
func documented(code int64, reason string) bool {
	for _, e := range api.Errors {
		if e.Code == code && e.Reason == reason {
			return true
		}
	}
	return false
}

func TestMessage_WithID(t *testing.T) {
	t.Parallel()
	in := `{"jsonrpc":"2.0", "id" : "abc" ,"method":"x","params":{"id":1,"_meta":{"z":[1,2]}},"extra":true}`
	m, err := jsonrpc.Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got := string(m.WithID([]byte("17")))
	want := `{"jsonrpc":"2.0", "id" : 17 ,"method":"x","params":{"id":1,"_meta":{"z":[1,2]}},"extra":true}`
	if got != want {
		t.Errorf("WithID =\n%s\nwant\n%s", got, want)
	}
	if string(m.Raw) != in {
		t.Error("WithID modified the original frame")
	}
}

func TestObjectEdits(t *testing.T) {
	t.Parallel()
	obj := []byte(`{ "fs" : {"readTextFile":true}, "terminal":true, "x":{"y":1} }`)
	tests := []struct {
		name string
		do   func() ([]byte, bool)
		want string
	}{
		{"delete first", func() ([]byte, bool) { return jsonrpc.DeleteField(obj, "fs") }, `{ "terminal":true, "x":{"y":1} }`},
		{"delete middle", func() ([]byte, bool) { return jsonrpc.DeleteField(obj, "terminal") }, `{ "fs" : {"readTextFile":true}, "x":{"y":1} }`},
		{"delete last", func() ([]byte, bool) { return jsonrpc.DeleteField(obj, "x") }, `{ "fs" : {"readTextFile":true}, "terminal":true }`},
		{"delete only", func() ([]byte, bool) { return jsonrpc.DeleteField([]byte(`{"a":1}`), "a") }, `{}`},
		{"delete missing", func() ([]byte, bool) { return jsonrpc.DeleteField(obj, "nope") }, string(obj)},
		{"set existing", func() ([]byte, bool) { return jsonrpc.SetField(obj, "terminal", []byte("false")) }, `{ "fs" : {"readTextFile":true}, "terminal":false, "x":{"y":1} }`},
		{"set new", func() ([]byte, bool) { return jsonrpc.SetField(obj, "n", []byte(`"v"`)) }, `{ "fs" : {"readTextFile":true}, "terminal":true, "x":{"y":1} ,"n":"v"}`},
		{"set in empty", func() ([]byte, bool) { return jsonrpc.SetField([]byte(`{ }`), "n", []byte(`1`)) }, `{ "n":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := tt.do()
			if !ok || string(got) != tt.want {
				t.Errorf("got %s (ok %v), want %s", got, ok, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("result is not valid JSON: %s", got)
			}
		})
	}
	if _, ok := jsonrpc.SetField([]byte(`[1]`), "a", []byte("1")); ok {
		t.Error("SetField on an array reported ok")
	}
	if v, ok := jsonrpc.Field(obj, "x"); !ok || string(v) != `{"y":1}` {
		t.Errorf("Field = %s %v", v, ok)
	}
}

// TestReader reads frames shorter and longer than the read-ahead buffer
// (a 16-byte one, the smallest bufio allows, and the default), and one
// over the limit, which is skipped.
func TestReader(t *testing.T) {
	t.Parallel()
	long := `{"` + strings.Repeat("y", 40) + `":1}`
	in := "{\"a\":1}\r\n\n  \n{\"" + strings.Repeat("x", 100) + "\":1}\n{\"b\":2}\n" + long + "\n{\"c\":3}"
	for name, r := range map[string]*jsonrpc.Reader{
		"default":  jsonrpc.NewReader(strings.NewReader(in), 50),
		"16 bytes": jsonrpc.NewReaderSize(strings.NewReader(in), 16, 50),
	} {
		want := []string{`{"a":1}`, "too large", `{"b":2}`, long, `{"c":3}`, "EOF"}
		for _, w := range want {
			f, err := r.Read()
			got := string(f)
			switch {
			case errors.Is(err, jsonrpc.ErrFrameTooLarge):
				got = "too large"
			case err != nil:
				got = err.Error()
			}
			if got != w {
				t.Fatalf("%s: Read = %q, want %q", name, got, w)
			}
		}
	}
}

func TestReader_Ready(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	r := jsonrpc.NewReader(pr, 0)
	if r.Ready() {
		t.Fatal("Ready before any input")
	}
	go func() {
		_, _ = pw.Write([]byte("{\"a\":1}\n{\"b\":2}\n{\"c\""))
	}()
	if f, err := r.Read(); err != nil || string(f) != `{"a":1}` {
		t.Fatalf("Read = %q, %v", f, err)
	}
	if !r.Ready() {
		t.Fatal("not Ready with a whole line buffered")
	}
	if f, err := r.Read(); err != nil || string(f) != `{"b":2}` {
		t.Fatalf("Read = %q, %v", f, err)
	}
	if r.Ready() {
		t.Fatal("Ready with only part of a line buffered")
	}
	go func() {
		_, _ = pw.Write([]byte(":3}\n"))
		pw.Close()
	}()
	if f, err := r.Read(); err != nil || string(f) != `{"c":3}` {
		t.Fatalf("Read = %q, %v", f, err)
	}
}

func TestAppendLine(t *testing.T) {
	t.Parallel()
	got := jsonrpc.AppendLine([]byte("x"), []byte("{\n\"a\":\r\n1}"))
	if want := "x{ \"a\":  1}\n"; string(got) != want {
		t.Errorf("AppendLine = %q, want %q", got, want)
	}
}

func TestCancelRequest(t *testing.T) {
	t.Parallel()
	for _, id := range []string{`7`, `"a\"b"`, `-12`} {
		frame := jsonrpc.CancelRequest([]byte(id))
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			t.Fatalf("id %s: %s does not parse: %v", id, frame, err)
		}
		if m.Method != jsonrpc.MethodCancelRequest || m.ID != nil {
			t.Errorf("id %s: method %q id %s", id, m.Method, m.ID)
		}
		var want, got any
		_ = json.Unmarshal(jsonrpc.NewNotification(jsonrpc.MethodCancelRequest, map[string]json.RawMessage{"requestId": json.RawMessage(id)}), &want)
		_ = json.Unmarshal(frame, &got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("id %s: %s, want the same as %v", id, frame, want)
		}
	}
}
