package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent fails when package api was not regenerated
// after a schema change: run go generate ./api.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..")
	files, err := Generate(filepath.Join(root, "schema", "session-events.schema.json"), filepath.Join(root, "schema", "api.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, "api", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("api/%s is stale: run go generate ./api", name)
		}
	}
	want, err := GenerateClient(filepath.Join(root, "schema", "api.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "client", ClientFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("client/%s is stale: run go generate ./api", ClientFile)
	}
}

func TestGenerate_RefusesWhatItDoesNotUnderstand(t *testing.T) {
	t.Parallel()
	events := `{"allOf":[{"$ref":"#/$defs/Envelope"},{"oneOf":[{"$ref":"#/$defs/X"}]}],"$defs":{
		"Envelope":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]},
		"X":{"x-acphub-stability":"stable","type":"object","properties":{"type":{"const":"x"},"data":{"$ref":"#/$defs/XData"}}},
		"XData":%s}}`
	api := `{"x-acphub-methods":{},"x-acphub-http":{},"x-acphub-errors":[],"x-acphub-http-errors":[],"$defs":{}}`
	tests := []struct {
		name, data, want string
	}{
		{"anyOf", `{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`, "unsupported schema"},
		{"array without items", `{"type":"object","properties":{"a":{"type":"array"}}}`, "array without items"},
		{"dangling ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/Nope"}}}`, "no such definition"},
		{"remote ref", `{"type":"object","properties":{"a":{"$ref":"other.json#/x"}}}`, "unsupported $ref"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ev := filepath.Join(dir, "events.json")
			ap := filepath.Join(dir, "api.json")
			if err := os.WriteFile(ev, []byte(strings.Replace(events, "%s", tt.data, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ap, []byte(api), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Generate(ev, ap)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Generate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
